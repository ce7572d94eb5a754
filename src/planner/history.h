// Usage history per workload signature (PLAN-4): what runs of "this kind of task" actually
// used, so the built-in planner can shrink over-sized recommendations and grow ones that ran
// out of memory or time. UsageHistory is the seam: RegistryUsageHistory reads the registry's
// sandbox_allocation rows; tests use a fake.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "registry/store.h"

namespace paddock::planner {

struct SignatureStats {
  int64_t count = 0;               // measured runs considered
  int64_t p95_peak_memory_mb = 0;  // nearest-rank P95 of peak memory
  double p95_peak_cpu = 0;         // nearest-rank P95 of peak CPU (cores)
  int64_t oom_count = 0;
  int64_t timeout_count = 0;
  double oom_rate = 0;            // oom_count / count
  double timeout_rate = 0;        // timeout_count / count
  int64_t max_oom_memory_mb = 0;  // largest memory allocation among the OOM'd runs

  bool operator==(const SignatureStats&) const = default;
};

class UsageHistory {
 public:
  virtual ~UsageHistory() = default;
  // Statistics over the recent runs whose signature of `kind` is `signature`, for the tenant;
  // count 0 when there are none. Errors are the backing store's (the planner then plans
  // without history). Thread-safe.
  virtual Result<SignatureStats> Stats(const std::string& tenant_id, registry::SignatureKind kind,
                                       const std::string& signature) = 0;
};

// Statistics over allocation records. Records without a measurement (peak_memory_mb 0, no
// OOM, no timeout: the sandbox has not finished) are skipped.
SignatureStats ComputeStats(const std::vector<registry::AllocationRecord>& records);

// History from the registry: the newest `window` allocations of the tenant with the
// signature of that kind (tenant "" = every tenant's: a request planned without a tenant learns
// from all). The store must outlive this object; thread-safe as the store is.
class RegistryUsageHistory final : public UsageHistory {
 public:
  explicit RegistryUsageHistory(registry::Store* store, int window = 50)
      : store_(store), window_(window < 1 ? 1 : window) {}

  Result<SignatureStats> Stats(const std::string& tenant_id, registry::SignatureKind kind,
                               const std::string& signature) override;

 private:
  registry::Store* store_;
  int window_;
};

}  // namespace paddock::planner
