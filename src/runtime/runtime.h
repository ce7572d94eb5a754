// The Runtime interface (ISO-8): everything above it (pools, leases, API) talks to sandboxes
// only through this seam, so other runtimes (crun, gVisor, microVMs, remote nodes) can plug in.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace paddock::runtime {

struct ResourceLimits {
  double cpus = 1.0;                     // CPU quota in cores (cfs quota / period)
  uint64_t memory_bytes = 512ull << 20;  // hard memory limit, no swap
  uint64_t pids = 256;                   // max tasks in the sandbox
  uint64_t disk_bytes = 1ull << 30;      // writable layer size cap
  uint64_t tmp_bytes = 256ull << 20;     // /tmp tmpfs size cap
  uint64_t open_files = 1024;            // RLIMIT_NOFILE for every exec
};

// A host directory mounted into a sandbox. Files on disk carry in-sandbox ids (the sandbox
// user's files are uid/gid 1000 on disk): every sandbox sees the directory through an
// id-mapped mount, so whichever sandbox (each with its own host uid range) serves a session
// sees the same owners.
struct BindMount {
  std::string host_path;  // absolute host directory, must exist
  std::string target;     // absolute path inside the sandbox, e.g. "/workspace"; created if missing
  bool read_only = false;
};

struct SandboxSpec {
  std::string id;  // empty: the runtime generates one ("sb-" + random hex)
  std::string template_name = "host";
  ResourceLimits limits;
  std::vector<std::string> env;  // KEY=VALUE added to every exec's environment
  // Read-only layers stacked between the writable layer and the template, top first: host
  // directories made by Runtime::Checkpoint (a fork of a checkpoint passes its layer chain).
  std::vector<std::string> layers;
  // e.g. the session workspace at /workspace, the tenant cache at /cache
  std::vector<BindMount> binds;
};

enum class SandboxState { kRunning, kPaused, kDead };
const char* SandboxStateName(SandboxState s);

struct SandboxInfo {
  std::string id;
  std::string template_name;
  std::string template_digest;
  SandboxState state = SandboxState::kRunning;
  pid_t init_pid = -1;  // host pid of paddock-init (the sandbox's pid 1)
  ResourceLimits limits;
  std::chrono::system_clock::time_point created_at;
  std::vector<std::string> layers;  // as created (SandboxSpec::layers)
};

// What Checkpoint wrote: entries (files, directories, symlinks, whiteouts...) and the bytes of
// regular-file data actually stored (holes of sparse files are not counted, nor copied).
struct LayerStats {
  uint64_t files = 0;
  uint64_t bytes = 0;
};

struct ChangedPath {
  std::string path;      // absolute, inside the sandbox
  bool deleted = false;  // a whiteout: the path was removed from the layers below
  bool operator==(const ChangedPath&) const = default;
};

// What exists on the host, found by scanning runtime objects (cgroups), not from
// memory: used by the reconciler to find orphans after a crash.
struct HostObject {
  std::string id;
  bool known = false;  // this Runtime instance created it and still manages it
  bool has_cgroup = false;
  std::vector<pid_t> pids;  // host pids still in the sandbox's cgroup
};

struct ExecRequest {
  // Exactly one of argv / shell: argv is exec'd directly (PATH searched), shell runs
  // "/bin/sh -c <shell>".
  std::vector<std::string> argv;
  std::string shell;
  std::map<std::string, std::string> env;   // overrides the sandbox env
  std::string cwd;                          // default: the user's home
  std::string user = "sandbox";             // "sandbox" (uid 1000) or "root" (uid 0 inside)
  std::string stdin_data;                   // written to the command's stdin, then EOF
  std::chrono::milliseconds timeout{0};     // 0 = no timeout; expiry kills the whole tree
  uint64_t output_cap_bytes = 16ull << 20;  // per stream; beyond it the pipe is closed
  // When >= 0 these host fds are handed to the command as its stdio directly (the one-shot
  // `paddockd sandbox run` passes the terminal); callbacks and stdin_data are then unused.
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
};

struct ExecCallbacks {
  std::function<void(std::string_view)> on_stdout;
  std::function<void(std::string_view)> on_stderr;
};

struct ExecResult {
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // the terminating signal, or 0
  bool timed_out = false;
  bool oom_killed = false;
  bool killed = false;  // killed through Kill() or Destroy()
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  double cpu_seconds = 0;          // user + system of the command and its waited-for children
  uint64_t peak_memory_bytes = 0;  // max RSS (ru_maxrss) of the command tree
  double wall_seconds = 0;
  // Shell convention: exit_code, or 128 + signal when killed by a signal.
  int ShellStatus() const { return signal ? 128 + signal : exit_code; }
};

