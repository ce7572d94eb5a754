// paddock-init: the sandbox's pid 1.
//
// The daemon clone3()s this binary (from a sealed memfd, see linux_runtime.cc) straight into
// new user, pid, mount, net, uts and ipc namespaces, writes its uid/gid maps, places it in the
// sandbox cgroup and then sends a Setup message on fd 3. The init builds the root filesystem,
// pivots into it, and then serves Exec/Kill requests until the daemon goes away. It is
// single-threaded on purpose: fork() from here is safe, so the per-exec hardening sequence can
// be ordinary code.
//
// Containment order (DESIGN.md): namespaces (done by clone3) -> mounts + pivot_root -> cgroup
// (done by the daemon before Setup; the cgroup namespace is unshared here) -> per exec: rlimits
// -> drop capabilities -> no_new_privs -> seccomp last.

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "runtime/linux/init_protocol.h"
#include "runtime/linux/seccomp_policy.h"

namespace proto = paddock::runtime::linux::proto;

namespace {

constexpr int kCtl = proto::kInitControlFd;

// A setup step failed: which one and the errno, reported to the daemon verbatim.
struct StepError {
  const char* step = nullptr;
  int err = 0;
  bool failed() const { return step != nullptr; }
};

#define STEP(name, expr)                           \
  do {                                             \
    if ((expr) < 0) return StepError{name, errno}; \
  } while (0)

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int WriteFileAt(int dirfd, const char* path, const std::string& content, mode_t mode) {
  int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return -1;
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      errno = e;
      return -1;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return close(fd);
}

int MountSetattr(const char* path, uint64_t attr_set, bool recursive) {
  mount_attr attr{};
  attr.attr_set = attr_set;
  return static_cast<int>(
      syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr, sizeof attr));
}

// Bind-mounts `src` onto `dst` and makes the result read-only, nosuid, nodev. mount_setattr
// with AT_RECURSIVE applies to every submount at once; remounting with MS_RDONLY would only
// change the top mount and leave submounts of a recursive bind writable.
int ReadOnlyBind(const std::string& src, const std::string& dst, bool recursive) {
  if (mount(src.c_str(), dst.c_str(), nullptr, MS_BIND | (recursive ? MS_REC : 0), nullptr) < 0)
    return -1;
  return MountSetattr(dst.c_str(), MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                      recursive);
}

// --- root filesystem -----------------------------------------------------------------------

// Files and directories created in the writable layer before the overlay is mounted. Creating
// them in the upper dir (owned by root of our user namespace) rather than relying on the
// template matters: template files belong to host uids that are unmapped here, and the kernel
// refuses to let anyone, even root in this namespace, modify or copy up such inodes.
StepError PopulateUpper(const std::string& upper, const proto::SetupMsg& s) {
  int up = open(upper.c_str(), O_DIRECTORY | O_CLOEXEC);
  STEP("open upper", up);
  const std::string uid = std::to_string(s.sandbox_uid), gid = std::to_string(s.sandbox_gid);
  struct Dir {
    const char* path;
    mode_t mode;
    bool sandbox_owned;
  };
  const Dir dirs[] = {
      {"etc", 0755, false},      {"home", 0755, false}, {"home/sandbox", 0750, true},
      {"root", 0700, false},     {"tmp", 01777, false}, {"var", 0755, false},
      {"var/tmp", 01777, false}, {"run", 0755, false},  {"workspace", 0755, true}};
  for (const Dir& d : dirs) {
    STEP("mkdir upper", mkdirat(up, d.path, d.mode));
    STEP("chmod upper", fchmodat(up, d.path, d.mode, 0));  // mkdir applies the umask
    if (d.sandbox_owned) STEP("chown upper", fchownat(up, d.path, s.sandbox_uid, s.sandbox_gid, 0));
  }
  const std::string passwd = "root:x:0:0:root:/root:/bin/sh\nsandbox:x:" + uid + ":" + gid +
                             ":sandbox:/home/sandbox:/bin/sh\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
  const std::string group = "root:x:0:\ntty:x:5:\nsandbox:x:" + gid + ":\nnogroup:x:65534:\n";
  const std::string hosts =
      "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n127.0.1.1\t" + s.hostname + "\n";
  STEP("write /etc/passwd", WriteFileAt(up, "etc/passwd", passwd, 0644));
  STEP("write /etc/group", WriteFileAt(up, "etc/group", group, 0644));
  STEP("write /etc/hosts", WriteFileAt(up, "etc/hosts", hosts, 0644));
  STEP("write /etc/hostname", WriteFileAt(up, "etc/hostname", s.hostname + "\n", 0644));
  // No outbound network yet (egress comes through a proxy later): no resolver.
  STEP("write /etc/resolv.conf", WriteFileAt(up, "etc/resolv.conf", "# no network\n", 0644));
  STEP("write /etc/nsswitch.conf",
       WriteFileAt(up, "etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n", 0644));
  close(up);
  return {};
}

