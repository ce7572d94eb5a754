// The REST API against a real paddockd on a loopback port with a temporary data dir: each
// endpoint's success and error paths, tenant isolation, lease fencing, expiry, restart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/daemon_process.h"

namespace paddock::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Small classes and fast background passes so expiry is observable within a test.
constexpr const char* kConfig = R"(
server:
  max_upload_bytes: 1MiB
resource_classes:
  - name: small
    cpus: 1
    memory: 256MiB
    disk: 64MiB
    pids: 128
    tmp: 32MiB
pools: []
lifecycle:
  default_ttl: 1h
  default_idle_timeout: 10m
  reconcile_interval: 300ms
leases:
  default_ttl: 60s
  max_ttl: 1h
)";

struct Reply {
  int status = 0;
  json body;
  std::string raw;
};

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
    daemon_ = std::make_unique<DaemonProcess>(kConfig);
    std::string err;
    ASSERT_TRUE(daemon_->Start(&err)) << err;
    ASSERT_FALSE(daemon_->admin_key().empty());
    admin_ = daemon_->admin_key();
    // Two tenants with their own keys.
    Reply a = Call("POST", "/v1/tenants", admin_, json{{"name", "tenant-a"}}.dump());
    ASSERT_EQ(a.status, 201) << a.raw;
    key_a_ = a.body["api_key"];
    Reply b = Call("POST", "/v1/tenants", admin_, json{{"name", "tenant-b"}}.dump());
    ASSERT_EQ(b.status, 201) << b.raw;
    key_b_ = b.body["api_key"];
  }
  void TearDown() override {
    if (daemon_) daemon_->Stop();
  }

  Reply Call(const std::string& method, const std::string& target, const std::string& key,
             const std::string& body = "", int64_t lease = 0) {
    auto client = daemon_->Client();
    api::Headers h;
    if (!key.empty()) h.Set("Authorization", "Bearer " + key);
    if (lease) h.Set("Paddock-Lease-Version", std::to_string(lease));
    auto r = client->Request(method, target, body, h);
    Reply out;
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return out;
    out.status = r->status;
    out.raw = r->body;
    out.body = json::parse(r->body, nullptr, false);
    return out;
  }

  std::string CreateSandbox(const std::string& key, json body = json::object()) {
    Reply r = Call("POST", "/v1/sandboxes", key, body.dump());
    EXPECT_EQ(r.status, 201) << r.raw;
    return r.status == 201 ? r.body["id"].get<std::string>() : "";
  }
  int64_t Lease(const std::string& key, const std::string& id, int ttl = 60) {
    Reply r = Call("POST", "/v1/sandboxes/" + id + "/lease", key,
                   json{{"owner", "test"}, {"ttl_seconds", ttl}}.dump());
    EXPECT_EQ(r.status, 201) << r.raw;
    return r.status == 201 ? r.body["lease_version"].get<int64_t>() : 0;
  }
  Reply Exec(const std::string& key, const std::string& id, int64_t lease, const std::string& sh) {
    return Call("POST", "/v1/sandboxes/" + id + "/exec", key, json{{"shell", sh}}.dump(), lease);
  }
  std::string State(const std::string& id) {
    return Call("GET", "/v1/sandboxes/" + id, admin_).body.value("state", "");
  }
  static bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit = 10s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(100ms);
    }
    return pred();
  }
  static void ExpectError(const Reply& r, int status, const std::string& field_or_code) {
    EXPECT_EQ(r.status, status) << r.raw;
    ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.raw;
    const std::string text =
        r.body["error"].value("code", "") + " " + r.body["error"].value("message", "");
    EXPECT_NE(text.find(field_or_code), std::string::npos) << r.raw;
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::string admin_, key_a_, key_b_;
};

TEST_F(ApiTest, HealthReadinessAndMetricsNeedNoKey) {
  EXPECT_EQ(Call("GET", "/healthz", "").status, 200);
  EXPECT_EQ(Call("GET", "/readyz", "").status, 200);
  std::string id = CreateSandbox(key_a_);
  Reply m = Call("GET", "/metrics", "");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.raw.find("paddock_sandboxes{state=\"ready\"} 1"), std::string::npos) << m.raw;
  EXPECT_NE(m.raw.find("paddock_exec_duration_seconds_bucket"), std::string::npos);
}

