// Host-side file operations on a sandbox's filesystem. The sandbox is hostile: it can rename,
// replace and symlink anything under its root at any moment, including while we are halfway
// through an operation. The rules that keep the daemon safe:
//
//  * Every lookup is openat2() from the root fd with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS.
//    The kernel then treats the root fd as "/" for absolute symlinks and clamps ".." at it, and
//    refuses procfs magic links (/proc/<pid>/root, /proc/self/fd/N) that would otherwise jump
//    to an arbitrary host object. No host path string is ever built.
//  * Operations on a final component resolve the parent to an fd first and then use the *at()
//    call with a single plain name, so nothing after that point re-walks a path the sandbox can
//    change.
//  * Objects on kernel pseudo-filesystems (the sandbox's /proc, /sys, cgroupfs, ...) are
//    refused: they are mounts inside the sandbox root, and reading or writing them as the
//    daemon would expose or modify kernel state.
//  * When the daemon is root, every filesystem syscall runs with the calling thread's fs
//    credentials switched to the sandbox user and its effective capabilities cleared.
#include "runtime/linux/sandbox_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <utility>

#include "common/random.h"

// fchmodat2 (Linux 6.6) is the only way to chmod through an O_PATH fd without going through a
// /proc/self/fd magic link; glibc 2.36 headers predate it. 452 on every architecture that uses
// the unified syscall table.
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

namespace paddock::runtime::linux {
namespace {

constexpr uint64_t kInRoot = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
// For a single plain name relative to a directory fd we already trust: nothing to follow and
// no ".." to clamp, so refuse every kind of link outright.
constexpr uint64_t kPlainName = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kMaxComponentBytes = 255;
constexpr size_t kIoChunkBytes = 64 * 1024;
constexpr size_t kMaxListEntries = 100000;
// A hostile sandbox can build a tree far deeper than any path can name (mkdir + chdir in a
// loop). The walk holds one fd per level, so the depth bounds both fds and memory.
constexpr size_t kMaxRemoveDepth = 4096;
// Re-scans of one directory during a recursive remove when it is still not empty after a
// pass (entries created concurrently, or skipped because the filesystem renumbered its
// directory offsets after deletions, as overlayfs does). Bounded so a sandbox that keeps
// creating files cannot pin a daemon thread forever.
constexpr int kMaxRemovePasses = 1024;
// openat2 returns EAGAIN under RESOLVE_IN_ROOT when a concurrent rename or mount change means
// the kernel cannot prove a ".." stayed inside the root; retrying is the documented answer.
constexpr int kOpenAt2Retries = 128;

constexpr uint32_t kNobodyId = 65534;
constexpr uid_t kNoUid = static_cast<uid_t>(-1);
constexpr gid_t kNoGid = static_cast<gid_t>(-1);

// Kernel-control filesystems not in <linux/magic.h> of every libc.
constexpr uint32_t kConfigfsMagic = 0x62656570;
constexpr uint32_t kFusectlMagic = 0x65735543;

// --- small syscall helpers ----------------------------------------------------------------

int OpenAt2(int dirfd, const std::string& path, uint64_t flags, uint64_t resolve, mode_t mode = 0) {
  struct open_how how {};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = resolve;
  for (int attempt = 0;; ++attempt) {
    long fd = syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof(how));
    if (fd >= 0) return static_cast<int>(fd);
    if (errno == EINTR) continue;
    if (errno == EAGAIN && attempt < kOpenAt2Retries) continue;
    return -1;
  }
}

// Refuses objects on pseudo-filesystems. The sandbox's /proc, /sys and cgroupfs are real
// kernel mounts reachable from its root; opening files there as the daemon would read kernel
// state of other processes or write kernel tunables (and mkdir in cgroupfs creates cgroups).
Status RefusePseudoFs(int fd, const std::string& path) {
  struct statfs sfs {};
  if (fstatfs(fd, &sfs) != 0) return ErrnoStatus("statfs " + path);
  switch (static_cast<uint32_t>(sfs.f_type)) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case SELINUX_MAGIC:
    case SMACK_MAGIC:
    case AAFS_MAGIC:
    case DEVPTS_SUPER_MAGIC:
    case BPF_FS_MAGIC:
    case PSTOREFS_MAGIC:
    case EFIVARFS_MAGIC:
    case BINFMTFS_MAGIC:
    case NSFS_MAGIC:
    case RDTGROUP_SUPER_MAGIC:
    case BINDERFS_SUPER_MAGIC:
    case kConfigfsMagic:
    case kFusectlMagic:
      return PermissionDenied(path + ": refusing to access a kernel pseudo-filesystem");
    default:
      return Status::Ok();
  }
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// --- paths ----------------------------------------------------------------------------------

struct PathParts {
  std::string parent;  // resolved from the root fd; "." or "/" mean the root
  std::string base;    // final component; empty when the path names the root itself
};

// Splits "a/b//c/" into parent "a/b" and base "c". Pure string handling on the caller's path;
// the kernel does the actual resolution of `parent` under RESOLVE_IN_ROOT.
PathParts SplitPath(std::string_view path) {
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.empty()) return {"/", ""};
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return {".", std::string(path)};
  std::string_view parent = path.substr(0, slash);
  while (!parent.empty() && parent.back() == '/') parent.remove_suffix(1);
  return {parent.empty() ? "/" : std::string(parent), std::string(path.substr(slash + 1))};
}

