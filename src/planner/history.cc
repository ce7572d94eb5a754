#include "planner/history.h"

#include <algorithm>
#include <cmath>

namespace paddock::planner {

namespace {

// Nearest-rank percentile of a non-empty, ascending vector: an observed value, never an
// interpolation below what some run really needed.
template <typename T>
T NearestRank(const std::vector<T>& sorted, double percentile) {
  size_t rank = static_cast<size_t>(std::ceil(percentile / 100.0 * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

SignatureStats ComputeStats(const std::vector<registry::AllocationRecord>& records) {
  SignatureStats s;
  std::vector<int64_t> memory;
  std::vector<double> cpu;
  for (const registry::AllocationRecord& r : records) {
    if (r.peak_memory_mb <= 0 && !r.oom && !r.timed_out) continue;
    ++s.count;
    memory.push_back(std::max<int64_t>(r.peak_memory_mb, 0));
    cpu.push_back(std::isfinite(r.peak_cpu) ? std::max(r.peak_cpu, 0.0) : 0.0);
    if (r.oom) {
      ++s.oom_count;
      s.max_oom_memory_mb = std::max(s.max_oom_memory_mb, r.memory_mb);
    }
    if (r.timed_out) ++s.timeout_count;
  }
  if (s.count == 0) return s;
  std::sort(memory.begin(), memory.end());
  std::sort(cpu.begin(), cpu.end());
  s.p95_peak_memory_mb = NearestRank(memory, 95);
  s.p95_peak_cpu = NearestRank(cpu, 95);
  s.oom_rate = static_cast<double>(s.oom_count) / s.count;
  s.timeout_rate = static_cast<double>(s.timeout_count) / s.count;
  return s;
}

Result<SignatureStats> RegistryUsageHistory::Stats(const std::string& tenant_id,
                                                   registry::SignatureKind kind,
                                                   const std::string& signature) {
  if (signature.empty()) return SignatureStats{};
  PADDOCK_ASSIGN_OR_RETURN(std::vector<registry::AllocationRecord> records,
                           store_->ListAllocationsBySignature(tenant_id, kind, signature, window_));
  return ComputeStats(records);
}

}  // namespace paddock::planner