TEST_F(ApiTest, AuthenticationAndAdminOnlyRoutes) {
  ExpectError(Call("GET", "/v1/sandboxes", ""), 401, "unauthenticated");
  ExpectError(Call("GET", "/v1/sandboxes", "pdk_0000"), 401, "unauthenticated");
  ExpectError(Call("POST", "/v1/tenants", key_a_, json{{"name", "x"}}.dump()), 403,
              "permission_denied");
  ExpectError(Call("POST", "/v1/tenants", admin_, json{{"name", "tenant-a"}}.dump()), 409,
              "already");
}

TEST_F(ApiTest, CreateValidatesEveryFieldByName) {
  ExpectError(Call("POST", "/v1/sandboxes", key_a_, "{not json"), 400, "body");
  ExpectError(Call("POST", "/v1/sandboxes", key_a_, "[1,2]"), 400, "body");
  ExpectError(Call("POST", "/v1/sandboxes", key_a_, R"({"class": 5})"), 400, "class");
  ExpectError(Call("POST", "/v1/sandboxes", key_a_, R"({"class": "huge"})"), 400, "class");
  ExpectError(Call("POST", "/v1/sandboxes", key_a_, R"({"resources": {"cpus": -1}})"), 400,
              "resources.cpus");
  ExpectError(Call("POST", "/v1/sandboxes", key_a_, R"({"resources": {"memory_mb": 999999}})"), 400,
              "resources.memory");
  ExpectError(Call("POST", "/v1/sandboxes", key_a_, R"({"resources": {"pids": "many"}})"), 400,
              "resources.pids");
  ExpectError(Call("POST", "/v1/sandboxes", key_a_, R"({"ttl_seconds": -5})"), 400, "ttl_seconds");
  ExpectError(Call("POST", "/v1/sandboxes", key_a_, R"({"env": {"A": 1}})"), 400, "env.A");
  ExpectError(Call("POST", "/v1/sandboxes", key_a_, R"({"metadata": "x"})"), 400, "metadata");
  // Nothing was created by any of them.
  Reply list = Call("GET", "/v1/sandboxes?all=true", key_a_);
  EXPECT_EQ(list.body["items"].size(), 0u) << list.raw;

  Reply ok = Call("POST", "/v1/sandboxes", key_a_,
                  R"({"class":"small","resources":{"memory_mb":128},"env":{"GREETING":"hi"},
                      "metadata":{"task":"t1"},"session_id":"s1"})");
  ASSERT_EQ(ok.status, 201) << ok.raw;
  EXPECT_EQ(ok.body["state"], "ready");
  EXPECT_EQ(ok.body["resources"]["memory_mb"], 128);
  EXPECT_EQ(ok.body["metadata"]["task"], "t1");
  const std::string id = ok.body["id"];
  int64_t v = Lease(key_a_, id);
  Reply out = Exec(key_a_, id, v, "echo $GREETING");
  EXPECT_EQ(out.body["stdout"], "hi\n") << out.raw;
}

TEST_F(ApiTest, QueryParametersAreValidatedByName) {
  ExpectError(Call("GET", "/v1/sandboxes?limit=12abc", key_a_), 400, "limit");
  ExpectError(Call("GET", "/v1/sandboxes?limit=0", key_a_), 400, "limit");
  ExpectError(Call("GET", "/v1/allocations?limit=5000", key_a_), 400, "limit");
  const std::string id = CreateSandbox(key_a_);
  ExpectError(Call("GET", "/v1/sandboxes/" + id + "/events?after=-1", key_a_), 400, "after");
  EXPECT_EQ(Call("GET", "/v1/sandboxes/" + id + "/events?limit=2&after=0", key_a_).status, 200);
  EXPECT_EQ(Call("GET", "/v1/sandboxes?limit=1000", key_a_).status, 200);
}

