#include "planner/history.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "planner/builtin_planner.h"
#include "planner/policy_guard.h"
#include "planner/telemetry.h"
#include "planner_test_support.h"
#include "registry/sqlite/sqlite_store.h"

namespace paddock::planner {
namespace {

using registry::AllocationRecord;
using testing::DefaultClasses;
using testing::ShippedConfig;
using testing::Task;

AllocationRecord Measured(int64_t peak_mb, double peak_cpu, bool oom = false,
                          bool timed_out = false, int64_t memory_mb = 2048) {
  AllocationRecord a;
  a.sandbox_id = "sb";
  a.tenant_id = "t1";
  a.workload_signature = "ws-1";
  a.peak_memory_mb = peak_mb;
  a.peak_cpu = peak_cpu;
  a.oom = oom;
  a.timed_out = timed_out;
  a.memory_mb = memory_mb;
  return a;
}

TEST(HistoryTest, ComputeStatsNearestRankP95AndRates) {
  std::vector<AllocationRecord> runs;
  for (int i = 1; i <= 20; ++i) runs.push_back(Measured(i * 10, i * 0.1));
  SignatureStats s = ComputeStats(runs);
  EXPECT_EQ(s.count, 20);
  EXPECT_EQ(s.p95_peak_memory_mb, 190);  // rank ceil(0.95 * 20) = 19
  EXPECT_NEAR(s.p95_peak_cpu, 1.9, 1e-9);
  EXPECT_EQ(s.oom_count, 0);
  EXPECT_DOUBLE_EQ(s.oom_rate, 0);

  runs = {Measured(100, 0.5), Measured(2048, 1, /*oom=*/true, false, 2048),
          Measured(4000, 1, /*oom=*/true, false, 4096),
          Measured(300, 0.2, false, /*timed_out=*/true)};
  s = ComputeStats(runs);
  EXPECT_EQ(s.count, 4);
  EXPECT_EQ(s.oom_count, 2);
  EXPECT_DOUBLE_EQ(s.oom_rate, 0.5);
  EXPECT_DOUBLE_EQ(s.timeout_rate, 0.25);
  EXPECT_EQ(s.max_oom_memory_mb, 4096);
  EXPECT_EQ(s.p95_peak_memory_mb, 4000);
}

TEST(HistoryTest, UnmeasuredRecordsAreSkipped) {
  SignatureStats s = ComputeStats({Measured(0, 0), Measured(0, 0), Measured(500, 1)});
  EXPECT_EQ(s.count, 1);
  EXPECT_EQ(s.p95_peak_memory_mb, 500);
  EXPECT_EQ(ComputeStats({}).count, 0);
}

class HistoryRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = registry::SqliteStore::Open(":memory:");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  std::unique_ptr<registry::SqliteStore> store_;
};

TEST_F(HistoryRegistryTest, RegistryHistoryReadsTheNewestWindowPerTenantAndSignature) {
  for (int i = 0; i < 10; ++i) {
    AllocationRecord a = Measured(i < 5 ? 5000 : 100, 0.5);  // the 5 oldest were big
    a.created_at = 1000 + i;
    ASSERT_TRUE(store_->InsertAllocation(a).ok());
  }
  AllocationRecord other_tenant = Measured(9000, 8);
  other_tenant.tenant_id = "t2";
  ASSERT_TRUE(store_->InsertAllocation(other_tenant).ok());
  AllocationRecord other_signature = Measured(9000, 8);
  other_signature.workload_signature = "ws-2";
  ASSERT_TRUE(store_->InsertAllocation(other_signature).ok());

  RegistryUsageHistory window5(store_.get(), 5);
  auto s = window5.Stats("t1", registry::SignatureKind::kWorkload, "ws-1");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->count, 5);
  EXPECT_EQ(s->p95_peak_memory_mb, 100);

  RegistryUsageHistory all(store_.get(), 50);
  EXPECT_EQ(all.Stats("t1", registry::SignatureKind::kWorkload, "ws-1")->p95_peak_memory_mb, 5000);
  EXPECT_EQ(all.Stats("t1", registry::SignatureKind::kWorkload, "ws-1")->count, 10);
  EXPECT_EQ(all.Stats("", registry::SignatureKind::kWorkload, "ws-1")->count,
            11);  // "" = every tenant
  EXPECT_EQ(all.Stats("t3", registry::SignatureKind::kWorkload, "ws-1")->count, 0);
  EXPECT_EQ(all.Stats("t1", registry::SignatureKind::kWorkload, "")->count, 0);
}

