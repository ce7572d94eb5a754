#include "common/config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <set>

#include "common/unique_fd.h"
#include "common/units.h"

namespace paddock {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

std::string Child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string Element(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// "2GiB", "1.5GiB", "768MiB", "1000B": for notes about sizes.
std::string FormatSize(uint64_t bytes) {
  if (bytes >= kGiB) {
    if (bytes % kGiB == 0) return fmt::format("{}GiB", bytes / kGiB);
    return fmt::format("{:.1f}GiB", static_cast<double>(bytes) / kGiB);
  }
  if (bytes >= kMiB && bytes % kMiB == 0) return fmt::format("{}MiB", bytes / kMiB);
  return fmt::format("{}B", bytes);
}

// [a-z0-9][a-z0-9._-]{0,62}: class, template and security-level names end up in ids, paths
// and API filters, so they share the template store's rule.
bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  auto lower_or_digit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_or_digit(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return lower_or_digit(c) || c == '.' || c == '_' || c == '-'; });
}

// Reads the keys of one YAML mapping. Check() rejects keys outside `allowed` (in document
// order, so the first typo is the one reported), non-scalar keys and duplicates; the typed
// getters leave their output untouched when the key is absent.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path) : node_(node), path_(std::move(path)) {}

  Status Check(std::initializer_list<std::string_view> allowed) const {
    if (!node_.IsMap()) return InvalidArgument(Where() + ": expected a mapping");
    std::set<std::string> seen;
    for (const auto& kv : node_) {
      if (!kv.first.IsScalar()) return InvalidArgument(Where() + ": keys must be plain strings");
      const std::string& key = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        return InvalidArgument(Child(path_, key) + ": unknown key");
      if (!seen.insert(key).second) return InvalidArgument(Child(path_, key) + ": duplicate key");
    }
    return Status::Ok();
  }

  bool Has(std::string_view key) const { return static_cast<bool>(node_[std::string(key)]); }
  YAML::Node Get(std::string_view key) const { return node_[std::string(key)]; }
  std::string PathOf(std::string_view key) const { return Child(path_, key); }

  Status Required(std::string_view key) const {
    if (!Has(key)) return InvalidArgument(PathOf(key) + ": required");
    return Status::Ok();
  }

  Status String(std::string_view key, std::string* out) const {
    if (!Has(key)) return Status::Ok();
    PADDOCK_ASSIGN_OR_RETURN(*out, Text(key));
    if (out->empty()) return InvalidArgument(PathOf(key) + ": must not be empty");
    return Status::Ok();
  }

  Status Unsigned(std::string_view key, uint64_t max, uint64_t* out) const {
    if (!Has(key)) return Status::Ok();
    PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) ||
        end != text.data() + text.size() || ec == std::errc::invalid_argument) {
      return InvalidArgument(PathOf(key) + ": '" + text + "' is not a non-negative integer");
    }
    if (ec == std::errc::result_out_of_range || v > max) {
      return InvalidArgument(PathOf(key) + ": " + text + " is too large (max " +
                             std::to_string(max) + ")");
    }
    *out = v;
    return Status::Ok();
  }

  template <typename T>
  Status UnsignedAs(std::string_view key, uint64_t min, uint64_t max, T* out) const {
    uint64_t v = *out;
    PADDOCK_RETURN_IF_ERROR(Unsigned(key, max, &v));
    if (Has(key) && v < min) {
      return InvalidArgument(PathOf(key) + ": must be at least " + std::to_string(min));
    }
    *out = static_cast<T>(v);
    return Status::Ok();
  }

  Status Bool(std::string_view key, bool* out) const {
    if (!Has(key)) return Status::Ok();
    PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
    if (text == "true") {
      *out = true;
    } else if (text == "false") {
      *out = false;
    } else {
      return InvalidArgument(PathOf(key) + ": '" + text + "' is not true or false");
    }
    return Status::Ok();
  }

  Status PositiveNumber(std::string_view key, double* out) const {
    if (!Has(key)) return Status::Ok();
    PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
    // Plain decimals only: strtod alone would also take "0x10", "inf" and " 2". A leading '-'
    // is let through so a negative value gets the "greater than 0" message.
    std::string_view digits = text;
    if (!digits.empty() && digits[0] == '-') digits.remove_prefix(1);
    bool decimal = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char ch) {
      return std::isdigit(static_cast<unsigned char>(ch)) || ch == '.';
    });
    char* end = nullptr;
    errno = 0;
    double v = decimal ? std::strtod(text.c_str(), &end) : 0;
    if (!decimal || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v)) {
      return InvalidArgument(PathOf(key) + ": '" + text + "' is not a number");
    }
    if (v <= 0) return InvalidArgument(PathOf(key) + ": must be greater than 0, got " + text);
    *out = v;
    return Status::Ok();
  }

  // Sizes and durations must be positive: a zero limit or timeout is never what was meant.
  Status Size(std::string_view key, uint64_t* out) const {
    if (!Has(key)) return Status::Ok();
    PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
    PADDOCK_ASSIGN_OR_RETURN(uint64_t v, ParseSize(text, PathOf(key)));
    if (v == 0) return InvalidArgument(PathOf(key) + ": must be greater than 0");
    *out = v;
    return Status::Ok();
  }

  Status Duration(std::string_view key, std::chrono::milliseconds* out) const {
    if (!Has(key)) return Status::Ok();
    PADDOCK_ASSIGN_OR_RETURN(std::string text, Text(key));
    PADDOCK_ASSIGN_OR_RETURN(std::chrono::milliseconds v, ParseDuration(text, PathOf(key)));
    if (v.count() <= 0) return InvalidArgument(PathOf(key) + ": must be greater than 0");
    *out = v;
    return Status::Ok();
  }

 private:
  std::string Where() const { return path_.empty() ? "config" : path_; }

  Result<std::string> Text(std::string_view key) const {
    YAML::Node v = Get(key);
    if (v.IsNull()) return InvalidArgument(PathOf(key) + ": missing value");
    if (!v.IsScalar()) return InvalidArgument(PathOf(key) + ": expected a single value");
    return v.Scalar();
  }

  const YAML::Node& node_;
  std::string path_;
};