bool IsDotName(std::string_view name) { return name == "." || name == ".."; }

// For operations that act on a directory entry: the entry must be a real name. "." and ".."
// name the directory itself or its parent, and the root has no entry to act on.
Status RequireEntryName(const PathParts& parts, const std::string& path, const char* op) {
  if (parts.base.empty()) {
    return InvalidArgument(std::string(op) + ": cannot operate on the sandbox root");
  }
  if (IsDotName(parts.base)) {
    return InvalidArgument(std::string(op) + " " + path + ": path must not end in . or ..");
  }
  return Status::Ok();
}

Result<UniqueFd> OpenParentDir(int root, const PathParts& parts, const std::string& path) {
  int fd = OpenAt2(root, parts.parent, O_PATH | O_DIRECTORY, kInRoot);
  if (fd < 0) return ErrnoStatus("open parent directory of " + path);
  UniqueFd dir(fd);
  PADDOCK_RETURN_IF_ERROR(RefusePseudoFs(dir.get(), path));
  return dir;
}

// --- ownership and FileStat -----------------------------------------------------------------

uint32_t InsideId(uint32_t host, uint32_t base, uint32_t range) {
  if (host >= base && static_cast<uint64_t>(host) < static_cast<uint64_t>(base) + range) {
    return host - base;
  }
  return kNobodyId;
}

FileStat MakeFileStat(std::string name, const struct stat& st, const SandboxIdentity& id) {
  FileStat fs;
  fs.name = std::move(name);
  if (S_ISREG(st.st_mode)) {
    fs.type = FileStat::Type::kFile;
  } else if (S_ISDIR(st.st_mode)) {
    fs.type = FileStat::Type::kDir;
  } else if (S_ISLNK(st.st_mode)) {
    fs.type = FileStat::Type::kSymlink;
  } else {
    fs.type = FileStat::Type::kOther;
  }
  fs.size = static_cast<uint64_t>(st.st_size);
  fs.mode = st.st_mode & 07777;
  fs.uid = InsideId(st.st_uid, id.host_id_base, id.id_range);
  fs.gid = InsideId(st.st_gid, id.host_id_base, id.id_range);
  fs.mtime_unix = st.st_mtim.tv_sec;
  return fs;
}

// Reads a symlink's target relative to `dirfd`. The target is sandbox-controlled text (a path
// as seen inside the sandbox), never resolved here.
Result<std::string> ReadLinkAt(int dirfd, const std::string& name, const std::string& path) {
  std::string buf(kMaxPathBytes + 1, '\0');
  ssize_t n = readlinkat(dirfd, name.c_str(), buf.data(), buf.size());
  if (n < 0) return ErrnoStatus("readlink " + path);
  buf.resize(static_cast<size_t>(n));
  return buf;
}

// Stats `name` in `dirfd` without following it and fills in the link target for symlinks.
Result<FileStat> StatEntry(int dirfd, const std::string& name, const std::string& path,
                           const SandboxIdentity& id) {
  struct stat st {};
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoStatus("stat " + path);
  }
  FileStat fs = MakeFileStat(name, st, id);
  if (S_ISLNK(st.st_mode)) {
    PADDOCK_ASSIGN_OR_RETURN(fs.link_target, ReadLinkAt(dirfd, name, path));
  }
  return fs;
}

// --- credential switch ----------------------------------------------------------------------

struct CapState {
  __user_cap_header_struct header{};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
};

bool GetThreadCaps(CapState* caps) {
  caps->header.version = _LINUX_CAPABILITY_VERSION_3;
  caps->header.pid = 0;  // the calling thread
  return syscall(SYS_capget, &caps->header, caps->data) == 0;
}

bool SetThreadCaps(const CapState& caps) {
  CapState copy = caps;
  copy.header.version = _LINUX_CAPABILITY_VERSION_3;
  copy.header.pid = 0;
  return syscall(SYS_capset, &copy.header, copy.data) == 0;
}

bool SameCaps(const CapState& a, const CapState& b) {
  for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; ++i) {
    if (a.data[i].effective != b.data[i].effective || a.data[i].permitted != b.data[i].permitted ||
        a.data[i].inheritable != b.data[i].inheritable) {
      return false;
    }
  }
  return true;
}

long CurrentFsUid() { return syscall(SYS_setfsuid, kNoUid); }  // -1 is invalid: only queries
long CurrentFsGid() { return syscall(SYS_setfsgid, kNoGid); }

