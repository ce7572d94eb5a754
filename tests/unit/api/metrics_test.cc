#include "api/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace paddock::api {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped
  std::string value;
};

// A strict parser for one sample line of the text format; nullopt when malformed.
std::optional<Sample> ParseSample(const std::string& line) {
  Sample s;
  size_t i = 0;
  auto name_char = [](char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
  };
  while (i < line.size() && name_char(line[i], i == 0)) s.name.push_back(line[i++]);
  if (s.name.empty()) return std::nullopt;
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      std::string key;
      while (i < line.size() && line[i] != '=') key.push_back(line[i++]);
      if (i + 1 >= line.size() || line[i + 1] != '"') return std::nullopt;
      i += 2;
      std::string value;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\') {
          if (++i >= line.size()) return std::nullopt;
          char e = line[i];
          if (e == 'n') {
            value.push_back('\n');
          } else if (e == '\\' || e == '"') {
            value.push_back(e);
          } else {
            return std::nullopt;
          }
        } else if (line[i] == '\n') {
          return std::nullopt;
        } else {
          value.push_back(line[i]);
        }
        ++i;
      }
      if (i >= line.size()) return std::nullopt;
      ++i;  // closing quote
      if (!s.labels.emplace(key, value).second) return std::nullopt;
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return std::nullopt;
    ++i;  // '}'
  }
  if (i >= line.size() || line[i] != ' ') return std::nullopt;
  s.value = line.substr(i + 1);
  if (s.value.empty() || s.value.find(' ') != std::string::npos) return std::nullopt;
  return s;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

double ToDouble(const std::string& v) {
  if (v == "+Inf") return INFINITY;
  if (v == "-Inf") return -INFINITY;
  return std::stod(v);
}