Status ParseServer(const YAML::Node& node, ServerConfig* s) {
  MapReader r(node, "server");
  PADDOCK_RETURN_IF_ERROR(r.Check({"listen_address", "port", "max_body_bytes", "max_upload_bytes",
                                   "read_timeout", "max_connections"}));
  PADDOCK_RETURN_IF_ERROR(r.String("listen_address", &s->listen_address));
  unsigned char buf[sizeof(struct in6_addr)];
  if (inet_pton(AF_INET, s->listen_address.c_str(), buf) != 1 &&
      inet_pton(AF_INET6, s->listen_address.c_str(), buf) != 1) {
    return InvalidArgument("server.listen_address: '" + s->listen_address +
                           "' is not an IPv4 or IPv6 address");
  }
  PADDOCK_RETURN_IF_ERROR(r.UnsignedAs("port", 1, 65535, &s->port));
  PADDOCK_RETURN_IF_ERROR(r.Size("max_body_bytes", &s->max_body_bytes));
  PADDOCK_RETURN_IF_ERROR(r.Size("max_upload_bytes", &s->max_upload_bytes));
  PADDOCK_RETURN_IF_ERROR(r.Duration("read_timeout", &s->read_timeout));
  PADDOCK_RETURN_IF_ERROR(r.UnsignedAs("max_connections", 1, 1'000'000, &s->max_connections));
  return Status::Ok();
}