// Switches the calling thread's filesystem identity to the sandbox user for its lifetime.
//
// Everything goes through raw syscalls because in the kernel credentials are per thread, while
// glibc's setgroups/setuid wrappers broadcast the change to every thread of the process (the
// setxid signal mechanism) and would flip the identity of unrelated daemon threads. setfsuid
// and setfsgid decide DAC checks and the owner of new files; setting fsuid away from 0 already
// drops the fs-related capabilities, and we clear the whole effective set so no capable() check
// (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_SYS_ADMIN, CAP_SYS_RESOURCE for reserved blocks, ...)
// passes. The permitted set is kept, which is what lets the destructor raise them again.
class ThreadCredentials {
 public:
  ThreadCredentials() = default;
  ThreadCredentials(const ThreadCredentials&) = delete;
  ThreadCredentials& operator=(const ThreadCredentials&) = delete;
  ~ThreadCredentials() {
    if (switched_) Restore();
  }

  Status SwitchTo(uid_t uid, gid_t gid) {
    if (!GetThreadCaps(&saved_caps_)) return ErrnoStatus("capget");
    long ngroups = syscall(SYS_getgroups, 0, nullptr);
    if (ngroups < 0) return ErrnoStatus("getgroups");
    saved_groups_.resize(static_cast<size_t>(ngroups));
    ngroups = syscall(SYS_getgroups, saved_groups_.size(), saved_groups_.data());
    if (ngroups < 0) return ErrnoStatus("getgroups");
    saved_groups_.resize(static_cast<size_t>(ngroups));
    saved_fsuid_ = CurrentFsUid();
    saved_fsgid_ = CurrentFsGid();
    // From here on a partial switch must be undone, whatever step fails.
    switched_ = true;

    if (syscall(SYS_setgroups, 1, &gid) != 0) return ErrnoStatus("setgroups (sandbox user)");
    // setfsuid/setfsgid report failure only by not changing the id, so verify by querying.
    syscall(SYS_setfsgid, gid);
    if (CurrentFsGid() != static_cast<long>(gid)) {
      return PermissionDenied("setfsgid to the sandbox group did not take effect");
    }
    syscall(SYS_setfsuid, uid);
    if (CurrentFsUid() != static_cast<long>(uid)) {
      return PermissionDenied("setfsuid to the sandbox user did not take effect");
    }
    CapState dropped = saved_caps_;
    for (auto& d : dropped.data) d.effective = 0;
    if (!SetThreadCaps(dropped)) return ErrnoStatus("capset (clear effective)");
    CapState now;
    if (!GetThreadCaps(&now)) return ErrnoStatus("capget");
    for (const auto& d : now.data) {
      if (d.effective != 0) return PermissionDenied("effective capabilities were not cleared");
    }
    return Status::Ok();
  }

 private:
  void Restore() {
    // Effective caps first: restoring the groups needs CAP_SETGID.
    bool ok = SetThreadCaps(saved_caps_);
    syscall(SYS_setfsuid, static_cast<uid_t>(saved_fsuid_));
    ok = ok && CurrentFsUid() == saved_fsuid_;
    syscall(SYS_setfsgid, static_cast<gid_t>(saved_fsgid_));
    ok = ok && CurrentFsGid() == saved_fsgid_;
    ok = ok && syscall(SYS_setgroups, saved_groups_.size(), saved_groups_.data()) == 0;
    // Moving fsuid back to 0 makes the kernel raise the fs capabilities from the permitted set
    // into the effective set; set the exact original sets again.
    ok = ok && SetThreadCaps(saved_caps_);
    CapState now;
    ok = ok && GetThreadCaps(&now) && SameCaps(now, saved_caps_);
    if (!ok) {
      // This thread now carries a foreign identity and would run later work (for the daemon or
      // another sandbox) under it. There is no safe way to continue.
      std::fprintf(stderr,
                   "paddock: FATAL: could not restore thread credentials after a sandbox file "
                   "operation (errno %d)\n",
                   errno);
      std::abort();
    }
  }

  bool switched_ = false;
  CapState saved_caps_;
  std::vector<gid_t> saved_groups_;
  long saved_fsuid_ = 0;
  long saved_fsgid_ = 0;
};

bool ShouldSwitch(const SandboxIdentity& id) { return id.host_uid != kNoUid && geteuid() == 0; }

// Runs `fn` (filesystem syscalls only, never caller callbacks) as the sandbox user. If the
// switch fails the operation fails: it must never run as root by accident.
template <typename Fn>
auto AsSandboxUser(const SandboxIdentity& id, Fn&& fn) -> decltype(fn()) {
  ThreadCredentials creds;
  if (ShouldSwitch(id)) {
    if (id.host_gid == kNoGid) return PermissionDenied("sandbox identity has a uid but no gid");
    Status st = creds.SwitchTo(id.host_uid, id.host_gid);
    if (!st.ok()) return st;
  }
  return fn();
}

