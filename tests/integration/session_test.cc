// Sessions through a real paddockd (SCH-1, REUSE-1..6, STATE-2): the seed 000 §7.7 scenario
// end to end — a spreadsheet run, a reuse with an incremental install, a browser run that
// must not reuse the Python sandbox, and a run needing an older version of an installed
// package that forks a clean checkpoint instead of downgrading in place — plus the session
// boundaries (other tenants, one active run) and the persistent workspace.
//
// There is no PyPI here: the test builds two versions of a small package as wheels and the
// runs install them offline from the workspace.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/child_process.h"
#include "support/daemon_process.h"
#include "support/json_api.h"
#include "support/runtime_fixture.h"

namespace paddock::testing {
namespace {

using json = nlohmann::json;

// Writes <dir>/<name>-<version>-py3-none-any.whl: a module whose VERSION is the version.
constexpr const char* kWheelBuilder = R"(
import base64, hashlib, sys, zipfile
out, name, version = sys.argv[1:4]
dist = f"{name}-{version}.dist-info"
files = {
    f"{name}/__init__.py": f"VERSION = '{version}'\ndef total(path):\n"
        "    import csv\n    return sum(float(r['amount']) for r in csv.DictReader(open(path)))\n",
    f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: paddock-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(f"{out}/{name}-{version}-py3-none-any.whl", "w") as z:
    for path, text in files.items():
        z.writestr(path, text)
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text)}")
    record.append(f"{dist}/RECORD,,")
    z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
)";

std::string PipInstall(const std::string& spec) {
  return "python3 -m pip install --quiet --user --break-system-packages --no-index "
         "--find-links /workspace/pkgs '" +
         spec + "'";
}

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
    dir_ = TestDataDir() + "/session-" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/planner.yaml") << kSessionPlannerYaml;
    daemon_ = std::make_unique<DaemonProcess>(SessionClassesConfig(dir_ + "/planner.yaml"));
    std::string err;
    ASSERT_TRUE(daemon_->Start(&err)) << err;
    ApiReply t = CreateTenant(*daemon_, "acme");
    ASSERT_EQ(t.status, 201) << t.raw;
    api_ = std::make_unique<JsonApi>(daemon_->port(), t.body.value("api_key", ""));
    ApiReply o = CreateTenant(*daemon_, "other");
    ASSERT_EQ(o.status, 201) << o.raw;
    other_ = std::make_unique<JsonApi>(daemon_->port(), o.body.value("api_key", ""));
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Puts the wheels and a spreadsheet into the session's workspace, as a user uploading files.
  void StageWorkspace(const std::string& session_id) {
    const std::string ws = daemon_->data_dir() + "/sessions/workspaces/" + session_id;
    ASSERT_TRUE(std::filesystem::is_directory(ws)) << ws;
    std::filesystem::create_directories(ws + "/pkgs");
    std::ofstream(dir_ + "/mkwheel.py") << kWheelBuilder;
    for (const auto& [name, version] : std::vector<std::pair<std::string, std::string>>{
             {"sheetkit", "1.0"}, {"sheetkit", "2.0"}, {"chartkit", "1.0"}}) {
      CliResult r =
          RunChild({"/usr/bin/python3", dir_ + "/mkwheel.py", ws + "/pkgs", name, version});
      ASSERT_EQ(r.status, 0) << r.err;
    }
    std::ofstream(ws + "/sales.csv") << "region,amount\nnorth,10\nsouth,32.5\n";
    CliResult chown = RunChild({"/bin/chown", "-R", "1000:1000", ws});
    ASSERT_EQ(chown.status, 0) << chown.err;
  }

  ApiReply Run(const std::string& session_id, const json& body) {
    return api_->Call("POST", "/v1/sessions/" + session_id + "/runs", body);
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<JsonApi> api_, other_;
};