StepError MountProc(const std::string& root) {
  const std::string proc = root + "/proc";
  STEP("mkdir /proc", (mkdir(proc.c_str(), 0555) < 0 && errno != EEXIST) ? -1 : 0);
  STEP("mount /proc",
       mount("proc", proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr));
  // The same paths runc/Docker mask: kernel memory, keys, timers, and the knobs that would
  // reach the host kernel (sysctl, sysrq, irq affinity) even from inside a user namespace.
  for (const char* f : {"/kcore", "/keys", "/timer_list", "/sched_debug", "/latency_stats",
                        "/kallsyms", "/kpagecount", "/kpageflags", "/kpagecgroup", "/config.gz"}) {
    const std::string p = proc + f;
    if (access(p.c_str(), F_OK) != 0) continue;
    STEP("mask /proc file", mount("/dev/null", p.c_str(), nullptr, MS_BIND, nullptr));
  }
  for (const char* d : {"/acpi", "/scsi"}) {
    const std::string p = proc + d;
    if (access(p.c_str(), F_OK) != 0) continue;
    STEP("mask /proc dir", mount("tmpfs", p.c_str(), "tmpfs",
                                 MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0"));
  }
  for (const char* d : {"/sys", "/sysrq-trigger", "/irq", "/bus", "/fs"}) {
    const std::string p = proc + d;
    if (access(p.c_str(), F_OK) != 0) continue;
    STEP("read-only /proc path", ReadOnlyBind(p, p, true));
  }
  return {};
}

StepError MountDev(const std::string& root, const proto::SetupMsg& s) {
  const std::string dev = root + "/dev";
  STEP("mkdir /dev", (mkdir(dev.c_str(), 0755) < 0 && errno != EEXIST) ? -1 : 0);
  STEP("mount /dev", mount("tmpfs", dev.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC,
                           "mode=0755,size=65536,nr_inodes=64"));
  // We cannot mknod in a user namespace; bind the host's harmless character devices instead
  // (what bubblewrap does).
  for (const char* n : {"null", "zero", "full", "random", "urandom", "tty"}) {
    const std::string p = dev + "/" + n;
    STEP("create /dev node", WriteFileAt(AT_FDCWD, p.c_str(), "", 0666));
    const std::string host = std::string("/dev/") + n;
    STEP("bind /dev node", mount(host.c_str(), p.c_str(), nullptr, MS_BIND, nullptr));
    STEP("harden /dev node", MountSetattr(p.c_str(), MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false));
  }
  const std::string pts = dev + "/pts";
  STEP("mkdir /dev/pts", mkdir(pts.c_str(), 0755));
  STEP("mount /dev/pts", mount("devpts", pts.c_str(), "devpts", MS_NOSUID | MS_NOEXEC,
                               "newinstance,ptmxmode=0666,mode=0620,gid=5"));
  STEP("link /dev/ptmx", symlink("pts/ptmx", (dev + "/ptmx").c_str()));
  const std::string shm = dev + "/shm";
  STEP("mkdir /dev/shm", mkdir(shm.c_str(), 01777));
  const std::string shm_opts = "mode=1777,size=" + std::to_string(s.tmp_bytes);
  STEP("mount /dev/shm",
       mount("tmpfs", shm.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, shm_opts.c_str()));
  STEP("link /dev/fd", symlink("/proc/self/fd", (dev + "/fd").c_str()));
  STEP("link /dev/stdin", symlink("/proc/self/fd/0", (dev + "/stdin").c_str()));
  STEP("link /dev/stdout", symlink("/proc/self/fd/1", (dev + "/stdout").c_str()));
  STEP("link /dev/stderr", symlink("/proc/self/fd/2", (dev + "/stderr").c_str()));
  STEP("remount /dev read-only", MountSetattr(dev.c_str(), MOUNT_ATTR_RDONLY, false));
  return {};
}

StepError BringUpLoopback() {
  int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  STEP("socket for lo", sock);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  int rc = ioctl(sock, SIOCGIFFLAGS, &ifr);
  if (rc == 0) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
    rc = ioctl(sock, SIOCSIFFLAGS, &ifr);
  }
  int e = errno;
  close(sock);
  errno = e;
  STEP("bring up lo", rc);
  return {};
}

// Removes every capability from the bounding set so that no later execve, not even of a
// setuid-root or file-capability binary, can regain one; clears the ambient set too.
StepError DropBoundingSet() {
  for (int cap = 0; cap <= 63; ++cap) {
    if (prctl(PR_CAPBSET_READ, cap) < 0) break;  // past CAP_LAST_CAP
    STEP("drop bounding cap", prctl(PR_CAPBSET_DROP, cap));
  }
  STEP("clear ambient caps", prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0));
  return {};
}

