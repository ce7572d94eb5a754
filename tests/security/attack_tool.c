// paddock-attack: one sandbox-escape attempt per subcommand, made with raw syscalls so that no
// libc wrapper or fallback hides what the kernel (and the seccomp filter) answered.
//
// Output: exactly one line. A failed step prints "<step>: <ERRNO NAME>" (e.g. "mount: EPERM");
// success prints "ok" (some subcommands add details after it, e.g. "ok 42" bytes read). The
// security tests copy this static binary into a sandbox and compare that line.
//
// Usage: paddock-attack <subcommand> [args...]; "paddock-attack list" prints the subcommands.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

static const char* ErrName(int e) {
  const char* n = strerrorname_np(e);
  return n ? n : "E?";
}

// Prints the outcome of one step and returns the process exit code (0 only for "ok").
static int Report(const char* step, long rc) {
  if (rc < 0) {
    printf("%s: %s\n", step, ErrName(errno));
    return 1;
  }
  printf("ok\n");
  return 0;
}

static int Fail(const char* step) {
  printf("%s: %s\n", step, ErrName(errno));
  return 1;
}

static unsigned long NsFlag(const char* name) {
  static const struct {
    const char* name;
    unsigned long flag;
  } kFlags[] = {{"user", CLONE_NEWUSER},     {"mnt", CLONE_NEWNS},    {"net", CLONE_NEWNET},
                {"pid", CLONE_NEWPID},       {"uts", CLONE_NEWUTS},   {"ipc", CLONE_NEWIPC},
                {"cgroup", CLONE_NEWCGROUP}, {"time", CLONE_NEWTIME}, {"none", 0}};
  for (size_t i = 0; i < sizeof kFlags / sizeof kFlags[0]; ++i) {
    if (strcmp(kFlags[i].name, name) == 0) return kFlags[i].flag;
  }
  fprintf(stderr, "unknown namespace %s\n", name);
  exit(2);
}

// A child that just waits to be attacked; killed by the caller.
static pid_t SpawnVictim(void) {
  pid_t pid = fork();
  if (pid == 0) {
    for (;;) pause();
  }
  return pid;
}

