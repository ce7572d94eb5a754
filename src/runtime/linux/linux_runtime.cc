#include "runtime/linux/linux_runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <thread>

#include "common/random.h"
#include "runtime/linux/init_protocol.h"
#include "runtime/linux/sandbox_files.h"
#include "runtime/linux/seccomp_policy.h"
#include "runtime/linux/template_store.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

namespace paddock::runtime::linux {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Each sandbox maps uid/gid 0..65535 inside onto its own host range, so a process that escaped
// one sandbox would still be a stranger to every other sandbox and to the host.
constexpr uid_t kHostIdBase = 0x10000000;  // 268435456: far above any real account
constexpr uint32_t kIdsPerSandbox = 65536;
constexpr uint32_t kMaxSlots = 4096;
constexpr uint32_t kSandboxUid = 1000;

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

Status WriteWholeFile(const std::string& path, const std::string& content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open " + path);
  if (::write(fd.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size()))
    return ErrnoStatus("write " + path);
  return Status::Ok();
}

// A host uid range reserved with an flock on <state_dir>/uid-slots/<n>.lock. The lock dies with
// the process, so independent runtimes on one host (a daemon and a one-shot `sandbox run`)
// never hand out the same range, and a crashed daemon's ranges free themselves.
class UidSlot {
 public:
  static Result<UidSlot> Acquire(const std::string& dir) {
    static std::atomic<uint32_t> next{static_cast<uint32_t>(std::random_device{}()) % kMaxSlots};
    for (uint32_t tries = 0; tries < kMaxSlots; ++tries) {
      uint32_t slot = next.fetch_add(1) % kMaxSlots;
      std::string path = dir + "/" + std::to_string(slot) + ".lock";
      UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
      if (!fd) return ErrnoStatus("open uid slot lock " + path);
      if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
        UidSlot s;
        s.slot_ = slot;
        s.lock_ = std::move(fd);
        return s;
      }
    }
    return ResourceExhausted("no free uid ranges (all " + std::to_string(kMaxSlots) + " in use)");
  }
  uid_t base() const { return kHostIdBase + slot_ * kIdsPerSandbox; }

 private:
  uint32_t slot_ = 0;
  UniqueFd lock_;
};

struct ExecState {
  ExecId id = 0;
  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  bool done = false;
  bool sandbox_died = false;
  proto::ExitedMsg exited;
  UniqueFd done_event;  // eventfd, written when done (for poll-based waiters)
  Clock::time_point start;
  std::chrono::milliseconds timeout{0};
};

// Longer chains must be squashed by the caller: the overlay's options (one page) name every
// layer, and each layer costs a mount.
constexpr size_t kMaxLayers = 64;
constexpr size_t kMaxBinds = 16;

// A bind target: absolute and normalised (no empty, "." or ".." components, no trailing '/'),
// not "/" and not where the init mounts its own filesystems.
Status ValidateBindTarget(const std::string& t) {
  const std::string what = "binds: target '" + t + "' ";
  if (t.size() < 2 || t[0] != '/' || t.back() == '/' || t.size() > 1024 ||
      t.find('\0') != std::string::npos)
    return InvalidArgument(what + "must be an absolute path other than /");
  for (size_t pos = 1; pos <= t.size();) {
    size_t end = t.find('/', pos);
    if (end == std::string::npos) end = t.size();
    const std::string_view comp(t.data() + pos, end - pos);
    if (comp.empty() || comp == "." || comp == "..")
      return InvalidArgument(what + "must not contain empty, '.' or '..' components");
    pos = end + 1;
  }
  for (const std::string p : {"/proc", "/dev", "/sys", "/tmp"}) {
    if (t == p || t.rfind(p + "/", 0) == 0) return InvalidArgument(what + "must not be under " + p);
  }
  return Status::Ok();
}

// A detached copy of the mount at `path` (not its submounts), taken before anything exists for
// the sandbox so a bad path leaves nothing behind. AT_SYMLINK_NOFOLLOW: the final component
// must itself be the directory.
Result<UniqueFd> OpenHostTree(const std::string& what, const std::string& path) {
  if (path.empty() || path[0] != '/' || path.find('\0') != std::string::npos)
    return InvalidArgument(what + ": '" + path + "' must be an absolute host path");
  UniqueFd fd(
      static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, path.c_str(),
                                 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW)));
  if (!fd) {
    if (errno == ENOENT) return NotFound(what + ": " + path + " does not exist");
    return ErrnoStatus(what + ": open_tree " + path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) < 0) return ErrnoStatus(what + ": stat " + path);
  if (!S_ISDIR(st.st_mode)) return InvalidArgument(what + ": " + path + " is not a directory");
  return fd;
}