// Creates `target` (absolute, validated by the daemon) inside the new root, one component at
// a time as root of our user namespace, and returns an O_PATH fd of it. Layers below come from
// checkpoints of other sandboxes, so any component may be a symlink planted there; resolving
// one now, before pivot_root, would land on the host's tree. Symlinks and mount crossings are
// refused instead (ELOOP / EXDEV): a bind never lands anywhere but a plain directory of the
// overlay.
int OpenBindTarget(const std::string& root, const std::string& target) {
  int cur = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (cur < 0) return -1;
  size_t pos = 1;
  while (pos <= target.size()) {
    size_t end = target.find('/', pos);
    if (end == std::string::npos) end = target.size();
    const std::string comp = target.substr(pos, end - pos);
    pos = end + 1;
    if (comp.empty() || comp == "." || comp == "..") {
      close(cur);
      errno = EINVAL;
      return -1;
    }
    if (mkdirat(cur, comp.c_str(), 0755) < 0 && errno != EEXIST) {
      int e = errno;
      close(cur);
      errno = e;
      return -1;
    }
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
    int next = static_cast<int>(syscall(SYS_openat2, cur, comp.c_str(), &how, sizeof how));
    int e = errno;
    close(cur);
    if (next < 0) {
      errno = e;
      return -1;
    }
    cur = next;
  }
  return cur;
}

int MoveMountAt(int tree_fd, int target_dirfd, const char* target_path, unsigned flags) {
  return static_cast<int>(syscall(SYS_move_mount, tree_fd, "", target_dirfd, target_path,
                                  MOVE_MOUNT_F_EMPTY_PATH | flags));
}

// `mount_fds`: the daemon's id-mapped trees (layers, then binds), closed here once attached.
// `upper_fd` receives the writable layer's upper dir, for the daemon's Checkpoint.
StepError SetUpSandbox(const proto::SetupMsg& s, std::vector<int>& mount_fds, int* upper_fd) {
  // The daemon put us in the sandbox cgroup before sending Setup; a new cgroup namespace now
  // makes that cgroup our "/" so /proc/self/cgroup reveals nothing of the host's layout.
  STEP("unshare cgroup namespace", unshare(CLONE_NEWCGROUP));
  // Mount events must never propagate back to the host (the copied tree may be shared).
  STEP("make mounts private", mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr));

  // The writable layer: a size-capped tmpfs (the disk limit). It exists only in this mount
  // namespace, so it disappears with the sandbox even if the daemon dies.
  const std::string& st = s.staging_dir;
  const std::string rw_opts = "mode=0755,size=" + std::to_string(s.disk_bytes);
  STEP("mount writable layer",
       mount("paddock-rw", st.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, rw_opts.c_str()));
  const std::string upper = st + "/upper", work = st + "/work", root = st + "/root";
  STEP("mkdir upper", mkdir(upper.c_str(), 0755));
  STEP("mkdir work", mkdir(work.c_str(), 0755));
  STEP("mkdir root", mkdir(root.c_str(), 0755));
  if (StepError e = PopulateUpper(upper, s); e.failed()) return e;
  // Checkpoint layers: the daemon's id-mapped, read-only trees, attached under the staging
  // tmpfs (which is detached with the old root later; the overlay keeps its own references).
  std::string lowers;
  if (s.layer_count > 0) {
    const std::string ldir = st + "/l";
    STEP("mkdir layers", mkdir(ldir.c_str(), 0700));
    for (uint32_t i = 0; i < s.layer_count; ++i) {
      const std::string p = ldir + "/" + std::to_string(i);
      STEP("mkdir layer", mkdir(p.c_str(), 0755));
      STEP("attach layer", MoveMountAt(mount_fds[i], AT_FDCWD, p.c_str(), 0));
      lowers += p + ":";
    }
  }
  lowers += s.lower_dir;
  // userxattr: overlay in a user namespace keeps its metadata in user.* xattrs (tmpfs >= 6.6).
  const std::string ovl =
      "lowerdir=" + lowers + ",upperdir=" + upper + ",workdir=" + work + ",userxattr";
  // mount(2) copies at most one page of options; a longer string would be cut, not refused.
  if (ovl.size() >= 4000) return StepError{"overlay options too long (too many layers)", E2BIG};
  STEP("mount overlay root",
       mount("overlay", root.c_str(), "overlay", MS_NOSUID | MS_NODEV, ovl.c_str()));

  for (size_t i = 0; i + 1 < s.ro_binds.size(); i += 2) {
    const std::string target = root + s.ro_binds[i + 1];
    STEP("read-only template bind", ReadOnlyBind(s.ro_binds[i], target, true));
  }
  for (size_t i = 0; i < s.bind_targets.size(); ++i) {
    int dir = OpenBindTarget(root, s.bind_targets[i]);
    STEP("create bind target", dir);
    int rc = MoveMountAt(mount_fds[s.layer_count + i], dir, "", MOVE_MOUNT_T_EMPTY_PATH);
    int e = errno;
    close(dir);
    errno = e;
    STEP("attach bind", rc);
  }
  for (int& fd : mount_fds) {
    close(fd);
    fd = -1;
  }
  if (StepError e = MountProc(root); e.failed()) return e;
  if (StepError e = MountDev(root, s); e.failed()) return e;
  const std::string tmp_opts = "mode=1777,size=" + std::to_string(s.tmp_bytes);
  STEP("mount /tmp",
       mount("tmpfs", (root + "/tmp").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts.c_str()));

  // pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves the
  // host's tree unreachable from this mount namespace (no directory needed for the old root).
  // The daemon copies the writable layer from this fd (Checkpoint); after pivot_root the
  // upper dir is reachable from nowhere else.
  *upper_fd = open(upper.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  STEP("open upper", *upper_fd);
  STEP("chdir new root", chdir(root.c_str()));
  STEP("pivot_root", static_cast<int>(syscall(SYS_pivot_root, ".", ".")));
  STEP("detach old root", umount2(".", MNT_DETACH));
  STEP("chdir /", chdir("/"));

  STEP("sethostname", sethostname(s.hostname.data(), s.hostname.size()));
  if (StepError e = BringUpLoopback(); e.failed()) return e;
  if (StepError e = DropBoundingSet(); e.failed()) return e;
  // Not dumpable: sandbox processes (a different uid anyway) cannot ptrace us or open our
  // /proc/1/{mem,environ,fd}; the daemon's fds we hold stay private.
  STEP("set not dumpable", prctl(PR_SET_DUMPABLE, 0, 0, 0, 0));
  umask(022);
  return {};
}

