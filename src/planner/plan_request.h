// The planner's vocabulary (PLAN-1): what a caller tells the planner about a task
// (PlanRequest), what a planner answers (ResourceIntent), and the Planner seam every backend
// (built-in rules + history, external LLM) implements.
//
// A ResourceIntent is a *recommendation*. Planners are untrusted (one may be an LLM that read
// hostile task text), so an intent never reaches the runtime directly: PolicyGuard
// (policy_guard.h) maps it onto a class the tenant may use and bounds every number (PLAN-2).
//
// PlanRequest JSON comes from API callers and is bounded here, before any planner sees it: a
// hostile request cannot make feature extraction, hashing or an LLM prompt arbitrarily large.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/sha256.h"  // Sha256Hex, used with request hashes
#include "common/status.h"

namespace paddock::planner {

// Bounds on PlanRequest input (enforced by PlanRequestFromJson).
inline constexpr size_t kMaxTaskBytes = 64 * 1024;
inline constexpr size_t kMaxListItems = 200;       // plan_steps, commands, languages, dependencies
inline constexpr size_t kMaxItemBytes = 8 * 1024;  // one step / command
inline constexpr size_t kMaxNameBytes = 256;       // one language / dependency name

struct PlanRequest {
  // Set by the caller from the authenticated identity, never read from JSON: a request body
  // must not be able to claim another tenant's history or policy.
  std::string tenant_id;
  std::string task;                     // the user's task text
  std::vector<std::string> plan_steps;  // the agent's current plan
  std::vector<std::string> commands;    // planned tool calls / shell commands
  std::vector<std::string> languages;   // hints: "python", "node", ...
  std::optional<uint64_t> repo_size_bytes;
  std::vector<std::string> dependencies;  // declared package names
  bool needs_browser = false;
  bool needs_compile = false;
  bool needs_gpu = false;
  std::optional<int64_t> expected_duration_seconds;
  std::string network;  // "" (unspecified) | "none" | "package-registries" | "web"
  std::optional<uint64_t> workspace_bytes;
  std::string risk_level;  // "" | "low" | "medium" | "high"

  bool operator==(const PlanRequest&) const = default;
};

struct ResourceIntent {
  std::string resource_class;
  double cpu = 0;
  int64_t memory_mb = 0;
  int64_t disk_gb = 0;
  std::string runtime;
  std::string template_name;
  std::string network_profile;  // "none" | "package-registries" | "web"
  int64_t ttl_seconds = 0;
  double confidence = 0;             // 0..1
  std::vector<std::string> reasons;  // one line per decision step
  // Which backend produced it: "builtin", "external", "builtin (external failed: <why>)".
  std::string planner;
  std::string workload_signature;  // see features.h
  std::string command_signature;   // see features.h CommandSignature; "" without commands
  std::string input_hash;          // PlanRequestHash of the request

  bool operator==(const ResourceIntent&) const = default;
};

// Network profiles a request or intent may name, least to most permissive.
inline constexpr std::string_view kNetworkProfiles[] = {"none", "package-registries", "web"};
// The profile's rank in kNetworkProfiles, or -1 when unknown.
int NetworkProfileRank(std::string_view profile);

// Parses and bounds a request. Unknown keys, wrong types, negative sizes, values outside the
// enums and over-long input are kInvalidArgument naming the field under `path`
// ("plan.commands[2]: must be a string"). tenant_id is left empty (see PlanRequest).
Result<PlanRequest> PlanRequestFromJson(const nlohmann::json& json, std::string_view path = "plan");

// The request's content as JSON (tenant_id excluded); absent optionals are omitted. Keys are
// sorted, so dump() of it is canonical.
nlohmann::json PlanRequestToJson(const PlanRequest& request);

// sha256 hex of the canonical JSON of the request's content (tenant excluded): equal requests
// hash equally whoever sends them; the allocation record stores the tenant beside it.
std::string PlanRequestHash(const PlanRequest& request);

nlohmann::json ResourceIntentToJson(const ResourceIntent& intent);
// Type-checked (not policy-checked: that is PolicyGuard's job). Unknown keys are rejected.
Result<ResourceIntent> ResourceIntentFromJson(const nlohmann::json& json,
                                              std::string_view path = "intent");

// `text` cut to at most `max_bytes` without splitting a UTF-8 sequence, control characters
// replaced by spaces, "..." appended when cut: for quoting untrusted text in reasons and logs.
std::string BoundedQuote(std::string_view text, size_t max_bytes);

class Planner {
 public:
  virtual ~Planner() = default;
  // Recommends resources for the request. Never blocks longer than the backend's configured
  // timeout; errors only for a request it cannot plan at all. Thread-safe.
  virtual Result<ResourceIntent> Plan(const PlanRequest& request) = 0;
};

}  // namespace paddock::planner