// Caller callbacks and our own allocations may throw; nothing may escape the interface.
template <typename Fn>
auto NoThrow(const char* op, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return Internal(std::string(op) + ": " + e.what());
  } catch (...) {
    return Internal(std::string(op) + ": unknown exception");
  }
}

// --- chmod ----------------------------------------------------------------------------------

// chmod through an O_PATH fd, so the inode checked is the inode changed. `reopen_regular`
// is only used on kernels without fchmodat2 (< 6.6) for regular files.
Status ChmodPathFd(int opath_fd, const struct stat& st, mode_t mode, const std::string& path,
                   const std::function<Result<UniqueFd>()>& reopen_regular) {
  if (syscall(SYS_fchmodat2, opath_fd, "", mode, AT_EMPTY_PATH) == 0) return Status::Ok();
  if (errno != ENOSYS) return ErrnoStatus("chmod " + path);
  UniqueFd fd;
  if (S_ISDIR(st.st_mode)) {
    // "." relative to the O_PATH directory fd reopens exactly that directory.
    int d = OpenAt2(opath_fd, ".", O_RDONLY | O_DIRECTORY, kPlainName);
    if (d < 0) return ErrnoStatus("chmod " + path);
    fd.reset(d);
  } else if (S_ISREG(st.st_mode) && reopen_regular) {
    PADDOCK_ASSIGN_OR_RETURN(fd, reopen_regular());
    struct stat again {};
    if (fstat(fd.get(), &again) != 0) return ErrnoStatus("chmod " + path);
    if (again.st_dev != st.st_dev || again.st_ino != st.st_ino) {
      return Status(StatusCode::kConflict, "chmod " + path + ": file was replaced concurrently");
    }
  } else {
    return Unimplemented("chmod " + path + ": this kernel lacks fchmodat2");
  }
  if (fchmod(fd.get(), mode) != 0) return ErrnoStatus("chmod " + path);
  return Status::Ok();
}

// --- directory reading ----------------------------------------------------------------------

struct DirEntry {
  std::string name;
  unsigned char type = DT_UNKNOWN;
  off64_t next_offset = 0;  // seek cookie of the entry after this one
};

// getdents64 over a directory fd we own, so the fd stays usable for *at() calls and can be
// repositioned with the kernel's own seek cookies.
class DirReader {
 public:
  explicit DirReader(int fd) : fd_(fd), buf_(new uint64_t[kBufWords]) {}

  // Points the reader at `fd` (which may differ from the last one) at a seek cookie from a
  // previous DirEntry::next_offset, or 0 for the start.
  Status Reset(int fd, off64_t offset) {
    fd_ = fd;
    pos_ = len_ = 0;
    if (lseek64(fd_, offset, SEEK_SET) < 0) return ErrnoStatus("seek directory");
    return Status::Ok();
  }

  // Returns false at the end of the directory. Skips "." and "..".
  Result<bool> Next(DirEntry* out) {
    for (;;) {
      if (pos_ >= len_) {
        ssize_t n = getdents64(fd_, buf_.get(), kBufWords * sizeof(uint64_t));
        if (n < 0) {
          if (errno == EINTR) continue;
          return ErrnoStatus("read directory");
        }
        if (n == 0) return false;
        pos_ = 0;
        len_ = static_cast<size_t>(n);
      }
      const char* base = reinterpret_cast<const char*>(buf_.get());
      const auto* d = reinterpret_cast<const struct dirent64*>(base + pos_);
      pos_ += d->d_reclen;
      if (IsDotName(d->d_name)) continue;
      out->name = d->d_name;
      out->type = d->d_type;
      out->next_offset = d->d_off;
      return true;
    }
  }

 private:
  static constexpr size_t kBufWords = 4096;  // 32 KiB, 8-byte aligned for struct dirent64
  int fd_;
  std::unique_ptr<uint64_t[]> buf_;
  size_t pos_ = 0;
  size_t len_ = 0;
};

// --- recursive remove -----------------------------------------------------------------------

// Opens a subdirectory for the recursive walk. RESOLVE_NO_XDEV makes the kernel refuse to step
// onto another mount (the sandbox's /proc, a bind mount of host data, a tmpfs): a recursive
// remove stays on the filesystem it started on. O_NOFOLLOW + RESOLVE_NO_SYMLINKS: a symlink
// planted or swapped in is never entered; it is unlinked as an entry instead.
int OpenSubdirForRemove(int dirfd, const std::string& name) {
  return OpenAt2(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK,
                 kPlainName | RESOLVE_NO_XDEV);
}

