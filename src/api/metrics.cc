#include "api/metrics.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace paddock::api {
namespace {

bool IsMetricName(std::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool IsLabelName(std::string_view s) {
  if (s.empty() || s.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// Sorted by label name; false on an invalid or repeated name (or "le" for histograms).
bool NormalizeLabels(const MetricLabels& in, bool histogram, MetricLabels* out) {
  *out = in;
  std::sort(out->begin(), out->end());
  for (size_t i = 0; i < out->size(); ++i) {
    const std::string& name = (*out)[i].first;
    if (!IsLabelName(name) || (histogram && name == "le")) return false;
    if (i > 0 && (*out)[i - 1].first == name) return false;
  }
  return true;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// {a="x",b="y"} plus an optional extra pair (le) last; "" when there are no labels at all.
std::string FormatLabels(const MetricLabels& labels, std::string_view extra_name = {},
                         std::string_view extra_value = {}) {
  if (labels.empty() && extra_name.empty()) return "";
  std::string out = "{";
  bool first = true;
  auto add = [&](std::string_view name, std::string_view value) {
    if (!first) out.push_back(',');
    first = false;
    out.append(name);
    out += "=\"";
    out += EscapeLabelValue(value);
    out.push_back('"');
  };
  for (const auto& [name, value] : labels) add(name, value);
  if (!extra_name.empty()) add(extra_name, extra_value);
  out.push_back('}');
  return out;
}

}  // namespace

void Counter::Inc(double delta) {
  if (!(delta >= 0)) return;  // also rejects NaN
  value_.fetch_add(delta, std::memory_order_relaxed);
}

void Gauge::SetCallback(std::function<double()> callback) {
  std::lock_guard lock(mu_);
  callback_ =
      callback ? std::make_shared<const std::function<double()>>(std::move(callback)) : nullptr;
}

double Gauge::Value() const {
  std::shared_ptr<const std::function<double()>> cb;
  {
    std::lock_guard lock(mu_);
    cb = callback_;
  }
  if (!cb) return value_.load(std::memory_order_relaxed);
  try {
    return (*cb)();
  } catch (...) {
    return std::nan("");
  }
}

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  std::erase_if(bounds_, [](double b) { return !std::isfinite(b); });
  std::sort(bounds_.begin(), bounds_.end());
  bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
  counts_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0);
}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Collect() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative_counts.push_back(running);
  }
  // _count is derived from the buckets so a scrape is always self-consistent.
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> DefaultLatencyBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

struct MetricsRegistry::Family {
  std::string name;
  std::string help;
  Type type;
  std::vector<double> buckets;
  std::map<MetricLabels, std::unique_ptr<Counter>> counters;
  std::map<MetricLabels, std::unique_ptr<Gauge>> gauges;
  std::map<MetricLabels, std::unique_ptr<Histogram>> histograms;
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Family* MetricsRegistry::FindOrCreate(std::string_view name, std::string_view help,
                                                       Type type,
                                                       const std::vector<double>* buckets) {
  if (!IsMetricName(name)) {
    spdlog::error("metrics: invalid metric name '{}'", name);
    return nullptr;
  }
  auto it = families_.find(name);
  if (it != families_.end()) {
    if (it->second->type != type) {
      spdlog::error("metrics: '{}' is already registered with another type", name);
      return nullptr;
    }
    return it->second.get();
  }
  auto family = std::make_unique<Family>();
  family->name = std::string(name);
  family->help = std::string(help);
  family->type = type;
  if (buckets != nullptr) family->buckets = *buckets;
  Family* raw = family.get();
  families_.emplace(std::string(name), std::move(family));
  return raw;
}

Counter& MetricsRegistry::GetCounter(std::string_view name, std::string_view help,
                                     const MetricLabels& labels) {
  std::lock_guard lock(mu_);
  MetricLabels key;
  Family* f = FindOrCreate(name, help, Type::kCounter, nullptr);
  if (f == nullptr || !NormalizeLabels(labels, false, &key)) {
    if (f != nullptr) spdlog::error("metrics: invalid labels for '{}'", name);
    return detached_counter_;
  }
  auto& slot = f->counters[key];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& MetricsRegistry::GetGauge(std::string_view name, std::string_view help,
                                 const MetricLabels& labels) {
  std::lock_guard lock(mu_);
  MetricLabels key;
  Family* f = FindOrCreate(name, help, Type::kGauge, nullptr);
  if (f == nullptr || !NormalizeLabels(labels, false, &key)) {
    if (f != nullptr) spdlog::error("metrics: invalid labels for '{}'", name);
    return detached_gauge_;
  }
  auto& slot = f->gauges[key];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& MetricsRegistry::GetHistogram(std::string_view name, std::string_view help,
                                         const std::vector<double>& upper_bounds,
                                         const MetricLabels& labels) {
  std::lock_guard lock(mu_);
  MetricLabels key;
  Family* f = FindOrCreate(name, help, Type::kHistogram, &upper_bounds);
  if (f == nullptr || !NormalizeLabels(labels, true, &key)) {
    if (f != nullptr) spdlog::error("metrics: invalid labels for '{}'", name);
    return detached_histogram_;
  }
  auto& slot = f->histograms[key];
  if (!slot) slot = std::make_unique<Histogram>(f->buckets);
  return *slot;
}

std::string MetricsRegistry::Render() const {
  // Collect pointers under the lock, read values after it: series are never removed, and a
  // gauge callback may itself take locks (or even register metrics) without deadlocking.
  struct Series {
    const MetricLabels* labels;
    const Counter* counter = nullptr;
    const Gauge* gauge = nullptr;
    const Histogram* histogram = nullptr;
  };
  struct Snapshot {
    const Family* family;
    std::vector<Series> series;
  };
  std::vector<Snapshot> snapshot;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, family] : families_) {
      Snapshot s{family.get(), {}};
      for (const auto& [labels, c] : family->counters) s.series.push_back({&labels, c.get()});
      for (const auto& [labels, g] : family->gauges) {
        s.series.push_back({&labels, nullptr, g.get()});
      }
      for (const auto& [labels, h] : family->histograms) {
        s.series.push_back({&labels, nullptr, nullptr, h.get()});
      }
      snapshot.push_back(std::move(s));
    }
  }
  std::string out;
  for (const Snapshot& s : snapshot) {
    const Family& f = *s.family;
    const char* type = f.type == Type::kCounter ? "counter"
                       : f.type == Type::kGauge ? "gauge"
                                                : "histogram";
    out += "# HELP " + f.name + " " + EscapeHelp(f.help) + "\n";
    out += "# TYPE " + f.name + " " + type + "\n";
    for (const Series& series : s.series) {
      if (series.counter != nullptr) {
        out += f.name + FormatLabels(*series.labels) + " " + FormatValue(series.counter->Value()) +
               "\n";
      } else if (series.gauge != nullptr) {
        out +=
            f.name + FormatLabels(*series.labels) + " " + FormatValue(series.gauge->Value()) + "\n";
      } else {
        Histogram::Snapshot h = series.histogram->Collect();
        for (size_t i = 0; i < h.cumulative_counts.size(); ++i) {
          std::string le = i < h.upper_bounds.size() ? FormatValue(h.upper_bounds[i]) : "+Inf";
          out += f.name + "_bucket" + FormatLabels(*series.labels, "le", le) + " " +
                 std::to_string(h.cumulative_counts[i]) + "\n";
        }
        out += f.name + "_sum" + FormatLabels(*series.labels) + " " + FormatValue(h.sum) + "\n";
        out +=
            f.name + "_count" + FormatLabels(*series.labels) + " " + std::to_string(h.count) + "\n";
      }
    }
  }
  return out;
}

}  // namespace paddock::api