// --- exec ----------------------------------------------------------------------------------

struct Exec {
  uint64_t id = 0;
  pid_t pid = 0;
  uint64_t start_ns = 0;
  uint64_t deadline_ns = 0;  // 0 = none
  bool timed_out = false;
  bool killed = false;
  std::string cgroup;  // sub-cgroup name under the exec parent dir
};

class Init {
 public:
  Init(proto::SetupMsg setup, int cgroup_dir_fd)
      : setup_(std::move(setup)), cgroup_dir_(cgroup_dir_fd) {
    filter_len_ = static_cast<unsigned short>(setup_.seccomp_bpf.size() / sizeof(sock_filter));
  }

  int Run();

 private:
  void HandleMessage();
  void StartExec(const proto::ExecMsg& m, int fds[3]);
  void KillExecTree(Exec& e, int sig);
  void ReapChildren();
  void EnforceDeadlines();
  void CollectEmptyCgroups();
  // What StartExec hands to its CLONE_VM child; the child writes report_* when it fails.
  struct ChildLaunch {
    Init* init = nullptr;
    char** argv = nullptr;
    char** envp = nullptr;
    const char* path = nullptr;
    const char* cwd = nullptr;
    uid_t uid = 0;
    gid_t gid = 0;
    rlim_t nofile = 0;
    int procs_fd = -1;
    int fds[3] = {-1, -1, -1};
    volatile int report_errno = 0;
    const char* volatile report_step = nullptr;
  };
  static int ExecChildEntry(void* arg);
  [[noreturn]] void ExecChild(ChildLaunch& c);
  void SendExited(const Exec& e, int status, const rusage& ru, int spawn_errno, const char* msg);
  [[noreturn]] void KillEverythingAndExit();

  proto::SetupMsg setup_;
  int cgroup_dir_;
  unsigned short filter_len_ = 0;
  std::map<pid_t, Exec> running_;                     // main pid -> exec
  std::map<uint64_t, pid_t> exec_pids_;               // exec id -> main pid
  std::vector<std::string> lingering_;                // exec cgroups with background leftovers
  std::map<uint64_t, std::string> finished_cgroups_;  // exec id -> cgroup (for Kill later)
  uint64_t cgroup_seq_ = 0;
  // Stack for the vfork-style exec child; only the pages it touches become resident.
  alignas(64) char child_stack_[64 * 1024];
};

