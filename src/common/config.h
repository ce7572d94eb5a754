// The daemon configuration (paddock.yaml): HTTP server limits, directories, resource classes
// and their warm pools (POOL-1/2), lifecycle, lease and exec defaults. Parsing is strict: an
// unknown key, a wrong type or an out-of-range value is an error naming the key's path
// ("pools[1].bufer: unknown key"), because a typo that silently falls back to a default is a
// misconfiguration nobody notices.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace paddock {

struct ServerConfig {
  std::string listen_address = "127.0.0.1";  // an IPv4 or IPv6 literal
  uint16_t port = 8780;
  uint64_t max_body_bytes = 1ull << 20;      // JSON request bodies
  uint64_t max_upload_bytes = 256ull << 20;  // file uploads into sandboxes
  std::chrono::milliseconds read_timeout{10'000};
  uint32_t max_connections = 256;

  bool operator==(const ServerConfig&) const = default;
};

// A resource class (POOL-1): what one sandbox of the class gets, and what it runs on.
struct ResourceClass {
  std::string name;  // [a-z0-9][a-z0-9._-]*
  double cpus = 0;
  uint64_t memory_bytes = 0;
  uint64_t disk_bytes = 0;
  uint32_t pids = 512;
  uint64_t tmp_bytes = 256ull << 20;
  std::string template_name = "host";
  std::string runtime = "native";
  std::string security_level = "standard";

  bool operator==(const ResourceClass&) const = default;
};

// A warm pool of one class (POOL-2). `min` warm sandboxes are always kept; `buffer` more than
// current demand are kept ready; the pool never holds more than `max`. min <= max, buffer <= max.
struct PoolConfig {
  std::string class_name;
  uint32_t min = 0;
  uint32_t max = 0;
  uint32_t buffer = 0;

  bool operator==(const PoolConfig&) const = default;
};

enum class ExpiryAction { kDestroy, kPause };
const char* ExpiryActionName(ExpiryAction action);  // "destroy" | "pause"

struct LifecycleConfig {
  std::chrono::milliseconds default_ttl{3'600'000};         // absolute lifetime of a sandbox
  std::chrono::milliseconds default_idle_timeout{600'000};  // no activity under a lease
  ExpiryAction expiry_action = ExpiryAction::kDestroy;      // what TTL / idle expiry does
  std::chrono::milliseconds reconcile_interval{10'000};

  bool operator==(const LifecycleConfig&) const = default;
};

struct LeaseConfig {
  std::chrono::milliseconds default_ttl{60'000};  // renewed by heartbeats
  std::chrono::milliseconds max_ttl{3'600'000};   // longest a single grant/renewal may ask for

  bool operator==(const LeaseConfig&) const = default;
};

struct ExecConfig {
  std::chrono::milliseconds default_timeout{300'000};
  std::chrono::milliseconds max_timeout{3'600'000};
  uint64_t output_cap_bytes = 16ull << 20;  // per stream

  bool operator==(const ExecConfig&) const = default;
};

// How the registry persists writes (see SqliteStore's class comment for the reasoning).
struct RegistryConfig {
  // false: sandbox lifecycle writes (sandboxes, leases, events) survive any daemon crash but
  // not a host crash, which ends every sandbox they describe anyway; tenants and keys are
  // always fsynced. true: fsync those too (one fdatasync per lifecycle change).
  bool fsync_lifecycle = false;

  bool operator==(const RegistryConfig&) const = default;
};

struct PaddockConfig {
  ServerConfig server;
  std::string data_dir = "/var/lib/paddock";  // durable state (registry, templates, artifacts)
  std::string state_dir = "/run/paddock";     // runtime state (sockets, sandbox roots)
  std::vector<ResourceClass> resource_classes;
  std::vector<PoolConfig> pools;
  LifecycleConfig lifecycle;
  LeaseConfig leases;
  ExecConfig exec;
  RegistryConfig registry;
  // planner.yaml (resource planner rules and tenant policies); "" = the shipped one.
  std::string planner_config;

  // The class named `name`, or nullptr. The pointer is valid until resource_classes changes.
  const ResourceClass* FindClass(std::string_view name) const;

  bool operator==(const PaddockConfig&) const = default;
};

// The built-in configuration; identical to what config/paddock.yaml in the source tree says.
PaddockConfig DefaultConfig();

// Parses and validates a YAML document. Every key is optional and starts from DefaultConfig();
// a list that is given replaces the default list wholesale, and when resource_classes is given
// without pools there are no pools (the default pools belong to the default classes).
// Errors are kInvalidArgument with the offending key path first in the message.
Result<PaddockConfig> ParseConfig(std::string_view yaml);

// Reads and parses a file; error messages are prefixed with the path.
Result<PaddockConfig> LoadConfigFile(const std::string& path);

struct HostCapacity {
  double cpus = 0;            // CPUs this process may run on
  uint64_t memory_bytes = 0;  // physical memory
};

// The CPUs available to this process (affinity mask, like nproc) and MemTotal.
HostCapacity DetectHost();

// Fits the configuration to a host smaller than it was written for, returning one note per
// change (empty when nothing changed):
// - a class asking for more CPUs than the host has gets the host's CPUs;
// - a class asking for more than 75% of host memory gets 75% (leaving room for the host);
// - pool minimums are lowered (fairly, round-robin over pools in config order) until the warm
//   sandboxes' min * memory fits in 50% of host memory, and a buffer larger than that budget
//   could ever hold is lowered to what it can.
// Fields of `host` that are 0 (unknown) are not used. The result still validates.
std::vector<std::string> ScaleToHost(PaddockConfig& config, const HostCapacity& host);

}  // namespace paddock
