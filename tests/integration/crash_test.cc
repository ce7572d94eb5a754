// Crash test: kill -9 paddockd at random moments during creates, execs and releases, restart it,
// and check the invariants the control plane promises after any crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "lifecycle/state_machine.h"
#include "support/daemon_process.h"
#include "support/json_api.h"

namespace paddock::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kConfig = SmallClassConfig("128MiB", "lifecycle:\n  reconcile_interval: 500ms\n");

// One client doing create -> lease -> exec -> release/destroy in a loop until the daemon dies.
void Workload(uint16_t port, const std::string& key, std::atomic<bool>& stop) {
  JsonApi c(port, key);
  while (!stop) {
    ApiReply s = c.Call("POST", "/v1/sandboxes", json::object());
    if (s.status != 201) return;
    const std::string id = s.body["id"];
    ApiReply l = c.Call("POST", "/v1/sandboxes/" + id + "/lease", {{"owner", "crash"}});
    if (l.status != 201) return;
    const int64_t v = l.body["lease_version"];
    if (c.Call("POST", "/v1/sandboxes/" + id + "/exec", {{"shell", "echo hi; sleep 0.05"}}, v)
            .status == 0)
      return;
    if (c.Call("POST", "/v1/sandboxes/" + id + "/lease/release",
               {{"lease_version", v}, {"recycle", (v % 2) ? "keep" : "destroy"}})
            .status == 0)
      return;
  }
}

TEST(CrashTest, KillNineAtRandomMomentsKeepsTheInvariants) {
  if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
  DaemonProcess daemon(kConfig);
  std::string err;
  ASSERT_TRUE(daemon.Start(&err)) << err;
  const std::string key = daemon.admin_key();
  // Admin acts as a tenant here: create one for the workload.
  ApiReply t = CreateTenant(daemon, "crash");
  ASSERT_EQ(t.status, 201) << t.raw;
  const std::string tenant_key = t.body["api_key"];

  std::mt19937 rng(12345);
  std::map<std::string, int64_t> last_lease_version;
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int i = 0; i < 2; ++i)
      workers.emplace_back(Workload, daemon.port(), tenant_key, std::ref(stop));
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));
    daemon.Kill9();
    stop = true;
    for (auto& w : workers) w.join();
    ASSERT_TRUE(daemon.Start(&err)) << "round " << round << ": " << err;

    // After the start-up reconciliation: every row is in a valid state, nothing of the crashed
    // run is still live (its sandboxes died with it), and lease versions never went backwards.
    ApiReply page =
        JsonApi(daemon.port(), tenant_key).Call("GET", "/v1/sandboxes?all=true&limit=1000");
    ASSERT_EQ(page.status, 200) << page.raw;
    for (const auto& s : page.body["items"]) {
      const std::string state = s["state"];
      EXPECT_TRUE(lifecycle::ParseState(state).ok()) << state;
      EXPECT_TRUE(state == "terminated" || state == "failed")
          << "round " << round << ": " << s["id"] << " is " << state << " after restart";
      int64_t v = s["last_lease_version"];
      auto [it, inserted] = last_lease_version.emplace(s["id"], v);
      if (!inserted) {
        EXPECT_GE(v, it->second) << s["id"];
        it->second = v;
      }
    }
  }
  // The last round's sandboxes: their inits exit when they see the daemon gone, and the
  // periodic reconciliation removes what they leave. Give it a few passes.
  auto leftovers = [&] {
    int n = 0;
    for (const auto& [id, v] : last_lease_version)
      n += std::filesystem::exists("/sys/fs/cgroup/pids/paddock-" + id);
    return n;
  };
  for (int i = 0; i < 50 && leftovers() > 0; ++i) std::this_thread::sleep_for(100ms);
  daemon.Stop();
  // Nothing of any round is left on the host.
  for (const auto& [id, v] : last_lease_version) {
    EXPECT_FALSE(std::filesystem::exists("/sys/fs/cgroup/pids/paddock-" + id)) << id;
    EXPECT_FALSE(std::filesystem::exists("/sys/fs/cgroup/freezer/paddock-" + id)) << id;
  }
  EXPECT_GT(last_lease_version.size(), 5u) << "the workload barely ran";
}

}  // namespace
}  // namespace paddock::testing
