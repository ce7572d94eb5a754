#include "api/planning.h"

#include <fmt/format.h>

#include "planner/features.h"

namespace paddock::api {

nlohmann::json PlanOutcome::ToJson() const {
  return {{"intent", planner::ResourceIntentToJson(intent)},
          {"decision", planner::GuardDecisionToJson(decision)}};
}

Result<PlanOutcome> PlanForTenant(const planner::PlannerStack& stack, registry::Store& store,
                                  const lifecycle::Principal& who,
                                  const nlohmann::json& request_json, const std::string& field) {
  PADDOCK_ASSIGN_OR_RETURN(planner::PlanRequest request,
                           planner::PlanRequestFromJson(request_json, field));
  request.tenant_id = who.tenant_id;
  PlanOutcome out;
  auto intent = stack.planner().Plan(request);
  if (!intent.ok()) return Internal("planner: " + intent.status().message());
  out.intent = std::move(*intent);
  // Tenant policies may be keyed by name as well as by id.
  std::string tenant_name;
  if (auto t = store.GetTenant(who.tenant_id); t.ok()) tenant_name = t->name;
  out.decision = stack.guard->Review(out.intent, who.tenant_id, tenant_name);
  return out;
}

Status ApplyPlan(const PlanOutcome& plan, const PaddockConfig& config,
                 const std::string& request_id, lifecycle::CreateSandboxRequest* create) {
  const planner::GuardDecision& d = plan.decision;
  if (!d.allowed) return PermissionDenied("intent: denied by policy: " + d.denial);
  const ResourceClass* cls = config.FindClass(d.resource_class);
  if (!cls) return Internal("policy guard chose unknown class " + d.resource_class);
  create->resource_class = cls->name;
  if (d.cpu > 0 && d.cpu < cls->cpus) create->cpus = d.cpu;
  const uint64_t memory = static_cast<uint64_t>(d.memory_mb) << 20;
  if (memory > 0 && memory < cls->memory_bytes) create->memory_bytes = memory;
  const uint64_t disk = static_cast<uint64_t>(d.disk_gb) << 30;
  if (disk > 0 && disk < cls->disk_bytes) create->disk_bytes = disk;
  if (!d.template_name.empty() && d.template_name != cls->template_name)
    create->template_name = d.template_name;
  if (!create->ttl_ms && d.ttl_seconds > 0) create->ttl_ms = d.ttl_seconds * 1000;
  nlohmann::json record = plan.ToJson();
  record["task_id"] = request_id;
  create->plan_json = record.dump();
  // One line for the event; the full reasons are in the event's metadata (the plan record).
  std::string first_reason;
  if (!d.reasons.empty()) first_reason = ": " + d.reasons.front();
  if (d.reasons.size() > 1) first_reason += fmt::format(" (+{} more)", d.reasons.size() - 1);
  create->plan_summary =
      fmt::format("planner {} recommended {} (confidence {:.2f}); policy {} {}{}",
                  plan.intent.planner, plan.intent.resource_class, plan.intent.confidence,
                  d.clamped ? "adjusted to" : "approved", d.resource_class, first_reason);
  return Status::Ok();
}

std::vector<std::string> NeededCapabilities(const planner::PlanRequest& request) {
  static const std::pair<const char*, const char*> kByTag[] = {
      {"lang:python", "python"}, {"lang:javascript", "node"}, {"lang:c", "gcc"},
      {"lang:java", "java"},     {"cap:browser", "browser"},
  };
  const planner::WorkloadFeatures f = planner::ExtractFeatures(request);
  std::vector<std::string> out;
  for (const auto& [tag, cap] : kByTag) {
    if (f.Has(tag)) out.push_back(cap);
  }
  return out;
}

}  // namespace paddock::api