TEST_F(SessionTest, SeedScenarioReuseBrowserAndFork) {
  ApiReply session = api_->Call("POST", "/v1/sessions", {{"user_id", "alice"}});
  ASSERT_EQ(session.status, 201) << session.raw;
  const std::string sid = session.body["id"];
  StageWorkspace(sid);

  // Turn 1: a spreadsheet → python-small, a new sandbox, sheetkit 2.0 installed.
  ApiReply t1 =
      Run(sid, {{"task", "read the spreadsheet sales.csv and total the sales"},
                {"commands",
                 {PipInstall("sheetkit==2.0"),
                  "python3 -c 'import sheetkit; print(sheetkit.total(\"sales.csv\"))'"}}});
  ASSERT_EQ(t1.status, 201) << t1.raw;
  const json& r1 = t1.body["result"];
  EXPECT_EQ(t1.body["state"], "succeeded") << t1.raw;
  EXPECT_EQ(r1["commands"][1]["stdout"], "42.5\n") << t1.raw;
  EXPECT_EQ(r1["resource_class"], "small");
  EXPECT_EQ(r1["reuse"]["action"], "new_sandbox") << r1["reuse"].dump();
  EXPECT_EQ(r1["reuse"]["reason"], "no_session_sandbox");
  EXPECT_EQ(r1["installed"]["sheetkit"], "2.0") << r1.dump();
  EXPECT_GT(r1["lease_version"].get<int64_t>(), 0);
  EXPECT_EQ(r1["environment_fingerprint"].get<std::string>().substr(0, 4), "env-");
  EXPECT_TRUE(r1.contains("base_checkpoint_id")) << r1.dump();
  EXPECT_TRUE(r1.contains("checkpoint_id")) << r1.dump();
  const std::string sandbox1 = r1["sandbox_id"];

  // Turn 2: chart it → the same sandbox, with an incremental install.
  ApiReply t2 = Run(sid, {{"task", "chart the sales by region"},
                          {"requires", {{"python", {"sheetkit"}}}},
                          {"commands",
                           {PipInstall("chartkit==1.0"),
                            "python3 -c 'import sheetkit, chartkit; print(chartkit.VERSION)'"}}});
  ASSERT_EQ(t2.status, 201) << t2.raw;
  const json& r2 = t2.body["result"];
  EXPECT_EQ(t2.body["state"], "succeeded") << t2.raw;
  EXPECT_EQ(r2["reuse"]["action"], "reuse") << r2["reuse"].dump();
  EXPECT_EQ(r2["sandbox_id"], sandbox1);
  EXPECT_GE(r2["reuse"]["score"].get<double>(), 0.75) << r2["reuse"].dump();
  EXPECT_NE(r2["reuse"]["to_install"].dump().find("chartkit"), std::string::npos)
      << r2["reuse"].dump();
  EXPECT_GT(r2["lease_version"].get<int64_t>(), r1["lease_version"].get<int64_t>());

  // Turn 3: Playwright → never the Python sandbox: a browser-class one.
  ApiReply t3 = Run(sid, {{"task", "check a web page with Playwright"},
                          {"commands", {"echo checking https://example.com"}}});
  ASSERT_EQ(t3.status, 201) << t3.raw;
  const json& r3 = t3.body["result"];
  EXPECT_EQ(r3["resource_class"], "browser") << r3.dump();
  EXPECT_EQ(r3["reuse"]["action"], "new_sandbox") << r3["reuse"].dump();
  EXPECT_EQ(r3["reuse"]["reason"], "runtime_capability_mismatch") << r3["reuse"].dump();
  EXPECT_NE(r3["sandbox_id"], sandbox1);
  // Its command changed nothing: the clean base is its only checkpoint.
  EXPECT_TRUE(r3.contains("base_checkpoint_id")) << r3.dump();
  EXPECT_FALSE(r3.contains("checkpoint_id")) << r3.dump();

  // Turn 4: an old report needs sheetkit 1.0 → fork the clean checkpoint, install it there;
  // nothing is downgraded in place.
  ApiReply t4 = Run(
      sid,
      {{"task", "run last year's report"},
       {"commands",
        {PipInstall("sheetkit==1.0"), "python3 -c 'import sheetkit; print(sheetkit.VERSION)'"}}});
  ASSERT_EQ(t4.status, 201) << t4.raw;
  const json& r4 = t4.body["result"];
  EXPECT_EQ(t4.body["state"], "succeeded") << t4.raw;
  EXPECT_EQ(r4["reuse"]["action"], "fork_checkpoint") << r4["reuse"].dump();
  EXPECT_EQ(r4["reuse"]["checkpoint_id"], r1["base_checkpoint_id"]) << r4["reuse"].dump();
  EXPECT_EQ(r4["commands"][1]["stdout"], "1.0\n") << r4.dump();
  EXPECT_EQ(r4["installed"]["sheetkit"], "1.0");

  // The workspace persisted through three sandboxes; the history and checkpoints are listed.
  ApiReply runs = api_->Call("GET", "/v1/sessions/" + sid + "/runs");
  ASSERT_EQ(runs.status, 200);
  EXPECT_EQ(runs.body["items"].size(), 4u);
  ApiReply cks = api_->Call("GET", "/v1/sessions/" + sid + "/checkpoints");
  ASSERT_EQ(cks.status, 200);
  EXPECT_GE(cks.body["items"].size(), 3u) << cks.raw;
  for (const json& c : cks.body["items"]) {
    EXPECT_EQ(c["session_id"], sid);
    EXPECT_EQ(c["user_id"], "alice");
    EXPECT_FALSE(c["base_image_digest"].get<std::string>().empty());
  }
}

