#include "common/config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/random.h"

#ifndef PADDOCK_SOURCE_DIR
#error "PADDOCK_SOURCE_DIR must name the source tree (set in CMakeLists.txt)"
#endif

namespace paddock {
namespace {

using std::chrono::milliseconds;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

const std::string kShippedConfig = std::string(PADDOCK_SOURCE_DIR) + "/config/paddock.yaml";

// The message of a config that must fail, or a failure marker when it parsed.
std::string ErrorOf(const std::string& yaml) {
  auto r = ParseConfig(yaml);
  if (r.ok()) return "<parsed OK>";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  return r.status().message();
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool AnyNoteContains(const std::vector<std::string>& notes, const std::string& needle) {
  return std::any_of(notes.begin(), notes.end(),
                     [&](const std::string& n) { return n.find(needle) != std::string::npos; });
}

TEST(ConfigTest, DefaultsMatchTheDocumentedValues) {
  PaddockConfig c = DefaultConfig();
  EXPECT_EQ(c.server.listen_address, "127.0.0.1");
  EXPECT_EQ(c.server.port, 8780);
  EXPECT_EQ(c.server.max_body_bytes, 1 * kMiB);
  EXPECT_EQ(c.server.max_upload_bytes, 256 * kMiB);
  EXPECT_EQ(c.server.read_timeout, milliseconds(10'000));
  EXPECT_EQ(c.server.max_connections, 256u);
  EXPECT_EQ(c.data_dir, "/var/lib/paddock");
  EXPECT_EQ(c.state_dir, "/run/paddock");

  ASSERT_EQ(c.resource_classes.size(), 5u);
  const ResourceClass* small = c.FindClass("python-small");
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->cpus, 1.0);
  EXPECT_EQ(small->memory_bytes, 2 * kGiB);
  EXPECT_EQ(small->disk_bytes, 10 * kGiB);
  EXPECT_EQ(small->pids, 512u);
  EXPECT_EQ(small->tmp_bytes, 256 * kMiB);
  EXPECT_EQ(small->template_name, "host");
  EXPECT_EQ(small->runtime, "native");
  EXPECT_EQ(small->security_level, "standard");
  const ResourceClass* large = c.FindClass("compute-large");
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(large->cpus, 8.0);
  EXPECT_EQ(large->memory_bytes, 16 * kGiB);
  EXPECT_EQ(large->disk_bytes, 50 * kGiB);
  for (const char* name : {"python-medium", "build-medium", "browser-medium"}) {
    EXPECT_NE(c.FindClass(name), nullptr) << name;
  }
  EXPECT_EQ(c.FindClass("nope"), nullptr);

  ASSERT_EQ(c.pools.size(), 5u);
  EXPECT_EQ(c.pools[0], (PoolConfig{"python-small", 2, 20, 2}));
  EXPECT_EQ(c.pools[1], (PoolConfig{"python-medium", 1, 10, 1}));
  for (size_t i = 2; i < c.pools.size(); ++i) {
    EXPECT_EQ(c.pools[i].min + c.pools[i].max + c.pools[i].buffer, 0u) << c.pools[i].class_name;
  }

  EXPECT_EQ(c.lifecycle.default_ttl, milliseconds(3'600'000));
  EXPECT_EQ(c.lifecycle.default_idle_timeout, milliseconds(600'000));
  EXPECT_EQ(c.lifecycle.expiry_action, ExpiryAction::kDestroy);
  EXPECT_EQ(c.lifecycle.reconcile_interval, milliseconds(10'000));
  EXPECT_EQ(c.leases.default_ttl, milliseconds(60'000));
  EXPECT_EQ(c.leases.max_ttl, milliseconds(3'600'000));
  EXPECT_EQ(c.exec.default_timeout, milliseconds(300'000));
  EXPECT_EQ(c.exec.max_timeout, milliseconds(3'600'000));
  EXPECT_EQ(c.exec.output_cap_bytes, 16 * kMiB);
  EXPECT_FALSE(c.registry.fsync_lifecycle);
  EXPECT_STREQ(ExpiryActionName(ExpiryAction::kPause), "pause");
}

TEST(ConfigTest, ShippedFileParsesToTheDefaults) {
  auto loaded = LoadConfigFile(kShippedConfig);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(*loaded == DefaultConfig());
  // And the comparison is not vacuous.
  PaddockConfig changed = *loaded;
  changed.pools[4].max = 1;
  EXPECT_FALSE(changed == DefaultConfig());
}

TEST(ConfigTest, EmptyDocumentIsTheDefaults) {
  for (const char* yaml : {"", "# only a comment\n", "---\n"}) {
    auto r = ParseConfig(yaml);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(*r == DefaultConfig()) << yaml;
  }
}

TEST(ConfigTest, GivenKeysOverrideAndTheRestKeepDefaults) {
  auto r = ParseConfig(R"(
server:
  port: 9000
  listen_address: "::1"
lifecycle:
  expiry_action: pause
  default_idle_timeout: 90s
exec:
  output_cap: 1M
registry:
  fsync_lifecycle: true
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->server.port, 9000);
  EXPECT_EQ(r->server.listen_address, "::1");
  EXPECT_EQ(r->server.max_connections, 256u);
  EXPECT_EQ(r->lifecycle.expiry_action, ExpiryAction::kPause);
  EXPECT_EQ(r->lifecycle.default_idle_timeout, milliseconds(90'000));
  EXPECT_EQ(r->lifecycle.default_ttl, milliseconds(3'600'000));
  EXPECT_EQ(r->exec.output_cap_bytes, 1 * kMiB);
  EXPECT_TRUE(r->registry.fsync_lifecycle);
  EXPECT_EQ(r->resource_classes, DefaultConfig().resource_classes);
  EXPECT_EQ(r->pools, DefaultConfig().pools);
}

TEST(ConfigTest, GivenClassesReplaceTheDefaultsAndTheirPools) {
  auto r = ParseConfig(R"(
resource_classes:
  - {name: tiny, cpus: 0.5, memory: 256M, disk: 1G, pids: 64, tmp: 16M, template: py-3.12,
     security_level: strict}
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->resource_classes.size(), 1u);
  const ResourceClass& tiny = r->resource_classes[0];
  EXPECT_EQ(tiny.name, "tiny");
  EXPECT_EQ(tiny.cpus, 0.5);
  EXPECT_EQ(tiny.memory_bytes, 256 * kMiB);
  EXPECT_EQ(tiny.disk_bytes, 1 * kGiB);
  EXPECT_EQ(tiny.pids, 64u);
  EXPECT_EQ(tiny.tmp_bytes, 16 * kMiB);
  EXPECT_EQ(tiny.template_name, "py-3.12");
  EXPECT_EQ(tiny.runtime, "native");
  EXPECT_EQ(tiny.security_level, "strict");
  EXPECT_TRUE(r->pools.empty());

  auto with_pool = ParseConfig(R"(
resource_classes: [{name: tiny, cpus: 1, memory: 1G, disk: 1G}]
pools: [{class: tiny, max: 3}]
)");
  ASSERT_TRUE(with_pool.ok()) << with_pool.status().ToString();
  EXPECT_EQ(with_pool->pools, (std::vector<PoolConfig>{{"tiny", 0, 3, 0}}));
}

TEST(ConfigTest, UnknownKeysAreRejectedWithTheirPath) {
  EXPECT_EQ(ErrorOf("pools:\n  - {class: python-small, max: 3}\n"
                    "  - {class: python-medium, max: 3, bufer: 1}\n"),
            "pools[1].bufer: unknown key");
  EXPECT_EQ(ErrorOf("serverr: {port: 1}\n"), "serverr: unknown key");
  EXPECT_EQ(ErrorOf("server: {prot: 1}\n"), "server.prot: unknown key");
  EXPECT_EQ(ErrorOf("resource_classes:\n"
                    "  - {name: a, cpus: 1, memory: 1G, disk: 1G}\n"
                    "  - {name: b, cpu: 1, memory: 1G, disk: 1G}\n"),
            "resource_classes[1].cpu: unknown key");
  EXPECT_EQ(ErrorOf("lifecycle: {default_tll: 1h}\n"), "lifecycle.default_tll: unknown key");
  EXPECT_EQ(ErrorOf("leases: {ttl: 1h}\n"), "leases.ttl: unknown key");
  EXPECT_EQ(ErrorOf("exec: {output_cap_bytes: 1M}\n"), "exec.output_cap_bytes: unknown key");
}

TEST(ConfigTest, DuplicateKeysAreRejected) {
  EXPECT_EQ(ErrorOf("server:\n  port: 1\n  port: 2\n"), "server.port: duplicate key");
}

TEST(ConfigTest, BadValuesNameTheFieldPath) {
  const std::string three_classes =
      "resource_classes:\n"
      "  - {name: a, cpus: 1, memory: 1G, disk: 1G}\n"
      "  - {name: b, cpus: 1, memory: 1G, disk: 1G}\n";
  struct Case {
    std::string yaml;
    std::string expected_prefix;
  };
  const std::vector<Case> cases = {
      // Sizes and durations.
      {three_classes + "  - {name: c, cpus: 1, memory: 2XB, disk: 1G}\n",
       "resource_classes[2].memory: '2XB' is not a size"},
      {three_classes + "  - {name: c, cpus: 1, memory: 0, disk: 1G}\n",
       "resource_classes[2].memory: must be greater than 0"},
      {"exec: {output_cap: -5M}\n", "exec.output_cap: '-5M' is not a size"},
      {"lifecycle: {default_ttl: soon}\n", "lifecycle.default_ttl: 'soon' is not a duration"},
      {"lifecycle: {reconcile_interval: 10d}\n", "lifecycle.reconcile_interval: unknown unit"},
      {"leases: {default_ttl: 0s}\n", "leases.default_ttl: must be greater than 0"},
      {"server: {read_timeout: -1s}\n", "server.read_timeout: '-1s' is not a duration"},
      // Numbers.
      {"pools: [{class: python-small, min: -1, max: 2}]\n",
       "pools[0].min: '-1' is not a non-negative integer"},
      {"pools: [{class: python-small, max: 2.5}]\n",
       "pools[0].max: '2.5' is not a non-negative integer"},
      {three_classes + "  - {name: c, cpus: -2, memory: 1G, disk: 1G}\n",
       "resource_classes[2].cpus: must be greater than 0"},
      {three_classes + "  - {name: c, cpus: 0, memory: 1G, disk: 1G}\n",
       "resource_classes[2].cpus: must be greater than 0"},
      {three_classes + "  - {name: c, cpus: lots, memory: 1G, disk: 1G}\n",
       "resource_classes[2].cpus: 'lots' is not a number"},
      {three_classes + "  - {name: c, cpus: 0x10, memory: 1G, disk: 1G}\n",
       "resource_classes[2].cpus: '0x10' is not a number"},
      {three_classes + "  - {name: c, cpus: 1, memory: 1G, disk: 1G, pids: 0}\n",
       "resource_classes[2].pids: must be at least 1"},
      {"server: {port: 70000}\n", "server.port: 70000 is too large"},
      {"server: {port: 0}\n", "server.port: must be at least 1"},
      {"server: {port: http}\n", "server.port: 'http' is not a non-negative integer"},
      {"server: {port: 99999999999999999999999}\n", "server.port: 99999999999999999999999 is too"},
      // Wrong shapes and missing values.
      {"server: [1, 2]\n", "server: expected a mapping"},
      {"server:\n", "server: expected a mapping"},
      {"- 1\n", "config: expected a mapping"},
      {"resource_classes: {name: a}\n", "resource_classes: expected a list"},
      {"pools: [python-small]\n", "pools[0]: expected a mapping"},
      {"server: {port: }\n", "server.port: missing value"},
      {"server: {port: [1]}\n", "server.port: expected a single value"},
      {"resource_classes: [{name: a, cpus: 1, memory: 1G}]\n",
       "resource_classes[0].disk: required"},
      {"pools: [{min: 1, max: 2}]\n", "pools[0].class: required"},
      // Names, addresses, paths, enums.
      {"resource_classes: [{name: Big Box, cpus: 1, memory: 1G, disk: 1G}]\n",
       "resource_classes[0].name: 'Big Box' is not a valid name"},
      {"resource_classes: [{name: a, cpus: 1, memory: 1G, disk: 1G, runtime: gvisor}]\n",
       "resource_classes[0].runtime: 'gvisor' is not a supported runtime"},
      {"resource_classes: [{name: a, cpus: 1, memory: 1G, disk: 1G, template: ../etc}]\n",
       "resource_classes[0].template: '../etc' is not a valid name"},
      {"server: {listen_address: localhost}\n",
       "server.listen_address: 'localhost' is not an IPv4 or IPv6 address"},
      {"data_dir: var/lib/paddock\n", "data_dir: 'var/lib/paddock' is not an absolute path"},
      {"state_dir: ''\n", "state_dir: must not be empty"},
      {"lifecycle: {expiry_action: hibernate}\n",
       "lifecycle.expiry_action: 'hibernate' is not one of destroy, pause"},
      {"registry: {fsync_lifecycle: yes}\n",
       "registry.fsync_lifecycle: 'yes' is not true or false"},
      {"registry: {fsync: true}\n", "registry.fsync: unknown key"},
      // Cross-field rules.
      {"pools: [{class: python-small, min: 5, max: 2}]\n", "pools[0].min: 5 is greater than max 2"},
      {"pools: [{class: python-small, max: 2, buffer: 3}]\n",
       "pools[0].buffer: 3 is greater than max 2"},
      {"pools: [{class: python-small, max: 2}, {class: gpu-huge, max: 1}]\n",
       "pools[1].class: unknown resource class 'gpu-huge'"},
      {"pools: [{class: python-small, max: 2}, {class: python-small, max: 1}]\n",
       "pools[1].class: a pool for 'python-small' is already defined"},
      {three_classes + "  - {name: a, cpus: 1, memory: 1G, disk: 1G}\n",
       "resource_classes[2].name: duplicate class 'a'"},
      {"leases: {default_ttl: 2h}\n", "leases.default_ttl: longer than leases.max_ttl"},
      {"exec: {default_timeout: 1h, max_timeout: 30m}\n",
       "exec.default_timeout: longer than exec.max_timeout"},
      // Not YAML at all.
      {"server: {port: 1\n", "yaml: line "},
  };
  for (const Case& c : cases) {
    std::string message = ErrorOf(c.yaml);
    EXPECT_TRUE(StartsWith(message, c.expected_prefix))
        << "yaml:\n"
        << c.yaml << "message:  " << message << "\nexpected: " << c.expected_prefix << "...";
  }
}

TEST(ConfigTest, LoadConfigFileReportsThePath) {
  auto missing = LoadConfigFile("/nonexistent/paddock.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/paddock.yaml"), std::string::npos);

  std::string path = ::testing::TempDir() + "paddock-config-" + RandomHex(6) + ".yaml";
  {
    std::ofstream out(path);
    out << "pools:\n  - {class: python-small, max: 2, bufer: 1}\n";
  }
  auto bad = LoadConfigFile(path);
  std::remove(path.c_str());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), path + ": pools[0].bufer: unknown key");
}

TEST(ConfigTest, ScaleToHostShrinksClassesAndPoolsOnASmallHost) {
  PaddockConfig c = DefaultConfig();
  std::vector<std::string> notes = ScaleToHost(c, HostCapacity{2, 4 * kGiB});

  // compute-large (8 CPUs, 16 GiB) is cut to the host's CPUs and 75% of its memory.
  const ResourceClass* large = c.FindClass("compute-large");
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(large->cpus, 2.0);
  EXPECT_EQ(large->memory_bytes, 3 * kGiB);
  EXPECT_EQ(large->disk_bytes, 50 * kGiB);  // disk is not a host-memory question
  EXPECT_TRUE(AnyNoteContains(notes, "resource class compute-large: cpus 8 -> 2"));
  EXPECT_TRUE(AnyNoteContains(notes, "resource class compute-large: memory 16GiB -> 3GiB"));

  // python-small already fits and is left alone; python-medium's 4 GiB exceeds 75%.
  const ResourceClass* small = c.FindClass("python-small");
  EXPECT_EQ(small->cpus, 1.0);
  EXPECT_EQ(small->memory_bytes, 2 * kGiB);
  EXPECT_FALSE(AnyNoteContains(notes, "resource class python-small"));
  EXPECT_EQ(c.FindClass("python-medium")->memory_bytes, 3 * kGiB);
  EXPECT_EQ(c.FindClass("python-medium")->cpus, 2.0);
  EXPECT_FALSE(AnyNoteContains(notes, "resource class python-medium: cpus"));

  // Warm pools get 2 GiB (half the host): one python-small (2 GiB); python-medium (3 GiB) does
  // not fit beside it.
  ASSERT_EQ(c.pools[0].class_name, "python-small");
  ASSERT_EQ(c.pools[1].class_name, "python-medium");
  EXPECT_EQ(c.pools[0].min, 1u);
  EXPECT_EQ(c.pools[1].min, 0u);
  EXPECT_EQ(c.pools[0].buffer, 1u);
  EXPECT_EQ(c.pools[1].buffer, 0u);
  EXPECT_TRUE(AnyNoteContains(notes, "pool python-small: min 2 -> 1"));
  EXPECT_TRUE(AnyNoteContains(notes, "pool python-medium: min 1 -> 0"));
  uint64_t warm = 0;
  for (const PoolConfig& p : c.pools) {
    warm += p.min * c.FindClass(p.class_name)->memory_bytes;
    EXPECT_LE(p.min, p.max) << p.class_name;
    EXPECT_LE(p.buffer, p.max) << p.class_name;
  }
  EXPECT_LE(warm, 2 * kGiB);

  // Scaling is idempotent: a second pass has nothing left to change.
  EXPECT_TRUE(ScaleToHost(c, HostCapacity{2, 4 * kGiB}).empty());
}

TEST(ConfigTest, ScaleToHostSharesTheWarmBudgetRoundRobin) {
  auto r = ParseConfig(R"(
resource_classes:
  - {name: a, cpus: 1, memory: 1G, disk: 1G}
  - {name: b, cpus: 1, memory: 1G, disk: 1G}
pools:
  - {class: a, min: 10, max: 10}
  - {class: b, min: 10, max: 10}
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto notes = ScaleToHost(*r, HostCapacity{16, 10 * kGiB});  // 5 GiB for warm sandboxes
  EXPECT_EQ(r->pools[0].min, 3u);
  EXPECT_EQ(r->pools[1].min, 2u);
  EXPECT_EQ(notes.size(), 2u);
}

TEST(ConfigTest, ScaleToHostLeavesABigHostAlone) {
  PaddockConfig c = DefaultConfig();
  EXPECT_TRUE(ScaleToHost(c, HostCapacity{64, 256 * kGiB}).empty());
  EXPECT_TRUE(c == DefaultConfig());
  // Unknown capacity (zeros) changes nothing either.
  EXPECT_TRUE(ScaleToHost(c, HostCapacity{}).empty());
  EXPECT_TRUE(c == DefaultConfig());
}

TEST(ConfigTest, DetectHostSeesThisMachine) {
  HostCapacity host = DetectHost();
  EXPECT_GE(host.cpus, 1.0);
  EXPECT_GT(host.memory_bytes, 64 * kMiB);
}

}  // namespace
}  // namespace paddock