static void KillVictim(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

// --- mounts and roots ----------------------------------------------------------------------

static int MountTmpfs(const char* dir) {
  return Report("mount", syscall(SYS_mount, "tmpfs", dir, "tmpfs", 0UL, "size=1m"));
}
static int MountBind(const char* src, const char* dst) {
  return Report("mount",
                syscall(SYS_mount, src, dst, NULL, (unsigned long)(MS_BIND | MS_REC), NULL));
}
static int MountProc(const char* dir) {
  return Report("mount", syscall(SYS_mount, "proc", dir, "proc", 0UL, NULL));
}
static int Remount(const char* dir) {
  // Try to make a read-only mount (e.g. /usr or /proc/sys) writable again.
  return Report("mount",
                syscall(SYS_mount, NULL, dir, NULL, (unsigned long)(MS_REMOUNT | MS_BIND), NULL));
}
static int Umount(const char* path) {
  return Report("umount2", syscall(SYS_umount2, path, MNT_DETACH));
}
static int PivotRoot(void) {
  if (chdir("/tmp") < 0) return Fail("chdir");
  return Report("pivot_root", syscall(SYS_pivot_root, ".", "."));
}
static int Chroot(const char* dir) { return Report("chroot", syscall(SYS_chroot, dir)); }
static int MountSetattr(const char* path) {
  struct {
    uint64_t attr_set, attr_clr, propagation, userns_fd;
  } attr = {0, 0x1 /* MOUNT_ATTR_RDONLY */, 0, 0};
  return Report("mount_setattr", syscall(SYS_mount_setattr, AT_FDCWD, path, 0, &attr, sizeof attr));
}
static int Fsopen(void) { return Report("fsopen", syscall(SYS_fsopen, "tmpfs", 0)); }
static int OpenTree(const char* path) {
  return Report("open_tree", syscall(SYS_open_tree, AT_FDCWD, path, 1 /* OPEN_TREE_CLONE */));
}

// The "shocker" escape: a file handle is resolved without a path walk, bypassing the root.
static int OpenByHandle(void) {
  struct {
    struct file_handle h;
    unsigned char bytes[128];
  } fh;
  memset(&fh, 0, sizeof fh);
  fh.h.handle_bytes = sizeof fh.bytes;
  int mount_id;
  if (syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &fh.h, &mount_id, 0) < 0) {
    // Forge a handle for inode 2 (the root directory of ext2/3/4) instead.
    memset(&fh, 0, sizeof fh);
    fh.h.handle_bytes = 8;
    fh.h.handle_type = 1;  // FILEID_INO32_GEN
    uint32_t ino = 2;
    memcpy(fh.h.f_handle, &ino, sizeof ino);
  }
  return Report("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, &fh.h, O_RDONLY));
}

// --- namespaces ----------------------------------------------------------------------------

static int Unshare(const char* ns) { return Report("unshare", syscall(SYS_unshare, NsFlag(ns))); }

// Raw clone() with fork semantics (no new stack); `hibits` sets bit 32, which the kernel drops
// (it reads the low 32 bits), to check the filter is not fooled by it.
static int Clone(const char* ns, int hibits) {
  unsigned long flags = NsFlag(ns) | SIGCHLD;
  if (hibits) flags |= 1UL << 32;
  long pid = syscall(SYS_clone, flags, 0UL, NULL, NULL, 0UL);
  if (pid == 0) syscall(SYS_exit_group, 0);
  if (pid < 0) return Fail("clone");
  waitpid((pid_t)pid, NULL, 0);
  printf("ok\n");
  return 0;
}

static int Clone3(const char* ns) {
  struct clone_args args;
  memset(&args, 0, sizeof args);
  args.flags = NsFlag(ns);
  args.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) syscall(SYS_exit_group, 0);
  if (pid < 0) return Fail("clone3");
  waitpid((pid_t)pid, NULL, 0);
  printf("ok\n");
  return 0;
}

static int Setns(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail("open");
  return Report("setns", syscall(SYS_setns, fd, 0));
}

// --- other processes -----------------------------------------------------------------------

static int PtraceAttach(pid_t pid) {
  return Report("ptrace", syscall(SYS_ptrace, PTRACE_ATTACH, pid, 0, 0));
}
static int PtraceChild(void) {
  pid_t victim = SpawnVictim();
  long rc = syscall(SYS_ptrace, PTRACE_ATTACH, victim, 0, 0);
  int e = errno;
  KillVictim(victim);
  errno = e;
  return Report("ptrace", rc);
}
static int PtraceTraceme(void) {
  return Report("ptrace", syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0));
}
static int ProcessVmReadv(void) {
  static char secret[16] = "victim-memory";
  pid_t victim = SpawnVictim();
  char buf[16];
  struct iovec local = {buf, sizeof buf}, remote = {secret, sizeof secret};
  long rc = syscall(SYS_process_vm_readv, victim, &local, 1UL, &remote, 1UL, 0UL);
  int e = errno;
  KillVictim(victim);
  errno = e;
  return Report("process_vm_readv", rc);
}
static int PidfdGetfd(pid_t pid, int target_fd) {
  long pidfd = syscall(SYS_pidfd_open, pid, 0);
  if (pidfd < 0) return Fail("pidfd_open");
  return Report("pidfd_getfd", syscall(SYS_pidfd_getfd, (int)pidfd, target_fd, 0));
}
static int PidfdOpen(pid_t pid) { return Report("pidfd_open", syscall(SYS_pidfd_open, pid, 0)); }
static int Kill(pid_t pid, int sig) { return Report("kill", syscall(SYS_kill, pid, sig)); }

// --- kernel attack surface -----------------------------------------------------------------