Status ParseDirectory(const MapReader& r, std::string_view key, std::string* out) {
  PADDOCK_RETURN_IF_ERROR(r.String(key, out));
  if (out->front() != '/') {
    return InvalidArgument(r.PathOf(key) + ": '" + *out + "' is not an absolute path");
  }
  return Status::Ok();
}

Status ParseClass(const YAML::Node& node, const std::string& path, ResourceClass* c) {
  MapReader r(node, path);
  PADDOCK_RETURN_IF_ERROR(r.Check(
      {"name", "cpus", "memory", "disk", "pids", "tmp", "template", "runtime", "security_level"}));
  for (std::string_view key : {"name", "cpus", "memory", "disk"}) {
    PADDOCK_RETURN_IF_ERROR(r.Required(key));
  }
  PADDOCK_RETURN_IF_ERROR(r.String("name", &c->name));
  if (!ValidName(c->name)) {
    return InvalidArgument(path + ".name: '" + c->name +
                           "' is not a valid name ([a-z0-9][a-z0-9._-]*, at most 63)");
  }
  PADDOCK_RETURN_IF_ERROR(r.PositiveNumber("cpus", &c->cpus));
  PADDOCK_RETURN_IF_ERROR(r.Size("memory", &c->memory_bytes));
  PADDOCK_RETURN_IF_ERROR(r.Size("disk", &c->disk_bytes));
  PADDOCK_RETURN_IF_ERROR(r.UnsignedAs("pids", 1, 4'194'304, &c->pids));
  PADDOCK_RETURN_IF_ERROR(r.Size("tmp", &c->tmp_bytes));
  PADDOCK_RETURN_IF_ERROR(r.String("template", &c->template_name));
  if (!ValidName(c->template_name)) {
    return InvalidArgument(path + ".template: '" + c->template_name + "' is not a valid name");
  }
  PADDOCK_RETURN_IF_ERROR(r.String("runtime", &c->runtime));
  // Only the native runtime exists; naming another here must fail now, not at first create.
  if (c->runtime != "native") {
    return InvalidArgument(path + ".runtime: '" + c->runtime +
                           "' is not a supported runtime (supported: native)");
  }
  PADDOCK_RETURN_IF_ERROR(r.String("security_level", &c->security_level));
  if (!ValidName(c->security_level)) {
    return InvalidArgument(path + ".security_level: '" + c->security_level +
                           "' is not a valid name");
  }
  return Status::Ok();
}

Status ParsePool(const YAML::Node& node, const std::string& path, PoolConfig* p) {
  MapReader r(node, path);
  PADDOCK_RETURN_IF_ERROR(r.Check({"class", "min", "max", "buffer"}));
  PADDOCK_RETURN_IF_ERROR(r.Required("class"));
  PADDOCK_RETURN_IF_ERROR(r.String("class", &p->class_name));
  constexpr uint64_t kMaxPool = 100'000;
  PADDOCK_RETURN_IF_ERROR(r.UnsignedAs("min", 0, kMaxPool, &p->min));
  PADDOCK_RETURN_IF_ERROR(r.UnsignedAs("max", 0, kMaxPool, &p->max));
  PADDOCK_RETURN_IF_ERROR(r.UnsignedAs("buffer", 0, kMaxPool, &p->buffer));
  return Status::Ok();
}

template <typename T>
Status ParseList(const YAML::Node& node, const std::string& path,
                 Status (*parse_one)(const YAML::Node&, const std::string&, T*),
                 std::vector<T>* out) {
  if (!node.IsSequence()) return InvalidArgument(path + ": expected a list");
  out->clear();
  for (size_t i = 0; i < node.size(); ++i) {
    T item;
    PADDOCK_RETURN_IF_ERROR(parse_one(node[i], Element(path, i), &item));
    out->push_back(std::move(item));
  }
  return Status::Ok();
}