// PLAN-4 end to end: plan, guard, record what was used, and the next plan learns from it.
TEST_F(HistoryRegistryTest, ThePlannerLearnsFromRecordedAllocations) {
  RegistryUsageHistory history(store_.get(), 50);
  BuiltinPlanner planner(DefaultClasses(), ShippedConfig(), &history);
  PolicyGuard guard(DefaultClasses(), ShippedConfig().policy);
  PlanRequest request = Task("summarise sales.csv with pandas");

  auto first = planner.Plan(request);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->resource_class, "python-medium");
  for (int run = 0; run < 4; ++run) {
    GuardDecision d = guard.Review(*first, request.tenant_id);
    MeasuredUsage usage;
    usage.peak_memory_mb = 280 + run * 10;
    usage.peak_cpu = 0.7;
    usage.duration_ms = 20'000;
    AllocationRecord rec = MakeAllocationRecord("sb-" + std::to_string(run), request.tenant_id,
                                                "task-1", *first, d, usage, 1000 + run);
    ASSERT_TRUE(store_->InsertAllocation(rec).ok());
  }
  auto second = planner.Plan(request);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->resource_class, "python-small");  // 310 MiB * 1.3 fits 2 GiB, 0.7 CPU fits 1
  EXPECT_EQ(second->memory_mb, 416);
  EXPECT_GT(second->confidence, first->confidence);

  // Then the small sandboxes start running out of memory: back up.
  for (int run = 0; run < 2; ++run) {
    GuardDecision d = guard.Review(*second, request.tenant_id);
    MeasuredUsage usage;
    usage.peak_memory_mb = 416;
    usage.oom = true;
    ASSERT_TRUE(store_
                    ->InsertAllocation(MakeAllocationRecord("sb-oom", request.tenant_id, "task-2",
                                                            *second, d, usage, 2000 + run))
                    .ok());
  }
  auto third = planner.Plan(request);
  ASSERT_TRUE(third.ok());
  // After OOMs history never shrinks below the rule's class: back to all of python-medium.
  EXPECT_EQ(third->resource_class, "python-medium");
  EXPECT_EQ(third->memory_mb, 4096);
  EXPECT_LT(third->confidence, second->confidence);
}

TEST(PlannerTelemetryTest, RecordCarriesIntentDecisionAndUsage) {
  ResourceIntent intent;
  intent.resource_class = "compute-large";
  intent.confidence = 0.8;
  intent.planner = "external";
  intent.input_hash = "abc";
  intent.workload_signature = "ws-9";
  intent.command_signature = "wc-9";
  GuardDecision d;
  d.allowed = true;
  d.resource_class = "python-medium";
  d.cpu = 2;
  d.memory_mb = 4096;
  d.reasons = {"policy: default (on_violation clamp)", "class compute-large is not allowed"};
  MeasuredUsage u;
  u.peak_memory_mb = 1234;
  u.cpu_seconds = 30;
  u.duration_ms = 20'000;
  u.timed_out = true;
  AllocationRecord a = MakeAllocationRecord("sb-1", "t1", "task-7", intent, d, u, 42);
  EXPECT_EQ(a.sandbox_id, "sb-1");
  EXPECT_EQ(a.tenant_id, "t1");
  EXPECT_EQ(a.task_id, "task-7");
  EXPECT_EQ(a.recommended_class, "compute-large");
  EXPECT_EQ(a.actual_class, "python-medium");
  EXPECT_EQ(a.planner_input_hash, "abc");
  EXPECT_EQ(a.workload_signature, "ws-9");
  EXPECT_EQ(a.command_signature, "wc-9");
  EXPECT_DOUBLE_EQ(a.confidence, 0.8);
  EXPECT_DOUBLE_EQ(a.cpu, 2);
  EXPECT_EQ(a.memory_mb, 4096);
  EXPECT_EQ(a.peak_memory_mb, 1234);
  EXPECT_DOUBLE_EQ(a.peak_cpu, 1.5);  // 30 CPU-seconds over 20 s
  EXPECT_EQ(a.duration_ms, 20'000);
  EXPECT_TRUE(a.timed_out);
  EXPECT_FALSE(a.oom);
  EXPECT_EQ(a.created_at, 42);
  EXPECT_EQ(a.reason,
            "planner: external; policy: default (on_violation clamp); class compute-large is not "
            "allowed");
}

TEST(PlannerTelemetryTest, ReasonIsBoundedAndMeasurementsSane) {
  ResourceIntent intent;
  GuardDecision d;
  d.denial = "cpu 64 > class x's 4 (on_violation: deny)";
  for (int i = 0; i < 100; ++i) d.reasons.push_back(std::string(100, 'r'));
  MeasuredUsage u;
  u.peak_cpu = std::numeric_limits<double>::quiet_NaN();
  u.peak_memory_mb = -5;
  AllocationRecord a = MakeAllocationRecord("sb", "t", "", intent, d, u, 1);
  EXPECT_LE(a.reason.size(), kMaxAllocationReasonBytes + 3);
  EXPECT_TRUE(a.reason.ends_with("..."));
  EXPECT_DOUBLE_EQ(a.peak_cpu, 0);
  EXPECT_EQ(a.peak_memory_mb, 0);
  d.reasons.clear();
  EXPECT_NE(MakeAllocationRecord("sb", "t", "", intent, d, u, 1).reason.find("denied: cpu 64"),
            std::string::npos);
}

}  // namespace
}  // namespace paddock::planner
