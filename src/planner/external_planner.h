// The external planner (PLAN-3): asks an LLM behind an OpenAI-compatible chat-completions API
// (`POST {url}{path}`, default /v1/chat/completions) for a ResourceIntent, and falls back to the
// built-in planner on ANY failure.
//
// The model is untrusted twice over: it is an LLM, and the task text it reads may be hostile
// (prompt injection). So:
//  - the prompt offers the configured classes and a JSON schema; the request goes in the user
//    message between nonce-marked lines, declared as data, never instructions;
//  - the answer (`choices[0].message.content`) must be one strict JSON object: the class must
//    be one on offer, numbers finite and within sanity bounds, confidence in 0..1, reasons a
//    short list of strings. Anything else rejects the whole answer (-> fallback). Unknown keys
//    are IGNORED with a note (a verbose model is harmless: only the schema's keys are read);
//  - numbers above the chosen class are capped to the class here, and PolicyGuard bounds the
//    result again for the tenant; runtime and template always come from the class (the model
//    never picks what a sandbox runs on); the model's reasons are quoted, bounded and prefixed,
//    and never read by anything that decides.
// A fallback's intent says why: planner = "builtin (external failed: <why>)".
// Only http:// URLs work (the HTTP client has no TLS): run a TLS-terminating proxy on loopback
// for a remote API.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "planner/plan_request.h"
#include "planner/rules.h"

namespace paddock::planner {

// Bounds on the model's answer.
inline constexpr size_t kMaxModelReasons = 5;
inline constexpr size_t kMaxModelReasonBytes = 200;

class ExternalPlanner final : public Planner {
 public:
  // Reads the API key (config.api_key, else the environment variable config.api_key_env) now.
  // `fallback` (normally a BuiltinPlanner) must outlive this planner.
  // `default_ttl_seconds` is used when the model gives no ttl (PlannerConfig's).
  ExternalPlanner(ExternalPlannerConfig config, std::vector<ResourceClass> classes,
                  Planner* fallback, int64_t default_ttl_seconds = 1800);

  // The model's intent, or the fallback's (with the failure in `planner` and the reasons).
  // Blocks at most about config.timeout for the model, plus the fallback. Thread-safe (one
  // connection per call).
  Result<ResourceIntent> Plan(const PlanRequest& request) override;

  // The chat-completions request body for `request`; `nonce` marks the data block.
  nlohmann::json RequestBody(const PlanRequest& request, const std::string& nonce) const;

 private:
  // The model's intent, or an error whose message is the (bounded) reason for falling back.
  Result<ResourceIntent> AskModel(const PlanRequest& request);

  ExternalPlannerConfig config_;
  std::vector<ResourceClass> classes_;
  Planner* fallback_;
  int64_t default_ttl_seconds_;
  std::string api_key_;
};

// Validates the model's message content and turns it into an intent (numbers capped to the
// class; runtime/template from the class; ttl capped at kMaxTtlSeconds). `request_network` and
// `default_ttl_seconds` fill in what the model leaves out. kInvalidArgument saying what was
// wrong.
Result<ResourceIntent> ParseModelAnswer(std::string_view content,
                                        const std::vector<ResourceClass>& classes,
                                        const std::string& request_network,
                                        int64_t default_ttl_seconds = 1800);

}  // namespace paddock::planner