Status RemoveTree(int parent_fd, const std::string& base, const std::string& path) {
  struct Frame {
    UniqueFd fd;
    std::string name;  // entry name in the frame below (or in parent_fd for the top)
    off64_t resume = 0;
    int passes = 1;
    bool progress = false;  // removed something during the current pass
  };
  int top = OpenSubdirForRemove(parent_fd, base);
  if (top < 0) {
    if (errno == EXDEV) return PermissionDenied("remove " + path + ": is a mount point");
    return ErrnoStatus("open " + path);
  }
  std::vector<Frame> stack;
  stack.push_back(Frame{UniqueFd(top), base});
  DirReader reader(top);
  DirEntry e;

  while (!stack.empty()) {
    Frame& frame = stack.back();
    // Each visit re-reads from the saved cookie rather than keeping a stream per level, so
    // the walk holds one fd per level and one buffer in total.
    PADDOCK_RETURN_IF_ERROR(reader.Reset(frame.fd.get(), frame.resume));
    bool descended = false;
    for (;;) {
      PADDOCK_ASSIGN_OR_RETURN(bool more, reader.Next(&e));
      if (!more) break;
      const int dirfd = frame.fd.get();
      bool is_dir = e.type == DT_DIR;
      if (e.type == DT_UNKNOWN) {
        struct stat st {};
        if (fstatat(dirfd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
          if (errno == ENOENT) continue;
          return ErrnoStatus("remove " + path + ": stat entry");
        }
        is_dir = S_ISDIR(st.st_mode);
      }
      if (!is_dir) {
        // unlinkat never follows a symlink: the link itself goes, its target is untouched.
        if (unlinkat(dirfd, e.name.c_str(), 0) == 0 || errno == ENOENT) {
          frame.progress = true;
          continue;
        }
        // EISDIR: swapped for a directory since readdir; handle it as one.
        if (errno != EISDIR) return ErrnoStatus("remove " + path + ": unlink entry");
      }
      if (stack.size() >= kMaxRemoveDepth) {
        return ResourceExhausted("remove " + path + ": directory tree deeper than " +
                                 std::to_string(kMaxRemoveDepth) + " levels");
      }
      int child = OpenSubdirForRemove(dirfd, e.name);
      if (child < 0) {
        if (errno == ENOENT) continue;
        if (errno == EXDEV) {
          return PermissionDenied("remove " + path + ": refusing to cross into another mount");
        }
        if (errno == ENOTDIR || errno == ELOOP) {
          // Swapped for a file or symlink since readdir: remove the entry itself.
          if (unlinkat(dirfd, e.name.c_str(), 0) == 0 || errno == ENOENT) continue;
        }
        return ErrnoStatus("remove " + path + ": open subdirectory");
      }
      frame.resume = e.next_offset;
      stack.push_back(Frame{UniqueFd(child), e.name});  // invalidates `frame`
      descended = true;
      break;
    }
    if (descended) continue;

    // The directory read as empty: remove it from the level below.
    const int below = stack.size() >= 2 ? stack[stack.size() - 2].fd.get() : parent_fd;
    Frame& done = stack.back();
    if (unlinkat(below, done.name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) {
      stack.pop_back();
      if (!stack.empty()) stack.back().progress = true;
      continue;
    }
    // Another pass while the last one still made progress (or was one of the first few: an
    // entry may have been created right after the directory read as empty).
    if (errno == ENOTEMPTY && done.passes < kMaxRemovePasses &&
        (done.progress || done.passes < 3)) {
      done.resume = 0;
      done.passes++;
      done.progress = false;
      continue;
    }
    if (errno == ENOTEMPTY) {
      return Status(StatusCode::kConflict,
                    "remove " + path + ": directory keeps changing during removal", ENOTEMPTY);
    }
    return ErrnoStatus("remove " + path + ": rmdir");
  }
  return Status::Ok();
}

}  // namespace

// --- public ---------------------------------------------------------------------------------

Status ValidateSandboxPath(std::string_view path) {
  if (path.empty()) return InvalidArgument("path is empty");
  if (path.size() > kMaxPathBytes) return InvalidArgument("path is longer than 4096 bytes");
  if (path.find('\0') != std::string_view::npos) return InvalidArgument("path contains NUL");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end - start > kMaxComponentBytes) {
      return InvalidArgument("path component is longer than 255 bytes");
    }
    start = end + 1;
  }
  return Status::Ok();
}

SandboxFiles::SandboxFiles(UniqueFd root_fd, SandboxIdentity identity)
    : root_(std::move(root_fd)), id_(identity) {}

