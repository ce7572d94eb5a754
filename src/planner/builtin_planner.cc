#include "planner/builtin_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace paddock::planner {

namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr uint64_t kGiB = 1ull << 30;

int64_t MemoryMiB(const ResourceClass& c) { return static_cast<int64_t>(c.memory_bytes / kMiB); }

bool SameSize(const ResourceClass* a, const ResourceClass* b) {
  return a->memory_bytes == b->memory_bytes && a->cpus == b->cpus && a->disk_bytes == b->disk_bytes;
}

// Position of `c` in the size-ordered list (it is always there: Compatible(c) includes c).
size_t IndexOf(const std::vector<const ResourceClass*>& ordered, const ResourceClass* c) {
  return static_cast<size_t>(std::find(ordered.begin(), ordered.end(), c) - ordered.begin());
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= kGiB) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / kGiB);
  return fmt::format("{} MiB", (bytes + kMiB - 1) / kMiB);
}

// "cap:browser ('npx playwright install chromium')" for each tag of the condition present.
std::string WhyMatched(const PlannerRule& rule, const WorkloadFeatures& f,
                       const PlanRequest& request) {
  std::vector<std::string> parts;
  auto tag = [&](const std::string& t) {
    if (!f.Has(t)) return;
    auto it = f.evidence.find(t);
    parts.push_back(it == f.evidence.end() ? t : t + " ('" + it->second + "')");
  };
  for (const std::string& t : rule.when.all_of) tag(t);
  for (const std::string& t : rule.when.any_of) tag(t);
  if (rule.when.min_data_bytes > 0) {
    parts.push_back(fmt::format("data {} >= {}", FormatBytes(f.data_bytes),
                                FormatBytes(rule.when.min_data_bytes)));
  }
  if (rule.when.min_repo_bytes > 0) {
    parts.push_back(fmt::format("repo {} >= {}", FormatBytes(request.repo_size_bytes.value_or(0)),
                                FormatBytes(rule.when.min_repo_bytes)));
  }
  if (rule.when.min_duration_seconds > 0) {
    parts.push_back(fmt::format("expected duration {}s >= {}s",
                                request.expected_duration_seconds.value_or(0),
                                rule.when.min_duration_seconds));
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

std::string FormatMiB(int64_t mib) {
  if (mib >= 1024) return fmt::format("{:.1f} GiB", static_cast<double>(mib) / 1024);
  return fmt::format("{} MiB", mib);
}

BuiltinPlanner::BuiltinPlanner(std::vector<ResourceClass> classes, PlannerConfig config,
                               UsageHistory* history)
    : classes_(std::move(classes)), config_(std::move(config)), history_(history) {}

const ResourceClass* BuiltinPlanner::Find(const std::string& name) const {
  for (const ResourceClass& c : classes_) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::vector<const ResourceClass*> BuiltinPlanner::Compatible(const ResourceClass& base) const {
  std::vector<const ResourceClass*> out;
  for (const ResourceClass& c : classes_) {
    if (c.runtime == base.runtime && c.template_name == base.template_name &&
        c.security_level == base.security_level) {
      out.push_back(&c);
    }
  }
  // Among equally sized classes, the one listed first in the configuration comes first
  // (classes_ keeps configuration order; pointers into it compare in that order).
  std::stable_sort(out.begin(), out.end(), [](const ResourceClass* a, const ResourceClass* b) {
    return std::tie(a->memory_bytes, a->cpus, a->disk_bytes) <
           std::tie(b->memory_bytes, b->cpus, b->disk_bytes);
  });
  return out;
}

Result<ResourceIntent> BuiltinPlanner::Plan(const PlanRequest& request) {
  ResourceIntent intent;
  intent.planner = "builtin";
  intent.input_hash = PlanRequestHash(request);
  WorkloadFeatures f = ExtractFeatures(request);
  intent.workload_signature = f.signature;
  intent.command_signature = f.command_signature;
  std::vector<std::string>& reasons = intent.reasons;

  reasons.push_back(fmt::format("features: {} (signature {})",
                                f.signature_key.empty() ? "none salient" : f.signature_key,
                                f.signature));
  if (f.truncated) {
    reasons.push_back(
        fmt::format("features: only the first {} KiB of text analysed", kMaxAnalysedBytes / 1024));
  }

  // 1. The rule.
  const PlannerRule* rule = FirstMatchingRule(config_, f, request);
  const std::string& class_name = rule ? rule->class_name : config_.default_class;
  const ResourceClass* cls = Find(class_name);
  if (!cls) {
    return FailedPrecondition("planner: resource class '" + class_name + "' is not configured");
  }
  if (rule) {
    reasons.push_back(fmt::format("rule '{}' matched: {} -> {}", rule->name,
                                  WhyMatched(*rule, f, request), cls->name));
    intent.confidence = 0.7;
  } else {
    reasons.push_back(fmt::format("no rule matched: default class {}", cls->name));
    intent.confidence = 0.5;
  }
  const std::vector<const ResourceClass*> ladder = Compatible(*cls);
  // A move to a class of the same size as the current one is no move: keep the current one
  // (a build must not become "browser-medium" because both are 4 CPU / 8 GiB).
  auto prefer_current = [&](const ResourceClass* to) { return to && SameSize(to, cls) ? cls : to; };

  // 2. Disk must hold the repository, the workspace and the data mentioned (x1.2 for the
  // tools and outputs around them).
  uint64_t disk_need = std::max(
      {request.repo_size_bytes.value_or(0), request.workspace_bytes.value_or(0), f.data_bytes});
  disk_need = static_cast<uint64_t>(static_cast<double>(disk_need) * 1.2);
  if (disk_need > cls->disk_bytes) {
    const ResourceClass* fit = nullptr;
    for (size_t i = IndexOf(ladder, cls); i < ladder.size() && !fit; ++i) {
      if (ladder[i]->disk_bytes >= disk_need) fit = ladder[i];
    }
    fit = prefer_current(fit);
    if (fit) {
      reasons.push_back(fmt::format("disk: needs ~{} > {}'s {} -> {}", FormatBytes(disk_need),
                                    cls->name, FormatBytes(cls->disk_bytes), fit->name));
      cls = fit;
    } else {
      reasons.push_back(fmt::format("disk: needs ~{}; no compatible class has that much",
                                    FormatBytes(disk_need)));
    }
  }

  // 3. History: runs of the very same commands first (the finest evidence, so a tighter
  // headroom and floor apply), else runs of the same kind of task (workload signature).
  int64_t memory_mb = MemoryMiB(*cls);
  const HistoryConfig& h = config_.history;
  std::optional<Result<SignatureStats>> stats;
  std::string source = "history";
  double headroom = h.headroom;
  int64_t min_memory_mb = h.min_memory_mb;
  if (history_ && !f.command_signature.empty()) {
    Result<SignatureStats> exact =
        history_->Stats(request.tenant_id, registry::SignatureKind::kCommand, f.command_signature);
    if (exact.ok() && exact->count >= h.min_samples) {
      stats = std::move(exact);
      source = "history (same commands)";
      headroom = h.exact_headroom;
      min_memory_mb = h.exact_min_memory_mb;
    } else if (exact.ok() && exact->count > 0) {
      reasons.push_back(fmt::format(
          "history (same commands): {} run(s), fewer than the {} needed; by workload instead",
          exact->count, h.min_samples));
    }
  }
  if (history_ && !stats && !f.signature.empty()) {
    stats = history_->Stats(request.tenant_id, registry::SignatureKind::kWorkload, f.signature);
  }
  if (stats && !stats->ok()) {
    reasons.push_back("history: unavailable (" + BoundedQuote(stats->status().message(), 200) +
                      ")");
  } else if (stats) {
    const SignatureStats& st = stats->value();
    if (st.count == 0) {
      reasons.push_back("history: no measured runs of this signature yet");
    } else if (st.count < h.min_samples) {
      reasons.push_back(fmt::format("history: {} run(s), fewer than the {} needed; not used",
                                    st.count, h.min_samples));
    } else if (st.oom_count > 0) {
      // Out of memory before: grow, never shrink, whatever the P95 says.
      int64_t oomed = st.max_oom_memory_mb > 0 ? st.max_oom_memory_mb : MemoryMiB(*cls);
      int64_t need = std::max<int64_t>(
          static_cast<int64_t>(std::ceil(static_cast<double>(oomed) * h.oom_growth)),
          static_cast<int64_t>(std::ceil(st.p95_peak_memory_mb * headroom)));
      const ResourceClass* to = nullptr;
      for (size_t i = IndexOf(ladder, cls); i < ladder.size() && !to; ++i) {
        if (MemoryMiB(*ladder[i]) >= need) to = ladder[i];
      }
      to = prefer_current(to);
      std::string where;
      if (!to) {
        to = MemoryMiB(*ladder.back()) > MemoryMiB(*cls) ? ladder.back() : cls;
        where = fmt::format(" (no class has that much: the largest, {})", to->name);
      } else {
        where = " -> " + to->name;
      }
      reasons.push_back(
          fmt::format("{}: {} runs, {} OOM (largest OOM'd allocation {}) -> needs >= {}{}", source,
                      st.count, st.oom_count, FormatMiB(oomed), FormatMiB(need), where));
      cls = to;
      memory_mb = MemoryMiB(*cls);
      intent.confidence = 0.6;
    } else if (st.timeout_rate > h.max_timeout_rate) {
      size_t i = IndexOf(ladder, cls);
      const ResourceClass* to = cls;
      for (size_t k = i + 1; k < ladder.size(); ++k) {
        if (ladder[k]->cpus > cls->cpus) {
          to = ladder[k];
          break;
        }
      }
      reasons.push_back(fmt::format(
          "{}: {} runs, {:.0f}% timed out -> {}", source, st.count, st.timeout_rate * 100,
          to == cls ? "no larger class; stays " + cls->name : "one class up: " + to->name));
      cls = to;
      memory_mb = MemoryMiB(*cls);
      intent.confidence = 0.6;
    } else {
      int64_t need_mb = std::max<int64_t>(
          static_cast<int64_t>(std::ceil(st.p95_peak_memory_mb * headroom)), min_memory_mb);
      double need_cpu = st.p95_peak_cpu;
      const ResourceClass* to = nullptr;
      for (const ResourceClass* c : ladder) {
        if (MemoryMiB(*c) >= need_mb && c->cpus + 1e-9 >= need_cpu && c->disk_bytes >= disk_need) {
          to = c;
          break;
        }
      }
      if (!to) to = ladder.back();
      to = prefer_current(to);
      std::string p95 = fmt::format("{}: {} runs, p95 peak {}, p95 cpu {:.2f}", source, st.count,
                                    FormatMiB(st.p95_peak_memory_mb), st.p95_peak_cpu);
      if (to != cls) {
        reasons.push_back(fmt::format("{} -> {} (needs {} with {:.2g}x headroom)", p95, to->name,
                                      FormatMiB(need_mb), headroom));
      } else {
        reasons.push_back(fmt::format("{} -> {} fits", p95, cls->name));
      }
      cls = to;
      // Explicit memory within the class: rounded up to the step, never above the class.
      const int64_t step = h.memory_step_mb;
      memory_mb = std::min<int64_t>(MemoryMiB(*cls), (need_mb + step - 1) / step * step);
      if (memory_mb < MemoryMiB(*cls)) {
        reasons.push_back(fmt::format("memory: {} of {}'s {} (history)", FormatMiB(memory_mb),
                                      cls->name, FormatMiB(MemoryMiB(*cls))));
      }
      double consistency = std::min(1.0, static_cast<double>(st.count) / 20.0);
      intent.confidence = std::min(0.95, 0.7 + 0.25 * consistency);
    }
  }

  // 4. The intent, from the final class.
  intent.resource_class = cls->name;
  intent.cpu = cls->cpus;
  intent.memory_mb = memory_mb;
  intent.disk_gb = std::max<int64_t>(1, static_cast<int64_t>(cls->disk_bytes / kGiB));
  intent.runtime = cls->runtime;
  intent.template_name =
      rule && !rule->template_name.empty() ? rule->template_name : cls->template_name;

  intent.ttl_seconds =
      rule && rule->ttl_seconds > 0 ? rule->ttl_seconds : config_.default_ttl_seconds;
  if (request.expected_duration_seconds) {
    // Half again the expected run time, so a run that is a little slow is not cut off.
    int64_t want = std::min<int64_t>(kMaxTtlSeconds, *request.expected_duration_seconds * 3 / 2);
    if (want > intent.ttl_seconds) {
      reasons.push_back(fmt::format("ttl: {}s (1.5x the expected {}s)", want,
                                    *request.expected_duration_seconds));
      intent.ttl_seconds = want;
    }
  }

  if (!request.network.empty()) {
    intent.network_profile = request.network;
  } else if (rule && !rule->network_profile.empty()) {
    intent.network_profile = rule->network_profile;
  } else {
    intent.network_profile = config_.default_network_profile;
    // A task that installs packages cannot work without the registries.
    auto pm = std::find_if(f.tags.begin(), f.tags.end(),
                           [](const std::string& t) { return t.starts_with("pm:"); });
    if (pm != f.tags.end() &&
        NetworkProfileRank(intent.network_profile) < NetworkProfileRank("package-registries")) {
      intent.network_profile = "package-registries";
      reasons.push_back("network: package-registries (" + *pm + ")");
    }
  }
  return intent;
}

}  // namespace paddock::planner