bool CgroupEmpty(int dirfd, const std::string& name) {
  const std::string p = name + "/cgroup.procs";
  int fd = openat(dirfd, p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char c;
  ssize_t n = read(fd, &c, 1);
  close(fd);
  return n <= 0;
}

// Signals every process in an exec's cgroup. With SIGKILL on cgroup v1 the tree is frozen
// first, so nothing can fork between reading cgroup.procs and killing it; frozen tasks die
// once thawed. v2 has cgroup.kill for the same guarantee.
void SignalCgroup(int dirfd, const std::string& name, int sig, bool v2) {
  if (v2 && sig == SIGKILL) {
    int fd = openat(dirfd, (name + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      (void)!write(fd, "1", 1);
      close(fd);
      return;
    }
  }
  const bool freeze = !v2 && sig == SIGKILL;
  int state_fd = -1;
  if (freeze) {
    state_fd = openat(dirfd, (name + "/freezer.state").c_str(), O_RDWR | O_CLOEXEC);
    if (state_fd >= 0) (void)!write(state_fd, "FROZEN", 6);
  }
  for (int round = 0; round < 100; ++round) {
    int fd = openat(dirfd, (name + "/cgroup.procs").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    std::string data;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(n));
    close(fd);
    bool any = false;
    size_t pos = 0;
    while (pos < data.size()) {
      size_t end = data.find('\n', pos);
      if (end == std::string::npos) end = data.size();
      pid_t pid = static_cast<pid_t>(atoi(data.c_str() + pos));
      if (pid > 1) {
        kill(pid, sig);
        any = true;
      }
      pos = end + 1;
    }
    if (!freeze || !any) break;
    if (state_fd >= 0) {
      (void)!write(state_fd, "THAWED", 6);
      (void)!write(state_fd, "FROZEN", 6);
    }
  }
  if (state_fd >= 0) {
    (void)!write(state_fd, "THAWED", 6);
    close(state_fd);
  }
}

void Init::SendExited(const Exec& e, int status, const rusage& ru, int spawn_errno,
                      const char* msg) {
  proto::ExitedMsg m;
  m.exec_id = e.id;
  if (spawn_errno == 0) {
    if (WIFEXITED(status)) {
      m.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      m.signal = WTERMSIG(status);
    }
  } else {
    m.exit_code = 127;
  }
  m.timed_out = e.timed_out;
  m.killed = e.killed;
  m.utime_us = static_cast<uint64_t>(ru.ru_utime.tv_sec) * 1000000 + ru.ru_utime.tv_usec;
  m.stime_us = static_cast<uint64_t>(ru.ru_stime.tv_sec) * 1000000 + ru.ru_stime.tv_usec;
  m.maxrss_kib = static_cast<uint64_t>(ru.ru_maxrss);
  m.wall_ns = MonotonicNs() - e.start_ns;
  m.spawn_errno = spawn_errno;
  if (msg) m.message = msg;
  proto::SendPacket(kCtl, proto::Encode(m));
}

// chdir() that cannot leave the sandbox root. A command's child changes directory while it
// still holds the init's descriptors (the control socket, a directory in the host's cgroupfs)
// and, as root of the namespace with every capability, may follow /proc/1/fd/N too. A cwd
// through such a /proc magic link -- passed by the API caller, or planted inside the sandbox
// as a symlink at a default cwd (root inside owns /root and /home) -- would leave the command
// in a host directory from which ".." walks the host's filesystem (CVE-2024-21626).
// RESOLVE_NO_MAGICLINKS refuses every magic link (ELOOP); RESOLVE_IN_ROOT keeps ".." and
// absolute symlinks inside the root.
int ChdirInsideRoot(const char* path) {
  int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return -1;
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long fd;
  int tries = 0;
  do {  // EAGAIN: a concurrent rename made the kernel unsure ".." stayed inside; retry
    fd = syscall(SYS_openat2, root, path, &how, sizeof how);
  } while (fd < 0 && (errno == EAGAIN || errno == EINTR) && ++tries < 128);
  int err = errno;
  close(root);
  if (fd < 0) {
    errno = err;
    return -1;
  }
  int rc = fchdir(static_cast<int>(fd));
  err = errno;
  close(static_cast<int>(fd));
  errno = err;
  return rc;
}

// PATH search without allocation (the child shares the init's heap, see StartExec), with
// execvp's error preference: EACCES from any candidate wins over a final ENOENT.
void ExecvpeNoAlloc(const char* file, char* const argv[], char* const envp[], const char* path) {
  if (strchr(file, '/')) {
    execve(file, argv, envp);
    return;
  }
  const size_t flen = strlen(file);
  bool saw_eacces = false;
  char buf[PATH_MAX];
  for (const char* p = path;; ++p) {
    const char* end = strchrnul(p, ':');
    size_t dlen = static_cast<size_t>(end - p);
    if (dlen == 0) {  // an empty PATH entry means the current directory
      buf[0] = '.';
      dlen = 1;
    } else if (dlen + flen + 2 <= sizeof buf) {
      memcpy(buf, p, dlen);
    } else {
      dlen = 0;
    }
    if (dlen > 0 && dlen + flen + 2 <= sizeof buf) {
      buf[dlen] = '/';
      memcpy(buf + dlen + 1, file, flen + 1);
      execve(buf, argv, envp);
      if (errno == EACCES)
        saw_eacces = true;
      else if (errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG)
        return;
    }
    if (*end == '\0') break;
    p = end;
  }
  errno = saw_eacces ? EACCES : ENOENT;
}

// The child of a vfork-style clone: it shares the init's memory until execve, so it only makes
// syscalls on data the parent prepared, and reports a failure by writing `report` (which the
// parent reads once the kernel resumes it) before _exit.
int Init::ExecChildEntry(void* arg) {
  auto* c = static_cast<ChildLaunch*>(arg);
  c->init->ExecChild(*c);
}

void Init::ExecChild(ChildLaunch& c) {
  const char* step = "join exec cgroup";
  auto fail = [&]() {
    c.report_errno = errno ? errno : EINVAL;
    c.report_step = step;
    _exit(127);
  };
  // Join the exec's own cgroup first, so every process it ever forks is tracked and can be
  // killed as one tree (timeouts, Kill, Destroy).
  if (write(c.procs_fd, "0", 1) < 0) fail();
  close(c.procs_fd);
  // The init's own descriptors must be gone before any caller-supplied path (cwd, the program,
  // PATH) is resolved: close-on-exec is too late, and /proc/self/fd/<cgroup dir> is a directory
  // in the host's cgroupfs from which "../../.." walks the host's filesystem (CVE-2024-21626).
  close(cgroup_dir_);
  close(kCtl);
  step = "setsid";
  if (setsid() < 0) fail();
  step = "reset signal mask";
  // The init sets no signal handlers or ignores (which would survive execve); it only blocks
  // SIGCHLD for its signalfd, and the mask is inherited, so unblock everything.
  sigset_t none;
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, nullptr) < 0) fail();
  step = "stdio";
  for (int i = 0; i < 3; ++i) {
    if (c.fds[i] == i) {
      if (fcntl(i, F_SETFD, 0) < 0) fail();
    } else if (dup2(c.fds[i], i) < 0) {
      fail();
    }
  }
  step = "chdir";
  if (ChdirInsideRoot(c.cwd) < 0) fail();
  step = "rlimits";
  rlimit nofile{c.nofile, c.nofile};
  if (setrlimit(RLIMIT_NOFILE, &nofile) < 0) fail();
  rlimit nocore{0, 0};
  if (setrlimit(RLIMIT_CORE, &nocore) < 0) fail();
  step = "set user";
  // Raw syscalls: glibc's set*id wrappers would try to synchronise "other threads", which in
  // a CLONE_VM child means the init's own bookkeeping.
  gid_t gid = c.gid;
  if (syscall(SYS_setgroups, 1, &gid) < 0) fail();
  if (syscall(SYS_setresgid, c.gid, c.gid, c.gid) < 0) fail();
  if (syscall(SYS_setresuid, c.uid, c.uid, c.uid) < 0) fail();
  step = "drop capabilities";
  // setresuid to a non-zero uid already cleared the permitted set; this also covers commands
  // run as root inside, who must not keep capabilities either (the bounding set is empty, so
  // execve cannot give any back).
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capset, &hdr, data) < 0) fail();
  step = "no_new_privs";
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) fail();
  step = "seccomp";
  if (filter_len_ > 0 &&
      paddock::runtime::linux::InstallSeccompFilter(
          reinterpret_cast<const sock_filter*>(setup_.seccomp_bpf.data()), filter_len_) < 0)
    fail();
  step = "close fds";
  // Everything above stdio becomes close-on-exec: other execs' pipes, the signalfd.
  if (syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) < 0) fail();
  step = "execve";
  ExecvpeNoAlloc(c.argv[0], c.argv, c.envp, c.path);
  fail();
  _exit(127);
}

