// Statistics shared by the benchmarks: nearest-rank percentiles and a JSON summary of a series.
#pragma once

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

namespace paddock::bench {

// Nearest-rank percentile: the smallest sample such that at least p% of samples are <= it.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}

inline double Mean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

inline nlohmann::json Summary(const std::vector<double>& v) {
  nlohmann::json j;
  j["n"] = v.size();
  j["p50_ms"] = Percentile(v, 50);
  j["p90_ms"] = Percentile(v, 90);
  j["p95_ms"] = Percentile(v, 95);
  j["p99_ms"] = Percentile(v, 99);
  j["min_ms"] = v.empty() ? NAN : *std::min_element(v.begin(), v.end());
  j["max_ms"] = v.empty() ? NAN : *std::max_element(v.begin(), v.end());
  j["mean_ms"] = Mean(v);
  return j;
}

}  // namespace paddock::bench
