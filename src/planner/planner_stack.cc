#include "planner/planner_stack.h"

namespace paddock::planner {

PlannerStack MakePlannerStack(const std::vector<ResourceClass>& classes,
                              const PlannerConfig& config, UsageHistory* history) {
  PlannerStack s;
  s.builtin = std::make_unique<BuiltinPlanner>(classes, config, history);
  if (config.external.enabled) {
    s.external = std::make_unique<ExternalPlanner>(config.external, classes, s.builtin.get(),
                                                   config.default_ttl_seconds);
  }
  s.guard = std::make_unique<PolicyGuard>(classes, config.policy, config.default_ttl_seconds);
  return s;
}

}  // namespace paddock::planner