void Init::StartExec(const proto::ExecMsg& m, int fds[3]) {
  Exec e;
  e.id = m.exec_id;
  e.start_ns = MonotonicNs();
  if (m.timeout_ms > 0) e.deadline_ns = e.start_ns + m.timeout_ms * 1000000ull;
  rusage ru{};
  auto spawn_failed = [&](int err, const char* what) {
    SendExited(e, 0, ru, err, what);
    for (int i = 0; i < 3; ++i) close(fds[i]);
  };
  if (m.argv.empty()) return spawn_failed(EINVAL, "empty argv");

  e.cgroup = "exec-" + std::to_string(++cgroup_seq_);
  if (mkdirat(cgroup_dir_, e.cgroup.c_str(), 0755) < 0)
    return spawn_failed(errno, "mkdir exec cgroup");
  int procs_fd = openat(cgroup_dir_, (e.cgroup + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (procs_fd < 0) {
    int err = errno;
    unlinkat(cgroup_dir_, e.cgroup.c_str(), AT_REMOVEDIR);
    return spawn_failed(err, "open exec cgroup");
  }
  // Everything the child needs is built here: it shares our memory and must not allocate.
  std::vector<char*> argv, envp;
  for (const auto& a : m.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const char* path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& v : m.env) {
    envp.push_back(const_cast<char*>(v.c_str()));
    if (v.rfind("PATH=", 0) == 0) path = v.c_str() + 5;
  }
  envp.push_back(nullptr);
  ChildLaunch c;
  c.init = this;
  c.argv = argv.data();
  c.envp = envp.data();
  c.path = path;
  c.cwd = m.cwd.empty() ? "/" : m.cwd.c_str();
  c.uid = m.uid;
  c.gid = m.gid;
  c.nofile = m.nofile;
  c.procs_fd = procs_fd;
  for (int i = 0; i < 3; ++i) c.fds[i] = fds[i];
  // CLONE_VM | CLONE_VFORK, like posix_spawn: no page tables to copy and no copy-on-write
  // faults in the child, and we are suspended until it has exec'd or exited, so `c` and the
  // strings above stay valid. The child gets its own stack; the fd table is its own copy.
  pid_t pid = clone(&Init::ExecChildEntry, child_stack_ + sizeof child_stack_,
                    CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
  int clone_errno = errno;
  close(procs_fd);
  for (int i = 0; i < 3; ++i) close(fds[i]);
  if (pid < 0) {
    unlinkat(cgroup_dir_, e.cgroup.c_str(), AT_REMOVEDIR);
    SendExited(e, 0, ru, clone_errno, "clone");
    return;
  }
  e.pid = pid;
  if (c.report_errno != 0) {
    int status;
    wait4(pid, &status, 0, &ru);
    unlinkat(cgroup_dir_, e.cgroup.c_str(), AT_REMOVEDIR);
    SendExited(e, status, ru, c.report_errno, c.report_step);
    return;
  }
  proto::SendPacket(kCtl, proto::Encode(proto::StartedMsg{e.id, pid}));
  exec_pids_[e.id] = pid;
  running_[pid] = std::move(e);
}

void Init::KillExecTree(Exec& e, int sig) {
  SignalCgroup(cgroup_dir_, e.cgroup, sig, setup_.cgroup_mode == 2);
}

void Init::ReapChildren() {
  while (true) {
    int status;
    rusage ru{};
    pid_t pid = wait4(-1, &status, WNOHANG, &ru);
    if (pid <= 0) break;
    auto it = running_.find(pid);
    if (it == running_.end()) continue;  // an orphan re-parented to us: just reaped
    Exec& e = it->second;
    // A timed-out or killed command's leftovers die with it; otherwise background processes
    // it started keep running in its cgroup until they exit.
    if (e.timed_out || e.killed) KillExecTree(e, SIGKILL);
    SendExited(e, status, ru, 0, nullptr);
    if (CgroupEmpty(cgroup_dir_, e.cgroup)) {
      unlinkat(cgroup_dir_, e.cgroup.c_str(), AT_REMOVEDIR);
    } else {
      lingering_.push_back(e.cgroup);
      finished_cgroups_[e.id] = e.cgroup;
    }
    exec_pids_.erase(e.id);
    running_.erase(it);
  }
  CollectEmptyCgroups();
}

void Init::CollectEmptyCgroups() {
  for (size_t i = 0; i < lingering_.size();) {
    if (CgroupEmpty(cgroup_dir_, lingering_[i]) &&
        unlinkat(cgroup_dir_, lingering_[i].c_str(), AT_REMOVEDIR) == 0) {
      for (auto it = finished_cgroups_.begin(); it != finished_cgroups_.end(); ++it) {
        if (it->second == lingering_[i]) {
          finished_cgroups_.erase(it);
          break;
        }
      }
      lingering_.erase(lingering_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
}

void Init::EnforceDeadlines() {
  const uint64_t now = MonotonicNs();
  for (auto& [pid, e] : running_) {
    if (e.deadline_ns && !e.timed_out && now >= e.deadline_ns) {
      e.timed_out = true;
      KillExecTree(e, SIGKILL);
    }
  }
}

void Init::KillEverythingAndExit() {
  // Exiting as pid 1 makes the kernel SIGKILL every process in the namespace.
  _exit(0);
}

void Init::HandleMessage() {
  std::vector<uint8_t> buf;
  int fds[proto::kMaxFdsPerMessage];
  int nfds = 0;
  ssize_t n = proto::RecvPacket(kCtl, &buf, fds, &nfds);
  // EOF or error on the control socket: the daemon is gone. A sandbox nobody controls must
  // not live on, so take everything down with us.
  if (n <= 0) KillEverythingAndExit();
  proto::MessageReader r(buf.data(), buf.size());
  auto close_fds = [&]() {
    for (int i = 0; i < nfds; ++i) close(fds[i]);
  };
  switch (r.Type()) {
    case proto::MsgType::kExec: {
      proto::ExecMsg m;
      if (!proto::Decode(r, &m) || nfds != 3) {
        close_fds();
        KillEverythingAndExit();  // protocol violation: the daemon is broken
      }
      StartExec(m, fds);
      return;
    }
    case proto::MsgType::kKill: {
      proto::KillMsg m;
      close_fds();
      if (!proto::Decode(r, &m)) KillEverythingAndExit();
      auto it = exec_pids_.find(m.exec_id);
      if (it != exec_pids_.end()) {
        Exec& e = running_[it->second];
        if (m.signal == SIGKILL) e.killed = true;
        KillExecTree(e, m.signal);
      } else if (auto f = finished_cgroups_.find(m.exec_id); f != finished_cgroups_.end()) {
        SignalCgroup(cgroup_dir_, f->second, m.signal, setup_.cgroup_mode == 2);
      }
      return;
    }
    case proto::MsgType::kShutdown:
    default:
      close_fds();
      KillEverythingAndExit();
  }
}

int Init::Run() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) return 1;
  while (true) {
    int timeout_ms = -1;
    const uint64_t now = MonotonicNs();
    for (const auto& [pid, e] : running_) {
      if (e.deadline_ns && !e.timed_out) {
        uint64_t left = e.deadline_ns > now ? (e.deadline_ns - now + 999999) / 1000000 : 0;
        if (timeout_ms < 0 || left < static_cast<uint64_t>(timeout_ms))
          timeout_ms = static_cast<int>(left);
      }
    }
    // Leftover background processes are reaped via SIGCHLD; poll their cgroups now and then
    // so empty ones get removed even when nothing else happens.
    if (!lingering_.empty() && (timeout_ms < 0 || timeout_ms > 1000)) timeout_ms = 1000;
    pollfd pfds[2] = {{kCtl, POLLIN, 0}, {sfd, POLLIN, 0}};
    int rc = poll(pfds, 2, timeout_ms);
    if (rc < 0 && errno != EINTR) return 1;
    if (pfds[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) > 0) {
      }
      ReapChildren();
    }
    if (pfds[0].revents & (POLLIN | POLLHUP | POLLERR)) HandleMessage();
    EnforceDeadlines();
    if (!lingering_.empty()) CollectEmptyCgroups();
  }
}

}  // namespace

int main() {
  // Exec'd from the daemon's memfd, the kernel names this task after the memfd
  // ("memfd:paddock-i"), which is what `ps` inside the sandbox shows as pid 1. Use the real name.
  prctl(PR_SET_NAME, "paddock-init", 0, 0, 0);
  std::vector<uint8_t> buf;
  int fds[proto::kMaxFdsPerMessage];
  int nfds = 0;
  ssize_t n = proto::RecvPacket(kCtl, &buf, fds, &nfds);
  if (n <= 0) return 1;
  proto::MessageReader r(buf.data(), buf.size());
  proto::SetupMsg setup;
  if (r.Type() != proto::MsgType::kSetup || !proto::Decode(r, &setup) || nfds != 1) {
    proto::SendPacket(kCtl, proto::Encode(proto::SetupFailedMsg{"decode setup", EPROTO}));
    return 1;
  }
  const int cgroup_dir = fds[0];
  std::vector<int> mount_fds;
  while (mount_fds.size() < setup.FdCount()) {
    n = proto::RecvPacket(kCtl, &buf, fds, &nfds);
    if (n <= 0) return 1;
    proto::MessageReader fr(buf.data(), buf.size());
    for (int i = 0; i < nfds; ++i) mount_fds.push_back(fds[i]);
    if (fr.Type() != proto::MsgType::kSetupFds || nfds == 0 || mount_fds.size() > setup.FdCount()) {
      proto::SendPacket(kCtl, proto::Encode(proto::SetupFailedMsg{"receive mount fds", EPROTO}));
      return 1;
    }
  }
  int upper_fd = -1;
  StepError err = SetUpSandbox(setup, mount_fds, &upper_fd);
  if (err.failed()) {
    proto::SendPacket(kCtl, proto::Encode(proto::SetupFailedMsg{err.step, err.err}));
    return 1;
  }
  if (proto::SendPacket(kCtl, proto::MessageWriter(proto::MsgType::kReady).data(), &upper_fd, 1) <
      0)
    return 1;
  close(upper_fd);  // the daemon's copy is all that may remain: no exec can inherit it
  Init init(std::move(setup), cgroup_dir);
  return init.Run();
}