Status ParseLifecycle(const YAML::Node& node, LifecycleConfig* l) {
  MapReader r(node, "lifecycle");
  PADDOCK_RETURN_IF_ERROR(
      r.Check({"default_ttl", "default_idle_timeout", "expiry_action", "reconcile_interval"}));
  PADDOCK_RETURN_IF_ERROR(r.Duration("default_ttl", &l->default_ttl));
  PADDOCK_RETURN_IF_ERROR(r.Duration("default_idle_timeout", &l->default_idle_timeout));
  if (r.Has("expiry_action")) {
    std::string action;
    PADDOCK_RETURN_IF_ERROR(r.String("expiry_action", &action));
    if (action == "destroy") {
      l->expiry_action = ExpiryAction::kDestroy;
    } else if (action == "pause") {
      l->expiry_action = ExpiryAction::kPause;
    } else {
      return InvalidArgument("lifecycle.expiry_action: '" + action +
                             "' is not one of destroy, pause");
    }
  }
  PADDOCK_RETURN_IF_ERROR(r.Duration("reconcile_interval", &l->reconcile_interval));
  return Status::Ok();
}

Status ParseLeases(const YAML::Node& node, LeaseConfig* l) {
  MapReader r(node, "leases");
  PADDOCK_RETURN_IF_ERROR(r.Check({"default_ttl", "max_ttl"}));
  PADDOCK_RETURN_IF_ERROR(r.Duration("default_ttl", &l->default_ttl));
  PADDOCK_RETURN_IF_ERROR(r.Duration("max_ttl", &l->max_ttl));
  return Status::Ok();
}

Status ParseRegistry(const YAML::Node& node, RegistryConfig* g) {
  MapReader r(node, "registry");
  PADDOCK_RETURN_IF_ERROR(r.Check({"fsync_lifecycle"}));
  PADDOCK_RETURN_IF_ERROR(r.Bool("fsync_lifecycle", &g->fsync_lifecycle));
  return Status::Ok();
}

Status ParseExec(const YAML::Node& node, ExecConfig* e) {
  MapReader r(node, "exec");
  PADDOCK_RETURN_IF_ERROR(r.Check({"default_timeout", "max_timeout", "output_cap"}));
  PADDOCK_RETURN_IF_ERROR(r.Duration("default_timeout", &e->default_timeout));
  PADDOCK_RETURN_IF_ERROR(r.Duration("max_timeout", &e->max_timeout));
  PADDOCK_RETURN_IF_ERROR(r.Size("output_cap", &e->output_cap_bytes));
  return Status::Ok();
}

// Checks that span sections: unique class names, pools that name a known class once, limits
// ordered. Runs after each section parsed on its own.
Status Validate(const PaddockConfig& c) {
  std::set<std::string> classes;
  for (size_t i = 0; i < c.resource_classes.size(); ++i) {
    if (!classes.insert(c.resource_classes[i].name).second) {
      return InvalidArgument(Element("resource_classes", i) + ".name: duplicate class '" +
                             c.resource_classes[i].name + "'");
    }
  }
  std::set<std::string> pooled;
  for (size_t i = 0; i < c.pools.size(); ++i) {
    const PoolConfig& p = c.pools[i];
    std::string path = Element("pools", i);
    if (!classes.count(p.class_name)) {
      return InvalidArgument(path + ".class: unknown resource class '" + p.class_name + "'");
    }
    if (!pooled.insert(p.class_name).second) {
      return InvalidArgument(path + ".class: a pool for '" + p.class_name +
                             "' is already defined (one pool per class)");
    }
    if (p.min > p.max) {
      return InvalidArgument(fmt::format("{}.min: {} is greater than max {}", path, p.min, p.max));
    }
    if (p.buffer > p.max) {
      return InvalidArgument(
          fmt::format("{}.buffer: {} is greater than max {}", path, p.buffer, p.max));
    }
  }
  if (c.leases.default_ttl > c.leases.max_ttl) {
    return InvalidArgument("leases.default_ttl: longer than leases.max_ttl");
  }
  if (c.exec.default_timeout > c.exec.max_timeout) {
    return InvalidArgument("exec.default_timeout: longer than exec.max_timeout");
  }
  return Status::Ok();
}