static int Keyctl(void) {
  return Report("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 1));
}
static int AddKey(void) {
  return Report("add_key",
                syscall(SYS_add_key, "user", "paddock", "secret", 6UL, KEY_SPEC_PROCESS_KEYRING));
}
static int RequestKey(void) {
  return Report("request_key", syscall(SYS_request_key, "user", "paddock", NULL, 0));
}
static int Bpf(void) {
  // The smallest valid program: r0 = 0; exit.
  struct bpf_insn insns[2];
  memset(insns, 0, sizeof insns);
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
  insns[0].dst_reg = BPF_REG_0;
  insns[1].code = BPF_JMP | BPF_EXIT;
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
  attr.insns = (uint64_t)(uintptr_t)insns;
  attr.insn_cnt = 2;
  attr.license = (uint64_t)(uintptr_t) "GPL";
  return Report("bpf", syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr));
}
static int IoUring(void) {
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  return Report("io_uring_setup", syscall(SYS_io_uring_setup, 8, &p));
}
static int PerfEventOpen(void) {
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.size = sizeof attr;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return Report("perf_event_open", syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0UL));
}
static int Userfaultfd(void) { return Report("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC)); }
static int KexecLoad(void) {
  return Report("kexec_load", syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0UL));
}
static int KexecFileLoad(void) {
  return Report("kexec_file_load", syscall(SYS_kexec_file_load, -1, -1, 0UL, "", 2UL /* UNLOAD */));
}
static int InitModule(void) {
  static char image[64];
  return Report("init_module", syscall(SYS_init_module, image, sizeof image, ""));
}
static int FinitModule(void) {
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail("open");
  return Report("finit_module", syscall(SYS_finit_module, fd, "", 0));
}
static int DeleteModule(void) {
  return Report("delete_module", syscall(SYS_delete_module, "paddock_nonexistent", O_NONBLOCK));
}
static int Reboot(void) {
  // CAD_OFF is the most harmless command: even a wrongly allowed call changes nothing visible.
  return Report("reboot", syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2,
                                  LINUX_REBOOT_CMD_CAD_OFF, NULL));
}
static int Swapon(void) {
  int fd = open("/tmp/paddock-swapfile", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
  return Report("swapon", syscall(SYS_swapon, "/tmp/paddock-swapfile", 0));
}
static int Swapoff(void) {
  return Report("swapoff", syscall(SYS_swapoff, "/tmp/paddock-swapfile"));
}
static int Syslog(void) {
  static char buf[4096];
  // SYSLOG_ACTION_READ_ALL (3): allowed to anyone when kernel.dmesg_restrict is 0.
  return Report("syslog", syscall(SYS_syslog, 3, buf, (int)sizeof buf));
}
static int Acct(void) { return Report("acct", syscall(SYS_acct, "/tmp/paddock-acct")); }
static int Iopl(void) { return Report("iopl", syscall(SYS_iopl, 3)); }
static int Ioperm(void) { return Report("ioperm", syscall(SYS_ioperm, 0x80UL, 1UL, 1)); }
static int Personality(void) {
  long rc = syscall(SYS_personality, (unsigned long)ADDR_NO_RANDOMIZE);
  return Report("personality", rc);
}
static int Mknod(void) {
  unlink("/tmp/paddock-sda");
  return Report("mknod",
                syscall(SYS_mknodat, AT_FDCWD, "/tmp/paddock-sda", S_IFBLK | 0600, makedev(8, 0)));
}

// --- sockets -------------------------------------------------------------------------------

static int Socket(const char* family, int hibits) {
  long fam;
  int type = SOCK_RAW, proto = 0;
  if (strcmp(family, "netlink") == 0) {
    fam = AF_NETLINK;
  } else if (strcmp(family, "packet") == 0) {
    fam = AF_PACKET;
    proto = htons(0x0003 /* ETH_P_ALL */);
  } else if (strcmp(family, "vsock") == 0) {
    fam = AF_VSOCK;
    type = SOCK_STREAM;
  } else if (strcmp(family, "inet_raw") == 0) {
    fam = AF_INET;
    proto = IPPROTO_ICMP;
  } else if (strcmp(family, "unspec") == 0) {
    fam = AF_UNSPEC;
    type = SOCK_DGRAM;
  } else {
    fprintf(stderr, "unknown family %s\n", family);
    return 2;
  }
  if (hibits) fam |= 1L << 32;
  return Report("socket", syscall(SYS_socket, fam, type, proto));
}

static int Socketpair(void) {
  int sv[2];
  return Report("socketpair", syscall(SYS_socketpair, AF_NETLINK, SOCK_RAW, 0, sv));
}

// TIOCSTI on a pty we made our controlling terminal: the kernel itself allows that (it only
// refuses other terminals), so any refusal here comes from the sandbox.
static int Tiocsti(int hibits, int linux_cmd) {
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0) return Fail("posix_openpt");
  if (grantpt(master) < 0 || unlockpt(master) < 0) return Fail("unlockpt");
  const char* name = ptsname(master);
  if (!name) return Fail("ptsname");
  if (setsid() < 0 && errno != EPERM) return Fail("setsid");
  int slave = open(name, O_RDWR);
  if (slave < 0) return Fail("open pts");
  if (ioctl(slave, TIOCSCTTY, 0) < 0) return Fail("TIOCSCTTY");
  if (linux_cmd) {
    char sub = 6;  // TIOCL_GETKMSGREDIRECT: harmless query
    return Report("ioctl", syscall(SYS_ioctl, slave, (unsigned long)TIOCLINUX, &sub));
  }
  unsigned long cmd = TIOCSTI;
  if (hibits) cmd |= 1UL << 32;
  char c = 'x';
  return Report("ioctl", syscall(SYS_ioctl, slave, cmd, &c));
}

