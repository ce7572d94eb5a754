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
#include "common/yaml_reader.h"

namespace paddock {

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// "2GiB", "1.5GiB", "768MiB", "1000B": for notes about sizes.
std::string FormatSize(uint64_t bytes) {
  if (bytes >= kGiB) {
    if (bytes % kGiB == 0) return fmt::format("{}GiB", bytes / kGiB);
    return fmt::format("{:.1f}GiB", static_cast<double>(bytes) / kGiB);
  }
  if (bytes >= kMiB && bytes % kMiB == 0) return fmt::format("{}MiB", bytes / kMiB);
  return fmt::format("{}B", bytes);
}

Status ParseServer(const YAML::Node& node, ServerConfig* s) {
  YamlMapReader r(node, "server");
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

Status ParseDirectory(const YamlMapReader& r, std::string_view key, std::string* out) {
  PADDOCK_RETURN_IF_ERROR(r.String(key, out));
  if (out->front() != '/') {
    return InvalidArgument(r.PathOf(key) + ": '" + *out + "' is not an absolute path");
  }
  return Status::Ok();
}

Status ParseClass(const YAML::Node& node, const std::string& path, ResourceClass* c) {
  YamlMapReader r(node, path);
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
  YamlMapReader r(node, path);
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
    PADDOCK_RETURN_IF_ERROR(parse_one(node[i], YamlElement(path, i), &item));
    out->push_back(std::move(item));
  }
  return Status::Ok();
}

Status ParseLifecycle(const YAML::Node& node, LifecycleConfig* l) {
  YamlMapReader r(node, "lifecycle");
  PADDOCK_RETURN_IF_ERROR(
      r.Check({"default_ttl", "default_idle_timeout", "expiry_action", "reconcile_interval"}));
  PADDOCK_RETURN_IF_ERROR(r.Duration("default_ttl", &l->default_ttl));
  PADDOCK_RETURN_IF_ERROR(r.Duration("default_idle_timeout", &l->default_idle_timeout));
  PADDOCK_RETURN_IF_ERROR(r.Choice<ExpiryAction>(
      "expiry_action", {{"destroy", ExpiryAction::kDestroy}, {"pause", ExpiryAction::kPause}},
      &l->expiry_action));
  PADDOCK_RETURN_IF_ERROR(r.Duration("reconcile_interval", &l->reconcile_interval));
  return Status::Ok();
}

Status ParseLeases(const YAML::Node& node, LeaseConfig* l) {
  YamlMapReader r(node, "leases");
  PADDOCK_RETURN_IF_ERROR(r.Check({"default_ttl", "max_ttl"}));
  PADDOCK_RETURN_IF_ERROR(r.Duration("default_ttl", &l->default_ttl));
  PADDOCK_RETURN_IF_ERROR(r.Duration("max_ttl", &l->max_ttl));
  return Status::Ok();
}

Status ParseRegistry(const YAML::Node& node, RegistryConfig* g) {
  YamlMapReader r(node, "registry");
  PADDOCK_RETURN_IF_ERROR(r.Check({"fsync_lifecycle"}));
  PADDOCK_RETURN_IF_ERROR(r.Bool("fsync_lifecycle", &g->fsync_lifecycle));
  return Status::Ok();
}

Status ParseExec(const YAML::Node& node, ExecConfig* e) {
  YamlMapReader r(node, "exec");
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
      return InvalidArgument(YamlElement("resource_classes", i) + ".name: duplicate class '" +
                             c.resource_classes[i].name + "'");
    }
  }
  std::set<std::string> pooled;
  for (size_t i = 0; i < c.pools.size(); ++i) {
    const PoolConfig& p = c.pools[i];
    std::string path = YamlElement("pools", i);
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
  YamlMapReader r(root, "");
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
  PADDOCK_ASSIGN_OR_RETURN(std::string text, ReadConfigFile(path, "config"));
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
