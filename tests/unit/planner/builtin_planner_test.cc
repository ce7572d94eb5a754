#include "planner/builtin_planner.h"

#include <gtest/gtest.h>

#include <string>

#include "planner_test_support.h"

namespace paddock::planner {
namespace {

using testing::DefaultClasses;
using testing::FakeHistory;
using testing::ShippedConfig;
using testing::Task;

bool HasReason(const ResourceIntent& i, const std::string& part) {
  for (const std::string& r : i.reasons) {
    if (r.find(part) != std::string::npos) return true;
  }
  return false;
}

std::string Reasons(const ResourceIntent& i) {
  std::string out;
  for (const std::string& r : i.reasons) out += "\n  " + r;
  return out;
}

class PlannerBuiltinTest : public ::testing::Test {
 protected:
  ResourceIntent Plan(const PlanRequest& r, UsageHistory* history = nullptr) {
    BuiltinPlanner planner(DefaultClasses(), ShippedConfig(), history);
    auto intent = planner.Plan(r);
    EXPECT_TRUE(intent.ok()) << intent.status().ToString();
    return intent.ok() ? *intent : ResourceIntent{};
  }
};

TEST_F(PlannerBuiltinTest, PlainScriptGetsTheDefaultClassWithLowConfidence) {
  ResourceIntent i = Plan(Task("print hello"));
  EXPECT_EQ(i.resource_class, "python-small");
  EXPECT_DOUBLE_EQ(i.cpu, 1);
  EXPECT_EQ(i.memory_mb, 2048);
  EXPECT_EQ(i.disk_gb, 10);
  EXPECT_EQ(i.runtime, "native");
  EXPECT_EQ(i.template_name, "host");
  EXPECT_EQ(i.network_profile, "none");
  EXPECT_EQ(i.ttl_seconds, 1800);
  EXPECT_DOUBLE_EQ(i.confidence, 0.5);
  EXPECT_EQ(i.planner, "builtin");
  EXPECT_EQ(i.input_hash, PlanRequestHash(Task("print hello")));
  EXPECT_EQ(i.workload_signature, ExtractFeatures(Task("print hello")).signature);
  EXPECT_TRUE(HasReason(i, "no rule matched: default class python-small")) << Reasons(i);
}

TEST_F(PlannerBuiltinTest, RulesPickClassesAndExplainWhy) {
  ResourceIntent browser = Plan(Task("", {"npx playwright install chromium"}));
  EXPECT_EQ(browser.resource_class, "browser-medium");
  EXPECT_DOUBLE_EQ(browser.cpu, 4);
  EXPECT_EQ(browser.memory_mb, 8192);
  EXPECT_EQ(browser.disk_gb, 30);
  EXPECT_EQ(browser.ttl_seconds, 40 * 60);
  EXPECT_EQ(browser.network_profile, "web");
  EXPECT_DOUBLE_EQ(browser.confidence, 0.7);
  EXPECT_TRUE(HasReason(browser,
                        "rule 'browser' matched: cap:browser ('npx playwright install "
                        "chromium') -> browser-medium"))
      << Reasons(browser);

  ResourceIntent big = Plan(Task("import pandas\ndf = pd.read_csv('20GB.csv')"));
  EXPECT_EQ(big.resource_class, "compute-large");
  EXPECT_TRUE(HasReason(big, "rule 'large-data' matched: data 20.0 GiB >= 4.0 GiB"))
      << Reasons(big);

  ResourceIntent build = Plan(Task("", {"cargo build --release"}));
  EXPECT_EQ(build.resource_class, "build-medium");
  EXPECT_EQ(build.network_profile, "package-registries");

  ResourceIntent analysis = Plan(Task("", {"pip install pandas", "python report.py"}));
  EXPECT_EQ(analysis.resource_class, "python-medium");
  EXPECT_EQ(analysis.network_profile, "package-registries");  // pm:pip needs the registries
  EXPECT_TRUE(HasReason(analysis, "network: package-registries (pm:pip)")) << Reasons(analysis);
}

TEST_F(PlannerBuiltinTest, RequestNetworkAndDurationAreHonoured) {
  PlanRequest r = Task("print hello");
  r.network = "web";
  r.expected_duration_seconds = 3 * 3600;
  ResourceIntent i = Plan(r);
  EXPECT_EQ(i.network_profile, "web");
  EXPECT_EQ(i.ttl_seconds, 3 * 3600 * 3 / 2);
  EXPECT_TRUE(HasReason(i, "ttl: 16200s (1.5x the expected 10800s)")) << Reasons(i);
  r.expected_duration_seconds = 30 * 3600;
  EXPECT_EQ(Plan(r).ttl_seconds, kMaxTtlSeconds);
}

TEST_F(PlannerBuiltinTest, DiskNeedMovesUpTheLadder) {
  PlanRequest r = Task("print hello");
  r.workspace_bytes = 25ull << 30;  // x1.2 = 30 GiB: more than python-small's and -medium's
  ResourceIntent i = Plan(r);
  EXPECT_EQ(i.resource_class, "build-medium") << Reasons(i);
  EXPECT_TRUE(HasReason(i, "disk: needs ~30.0 GiB > python-small's 10.0 GiB -> build-medium"))
      << Reasons(i);
}

TEST_F(PlannerBuiltinTest, HistoryWithEnoughSamplesShrinksTheClassAndMemory) {
  FakeHistory history;
  SignatureStats s;
  s.count = 12;
  s.p95_peak_memory_mb = 310;
  s.p95_peak_cpu = 0.6;
  history.any = s;
  ResourceIntent i = Plan(Task("", {"pip install pandas", "python report.py"}), &history);
  EXPECT_EQ(i.resource_class, "python-small") << Reasons(i);
  EXPECT_EQ(i.memory_mb, 416);  // 310 * 1.3 = 403 -> rounded up to the 16 MiB step
  EXPECT_DOUBLE_EQ(i.cpu, 1);
  EXPECT_TRUE(HasReason(i, "history: 12 runs, p95 peak 310 MiB, p95 cpu 0.60 -> python-small"))
      << Reasons(i);
  EXPECT_TRUE(HasReason(i, "memory: 416 MiB of python-small's 2.0 GiB (history)")) << Reasons(i);
  EXPECT_NEAR(i.confidence, 0.7 + 0.25 * 12 / 20, 1e-9);
  EXPECT_EQ(history.last_tenant, "t1");
  EXPECT_EQ(history.last_signature, i.workload_signature);
}

// Runs of the very same commands come first, with the tighter exact headroom and floor.
TEST_F(PlannerBuiltinTest, ExactCommandHistoryComesFirstWithALowerFloor) {
  PlanRequest r = Task("", {"python3 -c 'print(1)'"});
  FakeHistory history;
  SignatureStats workload;  // the plain-Python workload: some of its runs were big
  workload.count = 10;
  workload.p95_peak_memory_mb = 700;
  workload.p95_peak_cpu = 1;
  history.any = workload;
  SignatureStats exact;
  exact.count = 3;
  exact.p95_peak_memory_mb = 9;
  exact.p95_peak_cpu = 0.1;
  history.commands[CommandSignature(r)] = exact;

  ResourceIntent i = Plan(r, &history);
  EXPECT_EQ(i.resource_class, "python-small") << Reasons(i);
  EXPECT_EQ(i.memory_mb, 32) << Reasons(i);  // 9 * 1.2 < the 32 MiB exact floor
  EXPECT_TRUE(HasReason(i, "history (same commands): 3 runs, p95 peak 9 MiB")) << Reasons(i);
  EXPECT_EQ(i.command_signature, CommandSignature(r));
  EXPECT_EQ(history.last_command_signature, i.command_signature);
  EXPECT_EQ(history.last_signature, "");  // the workload history was not needed

  // Too few exact runs: the workload's history decides, with its own headroom and floor.
  history.commands[CommandSignature(r)].count = 2;
  ResourceIntent fallback = Plan(r, &history);
  EXPECT_EQ(fallback.memory_mb, 912) << Reasons(fallback);  // 700 * 1.3 = 910 -> 912
  EXPECT_TRUE(HasReason(fallback,
                        "history (same commands): 2 run(s), fewer than the 3 needed; by workload"))
      << Reasons(fallback);
  EXPECT_TRUE(HasReason(fallback, "history: 10 runs, p95 peak 700 MiB")) << Reasons(fallback);

  // The exact floor is the exact history's: the workload's 256 MiB still holds for it.
  workload.p95_peak_memory_mb = 9;
  history.any = workload;
  EXPECT_EQ(Plan(r, &history).memory_mb, 256);

  // An exact OOM grows the allocation like any other.
  exact.count = 3;
  exact.oom_count = 1;
  exact.oom_rate = 1.0 / 3;
  exact.max_oom_memory_mb = 2048;
  history.commands[CommandSignature(r)] = exact;
  ResourceIntent grown = Plan(r, &history);
  EXPECT_EQ(grown.resource_class, "python-medium") << Reasons(grown);
  EXPECT_TRUE(HasReason(grown, "history (same commands): 3 runs, 1 OOM")) << Reasons(grown);
}

TEST_F(PlannerBuiltinTest, HistoryCpuNeedKeepsALargerClass) {
  FakeHistory history;
  SignatureStats s;
  s.count = 20;
  s.p95_peak_memory_mb = 900;
  s.p95_peak_cpu = 3.5;
  history.any = s;
  ResourceIntent i = Plan(Task("", {"cargo build --release"}), &history);
  EXPECT_EQ(i.resource_class, "build-medium") << Reasons(i);
  EXPECT_EQ(i.memory_mb, 1184);  // 900 * 1.3 = 1170 -> 1184
  EXPECT_DOUBLE_EQ(i.confidence, 0.95);
}

TEST_F(PlannerBuiltinTest, HistoryCanMoveUpWithoutOoms) {
  FakeHistory history;
  SignatureStats s;
  s.count = 5;
  s.p95_peak_memory_mb = 1900;  // x1.3 = 2470 MiB: more than python-small's 2 GiB
  s.p95_peak_cpu = 0.9;
  history.any = s;
  ResourceIntent i = Plan(Task("print hello"), &history);
  EXPECT_EQ(i.resource_class, "python-medium") << Reasons(i);
  EXPECT_EQ(i.memory_mb, 2480);  // 2470 -> the 16 MiB step
}

TEST_F(PlannerBuiltinTest, TooFewSamplesAreNotUsed) {
  FakeHistory history;
  SignatureStats s;
  s.count = 2;
  s.p95_peak_memory_mb = 100;
  history.any = s;
  ResourceIntent i = Plan(Task("", {"cargo build"}), &history);
  EXPECT_EQ(i.resource_class, "build-medium");
  EXPECT_EQ(i.memory_mb, 8192);
  EXPECT_TRUE(HasReason(i, "history: 2 run(s), fewer than the 3 needed; not used")) << Reasons(i);
}

TEST_F(PlannerBuiltinTest, OomsMoveUpAndNeverDown) {
  FakeHistory history;
  SignatureStats s;
  s.count = 6;
  s.oom_count = 2;
  s.oom_rate = 2.0 / 6;
  s.p95_peak_memory_mb = 2048;
  s.max_oom_memory_mb = 2048;
  history.any = s;
  ResourceIntent i = Plan(Task("print hello"), &history);
  EXPECT_EQ(i.resource_class, "python-medium") << Reasons(i);  // >= 3072 MiB
  EXPECT_EQ(i.memory_mb, 4096);
  EXPECT_TRUE(HasReason(i,
                        "history: 6 runs, 2 OOM (largest OOM'd allocation 2.0 GiB) -> needs "
                        ">= 3.0 GiB -> python-medium"))
      << Reasons(i);
  EXPECT_DOUBLE_EQ(i.confidence, 0.6);

  // An OOM in a class smaller than the rule's: the rule's class already covers 1.5x.
  s.max_oom_memory_mb = 1024;
  s.p95_peak_memory_mb = 1024;
  history.any = s;
  EXPECT_EQ(Plan(Task("", {"cargo build"}), &history).resource_class, "build-medium");

  // Nothing is big enough: the largest class.
  s.max_oom_memory_mb = 16384;
  history.any = s;
  ResourceIntent top = Plan(Task("print hello"), &history);
  EXPECT_EQ(top.resource_class, "compute-large");
  EXPECT_TRUE(HasReason(top, "no class has that much")) << Reasons(top);
}

TEST_F(PlannerBuiltinTest, TimeoutsMoveOneClassUp) {
  FakeHistory history;
  SignatureStats s;
  s.count = 10;
  s.timeout_count = 4;
  s.timeout_rate = 0.4;
  s.p95_peak_memory_mb = 500;
  history.any = s;
  ResourceIntent i = Plan(Task("print hello"), &history);
  EXPECT_EQ(i.resource_class, "python-medium") << Reasons(i);
  EXPECT_TRUE(HasReason(i, "40% timed out -> one class up: python-medium")) << Reasons(i);
}

TEST_F(PlannerBuiltinTest, HistoryErrorIsAReasonNotAFailure) {
  FakeHistory history;
  history.error = Status(StatusCode::kUnavailable, "registry locked");
  ResourceIntent i = Plan(Task("print hello"), &history);
  EXPECT_EQ(i.resource_class, "python-small");
  EXPECT_TRUE(HasReason(i, "history: unavailable (registry locked)")) << Reasons(i);
}

TEST_F(PlannerBuiltinTest, HistoryNeverChangesRuntimeOrTemplate) {
  std::vector<ResourceClass> classes = DefaultClasses();
  for (ResourceClass& c : classes) {
    if (c.name == "browser-medium") c.template_name = "browser";
  }
  PlannerConfig config = MinimalPlannerConfig(classes);
  auto parsed = ParsePlannerConfig(R"(
default_class: python-small
rules:
  - {name: browser, when: {any_of: [cap:browser]}, class: browser-medium}
)",
                                   classes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  FakeHistory history;
  SignatureStats s;
  s.count = 30;
  s.p95_peak_memory_mb = 200;  // would fit python-small, which runs another template
  s.p95_peak_cpu = 0.2;
  history.any = s;
  BuiltinPlanner planner(classes, *parsed, &history);
  auto i = planner.Plan(Task("take a screenshot"));
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->resource_class, "browser-medium") << Reasons(*i);
  EXPECT_EQ(i->template_name, "browser");
  EXPECT_EQ(i->memory_mb, 272);  // 200 x 1.3 = 260 -> 272: memory may shrink within the class
}

TEST_F(PlannerBuiltinTest, UnknownDefaultClassIsAnError) {
  PlannerConfig config = MinimalPlannerConfig(DefaultClasses());
  config.default_class = "gone";
  BuiltinPlanner planner(DefaultClasses(), config);
  EXPECT_EQ(planner.Plan(Task("x")).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace paddock::planner
