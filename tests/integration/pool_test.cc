// Warm pools through the API: background refill to the target, late binding of identity at
// acquire (POOL-3), the pool never handing one sandbox to two callers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "support/daemon_process.h"

namespace paddock::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kConfig = R"(
resource_classes:
  - name: small
    cpus: 1
    memory: 128MiB
    disk: 32MiB
    pids: 64
    tmp: 16MiB
pools:
  - class: small
    min: 2
    max: 4
    buffer: 2
lifecycle:
  reconcile_interval: 200ms
)";

json Call(api::HttpClient& c, const std::string& key, const std::string& method,
          const std::string& target, const json& body = nullptr, int* status = nullptr) {
  api::Headers h;
  h.Set("Authorization", "Bearer " + key);
  auto r = c.Request(method, target, body.is_null() ? "" : body.dump(), h);
  if (status) *status = r.ok() ? r->status : 0;
  return r.ok() ? json::parse(r->body, nullptr, false) : json();
}

int Warm(api::HttpClient& c, const std::string& key) {
  json p = Call(c, key, "GET", "/v1/pools");
  for (const auto& e : p["items"])
    if (e["class"] == "small") return e["warm"];
  return -1;
}

bool Eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 150; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return pred();
}

TEST(PoolTest, RefillsAndBindsIdentityAtAcquire) {
  if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
  DaemonProcess daemon(kConfig);
  std::string err;
  ASSERT_TRUE(daemon.Start(&err)) << err;
  api::HttpClient c("127.0.0.1", daemon.port());
  int st = 0;
  json t = Call(c, daemon.admin_key(), "POST", "/v1/tenants", {{"name", "pooled"}}, &st);
  ASSERT_EQ(st, 201);
  const std::string key = t["api_key"];

  EXPECT_TRUE(Eventually([&] { return Warm(c, key) == 2; })) << Warm(c, key);
  // Warm sandboxes belong to nobody: the tenant does not see them.
  EXPECT_EQ(Call(c, key, "GET", "/v1/sandboxes")["items"].size(), 0u);

  json got = Call(c, key, "POST", "/v1/acquire",
                  {{"class", "small"}, {"owner", "agent-1"}, {"session_id", "s-1"}}, &st);
  ASSERT_EQ(st, 201) << got.dump();
  EXPECT_TRUE(got["from_pool"].get<bool>());
  EXPECT_EQ(got["sandbox"]["state"], "leased");
  EXPECT_EQ(got["sandbox"]["session_id"], "s-1");
  EXPECT_EQ(got["sandbox"]["tenant_id"], t["tenant"]["id"]);
  EXPECT_GT(got["sandbox"]["expires_at_ms"].get<int64_t>(), 0);
  const std::string id = got["sandbox"]["id"];
  // It works under the lease it came with, and now shows up as the tenant's.
  api::Headers h;
  h.Set("Authorization", "Bearer " + key);
  h.Set("Paddock-Lease-Version", std::to_string(got["lease"]["lease_version"].get<int64_t>()));
  auto r =
      c.Request("POST", "/v1/sandboxes/" + id + "/exec", json{{"shell", "echo warm"}}.dump(), h);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(json::parse(r->body)["stdout"], "warm\n") << r->body;
  EXPECT_EQ(Call(c, key, "GET", "/v1/sandboxes")["items"].size(), 1u);
  // The pool refills behind it.
  EXPECT_TRUE(Eventually([&] { return Warm(c, key) == 2; })) << Warm(c, key);

  // Concurrent acquirers never share a sandbox; an empty pool falls back to creating one.
  std::set<std::string> ids;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      api::HttpClient cc("127.0.0.1", daemon.port());
      int s = 0;
      json g = Call(cc, key, "POST", "/v1/acquire",
                    {{"class", "small"}, {"owner", "w" + std::to_string(i)}}, &s);
      if (s == 201) {
        std::lock_guard lock(mu);
        ids.insert(g["sandbox"]["id"].get<std::string>());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids.count(id), 0u);
  json pools = Call(c, key, "GET", "/v1/pools");
  EXPECT_EQ(pools["items"][0]["leased"], 6) << pools.dump();
  json bad = Call(c, key, "POST", "/v1/acquire", {{"class", "nope"}}, &st);
  EXPECT_EQ(st, 400) << bad.dump();
}

}  // namespace
}  // namespace paddock::testing