// Makes a detached tree id-mapped through the sandbox's user namespace (on-disk id k appears
// as in-sandbox id k, i.e. host base+k), private (no propagation to or from the host) and
// nosuid/nodev, plus `extra` (read-only). Needs the namespace's uid_map to be written.
Status IdmapTree(int tree, int userns, uint64_t extra, const std::string& what) {
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | extra;
  attr.userns_fd = static_cast<uint64_t>(userns);
  attr.propagation = MS_PRIVATE;
  if (::syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
    return ErrnoStatus(what + ": id-mapped mount");
  return Status::Ok();
}

uint32_t InsideId(uint32_t host, uid_t base) {
  return host >= base && host - base < kIdsPerSandbox ? host - base : 65534;
}

// True for an overlay whiteout: a character device 0/0.
bool IsWhiteout(const struct stat& st) { return S_ISCHR(st.st_mode) && st.st_rdev == 0; }

// Overlay xattrs that name the original layer set (file handles, fs uuid, link counts): they
// mean nothing, or something wrong, once the entry lives in another layer stack.
bool StaleOverlayXattr(std::string_view name) {
  for (std::string_view n : {"user.overlay.origin", "user.overlay.impure", "user.overlay.nlink",
                             "user.overlay.upper", "user.overlay.uuid"}) {
    if (name == n) return true;
  }
  return false;
}

// Copies a sandbox's upper dir into a host directory, the daemon acting as host root on
// content the sandbox wrote: every source entry is reached with *at() calls relative to an
// already opened directory, never through a symlink (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW,
// readlinkat), and checked to be the inode lstat saw. Only data extents are copied (a sparse
// terabyte stays sparse), hard links stay links (one copy of the data), and only whiteouts,
// fifos, regular files, directories and symlinks are recreated: no other device node ever
// lands on the host.
class LayerCopier {
 public:
  LayerCopier(uid_t base, int dst_root) : base_(base), dst_root_(dst_root) {}

  // Consumes `src` (an open file description of its own: its readdir offset is used).
  Status CopyTree(UniqueFd src, int dst) { return CopyDir(std::move(src), dst, "", 0); }
  const LayerStats& stats() const { return stats_; }

 private:
  // Each level holds two fds (source and copy) while below it: the depth is bounded so a
  // sandbox's deep tree cannot exhaust the daemon's descriptors (or its stack).
  static constexpr int kMaxDepth = 128;

  Status Fail(const std::string& what, const std::string& rel) {
    return ErrnoStatus("checkpoint: " + what + " /" + rel);
  }

  Status CopyDir(UniqueFd src, int dst, const std::string& rel, int depth) {
    std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(src.get()), ::closedir);
    if (!d) return Fail("read dir", rel);
    const int sfd = src.release();  // owned by `d` now
    errno = 0;
    while (dirent* de = ::readdir(d.get())) {
      const std::string name = de->d_name;
      if (name == "." || name == "..") continue;
      PADDOCK_RETURN_IF_ERROR(
          CopyEntry(sfd, dst, name, rel.empty() ? name : rel + "/" + name, depth + 1));
      errno = 0;
    }
    if (errno != 0) return Fail("read dir", rel);
    return Status::Ok();
  }

  Status CopyEntry(int src_dir, int dst_dir, const std::string& name, const std::string& rel,
                   int depth) {
    const char* n = name.c_str();
    struct stat st;
    if (::fstatat(src_dir, n, &st, AT_SYMLINK_NOFOLLOW) < 0) return Fail("stat", rel);
    const uid_t uid = InsideId(st.st_uid, base_);
    const gid_t gid = InsideId(st.st_gid, base_);
    const mode_t perm = st.st_mode & 07777;
    const timespec times[2] = {st.st_atim, st.st_mtim};
    if (S_ISDIR(st.st_mode)) {
      if (depth > kMaxDepth)
        return Status(StatusCode::kResourceExhausted,
                      "checkpoint: tree deeper than " + std::to_string(kMaxDepth) + " at /" + rel);
      UniqueFd s(::openat(src_dir, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!s) return Fail("open dir", rel);
      PADDOCK_RETURN_IF_ERROR(SameInode(s.get(), st, rel));
      if (::mkdirat(dst_dir, n, 0700) < 0) return Fail("mkdir", rel);
      UniqueFd d(::openat(dst_dir, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!d) return Fail("open new dir", rel);
      ++stats_.files;
      PADDOCK_RETURN_IF_ERROR(CopyXattrs(s.get(), d.get(), rel));
      PADDOCK_RETURN_IF_ERROR(CopyDir(std::move(s), d.get(), rel, depth));
      // Times last: creating the children changed them.
      return FinishFd(d.get(), uid, gid, perm, times, rel);
    }
    if (S_ISREG(st.st_mode)) {
      const std::pair<dev_t, ino_t> key{st.st_dev, st.st_ino};
      if (st.st_nlink > 1) {
        if (auto it = links_.find(key); it != links_.end()) {
          if (::linkat(dst_root_, it->second.c_str(), dst_dir, n, 0) < 0) return Fail("link", rel);
          ++stats_.files;
          return Status::Ok();
        }
      }
      UniqueFd s(::openat(src_dir, n, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
      if (!s) return Fail("open", rel);
      PADDOCK_RETURN_IF_ERROR(SameInode(s.get(), st, rel));
      UniqueFd d(::openat(dst_dir, n, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!d) return Fail("create", rel);
      PADDOCK_RETURN_IF_ERROR(CopyData(s.get(), d.get(), st.st_size, rel));
      ++stats_.files;
      if (st.st_nlink > 1) links_[key] = rel;
      PADDOCK_RETURN_IF_ERROR(CopyXattrs(s.get(), d.get(), rel));
      return FinishFd(d.get(), uid, gid, perm, times, rel);
    }
    if (S_ISLNK(st.st_mode)) {
      std::string target(static_cast<size_t>(std::min<off_t>(st.st_size, PATH_MAX)) + 1, '\0');
      ssize_t len = ::readlinkat(src_dir, n, target.data(), target.size());
      if (len < 0) return Fail("readlink", rel);
      if (static_cast<size_t>(len) >= target.size())
        return Status(StatusCode::kConflict,
                      "checkpoint: symlink /" + rel + " changed while copied");
      target.resize(static_cast<size_t>(len));
      if (::symlinkat(target.c_str(), dst_dir, n) < 0) return Fail("symlink", rel);
    } else if (IsWhiteout(st)) {
      if (::mknodat(dst_dir, n, S_IFCHR | 0, 0) < 0) return Fail("whiteout", rel);
    } else if (S_ISFIFO(st.st_mode)) {
      if (::mkfifoat(dst_dir, n, 0600) < 0) return Fail("mkfifo", rel);
    } else {
      return Status::Ok();  // sockets (meaningless in a copy), device nodes (never on the host)
    }
    ++stats_.files;
    if (::fchownat(dst_dir, n, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) return Fail("chown", rel);
    // A symlink's mode is fixed; a whiteout's and a fifo's are set after chown (which clears
    // set-id bits). Neither is a symlink (we just created it), so following is moot.
    if (!S_ISLNK(st.st_mode) && ::fchmodat(dst_dir, n, perm, 0) < 0) return Fail("chmod", rel);
    if (::utimensat(dst_dir, n, times, AT_SYMLINK_NOFOLLOW) < 0) return Fail("set times", rel);
    return Status::Ok();
  }

  Status SameInode(int fd, const struct stat& want, const std::string& rel) {
    struct stat got;
    if (::fstat(fd, &got) < 0) return Fail("stat", rel);
    if (got.st_dev != want.st_dev || got.st_ino != want.st_ino ||
        (got.st_mode & S_IFMT) != (want.st_mode & S_IFMT))
      return Status(StatusCode::kConflict, "checkpoint: /" + rel + " changed while copied");
    return Status::Ok();
  }

  // Owner, mode (after chown, which clears set-id bits), then times (last: everything before
  // changes them).
  Status FinishFd(int dst, uid_t uid, gid_t gid, mode_t perm, const timespec times[2],
                  const std::string& rel) {
    if (::fchown(dst, uid, gid) < 0) return Fail("chown", rel);
    if (::fchmod(dst, perm) < 0) return Fail("chmod", rel);
    if (::futimens(dst, times) < 0) return Fail("set times", rel);
    return Status::Ok();
  }

  // user.* only: overlay's own markers (user.overlay.opaque, user.overlay.whiteout...) and the
  // sandbox's. security.* (file capabilities) and trusted.* are never copied to the host.
  Status CopyXattrs(int src, int dst, const std::string& rel) {
    ssize_t len = ::flistxattr(src, nullptr, 0);
    if (len < 0) return errno == ENOTSUP ? Status::Ok() : Fail("list xattrs", rel);
    std::string names(static_cast<size_t>(len), '\0');
    len = ::flistxattr(src, names.data(), names.size());
    if (len < 0) return Fail("list xattrs", rel);
    names.resize(static_cast<size_t>(len));
    std::string value;
    for (size_t pos = 0; pos < names.size();) {
      const std::string name(names.c_str() + pos);
      pos += name.size() + 1;
      if (name.rfind("user.", 0) != 0 || StaleOverlayXattr(name)) continue;
      ssize_t vlen = ::fgetxattr(src, name.c_str(), nullptr, 0);
      if (vlen < 0) return Fail("read xattr " + name + " of", rel);
      value.assign(static_cast<size_t>(vlen), '\0');
      vlen = ::fgetxattr(src, name.c_str(), value.data(), value.size());
      if (vlen < 0) return Fail("read xattr " + name + " of", rel);
      if (::fsetxattr(dst, name.c_str(), value.data(), static_cast<size_t>(vlen), 0) < 0)
        return Fail("write xattr " + name + " of", rel);
    }
    return Status::Ok();
  }

  // Copies only the data extents (SEEK_DATA/SEEK_HOLE) and sets the length, so the copy takes
  // no more host disk than the sandbox's writable layer held.
  Status CopyData(int src, int dst, off_t size, const std::string& rel) {
    off_t off = 0;
    while (off < size) {
      off_t data = ::lseek(src, off, SEEK_DATA);
      if (data < 0) {
        if (errno == ENXIO) break;  // only a hole remains
        return Fail("seek data in", rel);
      }
      off_t hole = ::lseek(src, data, SEEK_HOLE);
      if (hole < 0) return Fail("seek hole in", rel);
      hole = std::min(hole, size);
      if (::lseek(dst, data, SEEK_SET) < 0) return Fail("seek in copy of", rel);
      off_t pos = data;
      while (pos < hole) {
        ssize_t n =
            ::sendfile(dst, src, &pos, static_cast<size_t>(std::min<off_t>(hole - pos, 1 << 30)));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Fail("copy", rel);
        if (n == 0) break;  // shrank under us: the length below still matches lstat
        stats_.bytes += static_cast<uint64_t>(n);
      }
      off = hole;
    }
    if (::ftruncate(dst, size) < 0) return Fail("set length of", rel);
    return Status::Ok();
  }

  uid_t base_;
  int dst_root_;
  LayerStats stats_;
  std::map<std::pair<dev_t, ino_t>, std::string> links_;  // hard-linked inode -> copy (rel path)
};

}  // namespace

struct Sandbox {
  SandboxInfo info;
  UidSlot slot;
  std::optional<SandboxCgroup> cgroup;
  UniqueFd ctl;
  UniqueFd pidfd;
  std::unique_ptr<SandboxFiles> files;
  std::vector<std::string> env;
  // Serialises what freezes and thaws the cgroup (Pause, Resume, Checkpoint): a Resume in the
  // middle of a checkpoint would let the sandbox change the layer being copied.
  std::mutex freeze_mu;

  std::mutex send_mu;  // one writer at a time on the control socket
  std::mutex mu;       // guards everything below
  bool ready = false;  // setup finished (written once by Create, before it is shared)
  bool dead = false;
  bool paused = false;
  bool checkpointing = false;  // frozen by Checkpoint (not a Pause)
  // The writable layer's upper dir (a tmpfs in the sandbox's mount namespace), sent by the init
  // with Ready. Users take their own open file description (openat ".") under `mu`: Teardown
  // closes this one, and readdir offsets must not be shared between concurrent walks.
  UniqueFd upper;
  std::map<ExecId, std::shared_ptr<ExecState>> execs;
  uint64_t next_exec = 1;
  uint64_t oom_seen = 0;
};

// One thread multiplexes every sandbox's control socket with epoll and completes exec states.
class ControlReactor {
 public:
  ControlReactor() {
    epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
    wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 0;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
    thread_ = std::thread([this] { Loop(); });
  }
  ~ControlReactor() {
    stop_ = true;
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    thread_.join();
  }

  void Register(const std::shared_ptr<Sandbox>& sb) {
    std::lock_guard lock(mu_);
    uint64_t token = ++next_token_;
    tokens_[token] = sb;
    by_fd_[sb->ctl.get()] = token;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = token;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, sb->ctl.get(), &ev);
  }
  void Unregister(const Sandbox& sb) {
    std::lock_guard lock(mu_);
    auto it = by_fd_.find(sb.ctl.get());
    if (it == by_fd_.end()) return;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, sb.ctl.get(), nullptr);
    tokens_.erase(it->second);
    by_fd_.erase(it);
  }

  // Marks the sandbox dead and releases everyone waiting on its commands. The exec states stay
  // registered (Exec/Wait remove them via ToResult): a background command nobody has waited
  // for yet must still report "killed" from a later Wait, not "exec not found". Nothing new
  // can be added once `dead` is set, and the map goes away with the Sandbox.
  static void FailAll(Sandbox& sb) {
    std::lock_guard lock(sb.mu);
    sb.dead = true;
    for (auto& [id, st] : sb.execs) Complete(*st, nullptr);
  }

  static void Complete(ExecState& st, const proto::ExitedMsg* m) {
    {
      std::lock_guard lock(st.mu);
      if (st.done) return;
      st.done = true;
      if (m) {
        st.exited = *m;
      } else {
        st.sandbox_died = true;
        st.exited.signal = SIGKILL;
        st.exited.killed = 1;
      }
    }
    st.cv.notify_all();
    uint64_t one = 1;
    (void)!::write(st.done_event.get(), &one, sizeof one);
  }

 private:
  void Loop() {
    epoll_event events[64];
    std::vector<uint8_t> buf;
    while (!stop_) {
      int n = ::epoll_wait(epoll_.get(), events, 64, -1);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == 0) continue;
        std::shared_ptr<Sandbox> sb;
        {
          std::lock_guard lock(mu_);
          auto it = tokens_.find(events[i].data.u64);
          if (it == tokens_.end()) continue;
          sb = it->second.lock();
        }
        if (!sb) continue;
        Drain(sb, &buf);
      }
    }
  }

  void Drain(const std::shared_ptr<Sandbox>& sb, std::vector<uint8_t>* buf) {
    while (true) {
      int fds[proto::kMaxFdsPerMessage];
      int nfds = 0;
      ssize_t n = proto::RecvPacket(sb->ctl.get(), buf, fds, &nfds, MSG_DONTWAIT);
      for (int i = 0; i < nfds; ++i) ::close(fds[i]);  // the init never sends fds
      if (n == -EAGAIN) return;
      if (n <= 0) {
        Unregister(*sb);
        FailAll(*sb);
        return;
      }
      proto::MessageReader r(buf->data(), buf->size());
      proto::MsgType type = r.Type();
      if (type == proto::MsgType::kStarted) {
        proto::StartedMsg m;
        if (!proto::Decode(r, &m)) continue;
        std::shared_ptr<ExecState> st = Find(*sb, m.exec_id);
        if (st) {
          std::lock_guard lock(st->mu);
          st->started = true;
        }
      } else if (type == proto::MsgType::kExited) {
        proto::ExitedMsg m;
        if (!proto::Decode(r, &m)) continue;
        std::shared_ptr<ExecState> st;
        {
          std::lock_guard lock(sb->mu);
          auto it = sb->execs.find(m.exec_id);
          if (it == sb->execs.end()) continue;
          st = it->second;
        }
        Complete(*st, &m);
      }
    }
  }

  static std::shared_ptr<ExecState> Find(Sandbox& sb, ExecId id) {
    std::lock_guard lock(sb.mu);
    auto it = sb.execs.find(id);
    return it == sb.execs.end() ? nullptr : it->second;
  }

  UniqueFd epoll_, wake_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  uint64_t next_token_ = 0;
  std::map<uint64_t, std::weak_ptr<Sandbox>> tokens_;
  std::map<int, uint64_t> by_fd_;
};

struct LinuxRuntime::Impl {
  LinuxRuntimeOptions opts;
  CgroupLayout layout;
  UniqueFd init_memfd;
  UniqueFd devnull;
  std::vector<uint8_t> seccomp_bpf;
  std::unique_ptr<TemplateStore> templates;
  std::string staging_dir, slots_dir;
  std::unique_ptr<ControlReactor> reactor;

  std::shared_mutex mu;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes;

  Result<std::shared_ptr<Sandbox>> Find(const std::string& id) {
    std::shared_lock lock(mu);
    auto it = sandboxes.find(id);
    if (it == sandboxes.end()) return NotFound("sandbox " + id + " not found");
    return it->second;
  }

  Result<std::shared_ptr<Sandbox>> FindLive(const std::string& id) {
    PADDOCK_ASSIGN_OR_RETURN(auto sb, Find(id));
    std::lock_guard lock(sb->mu);
    if (sb->dead) return FailedPrecondition("sandbox " + id + " is not running");
    return sb;
  }

  Result<pid_t> SpawnInit(int ctl_child, int cgroup_fd, int* pidfd);
  Status Teardown(Sandbox& sb);
  Result<std::shared_ptr<ExecState>> SendExec(Sandbox& sb, const ExecRequest& req, int fds[3]);
  Result<std::vector<std::string>> BuildEnv(const Sandbox& sb, const ExecRequest& req,
                                            const std::string& home) const;
  ExecResult ToResult(Sandbox& sb, ExecState& st);
};

Status ValidateSandboxId(const std::string& id) {
  // The id becomes a cgroup directory name and the hostname: keep it to [a-z0-9][a-z0-9-]{0,47}.
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  bool ok = !id.empty() && id.size() <= 48 && lower_alnum(id[0]);
  for (char c : id) ok = ok && (lower_alnum(c) || c == '-');
  if (!ok) return InvalidArgument("id: must match [a-z0-9][a-z0-9-]{0,47}");
  return Status::Ok();
}

Result<std::unique_ptr<LinuxRuntime>> LinuxRuntime::Open(LinuxRuntimeOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->opts = std::move(options);
  if (impl->opts.cgroup_layout) {
    impl->layout = *impl->opts.cgroup_layout;
  } else {
    PADDOCK_ASSIGN_OR_RETURN(impl->layout, DetectCgroupLayout());
  }
  std::error_code ec;
  impl->staging_dir = impl->opts.state_dir + "/staging";
  impl->slots_dir = impl->opts.state_dir + "/uid-slots";
  for (const auto& d : {impl->opts.state_dir, impl->staging_dir, impl->slots_dir}) {
    fs::create_directories(d, ec);
    if (ec) return Status(StatusCode::kInternal, "create " + d + ": " + ec.message());
  }
  ::chmod(impl->opts.state_dir.c_str(), 0711);
  // The overlay mount options are comma/colon separated; such characters in our own paths
  // would be misparsed (and could inject options).
  if (impl->staging_dir.find_first_of(",:") != std::string::npos)
    return InvalidArgument("state_dir: must not contain ',' or ':'");

  std::string init_path = impl->opts.init_path;
  if (init_path.empty()) {
    init_path = (fs::read_symlink("/proc/self/exe", ec).parent_path() / "paddock-init").string();
  }
  // Load paddock-init into a sealed memfd and exec it from there: /proc/self/exe of the
  // sandbox's pid 1 then points at an immutable in-memory copy, so nothing inside a sandbox
  // can overwrite the binary the host runs (CVE-2019-5736), and replacing the file on disk
  // does not affect running sandboxes.
  {
    UniqueFd src(::open(init_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!src) return ErrnoStatus("open paddock-init at " + init_path);
    int mfd = static_cast<int>(
        ::syscall(SYS_memfd_create, "paddock-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC));
    if (mfd < 0 && errno == EINVAL)
      mfd = static_cast<int>(
          ::syscall(SYS_memfd_create, "paddock-init", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (mfd < 0) return ErrnoStatus("memfd_create");
    impl->init_memfd.reset(mfd);
    char buf[65536];
    ssize_t n;
    while ((n = ::read(src.get(), buf, sizeof buf)) > 0) {
      if (::write(mfd, buf, static_cast<size_t>(n)) != n) return ErrnoStatus("copy paddock-init");
    }
    if (n < 0) return ErrnoStatus("read paddock-init");
    if (::fcntl(mfd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0)
      return ErrnoStatus("seal paddock-init memfd");
  }
  impl->devnull.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!impl->devnull) return ErrnoStatus("open /dev/null");

  PADDOCK_ASSIGN_OR_RETURN(std::vector<sock_filter> filter, BuildDefaultSeccompFilter());
  impl->seccomp_bpf.resize(filter.size() * sizeof(sock_filter));
  std::memcpy(impl->seccomp_bpf.data(), filter.data(), impl->seccomp_bpf.size());

  impl->templates = std::make_unique<TemplateStore>(impl->opts.template_dir);
  // A command that stops reading its stdin must not kill the daemon with SIGPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  impl->reactor = std::make_unique<ControlReactor>();
  return std::unique_ptr<LinuxRuntime>(new LinuxRuntime(std::move(impl)));
}

LinuxRuntime::LinuxRuntime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

LinuxRuntime::~LinuxRuntime() {
  for (const auto& sb : List()) (void)Destroy(sb.id);
  impl_->reactor.reset();
}

const CgroupLayout& LinuxRuntime::cgroup_layout() const { return impl_->layout; }

// Starts paddock-init in fresh namespaces. Between clone3 and execveat the child is a copy of
// this multi-threaded process, so it may only make raw syscalls (no allocation, no locks).
Result<pid_t> LinuxRuntime::Impl::SpawnInit(int ctl_child, int cgroup_fd, int* pidfd) {
  clone_args args{};
  args.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS |
               CLONE_NEWIPC | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<uint64_t>(pidfd);
  args.exit_signal = SIGCHLD;
  if (cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(cgroup_fd);
  }
  static char kArg0[] = "paddock-init";
  static char* const kArgv[] = {kArg0, nullptr};
  static char* const kEnvp[] = {nullptr};
  const int memfd = init_memfd.get(), null_fd = devnull.get();
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) {
    ::syscall(SYS_dup2, null_fd, 0);
    ::syscall(SYS_dup2, null_fd, 1);
    ::syscall(SYS_dup2, null_fd, 2);
    if (ctl_child == proto::kInitControlFd) {
      ::syscall(SYS_fcntl, ctl_child, F_SETFD, 0);
    } else {
      ::syscall(SYS_dup2, ctl_child, proto::kInitControlFd);
    }
    ::syscall(SYS_close_range, proto::kInitControlFd + 1, ~0u, CLOSE_RANGE_CLOEXEC);
    // Wait for the parent to write our uid/gid maps, then become root *of the new user
    // namespace* (host uid = the sandbox's base). execve keeps capabilities only for a euid
    // that is root in the current namespace; still being host root (unmapped here) would
    // make the init lose every capability at exec.
    char go = 0;
    if (::syscall(SYS_read, proto::kInitControlFd, &go, 1) != 1 || go != 'G')
      ::syscall(SYS_exit_group, 126);
    if (::syscall(SYS_setresgid, 0, 0, 0) != 0 || ::syscall(SYS_setresuid, 0, 0, 0) != 0 ||
        ::syscall(SYS_setgroups, 0, nullptr) != 0)
      ::syscall(SYS_exit_group, 126);
    ::syscall(SYS_execveat, memfd, "", kArgv, kEnvp, AT_EMPTY_PATH);
    ::syscall(SYS_exit_group, 127);
  }
  if (pid < 0) return ErrnoStatus("clone3 sandbox init");
  return static_cast<pid_t>(pid);
}

Result<SandboxInfo> LinuxRuntime::Create(const SandboxSpec& spec) {
  Impl& im = *impl_;
  const auto& lim = spec.limits;
  if (lim.cpus <= 0 || lim.cpus > 1024) return InvalidArgument("limits.cpus: must be in (0, 1024]");
  if (lim.memory_bytes < (16ull << 20))
    return InvalidArgument("limits.memory_bytes: minimum 16 MiB");
  if (lim.pids < 8 || lim.pids > 1000000)
    return InvalidArgument("limits.pids: must be in [8, 1e6]");
  if (lim.disk_bytes < (1ull << 20)) return InvalidArgument("limits.disk_bytes: minimum 1 MiB");
  if (lim.tmp_bytes < (1ull << 20)) return InvalidArgument("limits.tmp_bytes: minimum 1 MiB");
  if (lim.open_files < 16 || lim.open_files > (1u << 20))
    return InvalidArgument("limits.open_files: must be in [16, 1048576]");
  for (const auto& e : spec.env) {
    auto eq = e.find('=');
    if (eq == 0 || eq == std::string::npos || e.find('\0') != std::string::npos)
      return InvalidArgument("env: entries must be KEY=VALUE");
  }

  if (spec.layers.size() > kMaxLayers)
    return InvalidArgument("layers: at most " + std::to_string(kMaxLayers));
  if (spec.binds.size() > kMaxBinds)
    return InvalidArgument("binds: at most " + std::to_string(kMaxBinds));
  for (size_t i = 0; i < spec.binds.size(); ++i) {
    const std::string& t = spec.binds[i].target;
    PADDOCK_RETURN_IF_ERROR(ValidateBindTarget(t));
    // One bind inside another would make the init create the inner target in the outer host
    // directory; nothing needs that.
    for (size_t j = 0; j < i; ++j) {
      const std::string& u = spec.binds[j].target;
      if (t == u || t.rfind(u + "/", 0) == 0 || u.rfind(t + "/", 0) == 0)
        return InvalidArgument("binds: targets " + u + " and " + t + " overlap");
    }
  }
  // Detached copies of every layer and bind, taken now so a missing path leaves nothing on the
  // host; they are id-mapped once the sandbox's user namespace has its maps.
  std::vector<UniqueFd> layer_trees, bind_trees;
  for (const auto& l : spec.layers) {
    // Layers are named in the overlay's options inside the init (as its own mount points, but
    // refuse what could be misparsed anywhere down the line).
    if (l.find_first_of(",:") != std::string::npos)
      return InvalidArgument("layers: '" + l + "' must not contain ',' or ':'");
    PADDOCK_ASSIGN_OR_RETURN(UniqueFd t, OpenHostTree("layers", l));
    layer_trees.push_back(std::move(t));
  }
  for (const auto& b : spec.binds) {
    PADDOCK_ASSIGN_OR_RETURN(UniqueFd t, OpenHostTree("binds", b.host_path));
    bind_trees.push_back(std::move(t));
  }

  auto sb = std::make_shared<Sandbox>();
  sb->info.id = spec.id.empty() ? "sb-" + RandomHex(6) : spec.id;
  PADDOCK_RETURN_IF_ERROR(ValidateSandboxId(sb->info.id));
  {
    std::shared_lock lock(im.mu);
    if (im.sandboxes.count(sb->info.id))
      return Status(StatusCode::kAlreadyExists, "sandbox " + sb->info.id + " exists");
  }
  PADDOCK_ASSIGN_OR_RETURN(TemplateManifest tpl, im.templates->Get(spec.template_name));
  if (tpl.rootfs.find_first_of(",:") != std::string::npos)
    return InvalidArgument("template: rootfs path must not contain ',' or ':'");
  sb->info.template_name = tpl.name;
  sb->info.template_digest = tpl.digest;
  sb->info.limits = lim;
  sb->info.created_at = std::chrono::system_clock::now();
  sb->info.layers = spec.layers;
  sb->env = spec.env;

  PADDOCK_ASSIGN_OR_RETURN(sb->slot, UidSlot::Acquire(im.slots_dir));
  const uid_t base = sb->slot.base();
  CgroupLimits cl{lim.cpus, lim.memory_bytes, lim.pids};
  PADDOCK_ASSIGN_OR_RETURN(SandboxCgroup cg,
                           SandboxCgroup::Create(im.layout, sb->info.id, cl, base, base));
  sb->cgroup.emplace(std::move(cg));

  // From here on, failure must undo everything: Teardown kills whatever started and removes
  // the cgroup.
  auto fail = [&](Status st) -> Status {
    (void)im.Teardown(*sb);
    return st;
  };
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return fail(ErrnoStatus("socketpair"));
  sb->ctl.reset(sv[0]);
  UniqueFd ctl_child(sv[1]);
  auto exec_dir = sb->cgroup->OpenExecParentDir();
  if (!exec_dir.ok()) return fail(exec_dir.status());
  UniqueFd clone_cg;
  if (im.layout.version == CgroupVersion::kV2) {
    auto fd = sb->cgroup->OpenV2DirForClone();
    if (!fd.ok()) return fail(fd.status());
    clone_cg = std::move(*fd);
  }
  int pidfd = -1;
  auto pid = im.SpawnInit(ctl_child.get(), clone_cg ? clone_cg.get() : -1, &pidfd);
  if (!pid.ok()) return fail(pid.status());
  sb->pidfd.reset(pidfd);
  sb->info.init_pid = *pid;
  ctl_child.reset();

  // Root inside is `base` on the host; the whole 0..65535 range is this sandbox's alone.
  const std::string map = "0 " + std::to_string(base) + " " + std::to_string(kIdsPerSandbox) + "\n";
  const std::string proc = "/proc/" + std::to_string(*pid);
  if (Status st = WriteWholeFile(proc + "/uid_map", map); !st.ok()) return fail(st);
  if (Status st = WriteWholeFile(proc + "/gid_map", map); !st.ok()) return fail(st);
  if (im.layout.version == CgroupVersion::kV1) {
    if (Status st = sb->cgroup->AddProcess(*pid); !st.ok()) return fail(st);
  }
  if (!layer_trees.empty() || !bind_trees.empty()) {
    // The pid is our unreaped child, so /proc/<pid> cannot name another process.
    UniqueFd userns(::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
    if (!userns) return fail(ErrnoStatus("open sandbox user namespace"));
    for (size_t i = 0; i < layer_trees.size(); ++i) {
      Status st = IdmapTree(layer_trees[i].get(), userns.get(), MOUNT_ATTR_RDONLY,
                            "layers: " + spec.layers[i]);
      if (!st.ok()) return fail(st);
    }
    for (size_t i = 0; i < bind_trees.size(); ++i) {
      Status st = IdmapTree(bind_trees[i].get(), userns.get(),
                            spec.binds[i].read_only ? MOUNT_ATTR_RDONLY : 0,
                            "binds: " + spec.binds[i].host_path);
      if (!st.ok()) return fail(st);
    }
  }
  if (int rc = proto::SendPacket(sb->ctl.get(), {'G'}); rc < 0)
    return fail(ErrnoStatus("start sandbox init", -rc));

  proto::SetupMsg setup;
  setup.hostname = sb->info.id;
  setup.lower_dir = tpl.rootfs;
  for (const auto& b : tpl.readonly_binds) {
    setup.ro_binds.push_back(b.source);
    setup.ro_binds.push_back(b.target);
  }
  setup.staging_dir = im.staging_dir;
  setup.disk_bytes = lim.disk_bytes;
  setup.tmp_bytes = lim.tmp_bytes;
  setup.sandbox_uid = kSandboxUid;
  setup.sandbox_gid = kSandboxUid;
  setup.cgroup_mode = static_cast<uint32_t>(im.layout.version == CgroupVersion::kV2
                                                ? proto::CgroupMode::kV2
                                                : proto::CgroupMode::kV1Freezer);
  setup.seccomp_bpf = im.seccomp_bpf;
  setup.layer_count = static_cast<uint32_t>(layer_trees.size());
  for (const auto& b : spec.binds) setup.bind_targets.push_back(b.target);
  int dir_fd = exec_dir->get();
  if (int rc = proto::SendPacket(sb->ctl.get(), proto::Encode(setup), &dir_fd, 1); rc < 0)
    return fail(ErrnoStatus("send setup to sandbox init", -rc));
  exec_dir->reset();
  std::vector<int> tree_fds;
  for (const auto& t : layer_trees) tree_fds.push_back(t.get());
  for (const auto& t : bind_trees) tree_fds.push_back(t.get());
  for (size_t i = 0; i < tree_fds.size(); i += proto::kMaxFdsPerMessage) {
    const int n = static_cast<int>(std::min<size_t>(proto::kMaxFdsPerMessage, tree_fds.size() - i));
    if (int rc = proto::SendPacket(
            sb->ctl.get(), proto::MessageWriter(proto::MsgType::kSetupFds).data(), &tree_fds[i], n);
        rc < 0)
      return fail(ErrnoStatus("send mounts to sandbox init", -rc));
  }
  // The init holds the trees now; once attached they live in its mount namespace only.
  layer_trees.clear();
  bind_trees.clear();

  pollfd pfd{sb->ctl.get(), POLLIN, 0};
  int prc = ::poll(&pfd, 1, static_cast<int>(im.opts.setup_timeout.count()));
  if (prc <= 0) return fail(Status(StatusCode::kDeadlineExceeded, "sandbox init setup timed out"));
  std::vector<uint8_t> buf;
  int fds[proto::kMaxFdsPerMessage];
  int nfds = 0;
  ssize_t n = proto::RecvPacket(sb->ctl.get(), &buf, fds, &nfds);
  std::vector<UniqueFd> received;
  for (int i = 0; i < nfds; ++i) received.emplace_back(fds[i]);
  if (n <= 0) return fail(Internal("sandbox init exited during setup"));
  proto::MessageReader r(buf.data(), buf.size());
  proto::MsgType type = r.Type();
  if (type == proto::MsgType::kSetupFailed) {
    proto::SetupFailedMsg m;
    proto::Decode(r, &m);
    return fail(ErrnoStatus("sandbox setup step '" + m.step + "'", m.err));
  }
  if (type != proto::MsgType::kReady || received.size() != 1)
    return fail(Internal("unexpected message from sandbox init"));
  sb->upper = std::move(received[0]);

  // The sandbox's root as its init sees it; file operations resolve beneath this fd. Holding
  // the fd (not a path) means a later pid reuse can never point us at another process's root.
  UniqueFd root(::open((proc + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return fail(ErrnoStatus("open sandbox root"));
  SandboxIdentity ident;
  ident.host_uid = base + kSandboxUid;
  ident.host_gid = base + kSandboxUid;
  ident.host_id_base = base;
  ident.id_range = kIdsPerSandbox;
  sb->files = std::make_unique<SandboxFiles>(std::move(root), ident);
  if (auto oom = sb->cgroup->OomKillCount(); oom.ok()) sb->oom_seen = *oom;
  sb->ready = true;

  {
    std::unique_lock lock(im.mu);
    if (im.sandboxes.count(sb->info.id))
      return fail(Status(StatusCode::kAlreadyExists, "sandbox " + sb->info.id + " exists"));
    im.sandboxes[sb->info.id] = sb;
  }
  im.reactor->Register(sb);
  return sb->info;
}

// Kills the sandbox and removes every host object it had. Safe on partially created sandboxes.
Status LinuxRuntime::Impl::Teardown(Sandbox& sb) {
  if (sb.ctl) reactor->Unregister(sb);
  if (sb.pidfd) {
    bool paused, dead, checkpointing;
    {
      std::lock_guard lock(sb.mu);
      paused = sb.paused;
      dead = sb.dead;
      checkpointing = sb.checkpointing;
    }
    // Ask a healthy init to exit; as pid 1 its exit makes the kernel kill every process in the
    // namespace, and the mount namespace (the writable layer with it) goes away with the last
    // one. A paused, broken or half-created init is not asked, and SIGKILL follows regardless.
    if (sb.ready && !paused && !dead && !checkpointing) {
      int rc;
      {
        std::lock_guard lock(sb.send_mu);
        rc =
            proto::SendPacket(sb.ctl.get(), proto::MessageWriter(proto::MsgType::kShutdown).data());
      }
      pollfd pfd{sb.pidfd.get(), POLLIN, 0};
      if (rc == 0) (void)::poll(&pfd, 1, 1000);
    }
    ::syscall(SYS_pidfd_send_signal, sb.pidfd.get(), SIGKILL, nullptr, 0);
    // A frozen task does not act on SIGKILL until thawed. (A checkpoint that freezes after this
    // thaw delays the end of the sandbox until it thaws, which it always does.)
    if (sb.cgroup && (paused || checkpointing)) (void)sb.cgroup->Thaw();
    siginfo_t si;
    while (::waitid(P_PIDFD, static_cast<id_t>(sb.pidfd.get()), &si, WEXITED) < 0 &&
           errno == EINTR) {
    }
    sb.pidfd.reset();
  }
  Status st = Status::Ok();
  if (sb.cgroup) {
    if (Status k = sb.cgroup->KillAll(); !k.ok()) st = k;
    if (Status r = sb.cgroup->Remove(); !r.ok() && st.ok()) st = r;
  }
  ControlReactor::FailAll(sb);
  sb.files.reset();
  sb.ctl.reset();
  {
    // Our reference keeps the writable tmpfs (and its memory) alive past the mount namespace.
    std::lock_guard lock(sb.mu);
    sb.upper.reset();
  }
  return st;
}

Status LinuxRuntime::Destroy(const std::string& id) {
  PADDOCK_RETURN_IF_ERROR(ValidateSandboxId(id));
  std::shared_ptr<Sandbox> sb;
  {
    std::unique_lock lock(impl_->mu);
    auto it = impl_->sandboxes.find(id);
    if (it != impl_->sandboxes.end()) {
      sb = it->second;
      impl_->sandboxes.erase(it);
    }
  }
  if (sb) return impl_->Teardown(*sb);
  // Not ours: an orphan from a crashed daemon (or nothing at all). Kill and remove whatever
  // is left under this id; with nothing left this is a no-op, which makes Destroy idempotent.
  SandboxCgroup orphan = SandboxCgroup::Attach(impl_->layout, id);
  PADDOCK_RETURN_IF_ERROR(orphan.KillAll());
  return orphan.Remove();
}

Result<SandboxInfo> LinuxRuntime::Get(const std::string& id) {
  PADDOCK_ASSIGN_OR_RETURN(auto sb, impl_->Find(id));
  std::lock_guard lock(sb->mu);
  SandboxInfo info = sb->info;
  info.state = sb->dead     ? SandboxState::kDead
               : sb->paused ? SandboxState::kPaused
                            : SandboxState::kRunning;
  return info;
}

std::vector<SandboxInfo> LinuxRuntime::List() {
  std::vector<std::string> ids;
  {
    std::shared_lock lock(impl_->mu);
    for (const auto& [id, sb] : impl_->sandboxes) ids.push_back(id);
  }
  std::vector<SandboxInfo> out;
  for (const auto& id : ids) {
    if (auto info = Get(id); info.ok()) out.push_back(*info);
  }
  return out;
}

std::vector<HostObject> LinuxRuntime::ListHostObjects() {
  std::vector<HostObject> out;
  for (const auto& id : SandboxCgroup::ListSandboxIds(impl_->layout)) {
    HostObject o;
    o.id = id;
    o.has_cgroup = true;
    {
      std::shared_lock lock(impl_->mu);
      o.known = impl_->sandboxes.count(id) > 0;
    }
    if (auto pids = SandboxCgroup::Attach(impl_->layout, id).Pids(); pids.ok()) o.pids = *pids;
    out.push_back(std::move(o));
  }
  return out;
}

Result<std::vector<std::string>> LinuxRuntime::Impl::BuildEnv(const Sandbox& sb,
                                                              const ExecRequest& req,
                                                              const std::string& home) const {
  std::map<std::string, std::string> env = {
      {"PATH", kDefaultPath}, {"HOME", home},           {"LANG", "C.UTF-8"},
      {"SHELL", "/bin/sh"},   {"HOSTNAME", sb.info.id},
  };
  env["USER"] = env["LOGNAME"] = (home == "/root" ? "root" : "sandbox");
  for (const auto& e : sb.env) {
    auto eq = e.find('=');
    env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  for (const auto& [k, v] : req.env) {
    if (k.empty() || k.find_first_of("=\0", 0, 2) != std::string::npos)
      return InvalidArgument("env: invalid variable name '" + k + "'");
    if (v.find('\0') != std::string::npos)
      return InvalidArgument("env: value of " + k + " has NUL");
    env[k] = v;
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

Result<std::shared_ptr<ExecState>> LinuxRuntime::Impl::SendExec(Sandbox& sb, const ExecRequest& req,
                                                                int fds[3]) {
  proto::ExecMsg m;
  if (!req.shell.empty() && !req.argv.empty())
    return InvalidArgument("argv/shell: give exactly one");
  if (!req.shell.empty()) {
    m.argv = {"/bin/sh", "-c", req.shell};
  } else if (!req.argv.empty()) {
    m.argv = req.argv;
  } else {
    return InvalidArgument("argv: a command is required");
  }
  for (const auto& a : m.argv) {
    if (a.find('\0') != std::string::npos) return InvalidArgument("argv: contains NUL");
  }
  if (req.timeout.count() < 0) return InvalidArgument("timeout: must be >= 0");
  std::string home;
  if (req.user == "sandbox" || req.user.empty()) {
    m.uid = m.gid = kSandboxUid;
    home = "/home/sandbox";
  } else if (req.user == "root") {
    m.uid = m.gid = 0;
    home = "/root";
  } else {
    return InvalidArgument("user: must be 'sandbox' or 'root'");
  }
  m.cwd = req.cwd.empty() ? home : req.cwd;
  if (m.cwd.find('\0') != std::string::npos) return InvalidArgument("cwd: contains NUL");
  PADDOCK_ASSIGN_OR_RETURN(m.env, BuildEnv(sb, req, home));
  m.timeout_ms = static_cast<uint64_t>(req.timeout.count());
  m.nofile = sb.info.limits.open_files;

  auto st = std::make_shared<ExecState>();
  st->done_event.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!st->done_event) return ErrnoStatus("eventfd");
  st->start = Clock::now();
  st->timeout = req.timeout;
  {
    std::lock_guard lock(sb.mu);
    if (sb.dead) return FailedPrecondition("sandbox " + sb.info.id + " is not running");
    if (sb.paused) return FailedPrecondition("sandbox " + sb.info.id + " is paused");
    st->id = m.exec_id = sb.next_exec++;
    sb.execs[st->id] = st;  // registered before sending so the reply cannot be missed
  }
  int rc;
  {
    std::lock_guard lock(sb.send_mu);
    rc = proto::SendPacket(sb.ctl.get(), proto::Encode(m), fds, 3);
  }
  if (rc < 0) {
    std::lock_guard lock(sb.mu);
    sb.execs.erase(st->id);
    return Status(StatusCode::kFailedPrecondition, "sandbox " + sb.info.id + " is not running",
                  -rc);
  }
  return st;
}

ExecResult LinuxRuntime::Impl::ToResult(Sandbox& sb, ExecState& st) {
  {
    std::lock_guard lock(sb.mu);
    sb.execs.erase(st.id);
  }
  const proto::ExitedMsg& m = st.exited;
  ExecResult r;
  r.exit_code = m.signal ? -1 : m.exit_code;
  r.signal = m.signal;
  r.timed_out = m.timed_out;
  r.killed = m.killed || st.sandbox_died;
  r.cpu_seconds = static_cast<double>(m.utime_us + m.stime_us) / 1e6;
  r.peak_memory_bytes = m.maxrss_kib * 1024;
  r.wall_seconds = m.wall_ns ? static_cast<double>(m.wall_ns) / 1e9
                             : std::chrono::duration<double>(Clock::now() - st.start).count();
  // The kernel's OOM killer sends SIGKILL; if the sandbox's oom_kill counter moved while the
  // command ran and nobody else killed it, the memory limit did.
  if (m.signal == SIGKILL && !r.timed_out && !r.killed && sb.cgroup) {
    if (auto oom = sb.cgroup->OomKillCount(); oom.ok()) {
      std::lock_guard lock(sb.mu);
      if (*oom > sb.oom_seen) {
        r.oom_killed = true;
        sb.oom_seen = *oom;
      }
    }
  }
  return r;
}

namespace {

// Pumps one output pipe into a callback, enforcing the byte cap. Past the cap the pipe is
// closed: a command flooding output then gets SIGPIPE instead of burning CPU into the void.
struct OutputPump {
  UniqueFd fd;
  const std::function<void(std::string_view)>* cb = nullptr;
  uint64_t cap = 0;
  uint64_t seen = 0;
  bool truncated = false;

  // Reads what is available; returns false at EOF / closed.
  bool Pump(char* buf, size_t size) {
    while (fd) {
      ssize_t n = ::read(fd.get(), buf, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return true;
      if (n <= 0) {
        fd.reset();
        return false;
      }
      uint64_t room = cap - seen;
      uint64_t take = std::min<uint64_t>(room, static_cast<uint64_t>(n));
      if (take > 0 && *cb) (*cb)(std::string_view(buf, take));
      seen += take;
      if (static_cast<uint64_t>(n) > take) {
        truncated = true;
        fd.reset();
        return false;
      }
    }
    return false;
  }
};

Status MakePipe(UniqueFd* r, UniqueFd* w) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) < 0) return ErrnoStatus("pipe");
  r->reset(p[0]);
  w->reset(p[1]);
  return Status::Ok();
}

}  // namespace

Result<ExecResult> LinuxRuntime::Exec(const std::string& id, const ExecRequest& req,
                                      const ExecCallbacks& cb) {
  PADDOCK_ASSIGN_OR_RETURN(auto sb, impl_->FindLive(id));
  if (req.output_cap_bytes == 0) return InvalidArgument("output_cap_bytes: must be > 0");
  UniqueFd in_r, in_w, out_r, out_w, err_r, err_w;
  int fds[3];
  const bool passthrough = req.stdout_fd >= 0 || req.stderr_fd >= 0 || req.stdin_fd >= 0;
  if (passthrough) {
    fds[0] = req.stdin_fd >= 0 ? req.stdin_fd : impl_->devnull.get();
    fds[1] = req.stdout_fd >= 0 ? req.stdout_fd : impl_->devnull.get();
    fds[2] = req.stderr_fd >= 0 ? req.stderr_fd : impl_->devnull.get();
  } else {
    if (!req.stdin_data.empty()) {
      PADDOCK_RETURN_IF_ERROR(MakePipe(&in_r, &in_w));
      ::fcntl(in_w.get(), F_SETFL, O_NONBLOCK);
    }
    PADDOCK_RETURN_IF_ERROR(MakePipe(&out_r, &out_w));
    PADDOCK_RETURN_IF_ERROR(MakePipe(&err_r, &err_w));
    fds[0] = in_r ? in_r.get() : impl_->devnull.get();
    fds[1] = out_w.get();
    fds[2] = err_w.get();
  }
  PADDOCK_ASSIGN_OR_RETURN(auto st, impl_->SendExec(*sb, req, fds));
  // The init has its own copies now; ours must go or we would never see EOF.
  in_r.reset();
  out_w.reset();
  err_w.reset();
  ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);

  OutputPump out{std::move(out_r), &cb.on_stdout, req.output_cap_bytes};
  OutputPump err{std::move(err_r), &cb.on_stderr, req.output_cap_bytes};
  size_t stdin_off = 0;
  std::vector<char> buf(64 * 1024);
  // Backstop for a wedged init: the init enforces the timeout itself; if it has not reported
  // well after that, we ask again and finally give up on the sandbox.
  auto backstop = req.timeout.count() > 0 ? st->start + req.timeout + std::chrono::seconds(5)
                                          : Clock::time_point::max();
  bool backstop_sent = false;
  while (true) {
    pollfd p[4];
    int n = 0;
    p[n++] = {st->done_event.get(), POLLIN, 0};
    int out_i = -1, err_i = -1, in_i = -1;
    if (out.fd) out_i = n, p[n++] = {out.fd.get(), POLLIN, 0};
    if (err.fd) err_i = n, p[n++] = {err.fd.get(), POLLIN, 0};
    if (in_w) in_i = n, p[n++] = {in_w.get(), POLLOUT, 0};
    int wait_ms = -1;
    if (backstop != Clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(backstop - Clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(0, left.count()) + 1);
    }
    int rc = ::poll(p, static_cast<nfds_t>(n), wait_ms);
    if (rc < 0 && errno != EINTR) return ErrnoStatus("poll exec output");
    if (out_i >= 0 && p[out_i].revents) out.Pump(buf.data(), buf.size());
    if (err_i >= 0 && p[err_i].revents) err.Pump(buf.data(), buf.size());
    if (in_i >= 0 && p[in_i].revents) {
      ssize_t w =
          ::write(in_w.get(), req.stdin_data.data() + stdin_off, req.stdin_data.size() - stdin_off);
      if (w > 0) stdin_off += static_cast<size_t>(w);
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || stdin_off == req.stdin_data.size())
        in_w.reset();
    }
    if (p[0].revents & POLLIN) break;
    if (Clock::now() >= backstop) {
      bool paused;
      {
        std::lock_guard lock(sb->mu);
        paused = sb->paused;
      }
      // A frozen init cannot enforce timeouts; the clock that matters restarts on resume.
      if (paused) {
        backstop = Clock::now() + std::chrono::seconds(1);
        continue;
      }
      if (!backstop_sent) {
        backstop_sent = true;
        (void)Kill(id, st->id, SIGKILL);
        continue;
      }
      std::lock_guard lock(sb->mu);
      sb->execs.erase(st->id);
      return Status(StatusCode::kDeadlineExceeded, "sandbox init did not report the command");
    }
  }
  // The command has exited; whatever it wrote is already in the pipes. Background processes
  // it left behind may keep the pipes open, so take what is there and stop.
  out.Pump(buf.data(), buf.size());
  err.Pump(buf.data(), buf.size());
  ExecResult r = impl_->ToResult(*sb, *st);
  if (st->exited.spawn_errno != 0) {
    return Status(CodeForErrno(st->exited.spawn_errno) == StatusCode::kNotFound
                      ? StatusCode::kNotFound
                      : StatusCode::kFailedPrecondition,
                  "command did not start (" + st->exited.message +
                      "): " + std::strerror(st->exited.spawn_errno),
                  st->exited.spawn_errno);
  }
  r.stdout_truncated = out.truncated;
  r.stderr_truncated = err.truncated;
  return r;
}

Result<ExecId> LinuxRuntime::StartBackground(const std::string& id, const ExecRequest& req) {
  PADDOCK_ASSIGN_OR_RETURN(auto sb, impl_->FindLive(id));
  int null_fd = impl_->devnull.get();
  int fds[3] = {req.stdin_fd >= 0 ? req.stdin_fd : null_fd,
                req.stdout_fd >= 0 ? req.stdout_fd : null_fd,
                req.stderr_fd >= 0 ? req.stderr_fd : null_fd};
  PADDOCK_ASSIGN_OR_RETURN(auto st, impl_->SendExec(*sb, req, fds));
  return st->id;
}

Result<ExecResult> LinuxRuntime::Wait(const std::string& id, ExecId exec) {
  PADDOCK_ASSIGN_OR_RETURN(auto sb, impl_->Find(id));
  std::shared_ptr<ExecState> st;
  {
    std::lock_guard lock(sb->mu);
    auto it = sb->execs.find(exec);
    if (it == sb->execs.end()) return NotFound("exec " + std::to_string(exec) + " not found");
    st = it->second;
  }
  {
    std::unique_lock lock(st->mu);
    st->cv.wait(lock, [&] { return st->done; });
  }
  if (st->exited.spawn_errno != 0) {
    std::lock_guard lock(sb->mu);
    sb->execs.erase(exec);
    return Status(StatusCode::kFailedPrecondition,
                  "command did not start (" + st->exited.message + ")", st->exited.spawn_errno);
  }
  return impl_->ToResult(*sb, *st);
}

Status LinuxRuntime::Kill(const std::string& id, ExecId exec, int signal) {
  PADDOCK_ASSIGN_OR_RETURN(auto sb, impl_->FindLive(id));
  if (signal <= 0 || signal >= 65) return InvalidArgument("signal: out of range");
  std::lock_guard lock(sb->send_mu);
  int rc = proto::SendPacket(sb->ctl.get(), proto::Encode(proto::KillMsg{exec, signal}));
  if (rc < 0) return Status(StatusCode::kFailedPrecondition, "sandbox not running", -rc);
  return Status::Ok();
}

#define PADDOCK_FILES(id)                                 \
  PADDOCK_ASSIGN_OR_RETURN(auto sb, impl_->FindLive(id)); \
  SandboxFiles& files = *sb->files

Status LinuxRuntime::ReadFile(const std::string& id, const std::string& path, uint64_t max_bytes,
                              const std::function<Status(std::string_view)>& sink) {
  PADDOCK_FILES(id);
  return files.ReadFile(path, max_bytes, sink);
}
Status LinuxRuntime::WriteFile(const std::string& id, const std::string& path, uint32_t mode,
                               uint64_t max_bytes,
                               const std::function<Result<std::string>()>& source) {
  PADDOCK_FILES(id);
  return files.WriteFile(path, mode, max_bytes, source);
}
Result<std::vector<FileStat>> LinuxRuntime::ListDir(const std::string& id,
                                                    const std::string& path) {
  PADDOCK_FILES(id);
  return files.ListDir(path);
}
Result<FileStat> LinuxRuntime::Stat(const std::string& id, const std::string& path) {
  PADDOCK_FILES(id);
  return files.Stat(path);
}
Status LinuxRuntime::MakeDirs(const std::string& id, const std::string& path, uint32_t mode) {
  PADDOCK_FILES(id);
  return files.MakeDirs(path, mode);
}
Status LinuxRuntime::Remove(const std::string& id, const std::string& path, bool recursive) {
  PADDOCK_FILES(id);
  return files.Remove(path, recursive);
}
Status LinuxRuntime::Rename(const std::string& id, const std::string& from, const std::string& to) {
  PADDOCK_FILES(id);
  return files.Rename(from, to);
}
Status LinuxRuntime::Chmod(const std::string& id, const std::string& path, uint32_t mode) {
  PADDOCK_FILES(id);
  return files.Chmod(path, mode);
}

Status LinuxRuntime::Pause(const std::string& id) {
  PADDOCK_ASSIGN_OR_RETURN(auto sb, impl_->FindLive(id));
  std::lock_guard freeze(sb->freeze_mu);
  PADDOCK_RETURN_IF_ERROR(sb->cgroup->Freeze());
  std::lock_guard lock(sb->mu);
  sb->paused = true;
  return Status::Ok();
}

Status LinuxRuntime::Resume(const std::string& id) {
  PADDOCK_ASSIGN_OR_RETURN(auto sb, impl_->FindLive(id));
  std::lock_guard freeze(sb->freeze_mu);
  PADDOCK_RETURN_IF_ERROR(sb->cgroup->Thaw());
  std::lock_guard lock(sb->mu);
  sb->paused = false;
  return Status::Ok();
}

namespace {

// A fresh open file description of the sandbox's upper dir (its own readdir offset, and still
// valid if Destroy closes the sandbox's).
Result<UniqueFd> OpenUpper(Sandbox& sb) {
  std::lock_guard lock(sb.mu);
  if (sb.dead || !sb.upper) return FailedPrecondition("sandbox " + sb.info.id + " is not running");
  UniqueFd fd(::openat(sb.upper.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open writable layer");
  return fd;
}

}  // namespace

Result<LayerStats> LinuxRuntime::Checkpoint(const std::string& id, const std::string& dest_dir) {
  if (dest_dir.size() < 2 || dest_dir[0] != '/' || dest_dir.back() == '/' ||
      dest_dir.find('\0') != std::string::npos)
    return InvalidArgument("dest_dir: must be an absolute path");
  // The layer will be stacked into overlays; keep its name free of option separators.
  if (dest_dir.find_first_of(",:") != std::string::npos)
    return InvalidArgument("dest_dir: must not contain ',' or ':'");
  const size_t slash = dest_dir.rfind('/');
  const std::string parent = slash == 0 ? "/" : dest_dir.substr(0, slash);
  const std::string name = dest_dir.substr(slash + 1);
  if (name == "." || name == "..") return InvalidArgument("dest_dir: must name a new directory");
  PADDOCK_ASSIGN_OR_RETURN(auto sb, impl_->FindLive(id));
  UniqueFd pdir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!pdir) {
    if (errno == ENOENT || errno == ENOTDIR)
      return NotFound("dest_dir: parent " + parent + " is not a directory");
    return ErrnoStatus("open " + parent);
  }
  struct stat st;
  if (::fstatat(pdir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
    return Status(StatusCode::kAlreadyExists, "dest_dir: " + dest_dir + " exists");
  if (errno != ENOENT) return ErrnoStatus("stat " + dest_dir);

  std::lock_guard freeze(sb->freeze_mu);
  PADDOCK_ASSIGN_OR_RETURN(UniqueFd upper, OpenUpper(*sb));
  bool paused;
  {
    std::lock_guard lock(sb->mu);
    paused = sb->paused;
    sb->checkpointing = true;
  }
  auto done = [&]() {
    std::lock_guard lock(sb->mu);
    sb->checkpointing = false;
  };
  // Frozen, nothing inside can change the layer while it is copied (a consistent snapshot, and
  // no renames racing the walk).
  if (!paused) {
    if (Status fst = sb->cgroup->Freeze(); !fst.ok()) {
      done();
      return fst;
    }
  }
  // A hidden sibling on the same filesystem, root-only (0700) while it is written: it may hold
  // set-id files owned by (on-disk) root. Renamed into place only when complete.
  const std::string tmp = "." + name + ".tmp-" + RandomHex(4);
  Status copied = Status::Ok();
  LayerStats stats;
  bool made = false;
  UniqueFd troot;
  if (::mkdirat(pdir.get(), tmp.c_str(), 0700) < 0) {
    copied = ErrnoStatus("mkdir " + parent + "/" + tmp);
  } else {
    made = true;
    troot.reset(::openat(pdir.get(), tmp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!troot) {
      copied = ErrnoStatus("open " + parent + "/" + tmp);
    } else {
      LayerCopier copier(sb->slot.base(), troot.get());
      copied = copier.CopyTree(std::move(upper), troot.get());
      stats = copier.stats();
      // The layer's root stays 0700 root: the merged root's attributes come from each
      // sandbox's own upper dir, and nothing below is reachable by other host users.
      if (copied.ok() && ::fchown(troot.get(), 0, 0) < 0) copied = ErrnoStatus("chown layer");
      if (copied.ok() && ::fchmod(troot.get(), 0700) < 0) copied = ErrnoStatus("chmod layer");
    }
  }
  // Thawed as soon as the copy is done; syncing the host filesystem need not stop the sandbox.
  if (!paused) {
    if (Status tst = sb->cgroup->Thaw(); !tst.ok() && copied.ok()) copied = tst;
  }
  done();
  // Durable before it becomes visible: a crash leaves the hidden temporary, never a partial
  // layer under dest_dir.
  if (copied.ok() && ::syncfs(troot.get()) < 0) copied = ErrnoStatus("sync layer");
  if (copied.ok() &&
      ::renameat2(pdir.get(), tmp.c_str(), pdir.get(), name.c_str(), RENAME_NOREPLACE) < 0) {
    copied = errno == EEXIST
                 ? Status(StatusCode::kAlreadyExists, "dest_dir: " + dest_dir + " exists")
                 : ErrnoStatus("rename layer into " + dest_dir);
  }
  if (copied.ok()) (void)::fsync(pdir.get());
  if (!copied.ok()) {
    if (made) {
      std::error_code ec;  // remove_all never follows symlinks
      fs::remove_all(fs::path(parent) / tmp, ec);
    }
    return copied;
  }
  return stats;
}

Result<std::vector<ChangedPath>> LinuxRuntime::ChangedPaths(const std::string& id, int max_depth,
                                                            size_t max_entries, bool* truncated) {
  if (max_depth < 1) return InvalidArgument("max_depth: must be >= 1");
  // One fd and one stack frame per level: bounded whatever the caller asks, since the sandbox
  // decides how deep its tree is. Deeper entries show as their ancestor at this depth anyway.
  max_depth = std::min(max_depth, 128);
  bool trunc = false;
  if (truncated) *truncated = false;
  PADDOCK_ASSIGN_OR_RETURN(auto sb, impl_->FindLive(id));
  PADDOCK_ASSIGN_OR_RETURN(UniqueFd upper, OpenUpper(*sb));
  // The sandbox keeps running: entries may come and go under the walk, which only reads names
  // and lstat results and opens directories with O_NOFOLLOW. Only the max_entries smallest
  // paths are kept (memory stays bounded whatever the layer holds).
  std::map<std::string, bool> found;
  auto add = [&](const std::string& path, bool deleted) -> bool {
    if (found.size() >= max_entries && (found.empty() || path > found.rbegin()->first)) {
      trunc = true;
      return false;  // neither it nor anything below it (which sorts after it) can be kept
    }
    found.emplace(path, deleted);
    if (found.size() > max_entries) {
      found.erase(std::prev(found.end()));
      trunc = true;
    }
    return true;
  };
  // Consumes `dir` (its own open file description, whose readdir offset is used).
  std::function<Status(UniqueFd, const std::string&, int)> walk =
      [&](UniqueFd dir, const std::string& prefix, int depth) -> Status {
    std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(dir.get()), ::closedir);
    if (!d) return ErrnoStatus("read " + (prefix.empty() ? "/" : prefix));
    const int dfd = dir.release();  // owned by `d` now
    while (dirent* de = ::readdir(d.get())) {
      const std::string name = de->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) continue;  // gone
      const std::string path = prefix + "/" + name;
      if (!add(path, IsWhiteout(st))) continue;
      if (S_ISDIR(st.st_mode) && depth < max_depth) {
        UniqueFd child(
            ::openat(dfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (child) PADDOCK_RETURN_IF_ERROR(walk(std::move(child), path, depth + 1));
      }
    }
    return Status::Ok();
  };
  PADDOCK_RETURN_IF_ERROR(walk(std::move(upper), "", 1));
  std::vector<ChangedPath> out;
  out.reserve(found.size());
  for (const auto& [path, deleted] : found) out.push_back({path, deleted});
  if (truncated) *truncated = trunc;
  return out;
}

Result<SandboxUsage> LinuxRuntime::Usage(const std::string& id) {
  PADDOCK_ASSIGN_OR_RETURN(auto sb, impl_->FindLive(id));
  PADDOCK_ASSIGN_OR_RETURN(CgroupUsage cu, sb->cgroup->ReadUsage());
  SandboxUsage u;
  u.memory_bytes = cu.memory_bytes;
  u.memory_peak_bytes = cu.memory_peak_bytes;
  u.cpu_seconds = static_cast<double>(cu.cpu_usage_ns) / 1e9;
  u.pids = cu.pids;
  u.oom_kills = cu.oom_kills;
  // statfs on the overlay root reports its upper layer: the writable tmpfs and its cap.
  struct statfs sfs;
  std::string root = "/proc/" + std::to_string(sb->info.init_pid) + "/root";
  if (::statfs(root.c_str(), &sfs) == 0)
    u.disk_used_bytes = static_cast<uint64_t>(sfs.f_blocks - sfs.f_bfree) * sfs.f_bsize;
  return u;
}

}  // namespace paddock::runtime::linux
