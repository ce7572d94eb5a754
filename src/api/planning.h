// The planner and the policy guard on the request path (PLAN-1..4): a task description becomes
// a ResourceIntent (planner, untrusted), then a GuardDecision (policy, deterministic), then the
// class and resources of a create request. Kept apart from the routes so the rules of how a
// decision turns into a request live in one place.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "lifecycle/sandbox_manager.h"
#include "planner/planner_stack.h"
#include "registry/store.h"

namespace paddock::api {

struct PlanOutcome {
  planner::ResourceIntent intent;
  planner::GuardDecision decision;
  nlohmann::json ToJson() const;  // {"intent": ..., "decision": ...}
};

// Plans `request_json` (a PlanRequest object; errors name fields under `field`) for the
// caller's tenant. The tenant comes from the key, never from the body. A planner failure is
// kInternal; a policy denial is not an error here (decision.allowed == false).
Result<PlanOutcome> PlanForTenant(const planner::PlannerStack& stack, registry::Store& store,
                                  const lifecycle::Principal& who,
                                  const nlohmann::json& request_json, const std::string& field);

// Fills the class, resources, template, TTL and plan record of `create` from an allowed
// decision. Resources are set only where the decision asks for less than the class (a request
// for the class as it is can be served from its warm pool). kPermissionDenied for a denial.
Status ApplyPlan(const PlanOutcome& plan, const PaddockConfig& config,
                 const std::string& request_id, lifecycle::CreateSandboxRequest* create);

// The capabilities a task needs, from the planner's features ("python", "node", "gcc",
// "java", "browser"): what the reuse check compares with a sandbox's environment.
std::vector<std::string> NeededCapabilities(const planner::PlanRequest& request);

}  // namespace paddock::api
