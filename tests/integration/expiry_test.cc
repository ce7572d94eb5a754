// Idle expiry through a real paddockd: a leased sandbox nobody uses is ended (expiry_action
// destroy) or paused (expiry_action pause) after its idle timeout, while one in use is not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "support/daemon_process.h"
#include "support/json_api.h"

namespace paddock::testing {
namespace {

using json = nlohmann::json;

std::string ConfigWithExpiryAction(const std::string& action) {
  return SmallClassConfig(
      "128MiB", "lifecycle:\n  reconcile_interval: 200ms\n  expiry_action: " + action + "\n");
}

class IdleExpiryTest : public ::testing::Test {
 protected:
  void StartWith(const std::string& action) {
    daemon_ = std::make_unique<DaemonProcess>(ConfigWithExpiryAction(action));
    std::string err;
    ASSERT_TRUE(daemon_->Start(&err)) << err;
    ApiReply t = CreateTenant(*daemon_, "idle");
    ASSERT_EQ(t.status, 201) << t.raw;
    api_ = std::make_unique<JsonApi>(daemon_->port(), t.body["api_key"].get<std::string>());
  }
  // A leased sandbox with a 1 s idle timeout; returns {id, lease_version}.
  std::pair<std::string, int64_t> LeasedIdleSandbox() {
    ApiReply s = api_->Call("POST", "/v1/sandboxes", {{"idle_timeout_seconds", 1}});
    EXPECT_EQ(s.status, 201) << s.raw;
    const std::string id = s.body.value("id", "");
    ApiReply l = api_->Call("POST", "/v1/sandboxes/" + id + "/lease",
                            {{"owner", "t"}, {"ttl_seconds", 600}});
    EXPECT_EQ(l.status, 201) << l.raw;
    return {id, l.body.value("lease_version", int64_t{0})};
  }
  json Get(const std::string& id) { return api_->Call("GET", "/v1/sandboxes/" + id).body; }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<JsonApi> api_;
};

TEST_F(IdleExpiryTest, IdleSandboxIsDestroyedWhileABusyOneLives) {
  if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
  StartWith("destroy");
  auto [idle_id, idle_v] = LeasedIdleSandbox();
  auto [busy_id, busy_v] = LeasedIdleSandbox();
  // The busy one runs a command that lasts longer than the idle timeout, then keeps issuing
  // commands; activity, not the lease, keeps it alive.
  ApiReply r =
      api_->Call("POST", "/v1/sandboxes/" + busy_id + "/exec", {{"shell", "sleep 2"}}, busy_v);
  EXPECT_EQ(r.status, 200) << r.raw;
  EXPECT_TRUE(Eventually([&] { return Get(idle_id)["state"] == "terminated"; }))
      << Get(idle_id).dump();
  EXPECT_EQ(Get(idle_id)["state_reason"], "idle timeout");
  EXPECT_EQ(Get(busy_id)["state"], "leased") << Get(busy_id).dump();
  // The expired holder is fenced off.
  ApiReply stale =
      api_->Call("POST", "/v1/sandboxes/" + idle_id + "/exec", {{"argv", {"/bin/true"}}}, idle_v);
  EXPECT_EQ(stale.status, 409) << stale.raw;
}

TEST_F(IdleExpiryTest, PauseActionHibernatesAndResumeWorks) {
  if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
  StartWith("pause");
  auto [id, v] = LeasedIdleSandbox();
  const std::string base = "/v1/sandboxes/" + id;
  ASSERT_EQ(api_->Call("POST", base + "/exec", {{"shell", "echo kept > /tmp/state.txt"}}, v).status,
            200);
  EXPECT_TRUE(Eventually([&] { return Get(id)["state"] == "hibernating"; })) << Get(id).dump();
  EXPECT_EQ(Get(id)["state_reason"], "idle timeout");
  // Frozen: no commands until the holder resumes it; its lease is still the valid one.
  EXPECT_EQ(api_->Call("POST", base + "/exec", {{"argv", {"/bin/true"}}}, v).status, 409);
  ApiReply resumed = api_->Call("POST", base + "/resume", json::object(), v);
  ASSERT_EQ(resumed.status, 200) << resumed.raw;
  // Pausing kept memory: the tmpfs file is still there.
  ApiReply cat = api_->Call("POST", base + "/exec", {{"argv", {"cat", "/tmp/state.txt"}}}, v);
  EXPECT_EQ(cat.body["stdout"], "kept\n") << cat.raw;
  EXPECT_EQ(Get(id)["state"], "leased");
}

}  // namespace
}  // namespace paddock::testing
