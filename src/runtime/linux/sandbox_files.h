// Host-side file operations on a sandbox's filesystem (ISO-5). Every path is resolved from the
// sandbox root fd with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): "..", absolute
// symlinks and symlinks swapped in mid-operation all stay inside the root. Paths are never
// string-joined onto a host path.
//
// When the process is root, each operation runs with the calling thread's filesystem
// credentials switched to the sandbox user (setfsuid/setfsgid, per-thread setgroups, effective
// capabilities cleared) so the daemon can do nothing the sandbox user could not, and new files
// are owned by the sandbox user. The switch is per-thread and restored before returning.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "runtime/runtime.h"

namespace paddock::runtime::linux {

struct SandboxIdentity {
  // Host ids the operations run as; -1 = do not switch credentials (tests as non-root).
  uid_t host_uid = static_cast<uid_t>(-1);
  gid_t host_gid = static_cast<gid_t>(-1);
  // First host uid/gid of the sandbox's user-namespace mapping, to report ownership as seen
  // inside (host id - base; ids outside [base, base + range) show as 65534 "nobody").
  uid_t host_id_base = 0;
  uint32_t id_range = 65536;
};

// Validates a sandbox path given by a caller: non-empty, no NUL, <= 4096 bytes, each component
// <= 255 bytes. Relative paths are taken relative to the sandbox root. Returns it unchanged.
Status ValidateSandboxPath(std::string_view path);

class SandboxFiles {
 public:
  // `root_fd` is an O_PATH|O_DIRECTORY fd of the sandbox root (for a live sandbox: its
  // /proc/<init pid>/root, opened once at creation). Takes ownership.
  SandboxFiles(UniqueFd root_fd, SandboxIdentity identity);

  // Streams a regular file to `sink` in chunks; kInvalidArgument for non-regular files
  // (directories, devices, fifos), kResourceExhausted if it is larger than max_bytes (checked
  // before reading, and while reading in case it grows).
  Status ReadFile(std::string_view path, uint64_t max_bytes,
                  const std::function<Status(std::string_view)>& sink) const;
  // Pulls chunks from `source` until it yields an empty one, writing a temporary file in the
  // target directory and renaming it over `path` on success; on any failure (source error,
  // more than max_bytes, ENOSPC) the temporary file is removed and `path` is untouched.
  Status WriteFile(std::string_view path, uint32_t mode, uint64_t max_bytes,
                   const std::function<Result<std::string>()>& source) const;
  Result<std::vector<FileStat>> ListDir(std::string_view path) const;
  // lstat semantics: a symlink is reported as a symlink, with its target.
  Result<FileStat> Stat(std::string_view path) const;
  // mkdir -p; existing directories are fine, an existing non-directory is kAlreadyExists.
  Status MakeDirs(std::string_view path, uint32_t mode) const;
  // Removes a file, symlink (never its target) or empty directory; `recursive` removes a tree
  // without ever following symlinks. Removing "/" is kInvalidArgument.
  Status Remove(std::string_view path, bool recursive) const;
  Status Rename(std::string_view from, std::string_view to) const;
  // chmod of a file or directory (symlinks are rejected); only permission bits 07777.
  Status Chmod(std::string_view path, uint32_t mode) const;

 private:
  UniqueFd root_;
  SandboxIdentity id_;
};

}  // namespace paddock::runtime::linux
