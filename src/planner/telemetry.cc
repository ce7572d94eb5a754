#include "planner/telemetry.h"

#include <algorithm>
#include <cmath>

namespace paddock::planner {

namespace {

double NonNegative(double v) { return std::isfinite(v) && v > 0 ? v : 0; }

}  // namespace

registry::AllocationRecord MakeAllocationRecord(const std::string& sandbox_id,
                                                const std::string& tenant_id,
                                                const std::string& task_id,
                                                const ResourceIntent& intent,
                                                const GuardDecision& decision,
                                                const MeasuredUsage& usage, int64_t now_ms) {
  registry::AllocationRecord a;
  a.sandbox_id = sandbox_id;
  a.tenant_id = tenant_id;
  a.task_id = task_id;
  a.planner_input_hash = intent.input_hash;
  a.workload_signature = intent.workload_signature;
  a.command_signature = intent.command_signature;
  a.recommended_class = intent.resource_class;
  a.actual_class = decision.resource_class;
  a.confidence = std::isfinite(intent.confidence) ? std::clamp(intent.confidence, 0.0, 1.0) : 0;
  a.cpu = NonNegative(decision.cpu);
  a.memory_mb = std::max<int64_t>(decision.memory_mb, 0);

  std::string reason = "planner: " + intent.planner;
  for (const std::string& r : decision.reasons) reason += "; " + r;
  if (!decision.allowed && !decision.denial.empty()) reason += "; denied: " + decision.denial;
  a.reason = BoundedQuote(reason, kMaxAllocationReasonBytes);

  a.duration_ms = std::max<int64_t>(usage.duration_ms, 0);
  a.peak_memory_mb = std::max<int64_t>(usage.peak_memory_mb, 0);
  double peak = NonNegative(usage.peak_cpu);
  if (peak == 0 && a.duration_ms > 0) {
    peak = NonNegative(usage.cpu_seconds) / (static_cast<double>(a.duration_ms) / 1000.0);
  }
  a.peak_cpu = peak;
  a.cpu_seconds = NonNegative(usage.cpu_seconds);
  a.oom = usage.oom;
  a.timed_out = usage.timed_out;
  a.created_at = now_ms;
  return a;
}

}  // namespace paddock::planner