TEST_F(ApiTest, OtherTenantsSandboxIsNotFound) {
  std::string id = CreateSandbox(key_a_);
  ExpectError(Call("GET", "/v1/sandboxes/" + id, key_b_), 404, "not_found");
  ExpectError(Call("DELETE", "/v1/sandboxes/" + id, key_b_), 404, "not_found");
  ExpectError(Call("POST", "/v1/sandboxes/" + id + "/lease", key_b_, R"({"owner":"b"})"), 404,
              "not_found");
  int64_t v = Lease(key_a_, id);
  ExpectError(Exec(key_b_, id, v, "true"), 404, "not_found");
  EXPECT_EQ(Call("GET", "/v1/sandboxes", key_b_).body["items"].size(), 0u);
  EXPECT_EQ(Call("GET", "/v1/sandboxes", key_a_).body["items"].size(), 1u);
  ExpectError(Call("GET", "/v1/sandboxes/sb-doesnotexist", key_a_), 404, "not_found");
}

TEST_F(ApiTest, LeasesFenceStaleHolders) {
  std::string id = CreateSandbox(key_a_);
  ExpectError(Exec(key_a_, id, 0, "true"), 409, "Lease-Version");
  int64_t v1 = Lease(key_a_, id);
  EXPECT_EQ(v1, 1);
  ExpectError(Call("POST", "/v1/sandboxes/" + id + "/lease", key_a_, R"({"owner":"other"})"), 409,
              "conflict");
  EXPECT_EQ(Exec(key_a_, id, v1, "exit 0").status, 200);
  ExpectError(Exec(key_a_, id, v1 + 7, "true"), 409, "conflict");
  Reply renew = Call("POST", "/v1/sandboxes/" + id + "/lease/renew", key_a_,
                     json{{"lease_version", v1}, {"ttl_seconds", 30}}.dump());
  EXPECT_EQ(renew.status, 200) << renew.raw;
  Reply rel = Call("POST", "/v1/sandboxes/" + id + "/lease/release", key_a_,
                   json{{"lease_version", v1}, {"recycle", "keep"}}.dump());
  EXPECT_EQ(rel.status, 200) << rel.raw;
  // The old holder comes back: rejected, also for files and pause.
  ExpectError(Exec(key_a_, id, v1, "true"), 409, "conflict");
  int64_t v2 = Lease(key_a_, id);
  EXPECT_GT(v2, v1);
  ExpectError(Exec(key_a_, id, v1, "true"), 409, "conflict");
  ExpectError(Call("GET", "/v1/sandboxes/" + id + "/files/etc/hostname", key_a_, "", v1), 409,
              "conflict");
  ExpectError(Call("POST", "/v1/sandboxes/" + id + "/pause", key_a_, "", v1), 409, "conflict");
  ExpectError(Call("POST", "/v1/sandboxes/" + id + "/lease/release", key_a_,
                   json{{"lease_version", v1}}.dump()),
              409, "conflict");
  ExpectError(Call("POST", "/v1/sandboxes/" + id + "/lease/release", key_a_,
                   json{{"lease_version", v2}, {"recycle", "sideways"}}.dump()),
              400, "recycle");
}