static int Connect(const char* ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Fail("socket");
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
    fprintf(stderr, "bad address %s\n", ip);
    return 2;
  }
  if (connect(fd, (struct sockaddr*)&a, sizeof a) == 0) {
    printf("ok\n");
    return 0;
  }
  if (errno != EINPROGRESS) return Fail("connect");
  struct pollfd p = {fd, POLLOUT, 0};
  int rc = poll(&p, 1, 3000);
  if (rc == 0) {
    errno = ETIMEDOUT;
    return Fail("connect");
  }
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    errno = err;
    return Fail("connect");
  }
  printf("ok\n");
  return 0;
}

static int ConnectAbstract(const char* name) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Fail("socket");
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t n = strlen(name);
  if (n + 1 > sizeof a.sun_path) return 2;
  memcpy(a.sun_path + 1, name, n);  // leading NUL: the abstract namespace
  return Report("connect", connect(fd, (struct sockaddr*)&a,
                                   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)));
}

// --- host-global state ---------------------------------------------------------------------

static int Sethostname(void) {
  return Report("sethostname", syscall(SYS_sethostname, "pwned", 5UL));
}
static int Setdomainname(void) {
  return Report("setdomainname", syscall(SYS_setdomainname, "pwned", 5UL));
}
static int ClockSettime(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // setting the current time: harmless if it worked
  return Report("clock_settime", syscall(SYS_clock_settime, CLOCK_REALTIME, &ts));
}
static int Settimeofday(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return Report("settimeofday", syscall(SYS_settimeofday, &tv, NULL));
}
static int ClockAdjtime(void) {
  struct timex tx;
  memset(&tx, 0, sizeof tx);
  // Step the clock by zero: a no-op even if it were allowed, but it still needs CAP_SYS_TIME.
  tx.modes = ADJ_SETOFFSET | ADJ_NANO;
  return Report("clock_adjtime", syscall(SYS_clock_adjtime, CLOCK_REALTIME, &tx));
}

// --- credentials ---------------------------------------------------------------------------

static int Setuid0(void) { return Report("setresuid", syscall(SYS_setresuid, 0, 0, 0)); }
static int CapsetAll(void) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0xff, sizeof data);
  return Report("capset", syscall(SYS_capset, &hdr, data));
}
static int Ids(void) {
  uid_t r, e, s;
  getresuid(&r, &e, &s);
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  syscall(SYS_capget, &hdr, data);
  printf("ok uid=%u euid=%u suid=%u capeff=%08x%08x\n", r, e, s, data[1].effective,
         data[0].effective);
  return 0;
}

