// The `paddock` CLI's sessions, runs and demo against a real paddockd (small + browser classes,
// a planner with a browser rule, as session_test.cc's): session create/list/get/runs/
// checkpoints/fork/close --purge; `paddock run` printing the commands' output and the decision
// log and exiting with the first failing command's status; `paddock demo` running the seed's
// §7.7 scenario end to end; unknown sessions reported with the API's message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/child_process.h"
#include "support/daemon_process.h"
#include "support/json_api.h"
#include "support/runtime_fixture.h"

namespace paddock::testing {
namespace {

using json = nlohmann::json;

// kSessionPlannerYaml with a policy that caps every run's network at "none": installing runs are no
// longer moved to "package-registries", so they share the setup run's security context.
constexpr const char* kNoNetworkPolicy = R"(
policy:
  default:
    max_network_profile: none
    on_violation: clamp
)";

std::string PaddockCliPath() {
  return (std::filesystem::path(PaddockdPath()).parent_path() / "paddock").string();
}

bool Has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

class CliSessionTest : public ::testing::Test {
 protected:
  virtual std::string PlannerYaml() const { return kSessionPlannerYaml; }
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
    dir_ = TestDataDir() + "/cli-session-" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/planner.yaml") << PlannerYaml();
    daemon_ = std::make_unique<DaemonProcess>(SessionClassesConfig(dir_ + "/planner.yaml"));
    std::string err;
    ASSERT_TRUE(daemon_->Start(&err)) << err;
    ApiReply t = CreateTenant(*daemon_, "cli-sessions");
    ASSERT_EQ(t.status, 201) << t.raw;
    env_ = {"PADDOCK_URL=http://127.0.0.1:" + std::to_string(daemon_->port()),
            "PADDOCK_API_KEY=" + t.body["api_key"].get<std::string>()};
  }
  void TearDown() override {
    daemon_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  CliResult Paddock(std::vector<std::string> args) {
    args.insert(args.begin(), PaddockCliPath());
    return RunChild(args, "", {}, env_);
  }
  static std::string Trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }
  std::string Workspace(const std::string& sid) const {
    return daemon_->data_dir() + "/sessions/workspaces/" + sid;
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::vector<std::string> env_;
};

TEST_F(CliSessionTest, SessionCreateRunCheckpointsClose) {
  CliResult created = Paddock({"session", "create", "--user", "alice"});
  ASSERT_EQ(created.status, 0) << created.err;
  const std::string sid = Trim(created.out);
  ASSERT_EQ(sid.rfind("ss-", 0), 0u) << created.out;
  EXPECT_TRUE(std::filesystem::is_directory(Workspace(sid)));

  CliResult as_json = Paddock({"session", "create", "--json"});
  ASSERT_EQ(as_json.status, 0) << as_json.err;
  json other = json::parse(as_json.out, nullptr, false);
  ASSERT_FALSE(other.is_discarded()) << as_json.out;
  EXPECT_EQ(other["state"], "active") << as_json.out;

  CliResult listed = Paddock({"session", "list"});
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_TRUE(Has(listed.out, sid)) << listed.out;
  EXPECT_TRUE(Has(listed.out, other["id"].get<std::string>())) << listed.out;
  CliResult got = Paddock({"session", "get", sid});
  ASSERT_EQ(got.status, 0) << got.err;
  EXPECT_TRUE(Has(got.out, "\"user_id\": \"alice\"")) << got.out;

  // A run prints each command's output where it belongs and the decision log; it stops at
  // the first failing command and exits with its status.
  CliResult failed =
      Paddock({"run", sid, "--class", "small", "--task", "write a note", "--",
               "echo hello > note; cat note", "echo oops >&2; exit 3", "echo never"});
  EXPECT_EQ(failed.status, 3) << failed.out << failed.err;
  EXPECT_TRUE(Has(failed.out, "[planner] resource_class=small (named by the run")) << failed.out;
  EXPECT_TRUE(Has(failed.out, "[reuse] action=new_sandbox sandbox=sb-")) << failed.out;
  EXPECT_TRUE(Has(failed.out, "reason=no_session_sandbox")) << failed.out;
  EXPECT_TRUE(Has(failed.out, "[lease] version=")) << failed.out;
  EXPECT_TRUE(Has(failed.out, "[checkpoint] ck-")) << failed.out;  // the clean base
  EXPECT_TRUE(Has(failed.out, "[exec] $ echo hello > note; cat note\nhello\n")) << failed.out;
  EXPECT_TRUE(Has(failed.out, "[exec] exit 3")) << failed.out;
  EXPECT_TRUE(Has(failed.out, "[task] failed (exit 3)")) << failed.out;
  EXPECT_FALSE(Has(failed.out, "never")) << failed.out;
  EXPECT_TRUE(Has(failed.err, "oops")) << failed.err;
  EXPECT_FALSE(Has(failed.out, "oops\n")) << failed.out;  // stderr stays on stderr

  // Planned this time: the same class, so the sandbox is reused; a declared requirement the
  // sandbox lacks is an incremental install; the workspace kept the note.
  CliResult ok = Paddock({"run", sid, "--task", "print the note", "--step", "read it", "--require",
                          "sheetkit", "-v", "--", "cat /workspace/note"});
  EXPECT_EQ(ok.status, 0) << ok.out << ok.err;
  EXPECT_TRUE(Has(ok.out, "[planner] resource_class=small confidence=")) << ok.out;
  EXPECT_TRUE(Has(ok.out, "[reuse] action=reuse sandbox=sb-")) << ok.out;
  EXPECT_TRUE(Has(ok.out, "reason=compatible")) << ok.out;
  EXPECT_TRUE(Has(ok.out, "[env] incremental install: sheetkit")) << ok.out;
  EXPECT_TRUE(Has(ok.out, "- identity: same tenant, user and session")) << ok.out;  // -v
  EXPECT_TRUE(Has(ok.out, "\nhello\n")) << ok.out;
  EXPECT_TRUE(Has(ok.out, "[task] completed (exit 0)")) << ok.out;
  EXPECT_TRUE(Has(ok.out, "[env] fingerprint=env-")) << ok.out;

  // --json: the run as the API returns it; the exit status still the commands'.
  CliResult js = Paddock({"run", sid, "--json", "--no-checkpoint", "--capability", "browser", "--",
                          "echo browsing", "exit 7"});
  EXPECT_EQ(js.status, 7) << js.out << js.err;
  json run = json::parse(js.out, nullptr, false);
  ASSERT_FALSE(run.is_discarded()) << js.out;
  EXPECT_EQ(run["state"], "failed");
  EXPECT_EQ(run["result"]["commands"][0]["stdout"], "browsing\n");
  EXPECT_EQ(run["result"]["reuse"]["reason"], "runtime_capability_mismatch") << js.out;

  CliResult runs = Paddock({"session", "runs", sid});
  ASSERT_EQ(runs.status, 0) << runs.err;
  EXPECT_TRUE(Has(runs.out, "new_sandbox")) << runs.out;
  EXPECT_TRUE(Has(runs.out, "compatible")) << runs.out;
  EXPECT_TRUE(Has(runs.out, "print the note")) << runs.out;

  CliResult cks = Paddock({"session", "checkpoints", sid});
  ASSERT_EQ(cks.status, 0) << cks.err;
  EXPECT_TRUE(Has(cks.out, "clean base of sb-")) << cks.out;
  const size_t at = cks.out.find("\nck-");
  ASSERT_NE(at, std::string::npos) << cks.out;
  const std::string ck = cks.out.substr(at + 1, cks.out.find(' ', at) - at - 1);
  CliResult forked = Paddock({"session", "fork", sid, ck});
  ASSERT_EQ(forked.status, 0) << forked.err;
  EXPECT_EQ(Trim(forked.out).rfind("sb-", 0), 0u) << forked.out;

  CliResult closed = Paddock({"session", "close", sid, "--purge"});
  ASSERT_EQ(closed.status, 0) << closed.err;
  EXPECT_TRUE(Has(closed.out, sid + " closed")) << closed.out;
  EXPECT_FALSE(std::filesystem::exists(Workspace(sid)));
  CliResult after = Paddock({"run", sid, "--", "true"});
  EXPECT_NE(after.status, 0);
  EXPECT_TRUE(Has(after.err, "is closed")) << after.err;
  EXPECT_EQ(Paddock({"session", "close", other["id"].get<std::string>()}).status, 0);
}

TEST_F(CliSessionTest, UnknownSessionsAndBadInput) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"run", "ss-nosuch", "--", "true"},
                                             {"session", "get", "ss-nosuch"},
                                             {"session", "checkpoints", "ss-nosuch"},
                                             {"session", "close", "ss-nosuch", "--purge"}}) {
    CliResult r = Paddock(args);
    EXPECT_NE(r.status, 0) << args[0] << " " << args[1];
    EXPECT_TRUE(Has(r.err, "HTTP 404")) << r.err;
    EXPECT_TRUE(Has(r.err, "session ss-nosuch not found")) << r.err;
  }
  CliResult created = Paddock({"session", "create"});
  ASSERT_EQ(created.status, 0) << created.err;
  const std::string sid = Trim(created.out);
  // The server's validation reaches the user: an unknown class, an unknown checkpoint.
  CliResult bad_class = Paddock({"run", sid, "--class", "huge", "--", "true"});
  EXPECT_NE(bad_class.status, 0);
  EXPECT_TRUE(Has(bad_class.err, "class: unknown resource class")) << bad_class.err;
  CliResult bad_fork = Paddock({"session", "fork", sid, "ck-nosuch"});
  EXPECT_NE(bad_fork.status, 0);
  EXPECT_TRUE(Has(bad_fork.err, "ck-nosuch")) << bad_fork.err;
  // No command: the CLI refuses before asking the server.
  EXPECT_NE(Paddock({"run", sid}).status, 0);
  EXPECT_EQ(Paddock({"session", "close", sid, "--purge"}).status, 0);
}

