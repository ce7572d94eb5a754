#include "planner/policy_guard.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace paddock::planner {

nlohmann::json GuardDecisionToJson(const GuardDecision& d) {
  return {{"allowed", d.allowed},
          {"resource_class", d.resource_class},
          {"cpu", d.cpu},
          {"memory_mb", d.memory_mb},
          {"disk_gb", d.disk_gb},
          {"ttl_seconds", d.ttl_seconds},
          {"runtime", d.runtime},
          {"template", d.template_name},
          {"network_profile", d.network_profile},
          {"clamped", d.clamped},
          {"reasons", d.reasons},
          {"denial", d.denial}};
}

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

int64_t ClassMemoryMb(const ResourceClass& c) {
  return static_cast<int64_t>(c.memory_bytes / kMiB);
}
int64_t ClassDiskGb(const ResourceClass& c) {
  return std::max<int64_t>(1, static_cast<int64_t>(c.disk_bytes / kGiB));
}

// Numbers as text for reasons: "64", "0.5", "nan", "inf".
std::string Num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:g}", v);
}

}  // namespace

PolicyGuard::PolicyGuard(std::vector<ResourceClass> classes, PolicyConfig policy,
                         int64_t default_ttl_seconds)
    : classes_(std::move(classes)),
      policy_(std::move(policy)),
      default_ttl_seconds_(std::clamp<int64_t>(default_ttl_seconds, 1, kMaxTtlSeconds)) {}

