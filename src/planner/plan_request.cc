#include "planner/plan_request.h"

#include <algorithm>

#include "planner/json_fields.h"

namespace paddock::planner {

using json_fields::ObjectReader;
using nlohmann::json;

namespace {

// One exabyte: larger than any disk, small enough that no arithmetic on it overflows.
constexpr int64_t kMaxBytes = int64_t{1} << 60;
constexpr int64_t kMaxDurationSeconds = 365LL * 24 * 3600;

Status OneOf(const std::string& value, std::initializer_list<std::string_view> allowed,
             const std::string& where) {
  if (value.empty()) return Status::Ok();
  for (std::string_view a : allowed) {
    if (value == a) return Status::Ok();
  }
  std::string list;
  for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  return InvalidArgument(where + ": '" + BoundedQuote(value, 64) + "' is not one of " + list);
}

}  // namespace

int NetworkProfileRank(std::string_view profile) {
  for (size_t i = 0; i < std::size(kNetworkProfiles); ++i) {
    if (kNetworkProfiles[i] == profile) return static_cast<int>(i);
  }
  return -1;
}

Result<PlanRequest> PlanRequestFromJson(const json& j, std::string_view path) {
  ObjectReader r(j, std::string(path));
  PADDOCK_RETURN_IF_ERROR(r.CheckObject());
  PADDOCK_RETURN_IF_ERROR(
      r.RejectUnknown({"task", "plan_steps", "commands", "languages", "repo_size_bytes",
                       "dependencies", "needs_browser", "needs_compile", "needs_gpu",
                       "expected_duration_seconds", "network", "workspace_bytes", "risk_level"}));
  PlanRequest p;
  PADDOCK_RETURN_IF_ERROR(r.String("task", kMaxTaskBytes, &p.task));
  PADDOCK_RETURN_IF_ERROR(r.StringList("plan_steps", kMaxListItems, kMaxItemBytes, &p.plan_steps));
  PADDOCK_RETURN_IF_ERROR(r.StringList("commands", kMaxListItems, kMaxItemBytes, &p.commands));
  PADDOCK_RETURN_IF_ERROR(r.StringList("languages", kMaxListItems, kMaxNameBytes, &p.languages));
  PADDOCK_RETURN_IF_ERROR(
      r.StringList("dependencies", kMaxListItems, kMaxNameBytes, &p.dependencies));
  std::optional<int64_t> n;
  PADDOCK_RETURN_IF_ERROR(r.Integer("repo_size_bytes", 0, kMaxBytes, &n));
  if (n) p.repo_size_bytes = static_cast<uint64_t>(*n);
  n.reset();
  PADDOCK_RETURN_IF_ERROR(r.Integer("workspace_bytes", 0, kMaxBytes, &n));
  if (n) p.workspace_bytes = static_cast<uint64_t>(*n);
  PADDOCK_RETURN_IF_ERROR(
      r.Integer("expected_duration_seconds", 0, kMaxDurationSeconds, &p.expected_duration_seconds));
  PADDOCK_RETURN_IF_ERROR(r.Bool("needs_browser", &p.needs_browser));
  PADDOCK_RETURN_IF_ERROR(r.Bool("needs_compile", &p.needs_compile));
  PADDOCK_RETURN_IF_ERROR(r.Bool("needs_gpu", &p.needs_gpu));
  PADDOCK_RETURN_IF_ERROR(r.String("network", 64, &p.network));
  PADDOCK_RETURN_IF_ERROR(
      OneOf(p.network, {"none", "package-registries", "web"}, r.PathOf("network")));
  PADDOCK_RETURN_IF_ERROR(r.String("risk_level", 64, &p.risk_level));
  PADDOCK_RETURN_IF_ERROR(OneOf(p.risk_level, {"low", "medium", "high"}, r.PathOf("risk_level")));
  return p;
}

json PlanRequestToJson(const PlanRequest& p) {
  json j = json::object();
  j["task"] = p.task;
  j["plan_steps"] = p.plan_steps;
  j["commands"] = p.commands;
  j["languages"] = p.languages;
  j["dependencies"] = p.dependencies;
  if (p.repo_size_bytes) j["repo_size_bytes"] = *p.repo_size_bytes;
  j["needs_browser"] = p.needs_browser;
  j["needs_compile"] = p.needs_compile;
  j["needs_gpu"] = p.needs_gpu;
  if (p.expected_duration_seconds) j["expected_duration_seconds"] = *p.expected_duration_seconds;
  j["network"] = p.network;
  if (p.workspace_bytes) j["workspace_bytes"] = *p.workspace_bytes;
  j["risk_level"] = p.risk_level;
  return j;
}

std::string PlanRequestHash(const PlanRequest& request) {
  // nlohmann's object keys are sorted and dump() adds no whitespace, so this is canonical.
  // Invalid UTF-8 is replaced rather than thrown on: the hash must exist for any input.
  return Sha256Hex(PlanRequestToJson(request).dump(-1, ' ', false, json::error_handler_t::replace));
}

json ResourceIntentToJson(const ResourceIntent& i) {
  return json{{"resource_class", i.resource_class},
              {"cpu", i.cpu},
              {"memory_mb", i.memory_mb},
              {"disk_gb", i.disk_gb},
              {"runtime", i.runtime},
              {"template", i.template_name},
              {"network_profile", i.network_profile},
              {"ttl_seconds", i.ttl_seconds},
              {"confidence", i.confidence},
              {"reasons", i.reasons},
              {"planner", i.planner},
              {"workload_signature", i.workload_signature},
              {"command_signature", i.command_signature},
              {"input_hash", i.input_hash}};
}

Result<ResourceIntent> ResourceIntentFromJson(const json& j, std::string_view path) {
  ObjectReader r(j, std::string(path));
  PADDOCK_RETURN_IF_ERROR(r.CheckObject());
  PADDOCK_RETURN_IF_ERROR(
      r.RejectUnknown({"resource_class", "cpu", "memory_mb", "disk_gb", "runtime", "template",
                       "network_profile", "ttl_seconds", "confidence", "reasons", "planner",
                       "workload_signature", "command_signature", "input_hash"}));
  ResourceIntent i;
  PADDOCK_RETURN_IF_ERROR(r.String("resource_class", 256, &i.resource_class));
  std::optional<double> d;
  PADDOCK_RETURN_IF_ERROR(r.Number("cpu", -1e18, 1e18, &d));
  if (d) i.cpu = *d;
  std::optional<int64_t> n;
  PADDOCK_RETURN_IF_ERROR(r.Integer("memory_mb", INT64_MIN, INT64_MAX, &n));
  if (n) i.memory_mb = *n;
  n.reset();
  PADDOCK_RETURN_IF_ERROR(r.Integer("disk_gb", INT64_MIN, INT64_MAX, &n));
  if (n) i.disk_gb = *n;
  n.reset();
  PADDOCK_RETURN_IF_ERROR(r.Integer("ttl_seconds", INT64_MIN, INT64_MAX, &n));
  if (n) i.ttl_seconds = *n;
  d.reset();
  PADDOCK_RETURN_IF_ERROR(r.Number("confidence", 0, 1, &d));
  if (d) i.confidence = *d;
  PADDOCK_RETURN_IF_ERROR(r.String("runtime", 256, &i.runtime));
  PADDOCK_RETURN_IF_ERROR(r.String("template", 256, &i.template_name));
  PADDOCK_RETURN_IF_ERROR(r.String("network_profile", 256, &i.network_profile));
  PADDOCK_RETURN_IF_ERROR(r.StringList("reasons", 100, 4096, &i.reasons));
  PADDOCK_RETURN_IF_ERROR(r.String("planner", 1024, &i.planner));
  PADDOCK_RETURN_IF_ERROR(r.String("workload_signature", 256, &i.workload_signature));
  PADDOCK_RETURN_IF_ERROR(r.String("command_signature", 256, &i.command_signature));
  PADDOCK_RETURN_IF_ERROR(r.String("input_hash", 256, &i.input_hash));
  return i;
}

std::string BoundedQuote(std::string_view text, size_t max_bytes) {
  // Control characters become spaces (no log-line or header splitting) and bytes that are not
  // valid UTF-8 become '?' (the text ends up in JSON, which must be valid UTF-8).
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 3);
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    bool valid = len > 0 && i + len <= text.size();
    for (size_t k = 1; valid && k < len; ++k) {
      valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    }
    if (valid && len > 1) {
      // Overlong forms, UTF-16 surrogates and code points past U+10FFFF (RFC 3629).
      unsigned char n = static_cast<unsigned char>(text[i + 1]);
      if ((len == 2 && c < 0xC2) || (len == 3 && c == 0xE0 && n < 0xA0) ||
          (len == 3 && c == 0xED && n >= 0xA0) || (len == 4 && c == 0xF0 && n < 0x90) ||
          (len == 4 && c == 0xF4 && n >= 0x90) || (len == 4 && c > 0xF4)) {
        valid = false;
      }
    }
    size_t take = valid ? len : 1;
    if (out.size() + take > max_bytes) {
      out += "...";
      return out;
    }
    if (!valid) {
      out.push_back('?');
    } else if (len == 1 && (c < 0x20 || c == 0x7f)) {
      out.push_back(' ');
    } else {
      out.append(text.substr(i, len));
    }
    i += take;
  }
  return out;
}

}  // namespace paddock::planner