// --- files ---------------------------------------------------------------------------------

static int OpenWrite(const char* path) {
  return Report("open", syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC, 0));
}
static int WriteFile(const char* path, const char* data) {
  long fd = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC, 0);
  if (fd < 0) return Fail("open");
  return Report("write", syscall(SYS_write, (int)fd, data, strlen(data)));
}
static int ReadFile(const char* path) {
  long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return Fail("open");
  static char buf[65536];
  long total = 0;
  for (;;) {
    long n = syscall(SYS_read, (int)fd, buf, sizeof buf);
    if (n < 0) return Fail("read");
    if (n == 0) break;
    total += n;
    if (total > (1L << 24)) break;
  }
  printf("ok %ld\n", total);
  return 0;
}
static int ListDir(const char* path) {
  DIR* d = opendir(path);
  if (!d) return Fail("opendir");
  errno = 0;
  long n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) ++n;
  }
  if (errno != 0) return Fail("readdir");
  printf("ok %ld\n", n);
  return 0;
}
static int Readlink(const char* path) {
  char buf[4096];
  long n = syscall(SYS_readlinkat, AT_FDCWD, path, buf, sizeof buf - 1);
  if (n < 0) return Fail("readlink");
  buf[n] = '\0';
  printf("ok %s\n", buf);
  return 0;
}