const ResourceClass* PolicyGuard::Find(const std::string& name) const {
  for (const ResourceClass& c : classes_) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

GuardDecision PolicyGuard::Review(const ResourceIntent& intent, const std::string& tenant_id,
                                  const std::string& tenant_name) const {
  GuardDecision d;
  const TenantPolicy& p = policy_.ForTenant(tenant_id, tenant_name);
  const std::string key = policy_.KeyFor(tenant_id, tenant_name);
  const bool deny = p.on_violation == OnViolation::kDeny;
  const std::string tenant = key.empty() ? "the default policy" : "tenant " + key;
  d.reasons.push_back(fmt::format("policy: {} (on_violation {})",
                                  key.empty() ? "default" : "tenant '" + key + "'",
                                  OnViolationName(p.on_violation)));

  // A violation either clamps (and says so) or denies the whole request. Returns false when
  // the review must stop.
  auto violation = [&](const std::string& what, const std::string& clamp_note) {
    if (deny) {
      d.allowed = false;
      d.denial = what + " (on_violation: deny)";
      d.reasons.push_back("denied: " + d.denial);
      return false;
    }
    d.clamped = true;
    d.reasons.push_back(what + ": " + clamp_note);
    return true;
  };

  const double cpu = intent.cpu;
  const bool cpu_ok = std::isfinite(cpu) && cpu > 0;
  const bool memory_ok = intent.memory_mb > 0;
  const bool disk_ok = intent.disk_gb > 0;

  // 1. The class.
  // Allowed classes smallest first; equally sized ones in configuration order, so the choice
  // between them is the operator's, not the alphabet's.
  std::vector<const ResourceClass*> allowed;
  for (const ResourceClass& c : classes_) {
    if (std::find(p.allowed_classes.begin(), p.allowed_classes.end(), c.name) !=
        p.allowed_classes.end()) {
      allowed.push_back(&c);
    }
  }
  std::stable_sort(allowed.begin(), allowed.end(),
                   [](const ResourceClass* a, const ResourceClass* b) {
                     return std::tie(a->memory_bytes, a->cpus, a->disk_bytes) <
                            std::tie(b->memory_bytes, b->cpus, b->disk_bytes);
                   });
  if (allowed.empty()) {
    d.denial = "no resource class is allowed for " + tenant;
    d.reasons.push_back("denied: " + d.denial);
    return d;
  }
  // The smallest allowed class covering the intent's (valid) numbers, else the largest.
  auto nearest = [&]() {
    for (const ResourceClass* c : allowed) {
      if ((!cpu_ok || c->cpus + 1e-9 >= cpu) &&
          (!memory_ok || ClassMemoryMb(*c) >= intent.memory_mb) &&
          (!disk_ok || ClassDiskGb(*c) >= intent.disk_gb)) {
        return c;
      }
    }
    return allowed.back();
  };
  const ResourceClass* cls = Find(intent.resource_class);
  const std::string quoted_class = BoundedQuote(intent.resource_class, 64);
  if (!cls) {
    const ResourceClass* to = nearest();
    if (!violation("class '" + quoted_class + "' does not exist",
                   "nearest allowed class " + to->name)) {
      return d;
    }
    cls = to;
  } else if (std::find(allowed.begin(), allowed.end(), cls) == allowed.end()) {
    const ResourceClass* to = nearest();
    if (!violation("class " + cls->name + " is not allowed for " + tenant,
                   "nearest allowed class " + to->name)) {
      return d;
    }
    cls = to;
  }
  d.resource_class = cls->name;
  d.runtime = cls->runtime;
  if (!intent.runtime.empty() && intent.runtime != cls->runtime) {
    d.reasons.push_back(fmt::format("runtime '{}' ignored: class {} runs on {}",
                                    BoundedQuote(intent.runtime, 64), cls->name, cls->runtime));
  }

  // 2. Numbers: garbage is replaced by the class's value (capped by the tenant); values above
  // the class or the tenant's cap are violations.
  struct Limit {
    double value;
    std::string who;
  };
  auto limit_of = [&](double class_value, double tenant_cap) {
    if (tenant_cap > 0 && tenant_cap < class_value) {
      return Limit{tenant_cap, tenant + "'s max " + Num(tenant_cap)};
    }
    return Limit{class_value, "class " + cls->name + "'s " + Num(class_value)};
  };

  Limit cpu_limit = limit_of(cls->cpus, p.max_cpu);
  if (!cpu_ok) {
    d.cpu = cpu_limit.value;
    d.clamped = true;
    d.reasons.push_back(
        fmt::format("cpu {} is not a positive number: {} used", Num(cpu), Num(d.cpu)));
  } else if (cpu > cpu_limit.value + 1e-9) {
    if (!violation(fmt::format("cpu {} > {}", Num(cpu), cpu_limit.who), "clamped")) return d;
    d.cpu = cpu_limit.value;
  } else {
    d.cpu = cpu;
  }

  Limit memory_limit = limit_of(static_cast<double>(ClassMemoryMb(*cls)),
                                static_cast<double>(p.max_memory_bytes / kMiB));
  const int64_t memory_cap = static_cast<int64_t>(memory_limit.value);
  if (!memory_ok) {
    d.memory_mb = memory_cap;
    d.clamped = true;
    d.reasons.push_back(
        fmt::format("memory_mb {} is not positive: {} used", intent.memory_mb, memory_cap));
  } else if (intent.memory_mb > memory_cap) {
    if (!violation(fmt::format("memory_mb {} > {}", intent.memory_mb, memory_limit.who),
                   "clamped")) {
      return d;
    }
    d.memory_mb = memory_cap;
  } else {
    d.memory_mb = intent.memory_mb;
  }

  Limit disk_limit = limit_of(static_cast<double>(ClassDiskGb(*cls)),
                              static_cast<double>(p.max_disk_bytes / kGiB));
  const int64_t disk_cap = static_cast<int64_t>(disk_limit.value);
  if (!disk_ok) {
    d.disk_gb = disk_cap;
    d.clamped = true;
    d.reasons.push_back(
        fmt::format("disk_gb {} is not positive: {} used", intent.disk_gb, disk_cap));
  } else if (intent.disk_gb > disk_cap) {
    if (!violation(fmt::format("disk_gb {} > {}", intent.disk_gb, disk_limit.who), "clamped")) {
      return d;
    }
    d.disk_gb = disk_cap;
  } else {
    d.disk_gb = intent.disk_gb;
  }

  // 3. TTL.
  const int64_t max_ttl = std::min(p.max_ttl_seconds, kMaxTtlSeconds);
  if (intent.ttl_seconds <= 0) {
    d.ttl_seconds = std::min(default_ttl_seconds_, max_ttl);
    d.clamped = true;
    d.reasons.push_back(
        fmt::format("ttl_seconds {} is not positive: {} used", intent.ttl_seconds, d.ttl_seconds));
  } else if (intent.ttl_seconds > max_ttl) {
    if (!violation(fmt::format("ttl_seconds {} > {}'s max {}", intent.ttl_seconds, tenant, max_ttl),
                   "clamped")) {
      return d;
    }
    d.ttl_seconds = max_ttl;
  } else {
    d.ttl_seconds = intent.ttl_seconds;
  }

  // 4. Template: the class's own, or one the tenant is allowed besides it.
  if (intent.template_name.empty() || intent.template_name == cls->template_name) {
    d.template_name = cls->template_name;
  } else if (std::find(p.templates.begin(), p.templates.end(), intent.template_name) !=
             p.templates.end()) {
    d.template_name = intent.template_name;
  } else {
    if (!violation(fmt::format("template '{}' is neither class {}'s nor allowed for {}",
                               BoundedQuote(intent.template_name, 64), cls->name, tenant),
                   "class template '" + cls->template_name + "' used")) {
      return d;
    }
    d.template_name = cls->template_name;
  }

  // 5. Network: unknown -> none; more than the tenant's maximum is a violation.
  const int rank = NetworkProfileRank(intent.network_profile);
  const int max_rank = NetworkProfileRank(p.max_network_profile);
  if (rank < 0) {
    d.network_profile = "none";
    d.clamped = true;
    d.reasons.push_back(fmt::format("network profile '{}' is unknown: none used",
                                    BoundedQuote(intent.network_profile, 64)));
  } else if (rank > max_rank) {
    if (!violation(fmt::format("network profile {} > {}'s max {}", intent.network_profile, tenant,
                               p.max_network_profile),
                   "clamped")) {
      return d;
    }
    d.network_profile = p.max_network_profile;
  } else {
    d.network_profile = intent.network_profile;
  }

  d.allowed = true;
  if (!d.clamped && d.resource_class == intent.resource_class) {
    d.reasons.push_back("intent within policy: " + d.resource_class);
  }
  return d;
}

}  // namespace paddock::planner
