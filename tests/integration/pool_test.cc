// Warm pools through the API: background refill to the target, late binding of identity at
// acquire (POOL-3), the pool never handing one sandbox to two callers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "support/daemon_process.h"
#include "support/json_api.h"

namespace paddock::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kConfig = SmallClassConfig("128MiB", R"(pools:
  - class: small
    min: 2
    max: 4
    buffer: 2
lifecycle:
  reconcile_interval: 200ms
)");

int Warm(JsonApi& api) {
  ApiReply p = api.Call("GET", "/v1/pools");
  for (const auto& e : p.body["items"])
    if (e["class"] == "small") return e["warm"];
  return -1;
}

class PoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
    std::string err;
    ASSERT_TRUE(daemon_.Start(&err)) << err;
    ApiReply t = CreateTenant(daemon_, "p");
    ASSERT_EQ(t.status, 201) << t.raw;
    tenant_id_ = t.body["tenant"]["id"];
    api_ = std::make_unique<JsonApi>(daemon_.port(), t.body["api_key"].get<std::string>());
    EXPECT_TRUE(Eventually([&] { return Warm(*api_) == 2; })) << Warm(*api_);
  }

  DaemonProcess daemon_{kConfig};
  std::unique_ptr<JsonApi> api_;
  std::string tenant_id_;
};

TEST_F(PoolTest, RefillsAndBindsIdentityAtAcquire) {
  JsonApi& api = *api_;
  // Warm sandboxes belong to nobody: the tenant does not see them.
  EXPECT_EQ(api.Call("GET", "/v1/sandboxes").body["items"].size(), 0u);

  ApiReply got = api.Call("POST", "/v1/acquire",
                          {{"class", "small"}, {"owner", "agent-1"}, {"session_id", "s-1"}});
  ASSERT_EQ(got.status, 201) << got.raw;
  EXPECT_TRUE(got.body["from_pool"].get<bool>());
  EXPECT_EQ(got.body["sandbox"]["state"], "leased");
  EXPECT_EQ(got.body["sandbox"]["session_id"], "s-1");
  EXPECT_EQ(got.body["sandbox"]["tenant_id"], tenant_id_);
  EXPECT_GT(got.body["sandbox"]["expires_at_ms"].get<int64_t>(), 0);
  const std::string id = got.body["sandbox"]["id"];
  // It works under the lease it came with, and now shows up as the tenant's.
  ApiReply r = api.Call("POST", "/v1/sandboxes/" + id + "/exec", {{"shell", "echo warm"}},
                        got.body["lease"]["lease_version"].get<int64_t>());
  EXPECT_EQ(r.body["stdout"], "warm\n") << r.raw;
  EXPECT_EQ(api.Call("GET", "/v1/sandboxes").body["items"].size(), 1u);
  // The pool refills behind it (a claim wakes the refill; no need to wait for a full pass).
  EXPECT_TRUE(Eventually([&] { return Warm(api) == 2; })) << Warm(api);

  // Concurrent acquirers never share a sandbox; an empty pool falls back to creating one.
  std::set<std::string> ids;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      JsonApi c(daemon_.port(), api.key());
      ApiReply g =
          c.Call("POST", "/v1/acquire", {{"class", "small"}, {"owner", "w" + std::to_string(i)}});
      if (g.status == 201) {
        std::lock_guard lock(mu);
        ids.insert(g.body["sandbox"]["id"].get<std::string>());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids.count(id), 0u);
  ApiReply pools = api.Call("GET", "/v1/pools");
  EXPECT_EQ(pools.body["items"][0]["leased"], 6) << pools.raw;
  EXPECT_EQ(api.Call("POST", "/v1/acquire", {{"class", "nope"}}).status, 400);
}

TEST_F(PoolTest, CreateTakesAWarmMemberAndBindsTheRequestToIt) {
  JsonApi& api = *api_;
  ApiReply created = api.Call("POST", "/v1/sandboxes",
                              {{"class", "small"},
                               {"env", {{"GREETING", "hello from the request"}}},
                               {"metadata", {{"job", "42"}}},
                               {"session_id", "s-9"},
                               {"ttl_seconds", 600}});
  ASSERT_EQ(created.status, 201) << created.raw;
  const std::string id = created.body["id"];
  EXPECT_EQ(created.body["state"], "ready");
  EXPECT_EQ(created.body["tenant_id"], tenant_id_);
  EXPECT_EQ(created.body["session_id"], "s-9");
  EXPECT_EQ(created.body["metadata"]["job"], "42") << created.raw;
  // It was a pool member: its history starts before this request, with a bind.
  ApiReply events = api.Call("GET", "/v1/sandboxes/" + id + "/events");
  bool bound = false;
  for (const auto& e : events.body["items"]) bound |= e["type"] == "bind";
  EXPECT_TRUE(bound) << events.raw;
  // The env given at create reaches commands although the runtime object was made before the
  // request existed; the exec's own env still wins.
  ApiReply lease = api.Call("POST", "/v1/sandboxes/" + id + "/lease", {{"owner", "t"}});
  ASSERT_EQ(lease.status, 201) << lease.raw;
  const int64_t v = lease.body["lease_version"];
  ApiReply out =
      api.Call("POST", "/v1/sandboxes/" + id + "/exec", {{"shell", "echo \"$GREETING\""}}, v);
  EXPECT_EQ(out.body["stdout"], "hello from the request\n") << out.raw;
  out = api.Call("POST", "/v1/sandboxes/" + id + "/exec",
                 {{"shell", "echo \"$GREETING\""}, {"env", {{"GREETING", "override"}}}}, v);
  EXPECT_EQ(out.body["stdout"], "override\n") << out.raw;

  // Explicit resources are not what the pool holds: a new sandbox, no bind event.
  ApiReply custom =
      api.Call("POST", "/v1/sandboxes", {{"class", "small"}, {"resources", {{"memory_mb", 96}}}});
  ASSERT_EQ(custom.status, 201) << custom.raw;
  ApiReply custom_events =
      api.Call("GET", "/v1/sandboxes/" + custom.body["id"].get<std::string>() + "/events");
  for (const auto& e : custom_events.body["items"]) EXPECT_NE(e["type"], "bind");
  EXPECT_EQ(custom.body["resources"]["memory_mb"], 96) << custom.raw;
}

}  // namespace
}  // namespace paddock::testing