Result<PaddockConfig> ParseRoot(const YAML::Node& root) {
  PaddockConfig c = DefaultConfig();
  if (root.IsNull()) return c;  // an empty file: all defaults
  MapReader r(root, "");
  PADDOCK_RETURN_IF_ERROR(r.Check({"server", "data_dir", "state_dir", "resource_classes", "pools",
                                   "lifecycle", "leases", "exec", "registry", "planner_config"}));
  if (r.Has("server")) PADDOCK_RETURN_IF_ERROR(ParseServer(r.Get("server"), &c.server));
  PADDOCK_RETURN_IF_ERROR(ParseDirectory(r, "data_dir", &c.data_dir));
  PADDOCK_RETURN_IF_ERROR(ParseDirectory(r, "state_dir", &c.state_dir));
  if (r.Has("resource_classes")) {
    PADDOCK_RETURN_IF_ERROR(ParseList<ResourceClass>(r.Get("resource_classes"), "resource_classes",
                                                     ParseClass, &c.resource_classes));
    c.pools.clear();  // the default pools belong to the default classes
  }
  if (r.Has("pools")) {
    PADDOCK_RETURN_IF_ERROR(ParseList<PoolConfig>(r.Get("pools"), "pools", ParsePool, &c.pools));
  }
  if (r.Has("lifecycle")) PADDOCK_RETURN_IF_ERROR(ParseLifecycle(r.Get("lifecycle"), &c.lifecycle));
  if (r.Has("leases")) PADDOCK_RETURN_IF_ERROR(ParseLeases(r.Get("leases"), &c.leases));
  if (r.Has("exec")) PADDOCK_RETURN_IF_ERROR(ParseExec(r.Get("exec"), &c.exec));
  if (r.Has("registry")) PADDOCK_RETURN_IF_ERROR(ParseRegistry(r.Get("registry"), &c.registry));
  if (r.Has("planner_config"))
    PADDOCK_RETURN_IF_ERROR(ParseDirectory(r, "planner_config", &c.planner_config));
  PADDOCK_RETURN_IF_ERROR(Validate(c));
  return c;
}

ResourceClass Class(std::string name, double cpus, uint64_t memory_gib, uint64_t disk_gib) {
  ResourceClass c;
  c.name = std::move(name);
  c.cpus = cpus;
  c.memory_bytes = memory_gib * kGiB;
  c.disk_bytes = disk_gib * kGiB;
  return c;
}

}  // namespace

const char* ExpiryActionName(ExpiryAction action) {
  return action == ExpiryAction::kPause ? "pause" : "destroy";
}

const ResourceClass* PaddockConfig::FindClass(std::string_view name) const {
  for (const ResourceClass& c : resource_classes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

PaddockConfig DefaultConfig() {
  PaddockConfig c;
  c.resource_classes = {
      Class("python-small", 1, 2, 10),   Class("python-medium", 2, 4, 20),
      Class("build-medium", 4, 8, 30),   Class("browser-medium", 4, 8, 30),
      Class("compute-large", 8, 16, 50),
  };
  c.pools = {
      {"python-small", 2, 20, 2},  {"python-medium", 1, 10, 1}, {"build-medium", 0, 0, 0},
      {"browser-medium", 0, 0, 0}, {"compute-large", 0, 0, 0},
  };
  return c;
}

Result<PaddockConfig> ParseConfig(std::string_view yaml) {
  // yaml-cpp reports errors by exception; they stop here.
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return ParseRoot(root);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return InvalidArgument("yaml: " + e.msg);
    return InvalidArgument(
        fmt::format("yaml: line {}, column {}: {}", e.mark.line + 1, e.mark.column + 1, e.msg));
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("yaml: ") + e.what());
  }
}