TEST_F(SessionTest, SessionsAreTenantBoundAndRunOneAtATime) {
  ApiReply session = api_->Call("POST", "/v1/sessions", json::object());
  ASSERT_EQ(session.status, 201) << session.raw;
  const std::string sid = session.body["id"];
  // Another tenant sees nothing of it and cannot run in it.
  EXPECT_EQ(other_->Call("GET", "/v1/sessions/" + sid).status, 404);
  EXPECT_EQ(other_
                ->Call("POST", "/v1/sessions/" + sid + "/runs",
                       {{"commands", {"id -u"}}, {"class", "small"}})
                .status,
            404);
  // Bad input names the field.
  ApiReply bad = Run(sid, {{"commands", "ls"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.raw.find("commands"), std::string::npos) << bad.raw;
  ApiReply unknown = Run(sid, {{"commands", {"ls"}}, {"sandbox_id", "sb-x"}});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.raw.find("sandbox_id"), std::string::npos) << unknown.raw;

  // The workspace persists across runs and sandboxes: the next run, even in a new sandbox,
  // sees the file, owned by the sandbox user.
  ApiReply a = Run(sid, {{"class", "small"}, {"commands", {"echo kept > /workspace/note"}}});
  ASSERT_EQ(a.status, 201) << a.raw;
  ApiReply b = Run(sid, {{"class", "browser"},
                         {"commands", {"cat /workspace/note; stat -c %u /workspace/note"}}});
  ASSERT_EQ(b.status, 201) << b.raw;
  EXPECT_NE(b.body["result"]["sandbox_id"], a.body["result"]["sandbox_id"]) << b.raw;
  EXPECT_EQ(b.body["result"]["commands"][0]["stdout"], "kept\n1000\n") << b.raw;

  // One active run per session: a second run while one is in progress is 409.
  JsonApi second_client(daemon_->port(), api_->key());
  ApiReply slow_reply;
  std::thread slow([&] {
    slow_reply = second_client.Call("POST", "/v1/sessions/" + sid + "/runs",
                                    {{"class", "browser"}, {"commands", {"sleep 3"}}});
  });
  EXPECT_TRUE(Eventually(
      [&] {
        return !api_->Call("GET", "/v1/sessions/" + sid).body.value("active_run_id", "").empty();
      },
      std::chrono::seconds(10)));
  ApiReply busy = Run(sid, {{"class", "browser"}, {"commands", {"true"}}});
  EXPECT_EQ(busy.status, 409) << busy.raw;
  slow.join();
  EXPECT_EQ(slow_reply.status, 201) << slow_reply.raw;

  // Closing destroys the sandbox; purge deletes the workspace.
  ApiReply closed = api_->Call("DELETE", "/v1/sessions/" + sid + "?purge=1");
  ASSERT_EQ(closed.status, 200) << closed.raw;
  EXPECT_EQ(closed.body["state"], "closed");
  EXPECT_FALSE(std::filesystem::exists(daemon_->data_dir() + "/sessions/workspaces/" + sid));
  EXPECT_EQ(Run(sid, {{"class", "small"}, {"commands", {"true"}}}).status, 409);
}

// No checkpoint to fork (the runs asked for none) and one conflicting package: the conflict
// goes into a separate venv; the environment the first run built is left as it was.
TEST_F(SessionTest, ConflictWithoutACheckpointGoesIntoASeparateVenv) {
  ApiReply session = api_->Call("POST", "/v1/sessions", {{"user_id", "bob"}});
  ASSERT_EQ(session.status, 201) << session.raw;
  const std::string sid = session.body["id"];
  StageWorkspace(sid);
  ApiReply first =
      Run(sid,
          {{"class", "small"}, {"checkpoint", false}, {"commands", {PipInstall("sheetkit==2.0")}}});
  ASSERT_EQ(first.status, 201) << first.raw;
  EXPECT_EQ(first.body["state"], "succeeded") << first.raw;
  EXPECT_FALSE(first.body["result"].contains("base_checkpoint_id")) << first.raw;

  ApiReply second =
      Run(sid, {{"class", "small"},
                {"checkpoint", false},
                {"commands",
                 {"python3 -m pip install --quiet --no-index --find-links /workspace/pkgs "
                  "sheetkit==1.0",
                  "python3 -c 'import sheetkit; print(sheetkit.VERSION)'"}}});
  ASSERT_EQ(second.status, 201) << second.raw;
  const json& r = second.body["result"];
  EXPECT_EQ(second.body["state"], "succeeded") << second.raw;
  EXPECT_EQ(r["reuse"]["action"], "reuse_separate_venv") << r["reuse"].dump();
  EXPECT_EQ(r["sandbox_id"], first.body["result"]["sandbox_id"]);
  EXPECT_EQ(r["commands"].back()["stdout"], "1.0\n") << r.dump();
  // Outside the venv the first run's version is untouched.
  ApiReply third =
      Run(sid, {{"class", "small"},
                {"checkpoint", false},
                {"requires", {{"python", {"sheetkit==2.0"}}}},
                {"commands", {"python3 -c 'import sheetkit; print(sheetkit.VERSION)'"}}});
  ASSERT_EQ(third.status, 201) << third.raw;
  EXPECT_EQ(third.body["result"]["reuse"]["action"], "reuse") << third.raw;
  EXPECT_EQ(third.body["result"]["commands"][0]["stdout"], "2.0\n") << third.raw;
}

// A seccomp kill taints the sandbox: it is destroyed at once and the next run gets a new one.
TEST_F(SessionTest, SeccompKillTaintsAndDestroysTheSandbox) {
  ApiReply session = api_->Call("POST", "/v1/sessions", json::object());
  ASSERT_EQ(session.status, 201) << session.raw;
  const std::string sid = session.body["id"];
  ApiReply ok = Run(sid, {{"class", "small"}, {"commands", {"true"}}});
  ASSERT_EQ(ok.status, 201) << ok.raw;
  const std::string first = ok.body["result"]["sandbox_id"];
  // An x32 system call: the seccomp filter kills the process (SIGSYS).
  ApiReply bad = Run(sid, {{"class", "small"},
                           {"commands",
                            {"python3 -c 'import ctypes; ctypes.CDLL(None).syscall(0x40000000 | "
                             "39)'"}}});
  ASSERT_EQ(bad.status, 201) << bad.raw;
  EXPECT_EQ(bad.body["state"], "failed");
  EXPECT_EQ(bad.body["result"]["sandbox_id"], first) << bad.body["result"]["reuse"].dump();
  EXPECT_NE(bad.body["result"].value("tainted", ""), "") << bad.raw;
  EXPECT_EQ(api_->Call("GET", "/v1/sessions/" + sid).body["sandbox_id"], "");
  ApiReply gone = api_->Call("GET", "/v1/sandboxes/" + first);
  EXPECT_TRUE(gone.status == 404 || gone.body.value("state", "") == "terminated") << gone.raw;
  ApiReply next = Run(sid, {{"class", "small"}, {"commands", {"true"}}});
  ASSERT_EQ(next.status, 201) << next.raw;
  EXPECT_NE(next.body["result"]["sandbox_id"], first);
  EXPECT_NE(next.body["result"]["reuse"]["action"], "reuse") << next.raw;
}

// Restore verifies the binding first (STATE-2): a checkpoint serves only its own session;
// another tenant cannot even see it.
TEST_F(SessionTest, ForkVerifiesTheCheckpointsBinding) {
  ApiReply a = api_->Call("POST", "/v1/sessions", {{"user_id", "alice"}});
  ApiReply b = api_->Call("POST", "/v1/sessions", {{"user_id", "alice"}});
  ASSERT_EQ(a.status, 201);
  ASSERT_EQ(b.status, 201);
  const std::string sa = a.body["id"], sb = b.body["id"];
  ApiReply run = Run(sa, {{"class", "small"}, {"commands", {"mkdir -p ~/.local/lib/x && true"}}});
  ASSERT_EQ(run.status, 201) << run.raw;
  ApiReply cks = api_->Call("GET", "/v1/sessions/" + sa + "/checkpoints");
  ASSERT_EQ(cks.status, 200);
  ASSERT_FALSE(cks.body["items"].empty()) << cks.raw;
  const std::string ck = cks.body["items"][0]["id"];

  ApiReply own = api_->Call("POST", "/v1/sessions/" + sa + "/fork", {{"checkpoint_id", ck}});
  ASSERT_EQ(own.status, 201) << own.raw;
  EXPECT_EQ(api_->Call("GET", "/v1/sessions/" + sa).body["sandbox_id"], own.body["id"]);
  // The next run is served by the fork itself (its environment was measured when forked).
  ApiReply after = Run(sa, {{"class", "small"}, {"commands", {"true"}}});
  ASSERT_EQ(after.status, 201) << after.raw;
  EXPECT_EQ(after.body["result"]["reuse"]["action"], "reuse") << after.raw;
  EXPECT_EQ(after.body["result"]["sandbox_id"], own.body["id"]);

  ApiReply cross = api_->Call("POST", "/v1/sessions/" + sb + "/fork", {{"checkpoint_id", ck}});
  EXPECT_EQ(cross.status, 403) << cross.raw;
  ApiReply session_other = other_->Call("POST", "/v1/sessions", {{"user_id", "alice"}});
  ASSERT_EQ(session_other.status, 201);
  ApiReply foreign =
      other_->Call("POST", "/v1/sessions/" + session_other.body["id"].get<std::string>() + "/fork",
                   {{"checkpoint_id", ck}});
  EXPECT_EQ(foreign.status, 404) << foreign.raw;
  EXPECT_EQ(other_->Call("GET", "/v1/sessions/" + sa + "/checkpoints").status, 404);
  ApiReply missing = api_->Call("POST", "/v1/sessions/" + sa + "/fork", json::object());
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.raw.find("checkpoint_id"), std::string::npos) << missing.raw;
}

}  // namespace
}  // namespace paddock::testing