// The demo's log as every configuration must print it (see Demo() in cli/paddock.cc).
void ExpectDemoLog(const CliResult& demo) {
  EXPECT_EQ(demo.status, 0) << demo.out << demo.err;
  const std::string& log = demo.out;
  // The setup run says which class it named, and stages the files.
  EXPECT_TRUE(Has(log, "--class small, the planner's default class")) << log;
  EXPECT_TRUE(Has(log, "wrote /workspace/sales.csv")) << log;
  EXPECT_TRUE(Has(log, "total sales: 42.5")) << log;
  EXPECT_TRUE(Has(log, "[reuse] action=reuse")) << log;
  EXPECT_TRUE(Has(log, "[env] incremental install: chartkit==1.0")) << log;
  EXPECT_TRUE(Has(log, "no browser on this host")) << log;
  EXPECT_TRUE(Has(log, "reason=runtime_capability_mismatch")) << log;
  EXPECT_TRUE(Has(log, "[planner] resource_class=browser")) << log;
  EXPECT_TRUE(Has(log, "[reuse] action=fork_checkpoint checkpoint=ck-")) << log;
  EXPECT_TRUE(Has(log, "sheetkit 1.0 total: 42.5")) << log;
  for (const char* turn : {"turn 1 ok", "turn 2 ok", "turn 3 ok", "turn 4 ok"}) {
    EXPECT_TRUE(Has(log, turn)) << turn << "\n" << log;
  }
  EXPECT_FALSE(Has(log, "FAIL")) << log;
  EXPECT_TRUE(Has(log, "closed; its workspace and checkpoints purged")) << log;
}

