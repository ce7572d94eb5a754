// Wiring of the planner pieces from one planner.yaml: the built-in planner (with history), the
// external planner in front of it when enabled, and the policy guard. The daemon builds one of
// these at startup; callers then do
//   intent = stack.planner().Plan(request) -> decision = stack.guard->Review(intent, tenant)
// and record MakeAllocationRecord(...) (telemetry.h) when the sandbox's run ends.
#pragma once

#include <memory>
#include <vector>

#include "common/config.h"
#include "planner/builtin_planner.h"
#include "planner/external_planner.h"
#include "planner/history.h"
#include "planner/policy_guard.h"
#include "planner/rules.h"

namespace paddock::planner {

struct PlannerStack {
  std::unique_ptr<BuiltinPlanner> builtin;
  std::unique_ptr<ExternalPlanner> external;  // null unless config.external.enabled
  std::unique_ptr<PolicyGuard> guard;

  // The planner to ask: the external one (which falls back to the built-in one) when enabled,
  // else the built-in one.
  Planner& planner() const {
    return external ? static_cast<Planner&>(*external) : static_cast<Planner&>(*builtin);
  }
};

// Builds the stack. `config` must have been parsed against `classes`; `history` may be null
// and must outlive the stack.
PlannerStack MakePlannerStack(const std::vector<ResourceClass>& classes,
                              const PlannerConfig& config, UsageHistory* history);

}  // namespace paddock::planner