Status SandboxFiles::ReadFile(std::string_view path, uint64_t max_bytes,
                              const std::function<Status(std::string_view)>& sink) const {
  return NoThrow("read", [&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(ValidateSandboxPath(path));
    const std::string p(path);
    Result<UniqueFd> opened = AsSandboxUser(id_, [&]() -> Result<UniqueFd> {
      // The final component is followed like every other one: RESOLVE_IN_ROOT scopes a
      // symlink's target to the sandbox root, so this reads what `cat` inside would read.
      // O_NONBLOCK: opening a FIFO for reading would otherwise block until a writer appears,
      // letting the sandbox hang a daemon thread. O_NOCTTY: a tty never becomes ours.
      int fd = OpenAt2(root_.get(), p, O_RDONLY | O_NONBLOCK | O_NOCTTY, kInRoot);
      if (fd < 0) return ErrnoStatus("open " + p);
      UniqueFd file(fd);
      PADDOCK_RETURN_IF_ERROR(RefusePseudoFs(file.get(), p));
      struct stat st {};
      if (fstat(file.get(), &st) != 0) return ErrnoStatus("stat " + p);
      if (!S_ISREG(st.st_mode)) return InvalidArgument("read " + p + ": not a regular file");
      if (static_cast<uint64_t>(st.st_size) > max_bytes) {
        return ResourceExhausted("read " + p + ": file is larger than " +
                                 std::to_string(max_bytes) + " bytes");
      }
      int flags = fcntl(file.get(), F_GETFL);
      if (flags < 0 || fcntl(file.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
        return ErrnoStatus("fcntl " + p);
      }
      return file;
    });
    if (!opened.ok()) return opened.status();
    const int fd = opened->get();

    // Reading an fd needs no credentials (access was checked at open), so the loop and the
    // sink run with the thread's normal identity.
    std::string buf(kIoChunkBytes, '\0');
    uint64_t total = 0;
    for (;;) {
      // Ask for at most one byte beyond the cap: a file growing while we read is detected
      // without reading an unbounded amount.
      const uint64_t remaining = max_bytes - total;
      const size_t want = remaining >= kIoChunkBytes ? kIoChunkBytes : remaining + 1;
      ssize_t n = read(fd, buf.data(), want);
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("read " + p);
      }
      if (n == 0) break;
      if (static_cast<uint64_t>(n) > remaining) {
        return ResourceExhausted("read " + p + ": file grew beyond " + std::to_string(max_bytes) +
                                 " bytes");
      }
      total += static_cast<uint64_t>(n);
      PADDOCK_RETURN_IF_ERROR(sink(std::string_view(buf.data(), static_cast<size_t>(n))));
    }
    return Status::Ok();
  });
}

