#include "planner/planner_stack.h"

#include <gtest/gtest.h>

#include "planner_test_support.h"

namespace paddock::planner {
namespace {

using testing::DefaultClasses;
using testing::ShippedConfig;
using testing::Task;

TEST(PlannerStackTest, ShippedConfigPlansAndGuardsWithTheBuiltinPlanner) {
  PlannerConfig config = ShippedConfig();
  PlannerStack stack = MakePlannerStack(DefaultClasses(), config, nullptr);
  EXPECT_EQ(stack.external, nullptr);
  auto intent = stack.planner().Plan(Task("", {"cargo build --release"}));
  ASSERT_TRUE(intent.ok()) << intent.status().ToString();
  EXPECT_EQ(intent->planner, "builtin");
  GuardDecision d = stack.guard->Review(*intent, "t1");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.resource_class, "build-medium");
  EXPECT_EQ(d.ttl_seconds, 40 * 60);
}

TEST(PlannerStackTest, EnabledExternalPlannerFallsBackToTheBuiltinOne) {
  PlannerConfig config = ShippedConfig();
  config.external.enabled = true;
  config.external.url = "http://127.0.0.1:1";  // nothing listens on port 1
  config.external.timeout = std::chrono::milliseconds(500);
  PlannerStack stack = MakePlannerStack(DefaultClasses(), config, nullptr);
  ASSERT_NE(stack.external, nullptr);
  auto intent = stack.planner().Plan(Task("print hello"));
  ASSERT_TRUE(intent.ok()) << intent.status().ToString();
  EXPECT_TRUE(intent->planner.starts_with("builtin (external failed: ")) << intent->planner;
  EXPECT_EQ(intent->resource_class, "python-small");
}

}  // namespace
}  // namespace paddock::planner
