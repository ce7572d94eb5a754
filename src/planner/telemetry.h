// Allocation telemetry (PLAN-4): the record of one planning decision and what the sandbox then
// really used. It is what history learns from (history.h reads these rows back by workload
// signature), and what an operator reads to see why a sandbox got its size.
#pragma once

#include <cstdint>
#include <string>

#include "planner/plan_request.h"
#include "planner/policy_guard.h"
#include "registry/store.h"

namespace paddock::planner {

// What the runtime measured for one sandbox (or one run in it).
struct MeasuredUsage {
  int64_t peak_memory_mb = 0;
  double peak_cpu = 0;     // cores at peak; 0 = not measured (cpu_seconds is used instead)
  double cpu_seconds = 0;  // total CPU time, for an average when peak_cpu is unknown
  int64_t duration_ms = 0;
  bool oom = false;
  bool timed_out = false;
};

// Longest `reason` stored per allocation.
inline constexpr size_t kMaxAllocationReasonBytes = 2048;

// The allocation record: recommended_class = the intent's class, actual_class = the guard's,
// cpu/memory_mb = what was granted, confidence/input hash/signature from the intent, reason =
// "planner: <planner>; " + the decision's reasons joined by "; " (bounded to
// kMaxAllocationReasonBytes), peak_cpu = usage.peak_cpu or else cpu_seconds / duration.
// Non-finite or negative measurements are stored as 0.
registry::AllocationRecord MakeAllocationRecord(const std::string& sandbox_id,
                                                const std::string& tenant_id,
                                                const std::string& task_id,
                                                const ResourceIntent& intent,
                                                const GuardDecision& decision,
                                                const MeasuredUsage& usage, int64_t now_ms);

}  // namespace paddock::planner
