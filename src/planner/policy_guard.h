// The Policy Guard (PLAN-2): "planner recommends, policy approves". A deterministic function
// from an untrusted ResourceIntent to what the tenant will actually get.
//
// The planner may be an LLM that read hostile task text, so nothing in the intent is trusted:
//  - the class must exist and be allowed for the tenant; otherwise (clamp) the nearest allowed
//    class — the smallest covering the intent's numbers, else the largest allowed — or (deny)
//    a denial;
//  - cpu, memory and disk above the class or the tenant's caps are clamped, or deny the whole
//    request under on_violation: deny;
//  - non-positive, NaN or infinite numbers are garbage, not requests: replaced by the class's
//    values in both modes;
//  - ttl within (0, the tenant's max_ttl <= 24 h]; template the class's own or one the
//    tenant allows; network profile a known one the tenant allows (unknown -> "none").
// Every change is a reason ("cpu 64 > class browser-medium's 4: clamped"), recorded with the
// allocation.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/config.h"
#include "planner/plan_request.h"
#include "planner/rules.h"

namespace paddock::planner {

struct GuardDecision {
  bool allowed = false;
  std::string resource_class;
  double cpu = 0;
  int64_t memory_mb = 0;
  int64_t disk_gb = 0;
  int64_t ttl_seconds = 0;
  std::string runtime;
  std::string template_name;
  std::string network_profile;
  bool clamped = false;              // some value was lowered or replaced
  std::vector<std::string> reasons;  // one per change, in the order made
  std::string denial;                // why, when !allowed; the other fields are then unusable

  bool operator==(const GuardDecision&) const = default;
};

// {"allowed", "resource_class", "cpu", "memory_mb", "disk_gb", "ttl_seconds", "runtime",
//  "template", "network_profile", "clamped", "reasons", "denial"}.
nlohmann::json GuardDecisionToJson(const GuardDecision& decision);

class PolicyGuard {
 public:
  // `default_ttl_seconds` replaces a missing/garbage ttl (PlannerConfig::default_ttl_seconds).
  PolicyGuard(std::vector<ResourceClass> classes, PolicyConfig policy,
              int64_t default_ttl_seconds = 1800);

  // Reviews an intent for the tenant (policy looked up by id, then name). Pure: the same
  // inputs always give the same decision. Thread-safe.
  GuardDecision Review(const ResourceIntent& intent, const std::string& tenant_id,
                       const std::string& tenant_name = "") const;

 private:
  const ResourceClass* Find(const std::string& name) const;

  std::vector<ResourceClass> classes_;
  PolicyConfig policy_;
  int64_t default_ttl_seconds_;
};

}  // namespace paddock::planner
