// A tiny Prometheus registry: counters, gauges (set or computed at scrape) and fixed-bucket
// histograms, rendered in the text exposition format 0.0.4. Metric objects live as long as the
// registry and may be cached by callers; every operation is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace paddock::api {

// Label name/value pairs; order does not matter (series are keyed by the sorted set).
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  // Adds delta; negative or NaN deltas are ignored (a counter only goes up).
  void Inc(double delta = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Inc(double delta = 1.0) { value_.fetch_add(delta, std::memory_order_relaxed); }
  void Dec(double delta = 1.0) { value_.fetch_sub(delta, std::memory_order_relaxed); }
  // Computes the value at scrape time instead (nullptr reverts to the stored value). The
  // callback runs on the scraping thread without registry locks held; everything it captures
  // must outlive the registry or be cleared first. An exception in it renders NaN.
  void SetCallback(std::function<double()> callback);
  // The callback's result when one is set, else the stored value.
  double Value() const;

 private:
  std::atomic<double> value_{0.0};
  mutable std::mutex mu_;
  std::shared_ptr<const std::function<double()>> callback_;
};

class Histogram {
 public:
  // `upper_bounds` is sorted and de-duplicated; +Inf is implicit.
  explicit Histogram(std::vector<double> upper_bounds);
  // Counts `value` into the first bucket whose bound is >= value. NaN is ignored.
  void Observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;         // finite bounds
    std::vector<uint64_t> cumulative_counts;  // one per bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Collect() const;
  const std::vector<double>& upper_bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0.0};
};

// 5 ms .. 10 s, the usual latency buckets.
std::vector<double> DefaultLatencyBuckets();

// Escapes a label value for the exposition format: backslash, double quote and newline.
std::string EscapeLabelValue(std::string_view value);

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // The series `name{labels}`, created on first use (the first call's help text wins). A bad
  // metric or label name, or a name already used by another type, is a programming error: it
  // is logged and a shared detached metric, never rendered, is returned.
  Counter& GetCounter(std::string_view name, std::string_view help,
                      const MetricLabels& labels = {});
  Gauge& GetGauge(std::string_view name, std::string_view help, const MetricLabels& labels = {});
  // The first registration of `name` fixes the buckets for all its series.
  Histogram& GetHistogram(std::string_view name, std::string_view help,
                          const std::vector<double>& upper_bounds, const MetricLabels& labels = {});

  // Every family (sorted by name) with # HELP and # TYPE lines, in text format 0.0.4.
  std::string Render() const;

 private:
  struct Family;
  enum class Type { kCounter, kGauge, kHistogram };
  // The family for name/type, or nullptr (logged) when the name is invalid or taken.
  Family* FindOrCreate(std::string_view name, std::string_view help, Type type,
                       const std::vector<double>* buckets);

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Family>, std::less<>> families_;
  // Handed out on misuse (shared: a bug repeated per request must not leak memory).
  Counter detached_counter_;
  Gauge detached_gauge_;
  Histogram detached_histogram_{std::vector<double>{}};
};

}  // namespace paddock::api
