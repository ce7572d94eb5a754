// The built-in planner (PLAN-3's always-available backend): features -> first matching rule ->
// resource class -> intent, then adjusted by the usage history of the workload signature.
//
// Sizing is neither random nor an if/else pile: the *what* is read from the task by the
// feature tables (features.h), the *mapping* is operator-edited rules (rules.h), and *history*
// corrects both with what runs of the same signature really used (PLAN-4):
//  - enough measured runs (history.min_samples) with no OOM and few timeouts: the smallest
//    class whose memory covers P95 peak memory x headroom and whose CPUs cover P95 peak CPU
//    (down or up), and memory_mb set to that need within the class (never above it);
//  - OOMs: a class with at least oom_growth x the largest OOM'd allocation's memory, never a
//    smaller one; too many timeouts: one class up (more CPUs).
// Classes considered for a move share the chosen class's runtime, template and security
// level: history may change how big a sandbox is, not what it runs on.
// Every step adds a reason, so an allocation record explains itself.
#pragma once

#include <vector>

#include "common/config.h"
#include "planner/history.h"
#include "planner/plan_request.h"
#include "planner/rules.h"

namespace paddock::planner {

class BuiltinPlanner final : public Planner {
 public:
  // `config` must have been parsed against `classes` (ParsePlannerConfig checks class names).
  // `history` may be null (no history) and must outlive the planner.
  BuiltinPlanner(std::vector<ResourceClass> classes, PlannerConfig config,
                 UsageHistory* history = nullptr);

  // Never fails for a config parsed against the classes; kFailedPrecondition if a class a
  // rule names is missing. A failing history lookup is a reason, not an error. Thread-safe
  // when the history is.
  Result<ResourceIntent> Plan(const PlanRequest& request) override;

  const std::vector<ResourceClass>& classes() const { return classes_; }
  const PlannerConfig& config() const { return config_; }

 private:
  const ResourceClass* Find(const std::string& name) const;
  // Classes sharing c's runtime, template and security level, smallest first.
  std::vector<const ResourceClass*> Compatible(const ResourceClass& c) const;

  std::vector<ResourceClass> classes_;
  PlannerConfig config_;
  UsageHistory* history_;
};

// "310 MiB", "2.0 GiB": sizes in reasons.
std::string FormatMiB(int64_t mib);

}  // namespace paddock::planner