TEST_F(ApiTest, FiftyParallelAcquiresHaveExactlyOneWinner) {
  std::string id = CreateSandbox(key_a_);
  std::atomic<int> won{0}, conflicts{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back([&, i] {
      auto client = daemon_->Client();
      api::Headers h;
      h.Set("Authorization", "Bearer " + key_a_);
      auto r = client->Request("POST", "/v1/sandboxes/" + id + "/lease",
                               json{{"owner", "w" + std::to_string(i)}}.dump(), h);
      if (!r.ok()) {
        ++other;
      } else if (r->status == 201) {
        ++won;
      } else if (r->status == 409) {
        ++conflicts;
      } else {
        ++other;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(conflicts.load(), 49);
  EXPECT_EQ(other.load(), 0);
}

TEST_F(ApiTest, ExecBufferedAndStreaming) {
  std::string id = CreateSandbox(key_a_);
  int64_t v = Lease(key_a_, id);
  Reply r =
      Call("POST", "/v1/sandboxes/" + id + "/exec", key_a_,
           json{{"argv", {"sh", "-c", "cat; echo err >&2; exit 3"}}, {"stdin", "in\n"}}.dump(), v);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["stdout"], "in\n");
  EXPECT_EQ(r.body["stderr"], "err\n");
  EXPECT_EQ(r.body["exit_code"], 3);
  ExpectError(Call("POST", "/v1/sandboxes/" + id + "/exec", key_a_, R"({"argv": "ls"})", v), 400,
              "argv");
  ExpectError(Call("POST", "/v1/sandboxes/" + id + "/exec", key_a_,
                   R"({"shell": "true", "timeout_seconds": "soon"})", v),
              400, "timeout_seconds");
  r = Call("POST", "/v1/sandboxes/" + id + "/exec", key_a_,
           R"({"shell": "sleep 30", "timeout_seconds": 1})", v);
  EXPECT_EQ(r.body["timed_out"], true) << r.raw;

  auto client = daemon_->Client();
  api::Headers h;
  h.Set("Authorization", "Bearer " + key_a_);
  h.Set("Paddock-Lease-Version", std::to_string(v));
  std::vector<json> events;
  std::string pending;
  auto s = client->RequestStream("POST", "/v1/sandboxes/" + id + "/exec/stream",
                                 json{{"shell", "echo one; sleep 0.2; echo two; exit 5"}}.dump(), h,
                                 [&](std::string_view d) {
                                   pending.append(d);
                                   size_t nl;
                                   while ((nl = pending.find('\n')) != std::string::npos) {
                                     events.push_back(json::parse(pending.substr(0, nl)));
                                     pending.erase(0, nl + 1);
                                   }
                                   return true;
                                 });
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->status, 200);
  ASSERT_GE(events.size(), 3u);
  std::string out;
  for (const auto& e : events)
    if (e["type"] == "stdout") out += e["data"].get<std::string>();
  EXPECT_EQ(out, "one\ntwo\n");
  EXPECT_EQ(events.back()["type"], "exit");
  EXPECT_EQ(events.back()["exit_code"], 5);
}

TEST_F(ApiTest, FilesUploadDownloadAndMetadata) {
  std::string id = CreateSandbox(key_a_);
  int64_t v = Lease(key_a_, id);
  Reply up = Call("PUT", "/v1/sandboxes/" + id + "/files/home/sandbox/dir%20x/a.txt?mode=600",
                  key_a_, "payload", v);
  // The parent directory does not exist yet.
  EXPECT_EQ(up.status, 404) << up.raw;
  EXPECT_EQ(Call("POST", "/v1/sandboxes/" + id + "/fs/mkdir", key_a_,
                 json{{"path", "/home/sandbox/dir x"}}.dump(), v)
                .status,
            200);
  up = Call("PUT", "/v1/sandboxes/" + id + "/files/home/sandbox/dir%20x/a.txt?mode=600", key_a_,
            "payload", v);
  EXPECT_EQ(up.status, 201) << up.raw;
  auto client = daemon_->Client();
  api::Headers h;
  h.Set("Authorization", "Bearer " + key_a_);
  h.Set("Paddock-Lease-Version", std::to_string(v));
  auto down =
      client->Request("GET", "/v1/sandboxes/" + id + "/files/home/sandbox/dir%20x/a.txt", "", h);
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(down->status, 200);
  EXPECT_EQ(down->body, "payload");
  Reply st = Call("POST", "/v1/sandboxes/" + id + "/fs/stat", key_a_,
                  json{{"path", "/home/sandbox/dir x/a.txt"}}.dump(), v);
  EXPECT_EQ(st.body["mode"], 0600) << st.raw;
  EXPECT_EQ(st.body["uid"], 1000);
  EXPECT_EQ(
      Call("POST", "/v1/sandboxes/" + id + "/fs/move", key_a_,
           json{{"from", "/home/sandbox/dir x/a.txt"}, {"to", "/home/sandbox/b.txt"}}.dump(), v)
          .status,
      200);
  Reply list = Call("POST", "/v1/sandboxes/" + id + "/fs/list", key_a_,
                    json{{"path", "/home/sandbox"}}.dump(), v);
  ASSERT_EQ(list.status, 200) << list.raw;
  bool found = false;
  for (const auto& e : list.body["items"]) found = found || e["name"] == "b.txt";
  EXPECT_TRUE(found) << list.raw;
  EXPECT_EQ(Exec(key_a_, id, v, "cat /home/sandbox/b.txt").body["stdout"], "payload");
  // Too large for max_upload_bytes (1 MiB in this config).
  Reply big = Call("PUT", "/v1/sandboxes/" + id + "/files/home/sandbox/big", key_a_,
                   std::string(2 << 20, 'x'), v);
  EXPECT_EQ(big.status, 413) << big.raw;
  EXPECT_EQ(
      Call("DELETE", "/v1/sandboxes/" + id + "/files/home/sandbox/b.txt", key_a_, "", v).status,
      204);
  ExpectError(Call("POST", "/v1/sandboxes/" + id + "/fs/explode", key_a_, "{}", v), 404, "explode");
  // Confinement holds through the API too.
  ExpectError(Call("GET", "/v1/sandboxes/" + id + "/files/proc/1/environ", key_a_, "", v), 403,
              "permission");
}

TEST_F(ApiTest, PauseResumeAndEvents) {
  std::string id = CreateSandbox(key_a_);
  int64_t v = Lease(key_a_, id);
  Reply p = Call("POST", "/v1/sandboxes/" + id + "/pause", key_a_, "", v);
  ASSERT_EQ(p.status, 200) << p.raw;
  EXPECT_EQ(p.body["state"], "hibernating");
  ExpectError(Exec(key_a_, id, v, "true"), 409, "hibernating");
  Reply r = Call("POST", "/v1/sandboxes/" + id + "/resume", key_a_, "", v);
  EXPECT_EQ(r.body["state"], "leased") << r.raw;
  EXPECT_EQ(Exec(key_a_, id, v, "echo ok").body["stdout"], "ok\n");
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/" + id, key_a_).status, 204);
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/" + id, key_a_).status, 204);  // idempotent
  Reply ev = Call("GET", "/v1/sandboxes/" + id + "/events", key_a_);
  std::vector<std::string> path;
  for (const auto& e : ev.body["items"]) path.push_back(e["new_state"]);
  const std::vector<std::string> expected = {"provisioning", "ready",  "locking",   "leased",
                                             "hibernating",  "leased", "terminated"};
  EXPECT_EQ(path, expected) << ev.raw;
  for (const auto& e : ev.body["items"]) EXPECT_GT(e["time_ms"].get<int64_t>(), 0);
}

TEST_F(ApiTest, LeaseAndTtlExpiry) {
  std::string id = CreateSandbox(key_a_);
  int64_t v = Lease(key_a_, id, /*ttl=*/1);
  EXPECT_TRUE(Eventually([&] { return State(id) == "ready"; })) << State(id);
  ExpectError(Exec(key_a_, id, v, "true"), 409, "conflict");
  EXPECT_GT(Lease(key_a_, id), v);

  std::string short_lived = CreateSandbox(key_a_, json{{"ttl_seconds", 1}});
  EXPECT_TRUE(Eventually([&] { return State(short_lived) == "terminated"; })) << State(short_lived);
  EXPECT_FALSE(std::filesystem::exists("/sys/fs/cgroup/pids/paddock-" + short_lived));
}

TEST_F(ApiTest, CrashAndRestartReconciles) {
  std::string id = CreateSandbox(key_a_);
  int64_t v = Lease(key_a_, id);
  EXPECT_EQ(Exec(key_a_, id, v, "sleep 300 & echo started").status, 200);
  daemon_->Kill9();
  std::string err;
  ASSERT_TRUE(daemon_->Start(&err)) << err;
  // The sandbox died with the daemon: the registry records it as lost and cleaned up.
  EXPECT_TRUE(Eventually([&] { return State(id) == "terminated"; })) << State(id);
  EXPECT_FALSE(std::filesystem::exists("/sys/fs/cgroup/pids/paddock-" + id));
  ExpectError(Exec(key_a_, id, v, "true"), 409, "");
  // Lease versions never go backwards across restarts.
  std::string id2 = CreateSandbox(key_a_);
  EXPECT_EQ(Lease(key_a_, id2), 1);
}

}  // namespace
}  // namespace paddock::testing
