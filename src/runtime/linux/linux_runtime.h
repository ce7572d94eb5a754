// The native Linux runtime: namespaces + overlayfs + cgroups + seccomp, with paddock-init as
// each sandbox's pid 1. See docs/architecture.md ("Runtime") for the full picture.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/linux/cgroup.h"
#include "runtime/runtime.h"

namespace paddock::runtime::linux {

struct LinuxRuntimeOptions {
  // Host runtime state (uid-slot locks, the empty staging mount point). Should be a tmpfs:
  // nothing here must survive a reboot.
  std::string state_dir = "/run/paddock";
  // Where templates live (<data dir>/templates).
  std::string template_dir = "/var/lib/paddock/templates";
  // The paddock-init binary; empty = "paddock-init" next to the running executable.
  std::string init_path;
  // Tests inject a layout; empty = detect from /proc/self/mountinfo.
  std::optional<CgroupLayout> cgroup_layout;
  std::chrono::milliseconds setup_timeout{10000};
};

class LinuxRuntime : public Runtime {
 public:
  // Checks the host (cgroups, kernel features), loads paddock-init into a sealed memfd and
  // builds the seccomp filter. Does not touch existing sandboxes (see ListHostObjects).
  static Result<std::unique_ptr<LinuxRuntime>> Open(LinuxRuntimeOptions options);
  ~LinuxRuntime() override;  // destroys every sandbox this instance created

  Result<SandboxInfo> Create(const SandboxSpec& spec) override;
  Result<SandboxInfo> Get(const std::string& id) override;
  std::vector<SandboxInfo> List() override;
  std::vector<HostObject> ListHostObjects() override;

  Result<ExecResult> Exec(const std::string& id, const ExecRequest& req,
                          const ExecCallbacks& cb) override;
  Result<ExecId> StartBackground(const std::string& id, const ExecRequest& req) override;
  Result<ExecResult> Wait(const std::string& id, ExecId exec) override;
  Status Kill(const std::string& id, ExecId exec, int signal) override;

  Status ReadFile(const std::string& id, const std::string& path, uint64_t max_bytes,
                  const std::function<Status(std::string_view)>& sink) override;
  Status WriteFile(const std::string& id, const std::string& path, uint32_t mode,
                   uint64_t max_bytes, const std::function<Result<std::string>()>& source) override;
  Result<std::vector<FileStat>> ListDir(const std::string& id, const std::string& path) override;
  Result<FileStat> Stat(const std::string& id, const std::string& path) override;
  Status MakeDirs(const std::string& id, const std::string& path, uint32_t mode) override;
  Status Remove(const std::string& id, const std::string& path, bool recursive) override;
  Status Rename(const std::string& id, const std::string& from, const std::string& to) override;
  Status Chmod(const std::string& id, const std::string& path, uint32_t mode) override;

  Result<LayerStats> Checkpoint(const std::string& id, const std::string& dest_dir) override;
  Result<std::vector<ChangedPath>> ChangedPaths(const std::string& id, int max_depth,
                                                size_t max_entries, bool* truncated) override;

  Status Pause(const std::string& id) override;
  Status Resume(const std::string& id) override;
  Status Destroy(const std::string& id) override;
  Result<SandboxUsage> Usage(const std::string& id) override;

  const CgroupLayout& cgroup_layout() const;

  struct Impl;

 private:
  explicit LinuxRuntime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Validates a caller-supplied sandbox id: [a-z0-9][a-z0-9-]{0,47}.
Status ValidateSandboxId(const std::string& id);

}  // namespace paddock::runtime::linux