Result<PaddockConfig> LoadConfigFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open config " + path);
  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read config " + path);
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    // A configuration is a few KiB; a huge file is a mistake (or /dev/zero), not a config.
    if (text.size() > (16u << 20)) return InvalidArgument(path + ": larger than 16 MiB");
  }
  Result<PaddockConfig> config = ParseConfig(text);
  if (!config.ok()) {
    return Status(config.status().code(), path + ": " + config.status().message());
  }
  return config;
}

HostCapacity DetectHost() {
  HostCapacity host;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) host.cpus = CPU_COUNT(&set);
  if (host.cpus <= 0) host.cpus = static_cast<double>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));

  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemTotal:") {
      host.memory_bytes = kib * 1024;
      break;
    }
  }
  if (host.memory_bytes == 0) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) host.memory_bytes = static_cast<uint64_t>(pages) * page;
  }
  return host;
}

std::vector<std::string> ScaleToHost(PaddockConfig& config, const HostCapacity& host) {
  std::vector<std::string> notes;

  for (ResourceClass& c : config.resource_classes) {
    if (host.cpus > 0 && c.cpus > host.cpus) {
      notes.push_back(fmt::format("resource class {}: cpus {} -> {} (the host has {} CPUs)", c.name,
                                  c.cpus, host.cpus, host.cpus));
      c.cpus = host.cpus;
    }
    // Rounded down to whole MiB so the limit reads well in logs and cgroup files.
    uint64_t memory_cap = host.memory_bytes / 4 * 3 / kMiB * kMiB;
    if (memory_cap > 0 && c.memory_bytes > memory_cap) {
      notes.push_back(fmt::format("resource class {}: memory {} -> {} (75% of the host's {})",
                                  c.name, FormatSize(c.memory_bytes), FormatSize(memory_cap),
                                  FormatSize(host.memory_bytes)));
      c.memory_bytes = memory_cap;
    }
  }

  uint64_t budget = host.memory_bytes / 2;
  if (budget == 0) return notes;
  std::vector<uint64_t> memory(config.pools.size(), 0);
  uint64_t wanted = 0;
  for (size_t i = 0; i < config.pools.size(); ++i) {
    const ResourceClass* c = config.FindClass(config.pools[i].class_name);
    memory[i] = c ? c->memory_bytes : 0;
    wanted += memory[i] * config.pools[i].min;
  }
  if (wanted > budget) {
    // Grant warm slots one per pool per round, in config order, while they fit: every pool gets
    // its share before any pool gets a second one.
    std::vector<uint32_t> granted(config.pools.size(), 0);
    uint64_t left = budget;
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t i = 0; i < config.pools.size(); ++i) {
        if (granted[i] < config.pools[i].min && memory[i] <= left) {
          ++granted[i];
          left -= memory[i];
          progress = true;
        }
      }
    }
    for (size_t i = 0; i < config.pools.size(); ++i) {
      PoolConfig& p = config.pools[i];
      if (granted[i] == p.min) continue;
      notes.push_back(fmt::format(
          "pool {}: min {} -> {} (warm pools' min x memory must fit in 50% of host memory, {})",
          p.class_name, p.min, granted[i], FormatSize(budget)));
      p.min = granted[i];
    }
  }
  for (size_t i = 0; i < config.pools.size(); ++i) {
    PoolConfig& p = config.pools[i];
    if (memory[i] == 0) continue;
    uint64_t fits = budget / memory[i];
    if (p.buffer > fits) {
      notes.push_back(fmt::format(
          "pool {}: buffer {} -> {} (50% of host memory, {}, holds only {} of its {} sandboxes)",
          p.class_name, p.buffer, fits, FormatSize(budget), fits, FormatSize(memory[i])));
      p.buffer = static_cast<uint32_t>(fits);
    }
  }
  return notes;
}

}  // namespace paddock