Status SandboxFiles::WriteFile(std::string_view path, uint32_t mode, uint64_t max_bytes,
                               const std::function<Result<std::string>()>& source) const {
  return NoThrow("write", [&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(ValidateSandboxPath(path));
    const std::string p(path);
    const PathParts parts = SplitPath(path);
    PADDOCK_RETURN_IF_ERROR(RequireEntryName(parts, p, "write"));

    UniqueFd dir, file;
    std::string tmp_name;
    PADDOCK_RETURN_IF_ERROR(AsSandboxUser(id_, [&]() -> Status {
      PADDOCK_ASSIGN_OR_RETURN(dir, OpenParentDir(root_.get(), parts, p));
      struct stat st {};
      if (fstatat(dir.get(), parts.base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        // Fail before streaming the whole upload; renameat would refuse it anyway (EISDIR).
        if (S_ISDIR(st.st_mode)) return InvalidArgument("write " + p + ": is a directory");
      } else if (errno != ENOENT) {
        return ErrnoStatus("stat " + p);
      }
      const std::string suffix = RandomHex(8);
      tmp_name = ".paddock-upload-" + suffix;
      // A fresh file (O_EXCL, O_NOFOLLOW) that the sandbox cannot have prepared: writing into
      // an existing `path` instead would write through a hard link the sandbox planted to a
      // file it cannot otherwise modify, and would expose partial content.
      int fd = openat(dir.get(), tmp_name.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0) {
        tmp_name.clear();
        return ErrnoStatus("create temporary file for " + p);
      }
      file.reset(fd);
      return Status::Ok();
    }));

    // From here on every exit that is not a successful rename removes the temporary file.
    struct TempCleanup {
      const SandboxIdentity& id;
      int dirfd;
      const std::string& name;
      bool armed = true;
      ~TempCleanup() {
        if (!armed) return;
        (void)AsSandboxUser(id, [&]() -> Status {
          unlinkat(dirfd, name.c_str(), 0);
          return Status::Ok();
        });
      }
    } cleanup{id_, dir.get(), tmp_name};

    uint64_t total = 0;
    for (;;) {
      Result<std::string> chunk = source();
      if (!chunk.ok()) return chunk.status();
      if (chunk->empty()) break;
      if (chunk->size() > max_bytes - total) {
        return ResourceExhausted("write " + p + ": more than " + std::to_string(max_bytes) +
                                 " bytes");
      }
      total += chunk->size();
      // Written as the sandbox user too: root may dip into blocks reserved for root
      // (CAP_SYS_RESOURCE) that the sandbox user cannot.
      PADDOCK_RETURN_IF_ERROR(
          AsSandboxUser(id_, [&]() -> Status { return WriteAll(file.get(), *chunk, p); }));
    }
    PADDOCK_RETURN_IF_ERROR(AsSandboxUser(id_, [&]() -> Status {
      // Permission bits only: an upload never creates setuid/setgid/sticky files.
      if (fchmod(file.get(), mode & 0777) != 0) return ErrnoStatus("chmod " + p);
      // Both names are relative to the same directory fd, so a directory swapped in the
      // meantime cannot redirect the rename. Replacing a symlink at `path` replaces the link,
      // never its target.
      if (renameat(dir.get(), tmp_name.c_str(), dir.get(), parts.base.c_str()) != 0) {
        return ErrnoStatus("write " + p + ": rename into place");
      }
      return Status::Ok();
    }));
    cleanup.armed = false;
    return Status::Ok();
  });
}

Result<std::vector<FileStat>> SandboxFiles::ListDir(std::string_view path) const {
  return NoThrow("list", [&]() -> Result<std::vector<FileStat>> {
    PADDOCK_RETURN_IF_ERROR(ValidateSandboxPath(path));
    const std::string p(path);
    return AsSandboxUser(id_, [&]() -> Result<std::vector<FileStat>> {
      int fd = OpenAt2(root_.get(), p, O_RDONLY | O_DIRECTORY | O_NONBLOCK, kInRoot);
      if (fd < 0) return ErrnoStatus("open " + p);
      UniqueFd dir(fd);
      PADDOCK_RETURN_IF_ERROR(RefusePseudoFs(dir.get(), p));
      DirReader reader(dir.get());
      std::vector<FileStat> out;
      DirEntry e;
      for (;;) {
        PADDOCK_ASSIGN_OR_RETURN(bool more, reader.Next(&e));
        if (!more) break;
        if (out.size() >= kMaxListEntries) {
          return ResourceExhausted("list " + p + ": more than " + std::to_string(kMaxListEntries) +
                                   " entries");
        }
        Result<FileStat> st = StatEntry(dir.get(), e.name, p, id_);
        if (!st.ok()) {
          if (st.status().err() == ENOENT) continue;  // removed since readdir
          return st.status();
        }
        out.push_back(std::move(st).value());
      }
      std::sort(out.begin(), out.end(),
                [](const FileStat& a, const FileStat& b) { return a.name < b.name; });
      return out;
    });
  });
}

Result<FileStat> SandboxFiles::Stat(std::string_view path) const {
  return NoThrow("stat", [&]() -> Result<FileStat> {
    PADDOCK_RETURN_IF_ERROR(ValidateSandboxPath(path));
    const std::string p(path);
    const PathParts parts = SplitPath(path);
    return AsSandboxUser(id_, [&]() -> Result<FileStat> {
      if (parts.base.empty() || IsDotName(parts.base)) {
        // The root, or a path ending in "." / "..": a directory with no entry of its own to
        // lstat, so stat the directory it resolves to.
        int fd = OpenAt2(root_.get(), p, O_PATH | O_DIRECTORY, kInRoot);
        if (fd < 0) return ErrnoStatus("stat " + p);
        UniqueFd dir(fd);
        PADDOCK_RETURN_IF_ERROR(RefusePseudoFs(dir.get(), p));
        struct stat st {};
        if (fstat(dir.get(), &st) != 0) return ErrnoStatus("stat " + p);
        return MakeFileStat(parts.base.empty() ? "/" : parts.base, st, id_);
      }
      PADDOCK_ASSIGN_OR_RETURN(UniqueFd dir, OpenParentDir(root_.get(), parts, p));
      return StatEntry(dir.get(), parts.base, p, id_);
    });
  });
}

Status SandboxFiles::MakeDirs(std::string_view path, uint32_t mode) const {
  return NoThrow("mkdir", [&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(ValidateSandboxPath(path));
    std::vector<std::string> comps;
    for (size_t start = 0; start <= path.size();) {
      size_t end = std::min(path.find('/', start), path.size());
      std::string_view c = path.substr(start, end - start);
      if (!c.empty() && c != ".") comps.emplace_back(c);
      start = end + 1;
    }
    return AsSandboxUser(id_, [&]() -> Status {
      UniqueFd cur;
      int cur_fd = root_.get();
      std::string prefix;  // resolved from the root under RESOLVE_IN_ROOT
      for (const std::string& comp : comps) {
        std::string next = prefix.empty() ? comp : prefix + "/" + comp;
        if (comp == "..") {
          // Only RESOLVE_IN_ROOT from the root fd clamps ".." at the sandbox root; an openat
          // of ".." relative to `cur_fd` could climb out of it.
          int fd = OpenAt2(root_.get(), next, O_PATH | O_DIRECTORY, kInRoot);
          if (fd < 0) return ErrnoStatus("mkdir " + next);
          cur.reset(fd);
          cur_fd = fd;
          prefix = std::move(next);
          continue;
        }
        // mkdir in cgroupfs creates a cgroup; in other pseudo-filesystems it is kernel state.
        PADDOCK_RETURN_IF_ERROR(RefusePseudoFs(cur_fd, next));
        const bool created = mkdirat(cur_fd, comp.c_str(), mode & 07777) == 0;
        if (!created && errno != EEXIST) return ErrnoStatus("mkdir " + next);
        // A plain directory is opened relative to the directory we hold, following nothing.
        // An existing symlink (e.g. /var/run -> /run) fails that and is followed by resolving
        // the prefix again from the root, where RESOLVE_IN_ROOT keeps its target inside.
        bool relative = true;
        int fd = OpenAt2(cur_fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW, kPlainName);
        if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
          relative = false;
          fd = OpenAt2(root_.get(), next, O_PATH | O_DIRECTORY, kInRoot);
        }
        if (fd < 0) {
          if (!created && (errno == ENOTDIR || errno == ENOENT || errno == ELOOP)) {
            return Status(StatusCode::kAlreadyExists,
                          "mkdir " + next + ": exists and is not a directory", errno);
          }
          return ErrnoStatus("mkdir " + next);
        }
        cur.reset(fd);
        cur_fd = fd;
        if (created && relative) {
          // mkdir applied the daemon's umask; give the directory exactly the requested mode.
          struct stat st {};
          if (fstat(cur_fd, &st) != 0) return ErrnoStatus("stat " + next);
          PADDOCK_RETURN_IF_ERROR(ChmodPathFd(cur_fd, st, mode & 07777, next, nullptr));
        }
        prefix = std::move(next);
      }
      return Status::Ok();
    });
  });
}

