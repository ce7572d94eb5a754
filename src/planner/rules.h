// The planner's configuration (config/planner.yaml): the ordered sizing rules operators edit,
// how history adjusts them, the guard's per-tenant policy and the optional external planner.
//
// Rules are data, not code: each names tags (features.h) and a resource class. The FIRST rule
// whose condition matches wins, like a firewall: order is priority, so put specific rules
// before general ones; no rule matching means default_class. Parsing is strict in the style of
// paddock.yaml: unknown keys, unknown tags, unknown classes and out-of-range values are load
// errors naming their path ("rules[2].class: unknown resource class 'x'"), because a typo that
// silently never matches is a sizing bug nobody notices.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "planner/features.h"
#include "planner/plan_request.h"

namespace paddock::planner {

// No TTL the planner or guard hands out may exceed this.
inline constexpr int64_t kMaxTtlSeconds = 24 * 3600;

struct RuleCondition {
  std::vector<std::string> all_of;   // every tag present
  std::vector<std::string> any_of;   // at least one present (ignored when empty)
  std::vector<std::string> none_of;  // none present
  uint64_t min_data_bytes = 0;       // WorkloadFeatures::data_bytes >= this
  uint64_t min_repo_bytes = 0;       // PlanRequest::repo_size_bytes >= this
  int64_t min_duration_seconds = 0;  // PlanRequest::expected_duration_seconds >= this

  bool operator==(const RuleCondition&) const = default;
};

struct PlannerRule {
  std::string name;
  RuleCondition when;
  std::string class_name;
  int64_t ttl_seconds = 0;      // 0 = PlannerConfig::default_ttl_seconds
  std::string network_profile;  // "" = the request's, else default_network_profile
  std::string template_name;    // "" = the class's template

  bool operator==(const PlannerRule&) const = default;
};

struct HistoryConfig {
  int min_samples = 3;            // fewer measured runs than this: history is not used
  double headroom = 1.3;          // P95 peak memory x this must fit the class
  double oom_growth = 1.5;        // after an OOM: at least this x the OOM'd allocation
  double max_timeout_rate = 0.2;  // more timeouts than this (fraction) moves up a class
  int window = 50;                // newest allocations per signature considered
  int64_t min_memory_mb = 256;    // never recommend less memory than this
  // History of the very same commands (features.h CommandSignature) is the closest evidence
  // there is, so it is trusted with less headroom and a lower floor.
  double exact_headroom = 1.2;
  int64_t exact_min_memory_mb = 32;
  int64_t memory_step_mb = 16;  // a history-sized allocation is rounded up to a multiple of this

  bool operator==(const HistoryConfig&) const = default;
};

enum class OnViolation { kClamp, kDeny };
const char* OnViolationName(OnViolation v);  // "clamp" | "deny"

// What one tenant may get. 0 in a max_* field means "no cap beyond the class".
struct TenantPolicy {
  std::vector<std::string> allowed_classes;  // never empty after parsing
  double max_cpu = 0;
  uint64_t max_memory_bytes = 0;
  uint64_t max_disk_bytes = 0;
  int64_t max_ttl_seconds = kMaxTtlSeconds;
  // The most permissive network profile allowed; less is always allowed (kNetworkProfiles
  // is ordered none < package-registries < web).
  std::string max_network_profile = "web";
  std::vector<std::string> templates;  // allowed besides each class's own template
  OnViolation on_violation = OnViolation::kClamp;

  bool operator==(const TenantPolicy&) const = default;
};

struct PolicyConfig {
  TenantPolicy defaults;
  // Keyed by tenant id or tenant name; each entry is `defaults` with its own keys applied.
  std::map<std::string, TenantPolicy> tenants;

  // The policy of the tenant: by id first, then by name, else defaults.
  const TenantPolicy& ForTenant(std::string_view tenant_id, std::string_view tenant_name) const;
  // The key ForTenant matched ("" = defaults).
  std::string KeyFor(std::string_view tenant_id, std::string_view tenant_name) const;

  bool operator==(const PolicyConfig&) const = default;
};

struct ExternalPlannerConfig {
  bool enabled = false;
  std::string url;                            // http://host[:port][/prefix]
  std::string path = "/v1/chat/completions";  // appended to url
  std::string model;
  std::string api_key;      // literal key ("" = none); prefer api_key_env
  std::string api_key_env;  // name of the environment variable holding the key
  std::chrono::milliseconds timeout{10'000};
  uint64_t max_response_bytes = 256 * 1024;

  bool operator==(const ExternalPlannerConfig&) const = default;
};

struct PlannerConfig {
  std::string default_class;
  int64_t default_ttl_seconds = 1800;
  std::string default_network_profile = "none";
  std::vector<PlannerRule> rules;
  HistoryConfig history;
  PolicyConfig policy;
  ExternalPlannerConfig external;

  bool operator==(const PlannerConfig&) const = default;
};

// True when every part of the rule's condition holds.
bool RuleMatches(const RuleCondition& when, const WorkloadFeatures& features,
                 const PlanRequest& request);

// The first matching rule, or nullptr (then default_class applies).
const PlannerRule* FirstMatchingRule(const PlannerConfig& config, const WorkloadFeatures& features,
                                     const PlanRequest& request);

// Parses planner.yaml against the configured classes (class names are checked here, at load
// time). `default_class` and `rules` are required; everything else has the defaults above
// (policy: every class allowed, no caps, every network profile, clamp). kInvalidArgument with
// the key path first in the message.
Result<PlannerConfig> ParsePlannerConfig(std::string_view yaml,
                                         const std::vector<ResourceClass>& classes);

// Reads and parses a file; errors are prefixed with the path.
Result<PlannerConfig> LoadPlannerConfigFile(const std::string& path,
                                            const std::vector<ResourceClass>& classes);

// A configuration with no rules: everything gets the smallest class (by memory), the policy
// allows every class. For running without a planner.yaml.
PlannerConfig MinimalPlannerConfig(const std::vector<ResourceClass>& classes);

}  // namespace paddock::planner