// Race helper for the host-side files API: in `dir`, atomically exchanges the real directory
// "d" with symlinks pointing out of the sandbox (to "/", up through "..", and through /proc
// magic links), over and over for `seconds`.
static int SwapLoop(const char* dir, double seconds) {
  if (chdir(dir) < 0) return Fail("chdir");
  static const char* const kTargets[] = {"/", "../../../../../../../..", "/proc/1/root",
                                         "/proc/self/root", "/proc/self/cwd/../../.."};
  const int n = (int)(sizeof kTargets / sizeof kTargets[0]);
  char name[32];
  for (int i = 0; i < n; ++i) {
    snprintf(name, sizeof name, "l%d", i);
    unlink(name);
    if (symlink(kTargets[i], name) < 0) return Fail("symlink");
  }
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  long swaps = 0;
  for (;;) {
    for (int i = 0; i < n; ++i) {
      snprintf(name, sizeof name, "l%d", i);
      // d <-> l<i>: d becomes the symlink, then the directory again.
      if (syscall(SYS_renameat2, AT_FDCWD, "d", AT_FDCWD, name, RENAME_EXCHANGE) < 0)
        return Fail("renameat2");
      sched_yield();
      if (syscall(SYS_renameat2, AT_FDCWD, "d", AT_FDCWD, name, RENAME_EXCHANGE) < 0)
        return Fail("renameat2");
      swaps += 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    double elapsed =
        (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
    if (elapsed >= seconds) break;
  }
  printf("ok %ld\n", swaps);
  return 0;
}

// --- foreign syscall ABIs ------------------------------------------------------------------

static int Int80(void) {
#if defined(__x86_64__)
  long ret;
  // i386 getpid (20) through the 32-bit entry point: the filter must kill us.
  __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
  printf("ok %ld\n", ret);
  return 0;
#else
  printf("int80: ENOSYS\n");
  return 1;
#endif
}
static int X32(void) {
#if defined(__x86_64__)
  long rc = syscall(0x40000000L | 39 /* x32 getpid */);
  return Report("x32", rc);
#else
  printf("x32: ENOSYS\n");
  return 1;
#endif
}

// --- dispatch ------------------------------------------------------------------------------

#define ARG(i) (argc > (i) ? argv[(i)] : (fprintf(stderr, "missing argument\n"), exit(2), ""))

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: %s <subcommand> [args]\n", argv[0]);
    return 2;
  }
  const char* c = argv[1];
#define IS(name) (strcmp(c, name) == 0)
  if (IS("mount_tmpfs")) return MountTmpfs(ARG(2));
  if (IS("mount_bind")) return MountBind(ARG(2), ARG(3));
  if (IS("mount_proc")) return MountProc(ARG(2));
  if (IS("remount")) return Remount(ARG(2));
  if (IS("umount")) return Umount(ARG(2));
  if (IS("pivot_root")) return PivotRoot();
  if (IS("chroot")) return Chroot(ARG(2));
  if (IS("mount_setattr")) return MountSetattr(ARG(2));
  if (IS("fsopen")) return Fsopen();
  if (IS("open_tree")) return OpenTree(ARG(2));
  if (IS("open_by_handle")) return OpenByHandle();
  if (IS("unshare")) return Unshare(ARG(2));
  if (IS("clone")) return Clone(ARG(2), 0);
  if (IS("clone_hibits")) return Clone(ARG(2), 1);
  if (IS("clone3")) return Clone3(ARG(2));
  if (IS("setns")) return Setns(ARG(2));
  if (IS("ptrace_attach")) return PtraceAttach(atoi(ARG(2)));
  if (IS("ptrace_child")) return PtraceChild();
  if (IS("ptrace_traceme")) return PtraceTraceme();
  if (IS("process_vm_readv")) return ProcessVmReadv();
  if (IS("pidfd_getfd")) return PidfdGetfd(atoi(ARG(2)), atoi(ARG(3)));
  if (IS("pidfd_open")) return PidfdOpen(atoi(ARG(2)));
  if (IS("kill")) return Kill(atoi(ARG(2)), atoi(ARG(3)));
  if (IS("keyctl")) return Keyctl();
  if (IS("add_key")) return AddKey();
  if (IS("request_key")) return RequestKey();
  if (IS("bpf")) return Bpf();
  if (IS("io_uring_setup")) return IoUring();
  if (IS("perf_event_open")) return PerfEventOpen();
  if (IS("userfaultfd")) return Userfaultfd();
  if (IS("kexec_load")) return KexecLoad();
  if (IS("kexec_file_load")) return KexecFileLoad();
  if (IS("init_module")) return InitModule();
  if (IS("finit_module")) return FinitModule();
  if (IS("delete_module")) return DeleteModule();
  if (IS("reboot")) return Reboot();
  if (IS("swapon")) return Swapon();
  if (IS("swapoff")) return Swapoff();
  if (IS("syslog")) return Syslog();
  if (IS("acct")) return Acct();
  if (IS("iopl")) return Iopl();
  if (IS("ioperm")) return Ioperm();
  if (IS("personality")) return Personality();
  if (IS("mknod")) return Mknod();
  if (IS("socket")) return Socket(ARG(2), 0);
  if (IS("socket_hibits")) return Socket(ARG(2), 1);
  if (IS("socketpair_netlink")) return Socketpair();
  if (IS("tiocsti")) return Tiocsti(0, 0);
  if (IS("tiocsti_hibits")) return Tiocsti(1, 0);
  if (IS("tioclinux")) return Tiocsti(0, 1);
  if (IS("connect")) return Connect(ARG(2), atoi(ARG(3)));
  if (IS("connect_abstract")) return ConnectAbstract(ARG(2));
  if (IS("sethostname")) return Sethostname();
  if (IS("setdomainname")) return Setdomainname();
  if (IS("clock_settime")) return ClockSettime();
  if (IS("settimeofday")) return Settimeofday();
  if (IS("clock_adjtime")) return ClockAdjtime();
  if (IS("setuid0")) return Setuid0();
  if (IS("capset")) return CapsetAll();
  if (IS("ids")) return Ids();
  if (IS("openw")) return OpenWrite(ARG(2));
  if (IS("write")) return WriteFile(ARG(2), ARG(3));
  if (IS("read")) return ReadFile(ARG(2));
  if (IS("listdir")) return ListDir(ARG(2));
  if (IS("readlink")) return Readlink(ARG(2));
  if (IS("swaploop")) return SwapLoop(ARG(2), atof(ARG(3)));
  if (IS("int80")) return Int80();
  if (IS("x32")) return X32();
#undef IS
  fprintf(stderr, "unknown subcommand %s\n", c);
  return 2;
}