// The built-in planner gives installing runs the network profile "package-registries": turn 1
// cannot reuse the setup run's sandbox (network "none") and gets a new one, as in the seed.
TEST_F(CliSessionTest, DemoRunsTheSeedScenario) {
  CliResult demo = Paddock({"demo"});
  ExpectDemoLog(demo);
  EXPECT_TRUE(
      Has(demo.out, "turn 1 ok   expected new_sandbox (network package-registries vs none)"))
      << demo.out;
  EXPECT_TRUE(Has(demo.out, "reason=security_context_mismatch")) << demo.out;
  // The session is closed and its workspace gone.
  CliResult listed = Paddock({"session", "list"});
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_TRUE(Has(listed.out, "closed")) << listed.out;
  EXPECT_FALSE(Has(listed.out, "active")) << listed.out;
  EXPECT_TRUE(std::filesystem::is_empty(daemon_->data_dir() + "/sessions/workspaces"));
}

class CliSessionNoNetworkTest : public CliSessionTest {
 protected:
  std::string PlannerYaml() const override {
    return std::string(kSessionPlannerYaml) + kNoNetworkPolicy;
  }
};

// With the network capped, turn 1 is sized into the setup sandbox's class and security
// context: the reuse check proves it compatible and reuses it (an incremental install of
// sheetkit); turn 4 then forks the setup sandbox's clean checkpoint.
TEST_F(CliSessionNoNetworkTest, DemoReusesTheSetupSandbox) {
  CliResult demo = Paddock({"demo"});
  ExpectDemoLog(demo);
  EXPECT_TRUE(Has(demo.out, "turn 1 ok   expected reuse of the setup sandbox")) << demo.out;
  EXPECT_TRUE(Has(demo.out, "[env] incremental install: sheetkit==2.0")) << demo.out;
  EXPECT_TRUE(Has(demo.out,
                  "[policy] adjusted the planner's recommendation: network profile "
                  "package-registries"))
      << demo.out;
}

}  // namespace
}  // namespace paddock::testing
