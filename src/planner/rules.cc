#include "planner/rules.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <set>

#include "api/http_client.h"
#include "common/unique_fd.h"
#include "common/units.h"
#include "common/yaml_reader.h"

namespace paddock::planner {

namespace {

bool KnownClass(const std::vector<ResourceClass>& classes, const std::string& name) {
  return std::any_of(classes.begin(), classes.end(),
                     [&](const ResourceClass& c) { return c.name == name; });
}

Status CheckClass(const std::vector<ResourceClass>& classes, const std::string& name,
                  const std::string& where) {
  if (!KnownClass(classes, name)) {
    return InvalidArgument(where + ": unknown resource class '" + name + "'");
  }
  return Status::Ok();
}

Status CheckNetworkProfile(const std::string& profile, const std::string& where) {
  if (NetworkProfileRank(profile) < 0) {
    return InvalidArgument(where + ": unknown network profile '" + profile +
                           "' (known: none, package-registries, web)");
  }
  return Status::Ok();
}

Status ParseTags(const YamlMapReader& r, std::string_view key, std::vector<std::string>* out) {
  PADDOCK_RETURN_IF_ERROR(r.StringList(key, out));
  for (size_t i = 0; i < out->size(); ++i) {
    if (!KnownTags().count((*out)[i])) {
      return InvalidArgument(YamlElement(r.PathOf(key), i) + ": unknown tag '" + (*out)[i] + "'");
    }
  }
  return Status::Ok();
}

Status ParseCondition(const YAML::Node& node, const std::string& path, RuleCondition* c) {
  YamlMapReader r(node, path, "planner config");
  PADDOCK_RETURN_IF_ERROR(
      r.Check({"all_of", "any_of", "none_of", "min_data", "min_repo", "min_duration"}));
  PADDOCK_RETURN_IF_ERROR(ParseTags(r, "all_of", &c->all_of));
  PADDOCK_RETURN_IF_ERROR(ParseTags(r, "any_of", &c->any_of));
  PADDOCK_RETURN_IF_ERROR(ParseTags(r, "none_of", &c->none_of));
  PADDOCK_RETURN_IF_ERROR(r.Size("min_data", &c->min_data_bytes));
  PADDOCK_RETURN_IF_ERROR(r.Size("min_repo", &c->min_repo_bytes));
  PADDOCK_RETURN_IF_ERROR(r.Seconds("min_duration", 365LL * 24 * 3600, &c->min_duration_seconds));
  // A condition that holds for everything is what default_class is for; as a rule it would
  // shadow every rule after it.
  if (c->all_of.empty() && c->any_of.empty() && c->min_data_bytes == 0 && c->min_repo_bytes == 0 &&
      c->min_duration_seconds == 0) {
    return InvalidArgument(path +
                           ": matches every task (give all_of, any_of, min_data, min_repo or "
                           "min_duration; use default_class for the fallback)");
  }
  return Status::Ok();
}

Status ParseRule(const YAML::Node& node, const std::string& path,
                 const std::vector<ResourceClass>& classes, PlannerRule* rule) {
  YamlMapReader r(node, path, "planner config");
  PADDOCK_RETURN_IF_ERROR(r.Check({"name", "when", "class", "ttl", "network_profile", "template"}));
  for (std::string_view key : {"name", "when", "class"}) PADDOCK_RETURN_IF_ERROR(r.Required(key));
  PADDOCK_RETURN_IF_ERROR(r.String("name", &rule->name));
  if (!ValidName(rule->name)) {
    return InvalidArgument(path + ".name: '" + rule->name +
                           "' is not a valid name ([a-z0-9][a-z0-9._-]*, at most 63)");
  }
  PADDOCK_RETURN_IF_ERROR(ParseCondition(r.Get("when"), r.PathOf("when"), &rule->when));
  PADDOCK_RETURN_IF_ERROR(r.String("class", &rule->class_name));
  PADDOCK_RETURN_IF_ERROR(CheckClass(classes, rule->class_name, r.PathOf("class")));
  PADDOCK_RETURN_IF_ERROR(r.Seconds("ttl", kMaxTtlSeconds, &rule->ttl_seconds));
  PADDOCK_RETURN_IF_ERROR(r.String("network_profile", &rule->network_profile));
  if (!rule->network_profile.empty()) {
    PADDOCK_RETURN_IF_ERROR(
        CheckNetworkProfile(rule->network_profile, r.PathOf("network_profile")));
  }
  PADDOCK_RETURN_IF_ERROR(r.String("template", &rule->template_name));
  if (!rule->template_name.empty() && !ValidName(rule->template_name)) {
    return InvalidArgument(path + ".template: '" + rule->template_name + "' is not a valid name");
  }
  return Status::Ok();
}

Status ParseHistory(const YAML::Node& node, HistoryConfig* h) {
  YamlMapReader r(node, "history", "planner config");
  PADDOCK_RETURN_IF_ERROR(
      r.Check({"min_samples", "headroom", "oom_growth", "max_timeout_rate", "window", "min_memory",
               "exact_headroom", "exact_min_memory", "memory_step"}));
  int64_t n = h->min_samples;
  PADDOCK_RETURN_IF_ERROR(r.Integer("min_samples", 1, 10'000, &n));
  h->min_samples = static_cast<int>(n);
  n = h->window;
  PADDOCK_RETURN_IF_ERROR(r.Integer("window", 1, 10'000, &n));
  h->window = static_cast<int>(n);
  if (h->min_samples > h->window) {
    return InvalidArgument("history.min_samples: larger than history.window");
  }
  PADDOCK_RETURN_IF_ERROR(r.Number("headroom", 1.0, 10.0, &h->headroom));
  PADDOCK_RETURN_IF_ERROR(r.Number("oom_growth", 1.0, 10.0, &h->oom_growth));
  PADDOCK_RETURN_IF_ERROR(r.Number("max_timeout_rate", 0.0, 1.0, &h->max_timeout_rate));
  uint64_t min_memory = static_cast<uint64_t>(h->min_memory_mb) << 20;
  PADDOCK_RETURN_IF_ERROR(r.Size("min_memory", &min_memory));
  h->min_memory_mb = static_cast<int64_t>(min_memory >> 20);
  if (h->min_memory_mb < 1) return InvalidArgument("history.min_memory: must be at least 1MiB");
  PADDOCK_RETURN_IF_ERROR(r.Number("exact_headroom", 1.0, 10.0, &h->exact_headroom));
  uint64_t exact_min_memory = static_cast<uint64_t>(h->exact_min_memory_mb) << 20;
  PADDOCK_RETURN_IF_ERROR(r.Size("exact_min_memory", &exact_min_memory));
  h->exact_min_memory_mb = static_cast<int64_t>(exact_min_memory >> 20);
  if (h->exact_min_memory_mb < 1) {
    return InvalidArgument("history.exact_min_memory: must be at least 1MiB");
  }
  uint64_t step = static_cast<uint64_t>(h->memory_step_mb) << 20;
  PADDOCK_RETURN_IF_ERROR(r.Size("memory_step", &step));
  h->memory_step_mb = static_cast<int64_t>(step >> 20);
  if (h->memory_step_mb < 1 || h->memory_step_mb > 1024) {
    return InvalidArgument("history.memory_step: must be between 1MiB and 1GiB");
  }
  return Status::Ok();
}

// Applies the keys present in `node` on top of `*p` (which starts as the defaults).
Status ParseTenantPolicy(const YAML::Node& node, const std::string& path,
                         const std::vector<ResourceClass>& classes, TenantPolicy* p) {
  YamlMapReader r(node, path, "planner config");
  PADDOCK_RETURN_IF_ERROR(r.Check({"allowed_classes", "max_cpu", "max_memory", "max_disk",
                                   "max_ttl", "max_network_profile", "templates", "on_violation"}));
  PADDOCK_RETURN_IF_ERROR(r.StringList("allowed_classes", &p->allowed_classes));
  if (r.Has("allowed_classes")) {
    if (p->allowed_classes.empty()) {
      return InvalidArgument(r.PathOf("allowed_classes") + ": must name at least one class");
    }
    for (size_t i = 0; i < p->allowed_classes.size(); ++i) {
      PADDOCK_RETURN_IF_ERROR(
          CheckClass(classes, p->allowed_classes[i], YamlElement(r.PathOf("allowed_classes"), i)));
    }
  }
  if (r.Has("max_cpu")) {
    PADDOCK_RETURN_IF_ERROR(r.Number("max_cpu", 0.01, 4096, &p->max_cpu));
  }
  PADDOCK_RETURN_IF_ERROR(r.Size("max_memory", &p->max_memory_bytes));
  PADDOCK_RETURN_IF_ERROR(r.Size("max_disk", &p->max_disk_bytes));
  if (r.Has("max_disk") && p->max_disk_bytes < (1ull << 30)) {
    return InvalidArgument(r.PathOf("max_disk") + ": must be at least 1GiB");
  }
  if (r.Has("max_memory") && p->max_memory_bytes < (1ull << 20)) {
    return InvalidArgument(r.PathOf("max_memory") + ": must be at least 1MiB");
  }
  PADDOCK_RETURN_IF_ERROR(r.Seconds("max_ttl", kMaxTtlSeconds, &p->max_ttl_seconds));
  PADDOCK_RETURN_IF_ERROR(r.String("max_network_profile", &p->max_network_profile));
  PADDOCK_RETURN_IF_ERROR(
      CheckNetworkProfile(p->max_network_profile, r.PathOf("max_network_profile")));
  PADDOCK_RETURN_IF_ERROR(r.StringList("templates", &p->templates));
  for (size_t i = 0; i < p->templates.size(); ++i) {
    if (!ValidName(p->templates[i])) {
      return InvalidArgument(YamlElement(r.PathOf("templates"), i) + ": '" + p->templates[i] +
                             "' is not a valid name");
    }
  }
  PADDOCK_RETURN_IF_ERROR(r.Choice<OnViolation>(
      "on_violation", {{"clamp", OnViolation::kClamp}, {"deny", OnViolation::kDeny}},
      &p->on_violation));
  return Status::Ok();
}

Status ParsePolicy(const YAML::Node& node, const std::vector<ResourceClass>& classes,
                   PolicyConfig* policy) {
  YamlMapReader r(node, "policy", "planner config");
  PADDOCK_RETURN_IF_ERROR(r.Check({"default", "tenants"}));
  if (r.Has("default")) {
    PADDOCK_RETURN_IF_ERROR(
        ParseTenantPolicy(r.Get("default"), "policy.default", classes, &policy->defaults));
  }
  if (r.Has("tenants")) {
    YAML::Node tenants = r.Get("tenants");
    if (tenants.IsNull()) return Status::Ok();
    if (!tenants.IsMap()) return InvalidArgument("policy.tenants: expected a mapping");
    for (const auto& kv : tenants) {
      if (!kv.first.IsScalar() || kv.first.Scalar().empty()) {
        return InvalidArgument("policy.tenants: keys must be tenant ids or names");
      }
      const std::string& key = kv.first.Scalar();
      if (policy->tenants.count(key)) {
        return InvalidArgument("policy.tenants." + key + ": duplicate key");
      }
      TenantPolicy p = policy->defaults;
      PADDOCK_RETURN_IF_ERROR(ParseTenantPolicy(kv.second, "policy.tenants." + key, classes, &p));
      policy->tenants.emplace(key, std::move(p));
    }
  }
  return Status::Ok();
}

Status ParseExternal(const YAML::Node& node, ExternalPlannerConfig* e) {
  YamlMapReader r(node, "external", "planner config");
  PADDOCK_RETURN_IF_ERROR(r.Check({"enabled", "url", "path", "model", "api_key", "api_key_env",
                                   "timeout", "max_response_bytes"}));
  PADDOCK_RETURN_IF_ERROR(r.Bool("enabled", &e->enabled));
  PADDOCK_RETURN_IF_ERROR(r.String("url", &e->url));
  PADDOCK_RETURN_IF_ERROR(r.String("path", &e->path));
  PADDOCK_RETURN_IF_ERROR(r.String("model", &e->model));
  PADDOCK_RETURN_IF_ERROR(r.String("api_key", &e->api_key));
  PADDOCK_RETURN_IF_ERROR(r.String("api_key_env", &e->api_key_env));
  PADDOCK_RETURN_IF_ERROR(r.Duration("timeout", &e->timeout));
  PADDOCK_RETURN_IF_ERROR(r.Size("max_response_bytes", &e->max_response_bytes));
  if (e->path.empty() || e->path[0] != '/') {
    return InvalidArgument("external.path: '" + e->path + "' must start with '/'");
  }
  if (!e->api_key.empty() && !e->api_key_env.empty()) {
    return InvalidArgument("external.api_key: give api_key or api_key_env, not both");
  }
  if (e->timeout > std::chrono::minutes(5)) {
    return InvalidArgument("external.timeout: longer than 5m (planning blocks sandbox creation)");
  }
  if (e->enabled) {
    PADDOCK_RETURN_IF_ERROR(r.Required("url"));
    PADDOCK_RETURN_IF_ERROR(r.Required("model"));
  }
  if (!e->url.empty()) {
    Result<api::BaseUrl> url = api::ParseBaseUrl(e->url);
    if (!url.ok()) return InvalidArgument("external.url: " + url.status().message());
  }
  return Status::Ok();
}

Result<PlannerConfig> ParseRoot(const YAML::Node& root, const std::vector<ResourceClass>& classes) {
  if (classes.empty()) return InvalidArgument("planner config: no resource classes configured");
  YamlMapReader r(root, "", "planner config");
  PADDOCK_RETURN_IF_ERROR(r.Check({"default_class", "default_ttl", "default_network_profile",
                                   "rules", "history", "policy", "external"}));
  PlannerConfig c = MinimalPlannerConfig(classes);
  PADDOCK_RETURN_IF_ERROR(r.Required("default_class"));
  PADDOCK_RETURN_IF_ERROR(r.Required("rules"));
  PADDOCK_RETURN_IF_ERROR(r.String("default_class", &c.default_class));
  PADDOCK_RETURN_IF_ERROR(CheckClass(classes, c.default_class, "default_class"));
  PADDOCK_RETURN_IF_ERROR(r.Seconds("default_ttl", kMaxTtlSeconds, &c.default_ttl_seconds));
  PADDOCK_RETURN_IF_ERROR(r.String("default_network_profile", &c.default_network_profile));
  PADDOCK_RETURN_IF_ERROR(
      CheckNetworkProfile(c.default_network_profile, "default_network_profile"));

  YAML::Node rules = r.Get("rules");
  if (!rules.IsSequence()) return InvalidArgument("rules: expected a list");
  std::set<std::string> names;
  for (size_t i = 0; i < rules.size(); ++i) {
    PlannerRule rule;
    PADDOCK_RETURN_IF_ERROR(ParseRule(rules[i], YamlElement("rules", i), classes, &rule));
    if (!names.insert(rule.name).second) {
      return InvalidArgument(YamlElement("rules", i) + ".name: duplicate rule '" + rule.name + "'");
    }
    c.rules.push_back(std::move(rule));
  }
  if (r.Has("history")) PADDOCK_RETURN_IF_ERROR(ParseHistory(r.Get("history"), &c.history));
  if (r.Has("policy")) PADDOCK_RETURN_IF_ERROR(ParsePolicy(r.Get("policy"), classes, &c.policy));
  if (r.Has("external")) PADDOCK_RETURN_IF_ERROR(ParseExternal(r.Get("external"), &c.external));
  return c;
}

}  // namespace

const char* OnViolationName(OnViolation v) { return v == OnViolation::kDeny ? "deny" : "clamp"; }

const TenantPolicy& PolicyConfig::ForTenant(std::string_view tenant_id,
                                            std::string_view tenant_name) const {
  if (!tenant_id.empty()) {
    auto it = tenants.find(std::string(tenant_id));
    if (it != tenants.end()) return it->second;
  }
  if (!tenant_name.empty()) {
    auto it = tenants.find(std::string(tenant_name));
    if (it != tenants.end()) return it->second;
  }
  return defaults;
}

std::string PolicyConfig::KeyFor(std::string_view tenant_id, std::string_view tenant_name) const {
  if (!tenant_id.empty() && tenants.count(std::string(tenant_id))) return std::string(tenant_id);
  if (!tenant_name.empty() && tenants.count(std::string(tenant_name))) {
    return std::string(tenant_name);
  }
  return "";
}

bool RuleMatches(const RuleCondition& when, const WorkloadFeatures& features,
                 const PlanRequest& request) {
  for (const std::string& t : when.all_of) {
    if (!features.Has(t)) return false;
  }
  if (!when.any_of.empty() && std::none_of(when.any_of.begin(), when.any_of.end(),
                                           [&](const std::string& t) { return features.Has(t); })) {
    return false;
  }
  for (const std::string& t : when.none_of) {
    if (features.Has(t)) return false;
  }
  if (when.min_data_bytes > 0 && features.data_bytes < when.min_data_bytes) return false;
  if (when.min_repo_bytes > 0 && request.repo_size_bytes.value_or(0) < when.min_repo_bytes) {
    return false;
  }
  if (when.min_duration_seconds > 0 &&
      request.expected_duration_seconds.value_or(0) < when.min_duration_seconds) {
    return false;
  }
  return true;
}

const PlannerRule* FirstMatchingRule(const PlannerConfig& config, const WorkloadFeatures& features,
                                     const PlanRequest& request) {
  for (const PlannerRule& rule : config.rules) {
    if (RuleMatches(rule.when, features, request)) return &rule;
  }
  return nullptr;
}

Result<PlannerConfig> ParsePlannerConfig(std::string_view yaml,
                                         const std::vector<ResourceClass>& classes) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (root.IsNull()) return InvalidArgument("default_class: required");
    return ParseRoot(root, classes);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return InvalidArgument("yaml: " + e.msg);
    return InvalidArgument(
        fmt::format("yaml: line {}, column {}: {}", e.mark.line + 1, e.mark.column + 1, e.msg));
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("yaml: ") + e.what());
  }
}

Result<PlannerConfig> LoadPlannerConfigFile(const std::string& path,
                                            const std::vector<ResourceClass>& classes) {
  PADDOCK_ASSIGN_OR_RETURN(std::string text, ReadConfigFile(path, "planner config"));
  Result<PlannerConfig> config = ParsePlannerConfig(text, classes);
  if (!config.ok()) {
    return Status(config.status().code(), path + ": " + config.status().message());
  }
  return config;
}

PlannerConfig MinimalPlannerConfig(const std::vector<ResourceClass>& classes) {
  PlannerConfig c;
  const ResourceClass* smallest = nullptr;
  for (const ResourceClass& rc : classes) {
    c.policy.defaults.allowed_classes.push_back(rc.name);
    if (!smallest || rc.memory_bytes < smallest->memory_bytes) smallest = &rc;
  }
  if (smallest) c.default_class = smallest->name;
  return c;
}

}  // namespace paddock::planner
