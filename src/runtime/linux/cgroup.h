// cgroup management for sandboxes: v1 (one hierarchy per controller) and v2 (unified),
// detected at start. All sandbox cgroups are named "paddock-<sandbox id>" directly under the
// hierarchy root so a reconciler can find orphans by prefix.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace paddock::runtime::linux {

inline constexpr std::string_view kCgroupPrefix = "paddock-";

enum class CgroupVersion { kV1, kV2 };

struct CgroupLayout {
  CgroupVersion version = CgroupVersion::kV1;
  // v2: the unified hierarchy's root directory (e.g. /sys/fs/cgroup).
  std::string v2_root;
  // v1: controller name -> mount directory, for the controllers Paddock uses:
  // "cpu", "cpuacct", "memory", "pids", "freezer" (cpu and cpuacct may share one mount).
  std::map<std::string, std::string> v1_mounts;
  // Tests only: the paths point into a plain directory tree standing in for cgroupfs. The kernel
  // creates a cgroup's interface files on mkdir; a plain tree does not, so writes create files
  // (O_CREAT|O_TRUNC), delegated files are created before chown, and removal unlinks regular
  // files before rmdir. Never set for a real host.
  bool fake_for_tests = false;
};

// Parses /proc/self/mountinfo text. Pure cgroup v2 hosts (cgroup2 mounted with controllers and
// no v1 controller mounts for memory/pids) give kV2; hosts with the v1 controllers mounted give
// kV1 even when a v2 tree is mounted beside them (the "hybrid" layout: controllers live in v1).
// Errors: kUnimplemented when a required controller is missing.
Result<CgroupLayout> ParseCgroupLayout(std::string_view mountinfo);
// Reads /proc/self/mountinfo and calls ParseCgroupLayout.
Result<CgroupLayout> DetectCgroupLayout();

struct CgroupLimits {
  double cpus = 1.0;          // quota = cpus * period (period 100ms); <= 0 means unlimited
  uint64_t memory_bytes = 0;  // 0 = unlimited; swap always disabled
  uint64_t pids = 0;          // 0 = unlimited
};

struct CgroupUsage {
  uint64_t memory_bytes = 0;       // v1 memory.usage_in_bytes / v2 memory.current
  uint64_t memory_peak_bytes = 0;  // v1 memory.max_usage_in_bytes / v2 memory.peak (0 if absent)
  uint64_t cpu_usage_ns = 0;       // v1 cpuacct.usage / v2 cpu.stat usage_usec*1000
  uint64_t pids = 0;               // pids.current
  uint64_t oom_kills = 0;          // v1 memory.oom_control "oom_kill" / v2 memory.events "oom_kill"
};

// One sandbox's cgroup(s). Movable, not copyable. Destruction does NOT remove the cgroup (the
// owner calls Remove() after the processes are gone); this keeps a crash from racing teardown.
// Thread-safety: const methods may run concurrently; Freeze/Thaw/Remove need external ordering.
class SandboxCgroup {
 public:
  // Creates "paddock-<id>" in every hierarchy needed (v1: cpu, cpuacct, memory, pids, freezer;
  // v2: one directory, enabling +cpu +memory +pids in the root's cgroup.subtree_control first)
  // and writes the limits. The directory used for per-exec sub-cgroups (v1: the freezer one;
  // v2: the unified one) and its cgroup.procs file are chowned to `delegate_uid`/`delegate_gid`
  // so the sandbox's init (unprivileged on the host) can create and populate sub-cgroups
  // (systemd-style delegation); limit files stay root-owned so the sandbox cannot raise them.
  // On any error everything created so far is removed.
  static Result<SandboxCgroup> Create(const CgroupLayout& layout, const std::string& sandbox_id,
                                      const CgroupLimits& limits, uid_t delegate_uid,
                                      gid_t delegate_gid);
  // Refers to an existing sandbox cgroup (e.g. an orphan found by ListSandboxIds) without
  // creating anything.
  static SandboxCgroup Attach(const CgroupLayout& layout, const std::string& sandbox_id);

  // Ids (without the prefix) of every "paddock-*" cgroup present in any hierarchy.
  static std::vector<std::string> ListSandboxIds(const CgroupLayout& layout);

  SandboxCgroup(SandboxCgroup&&) = default;
  SandboxCgroup& operator=(SandboxCgroup&&) = default;

  const std::string& sandbox_id() const { return id_; }
  // Every directory that makes up this cgroup, one per hierarchy.
  const std::vector<std::string>& dirs() const { return dirs_; }
  // The directory in which per-exec sub-cgroups are created (freezer for v1, unified for v2).
  const std::string& exec_parent_dir() const { return exec_parent_dir_; }
  CgroupVersion version() const { return version_; }

  // Moves a process (host pid) into the cgroup in every hierarchy.
  Status AddProcess(pid_t pid) const;
  // Opens exec_parent_dir() as an O_DIRECTORY|O_CLOEXEC fd (passed to the sandbox init).
  Result<UniqueFd> OpenExecParentDir() const;
  // Opens the v2 directory as an O_PATH fd for clone3(CLONE_INTO_CGROUP); v1 gives kUnimplemented.
  Result<UniqueFd> OpenV2DirForClone() const;

  // Freezes every task (including those in sub-cgroups) and waits until the kernel reports
  // FROZEN (v1 freezer.state / v2 cgroup.events "frozen 1"), up to ~2 s. On timeout the cgroup is
  // thawed again (never left half-frozen) and kDeadlineExceeded is returned.
  Status Freeze() const;
  Status Thaw() const;
  bool IsFrozen() const;

  Result<CgroupUsage> ReadUsage() const;
  Result<uint64_t> OomKillCount() const;
  // Host pids of every task in this cgroup and its sub-cgroups.
  Result<std::vector<pid_t>> Pids() const;

  // Kills every task in the cgroup tree: v2 writes cgroup.kill; v1 freezes, SIGKILLs every
  // pid, thaws, and repeats until empty (so a forking process cannot escape). Waits up to ~5 s.
  Status KillAll() const;
  // Removes sub-cgroups (depth-first) and then the cgroup dirs; retries EBUSY briefly while
  // exiting tasks drain. Missing directories are not an error (idempotent).
  Status Remove() const;

 private:
  SandboxCgroup() = default;
  // Create() steps; each appends every directory it makes to `created` for rollback.
  Status CreateV1(const CgroupLayout& layout, const CgroupLimits& limits, uid_t delegate_uid,
                  gid_t delegate_gid, std::vector<std::string>* created) const;
  Status CreateV2(const CgroupLayout& layout, const CgroupLimits& limits, uid_t delegate_uid,
                  gid_t delegate_gid, std::vector<std::string>* created) const;
  const std::string& ControllerDir(const std::string& controller) const;

  std::string id_;
  bool fake_ = false;  // CgroupLayout::fake_for_tests
  CgroupVersion version_ = CgroupVersion::kV1;
  std::vector<std::string> dirs_;
  std::map<std::string, std::string> controller_dirs_;  // controller -> dir ("unified" for v2)
  std::string exec_parent_dir_;
};

}  // namespace paddock::runtime::linux