TEST(MetricsTest, RendersCountersAndGaugesWithHelpAndType) {
  MetricsRegistry reg;
  reg.GetCounter("jobs_total", "Jobs run", {{"queue", "a"}}).Inc();
  reg.GetCounter("jobs_total", "ignored help", {{"queue", "a"}}).Inc(2);
  reg.GetCounter("jobs_total", "", {{"queue", "b"}}).Inc(0.5);
  reg.GetCounter("jobs_total", "", {{"queue", "b"}}).Inc(-10);  // ignored
  Gauge& g = reg.GetGauge("temperature", "Current\ntemp \\ C");
  g.Set(20);
  g.Dec(1.5);
  int pool = 7;
  reg.GetGauge("pool_size", "Warm sandboxes", {{"class", "small"}}).SetCallback([&] {
    return static_cast<double>(pool);
  });
  pool = 9;  // the callback reads at scrape time

  std::string text = reg.Render();
  EXPECT_EQ(text,
            "# HELP jobs_total Jobs run\n"
            "# TYPE jobs_total counter\n"
            "jobs_total{queue=\"a\"} 3\n"
            "jobs_total{queue=\"b\"} 0.5\n"
            "# HELP pool_size Warm sandboxes\n"
            "# TYPE pool_size gauge\n"
            "pool_size{class=\"small\"} 9\n"
            "# HELP temperature Current\\ntemp \\\\ C\n"
            "# TYPE temperature gauge\n"
            "temperature 18.5\n");
  for (const std::string& line : Lines(text)) {
    if (line.rfind("# ", 0) == 0) continue;
    EXPECT_TRUE(ParseSample(line).has_value()) << line;
  }
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  MetricsRegistry reg;
  std::string nasty = "quote\" back\\slash new\nline } {a=\"b\"}";
  reg.GetCounter("evil_total", "x", {{"path", nasty}, {"a", "1"}}).Inc();
  std::string text = reg.Render();
  std::vector<std::string> lines = Lines(text);
  ASSERT_EQ(lines.size(), 3u) << text;  // the newline in the value did not split the sample
  auto sample = ParseSample(lines[2]);
  ASSERT_TRUE(sample.has_value()) << lines[2];
  EXPECT_EQ(sample->name, "evil_total");
  EXPECT_EQ(sample->labels.at("path"), nasty);
  EXPECT_EQ(sample->labels.at("a"), "1");
  EXPECT_NE(lines[2].find("a=\"1\",path="), std::string::npos) << "labels sorted by name";
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  MetricsRegistry reg;
  Histogram& h =
      reg.GetHistogram("latency_seconds", "Latency", {1, 0.01, 10, 0.1, 0.1}, {{"route", "/x"}});
  for (double v : {0.001, 0.02, 0.02, 0.3, 7.0, 100.0, 0.1}) h.Observe(v);
  h.Observe(std::nan(""));  // ignored
  std::string text = reg.Render();

  std::vector<std::pair<double, uint64_t>> buckets;
  std::optional<double> sum;
  std::optional<uint64_t> count;
  for (const std::string& line : Lines(text)) {
    if (line.rfind("# ", 0) == 0) continue;
    auto s = ParseSample(line);
    ASSERT_TRUE(s.has_value()) << line;
    EXPECT_EQ(s->labels.at("route"), "/x");
    if (s->name == "latency_seconds_bucket") {
      buckets.emplace_back(ToDouble(s->labels.at("le")), std::stoull(s->value));
    } else if (s->name == "latency_seconds_sum") {
      sum = ToDouble(s->value);
    } else if (s->name == "latency_seconds_count") {
      count = std::stoull(s->value);
    } else {
      ADD_FAILURE() << "unexpected sample " << line;
    }
  }
  ASSERT_EQ(buckets.size(), 5u) << text;
  std::vector<std::pair<double, uint64_t>> want = {
      {0.01, 1}, {0.1, 4}, {1, 5}, {10, 6}, {INFINITY, 7}};
  EXPECT_EQ(buckets, want);
  for (size_t i = 1; i < buckets.size(); ++i) {
    EXPECT_GT(buckets[i].first, buckets[i - 1].first);
    EXPECT_GE(buckets[i].second, buckets[i - 1].second);
  }
  ASSERT_TRUE(count.has_value());
  EXPECT_EQ(*count, buckets.back().second);
  ASSERT_TRUE(sum.has_value());
  EXPECT_NEAR(*sum, 0.001 + 0.02 + 0.02 + 0.3 + 7 + 100 + 0.1, 1e-9);
  EXPECT_NE(text.find("# TYPE latency_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("latency_seconds_bucket{route=\"/x\",le=\"+Inf\"} 7\n"), std::string::npos);
}

TEST(MetricsTest, MisuseIsDetachedNotRendered) {
  MetricsRegistry reg;
  reg.GetCounter("1bad", "x").Inc();
  reg.GetCounter("ok_total", "x", {{"__reserved", "v"}}).Inc();
  reg.GetCounter("ok_total", "x", {{"a", "1"}, {"a", "2"}}).Inc();
  reg.GetHistogram("h", "x", {1}, {{"le", "1"}}).Observe(1);
  reg.GetGauge("shared", "x").Set(1);
  reg.GetCounter("shared", "x").Inc();  // type clash: detached
  reg.GetGauge("throws", "x").SetCallback([]() -> double { throw std::runtime_error("boom"); });
  std::string text = reg.Render();
  EXPECT_EQ(text.find("1bad"), std::string::npos);
  EXPECT_EQ(text.find("__reserved"), std::string::npos);
  EXPECT_EQ(text.find("ok_total{"), std::string::npos);
  EXPECT_NE(text.find("# TYPE shared gauge\nshared 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("throws NaN\n"), std::string::npos) << text;
}

TEST(MetricsTest, ConcurrentUpdatesAreExact) {
  MetricsRegistry reg;
  constexpr int kThreads = 8;
  constexpr int kIters = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        reg.GetCounter("ops_total", "ops", {{"kind", t % 2 ? "odd" : "even"}}).Inc();
        reg.GetHistogram("lat", "lat", DefaultLatencyBuckets()).Observe(0.003);
        reg.GetGauge("level", "level").Inc();
        if (i % 1000 == 0) (void)reg.Render();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(reg.GetCounter("ops_total", "", {{"kind", "odd"}}).Value(), kThreads / 2 * kIters);
  EXPECT_EQ(reg.GetGauge("level", "").Value(), kThreads * kIters);
  auto snap = reg.GetHistogram("lat", "", {}).Collect();
  EXPECT_EQ(snap.count, static_cast<uint64_t>(kThreads * kIters));
  EXPECT_EQ(snap.cumulative_counts.front(), snap.count);  // all in the 5 ms bucket
}

}  // namespace
}  // namespace paddock::api
