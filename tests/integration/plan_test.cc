// The planner and the policy guard through a real paddockd (PLAN-1..4): dry runs, creates that
// describe a task instead of naming a class, tenant policies, and the telemetry loop — a lease's
// measured usage changes the next recommendation for the same kind of task.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/daemon_process.h"
#include "support/json_api.h"
#include "support/runtime_fixture.h"

namespace paddock::testing {
namespace {

using json = nlohmann::json;

// Two classes; data work goes to "medium"; history acts on a single run so one lease teaches it.
// Tenant "capped" may only use "small", and is refused anything else.
constexpr const char* kPlannerYaml = R"(
default_class: small
rules:
  - name: data
    when:
      any_of: [cap:dataframe, cap:numeric]
    class: medium
history:
  min_samples: 1
  min_memory: 96MiB
policy:
  tenants:
    capped:
      allowed_classes: [small]
      on_violation: deny
)";

std::string Config(const std::string& planner_path) {
  return SmallClassConfig("256MiB", R"(  - name: medium
    cpus: 1
    memory: 512MiB
    disk: 64MiB
    pids: 64
    tmp: 16MiB
lifecycle:
  reconcile_interval: 300ms
planner_config: )" + planner_path + "\n");
}

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
    dir_ = TestDataDir() + "/plan-" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/planner.yaml") << kPlannerYaml;
    daemon_ = std::make_unique<DaemonProcess>(Config(dir_ + "/planner.yaml"));
    std::string err;
    ASSERT_TRUE(daemon_->Start(&err)) << err;
    api_ = Tenant("open");
    capped_ = Tenant("capped");
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<JsonApi> Tenant(const std::string& name) {
    ApiReply t = CreateTenant(*daemon_, name);
    EXPECT_EQ(t.status, 201) << t.raw;
    return std::make_unique<JsonApi>(daemon_->port(), t.body.value("api_key", ""));
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<JsonApi> api_, capped_;
};

const json kDataTask = {{"task", "Load sales.csv with pandas and total the sales per region"},
                        {"commands", {"python3 -c \"b = bytearray(120 << 20); print(len(b))\""}}};

TEST_F(PlanTest, DryRunShowsThePlannerAndTheGuard) {
  ApiReply plain = api_->Call("POST", "/v1/plan", {{"task", "print hello world"}});
  ASSERT_EQ(plain.status, 200) << plain.raw;
  EXPECT_EQ(plain.body["intent"]["resource_class"], "small");
  EXPECT_EQ(plain.body["intent"]["planner"], "builtin");
  EXPECT_TRUE(plain.body["decision"]["allowed"].get<bool>());

  ApiReply data = api_->Call("POST", "/v1/plan", kDataTask);
  ASSERT_EQ(data.status, 200) << data.raw;
  EXPECT_EQ(data.body["intent"]["resource_class"], "medium") << data.raw;
  EXPECT_EQ(data.body["decision"]["resource_class"], "medium");
  EXPECT_FALSE(data.body["intent"]["reasons"].empty());
  // The same task reworded keeps its workload signature (history is shared between them).
  ApiReply reworded = api_->Call("POST", "/v1/plan",
                                 {{"task", "Total sales per region from sales.csv using pandas"},
                                  {"commands", kDataTask["commands"]}});
  EXPECT_EQ(reworded.body["intent"]["workload_signature"],
            data.body["intent"]["workload_signature"]);

  // A tenant held to "small" by policy is refused, and says why.
  ApiReply denied = capped_->Call("POST", "/v1/plan", kDataTask);
  ASSERT_EQ(denied.status, 200) << denied.raw;
  EXPECT_FALSE(denied.body["decision"]["allowed"].get<bool>());
  EXPECT_NE(denied.body["decision"]["denial"].get<std::string>(), "");

  // Hostile or malformed input names the field.
  ApiReply bad = api_->Call("POST", "/v1/plan", {{"task", 5}});
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_NE(bad.raw.find("task"), std::string::npos) << bad.raw;
  ApiReply unknown = api_->Call("POST", "/v1/plan", {{"task", "x"}, {"cpu", 64}});
  EXPECT_EQ(unknown.status, 400) << unknown.raw;
  // The tenant is the key's, never the body's.
  ApiReply spoof = capped_->Call("POST", "/v1/plan", {{"task", "x"}, {"tenant_id", "open"}});
  EXPECT_EQ(spoof.status, 400) << spoof.raw;
}

TEST_F(PlanTest, CreateFromIntentRecordsTheDecisionAndLearnsFromUsage) {
  ApiReply created = api_->Call("POST", "/v1/sandboxes", {{"intent", kDataTask}});
  ASSERT_EQ(created.status, 201) << created.raw;
  const std::string id = created.body["id"];
  EXPECT_EQ(created.body["resource_class"], "medium");
  EXPECT_EQ(created.body["plan"]["decision"]["resource_class"], "medium") << created.raw;
  EXPECT_EQ(created.body["plan"]["intent"]["resource_class"], "medium");
  ApiReply events = api_->Call("GET", "/v1/sandboxes/" + id + "/events");
  bool planned = false;
  for (const auto& e : events.body["items"]) planned |= e["type"] == "plan";
  EXPECT_TRUE(planned) << events.raw;

  // Run the task's command under a lease, then release: the lease's usage is recorded.
  ApiReply lease = api_->Call("POST", "/v1/sandboxes/" + id + "/lease", {{"owner", "agent"}});
  ASSERT_EQ(lease.status, 201) << lease.raw;
  const int64_t v = lease.body["lease_version"];
  ApiReply ran =
      api_->Call("POST", "/v1/sandboxes/" + id + "/exec", {{"shell", kDataTask["commands"][0]}}, v);
  ASSERT_EQ(ran.status, 200) << ran.raw;
  EXPECT_EQ(ran.body["exit_code"], 0) << ran.raw;
  ASSERT_EQ(api_->Call("POST", "/v1/sandboxes/" + id + "/lease/release",
                       {{"lease_version", v}, {"recycle", "destroy"}})
                .status,
            200);
  ApiReply allocs = api_->Call("GET", "/v1/allocations");
  ASSERT_EQ(allocs.status, 200) << allocs.raw;
  ASSERT_EQ(allocs.body["items"].size(), 1u) << allocs.raw;
  const json& a = allocs.body["items"][0];
  EXPECT_EQ(a["sandbox_id"], id);
  EXPECT_EQ(a["recommended_class"], "medium");
  EXPECT_EQ(a["actual_class"], "medium");
  EXPECT_EQ(a["workload_signature"], created.body["plan"]["intent"]["workload_signature"]);
  // The task has commands, so the record also carries their exact signature.
  EXPECT_EQ(a["command_signature"], created.body["plan"]["intent"]["command_signature"]);
  EXPECT_EQ(a["command_signature"].get<std::string>().substr(0, 3), "wc-") << a.dump();
  EXPECT_GE(a["peak_memory_mb"].get<int64_t>(), 120) << a.dump();
  EXPECT_LT(a["peak_memory_mb"].get<int64_t>(), 256) << a.dump();
  EXPECT_FALSE(a["oom"].get<bool>());
  EXPECT_GT(a["cpu_seconds"].get<double>(), 0.0) << a.dump();
  EXPECT_GT(a["duration_ms"].get<int64_t>(), 0) << a.dump();
  // Another tenant sees none of it.
  EXPECT_EQ(capped_->Call("GET", "/v1/allocations").body["items"].size(), 0u);

  // The next plan for the same kind of task has learnt: it fits in "small", with memory sized
  // from the measured peak, and says so.
  ApiReply next = api_->Call("POST", "/v1/plan", kDataTask);
  ASSERT_EQ(next.status, 200) << next.raw;
  EXPECT_EQ(next.body["intent"]["resource_class"], "small") << next.raw;
  EXPECT_LT(next.body["intent"]["memory_mb"].get<int64_t>(), 256) << next.raw;
  // The very same commands ran before, so their own history decided.
  EXPECT_NE(next.body["intent"]["reasons"].dump().find("history (same commands)"),
            std::string::npos)
      << next.raw;
}

TEST_F(PlanTest, IntentIsValidatedAndPolicyDenialIs403) {
  ApiReply both = api_->Call("POST", "/v1/sandboxes", {{"intent", kDataTask}, {"class", "small"}});
  EXPECT_EQ(both.status, 400) << both.raw;
  EXPECT_NE(both.raw.find("intent"), std::string::npos);
  ApiReply bad = api_->Call("POST", "/v1/sandboxes", {{"intent", {{"commands", "ls"}}}});
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_NE(bad.raw.find("intent.commands"), std::string::npos) << bad.raw;
  ApiReply denied = capped_->Call("POST", "/v1/sandboxes", {{"intent", kDataTask}});
  EXPECT_EQ(denied.status, 403) << denied.raw;
  EXPECT_NE(denied.raw.find("policy"), std::string::npos) << denied.raw;
  EXPECT_EQ(capped_->Call("GET", "/v1/sandboxes").body["items"].size(), 0u);
  // Within its policy the capped tenant is served.
  ApiReply ok = capped_->Call("POST", "/v1/sandboxes", {{"intent", {{"task", "print hello"}}}});
  EXPECT_EQ(ok.status, 201) << ok.raw;
}

}  // namespace
}  // namespace paddock::testing