Status SandboxFiles::Remove(std::string_view path, bool recursive) const {
  return NoThrow("remove", [&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(ValidateSandboxPath(path));
    const std::string p(path);
    const PathParts parts = SplitPath(path);
    PADDOCK_RETURN_IF_ERROR(RequireEntryName(parts, p, "remove"));
    return AsSandboxUser(id_, [&]() -> Status {
      PADDOCK_ASSIGN_OR_RETURN(UniqueFd dir, OpenParentDir(root_.get(), parts, p));
      struct stat st {};
      if (fstatat(dir.get(), parts.base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return ErrnoStatus("remove " + p);
      }
      if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(dir.get(), parts.base.c_str(), 0) != 0) return ErrnoStatus("remove " + p);
        return Status::Ok();
      }
      if (recursive) return RemoveTree(dir.get(), parts.base, p);
      if (unlinkat(dir.get(), parts.base.c_str(), AT_REMOVEDIR) != 0) {
        if (errno == ENOTEMPTY || errno == EEXIST) {
          return Status(StatusCode::kFailedPrecondition, "remove " + p + ": directory is not empty",
                        errno);
        }
        return ErrnoStatus("remove " + p);
      }
      return Status::Ok();
    });
  });
}

Status SandboxFiles::Rename(std::string_view from, std::string_view to) const {
  return NoThrow("rename", [&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(ValidateSandboxPath(from));
    PADDOCK_RETURN_IF_ERROR(ValidateSandboxPath(to));
    const std::string f(from), t(to);
    const PathParts fp = SplitPath(from), tp = SplitPath(to);
    PADDOCK_RETURN_IF_ERROR(RequireEntryName(fp, f, "rename"));
    PADDOCK_RETURN_IF_ERROR(RequireEntryName(tp, t, "rename"));
    return AsSandboxUser(id_, [&]() -> Status {
      PADDOCK_ASSIGN_OR_RETURN(UniqueFd from_dir, OpenParentDir(root_.get(), fp, f));
      PADDOCK_ASSIGN_OR_RETURN(UniqueFd to_dir, OpenParentDir(root_.get(), tp, t));
      if (renameat(from_dir.get(), fp.base.c_str(), to_dir.get(), tp.base.c_str()) != 0) {
        return ErrnoStatus("rename " + f + " to " + t);
      }
      return Status::Ok();
    });
  });
}

Status SandboxFiles::Chmod(std::string_view path, uint32_t mode) const {
  return NoThrow("chmod", [&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(ValidateSandboxPath(path));
    const std::string p(path);
    return AsSandboxUser(id_, [&]() -> Status {
      // O_PATH|O_NOFOLLOW pins the final inode without following it; a symlink there is
      // rejected rather than chmod-ing whatever it points to.
      int fd = OpenAt2(root_.get(), p, O_PATH | O_NOFOLLOW, kInRoot);
      if (fd < 0) return ErrnoStatus("chmod " + p);
      UniqueFd target(fd);
      struct stat st {};
      if (fstat(target.get(), &st) != 0) return ErrnoStatus("stat " + p);
      if (S_ISLNK(st.st_mode)) return InvalidArgument("chmod " + p + ": is a symlink");
      PADDOCK_RETURN_IF_ERROR(RefusePseudoFs(target.get(), p));
      return ChmodPathFd(target.get(), st, mode & 07777, p, [&]() -> Result<UniqueFd> {
        int rfd = OpenAt2(root_.get(), p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, kInRoot);
        if (rfd < 0) return ErrnoStatus("chmod " + p);
        return UniqueFd(rfd);
      });
    });
  });
}

}  // namespace paddock::runtime::linux