using ExecId = uint64_t;

struct FileStat {
  std::string name;
  enum class Type { kFile, kDir, kSymlink, kOther } type = Type::kOther;
  uint64_t size = 0;
  uint32_t mode = 0;          // permission bits
  uint32_t uid = 0, gid = 0;  // as seen inside the sandbox
  int64_t mtime_unix = 0;
  std::string link_target;  // for symlinks
};

struct SandboxUsage {
  uint64_t memory_bytes = 0;
  uint64_t memory_peak_bytes = 0;
  double cpu_seconds = 0;
  uint64_t pids = 0;
  uint64_t oom_kills = 0;
  uint64_t disk_used_bytes = 0;
};

// Thread-safety: every method may be called concurrently from any thread, on the same or
// different sandboxes. Ids that do not exist give kNotFound.
class Runtime {
 public:
  virtual ~Runtime() = default;

  // Creates and starts a sandbox; on failure nothing is left on the host.
  virtual Result<SandboxInfo> Create(const SandboxSpec& spec) = 0;
  virtual Result<SandboxInfo> Get(const std::string& id) = 0;
  virtual std::vector<SandboxInfo> List() = 0;
  // Scans the host for runtime objects (including orphans of a crashed daemon).
  virtual std::vector<HostObject> ListHostObjects() = 0;

  // Runs a command to completion, streaming output through callbacks.
  virtual Result<ExecResult> Exec(const std::string& id, const ExecRequest& req,
                                  const ExecCallbacks& cb) = 0;
  // Starts a background command; its output is discarded unless the request passes fds.
  virtual Result<ExecId> StartBackground(const std::string& id, const ExecRequest& req) = 0;
  // Waits for a background command.
  virtual Result<ExecResult> Wait(const std::string& id, ExecId exec) = 0;
  // Signals a command's whole process tree (SIGKILL kills every process it started).
  virtual Status Kill(const std::string& id, ExecId exec, int signal) = 0;

  // Files: paths are resolved inside the sandbox root; symlinks cannot escape it. Files are
  // created as the sandbox user.
  virtual Status ReadFile(const std::string& id, const std::string& path, uint64_t max_bytes,
                          const std::function<Status(std::string_view)>& sink) = 0;
  // Reads chunks from `source` until it returns an empty chunk; atomically replaces `path`.
  virtual Status WriteFile(const std::string& id, const std::string& path, uint32_t mode,
                           uint64_t max_bytes,
                           const std::function<Result<std::string>()>& source) = 0;
  virtual Result<std::vector<FileStat>> ListDir(const std::string& id, const std::string& path) = 0;
  virtual Result<FileStat> Stat(const std::string& id, const std::string& path) = 0;
  virtual Status MakeDirs(const std::string& id, const std::string& path, uint32_t mode) = 0;
  virtual Status Remove(const std::string& id, const std::string& path, bool recursive) = 0;
  virtual Status Rename(const std::string& id, const std::string& from, const std::string& to) = 0;
  virtual Status Chmod(const std::string& id, const std::string& path, uint32_t mode) = 0;

  // Freezes the sandbox (if running), copies its writable layer into `dest_dir` (must not exist;
  // its parent must) and thaws it. The copy is a valid overlay lower layer: whiteouts, opaque
  // markers and user.* xattrs, modes, mtimes and symlinks are kept; ownership is stored as
  // in-sandbox ids (see BindMount). Written to a temporary sibling and renamed, so dest_dir
  // either is complete or does not exist. Works on a paused sandbox (stays paused). A sandbox
  // created with layers produces a layer holding only its own changes: the caller keeps the
  // chain (new layer + the old layers) for forks.
  virtual Result<LayerStats> Checkpoint(const std::string& id, const std::string& dest_dir) = 0;
  // What the writable layer changed relative to the layers below: absolute in-sandbox paths of
  // upper-dir entries down to max_depth path components ("/home/sandbox/.local" at depth 3;
  // deeper changes are reported as their ancestor at that depth, once), whiteouts as deleted.
  // At most max_entries (sorted), `truncated` set when more existed.
  virtual Result<std::vector<ChangedPath>> ChangedPaths(const std::string& id, int max_depth,
                                                        size_t max_entries, bool* truncated) = 0;

  virtual Status Pause(const std::string& id) = 0;
  virtual Status Resume(const std::string& id) = 0;
  // Idempotent: destroying an unknown id that still has host objects removes them; an id with
  // nothing left returns OK.
  virtual Status Destroy(const std::string& id) = 0;
  virtual Result<SandboxUsage> Usage(const std::string& id) = 0;
};

}  // namespace paddock::runtime
