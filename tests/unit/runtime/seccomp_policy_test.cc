#include "runtime/linux/seccomp_policy.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace paddock::runtime::linux {
namespace {

constexpr uint32_t kRetErrnoEperm = SECCOMP_RET_ERRNO | EPERM;
constexpr uint32_t kRetErrnoEnosys = SECCOMP_RET_ERRNO | ENOSYS;
constexpr uint32_t kRetErrnoEafnosupport = SECCOMP_RET_ERRNO | EAFNOSUPPORT;
constexpr uint64_t kAllOnes = ~uint64_t{0};
constexpr long kX32SyscallBit = 0x40000000;

const std::vector<sock_filter>& Filter() {
  static const std::vector<sock_filter>* const kFilter = [] {
    Result<std::vector<sock_filter>> built = BuildDefaultSeccompFilter();
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    return new std::vector<sock_filter>(built.ok() ? *built : std::vector<sock_filter>{});
  }();
  return *kFilter;
}

// ---------------------------------------------------------------------------------------------
// A classic-BPF interpreter with the kernel's seccomp semantics, so every decision of the filter
// can be checked exactly, including inputs that would be unsafe or impossible to issue for real
// (foreign architectures, arbitrary numbers, arguments a kernel would act on).

constexpr uint32_t kInterpreterError = 0xdeadbeef;

uint32_t RunFilter(const std::vector<sock_filter>& prog, const seccomp_data& data) {
  uint32_t a = 0, x = 0;
  uint32_t mem[BPF_MEMWORDS] = {};
  const auto* bytes = reinterpret_cast<const unsigned char*>(&data);
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    const sock_filter& f = prog[pc];
    switch (f.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (f.k % 4 != 0 || f.k + 4 > sizeof(data)) return kInterpreterError;
        std::memcpy(&a, bytes + f.k, 4);
        break;
      case BPF_LD | BPF_W | BPF_LEN:
        a = sizeof(data);
        break;
      case BPF_LD | BPF_IMM:
        a = f.k;
        break;
      case BPF_LDX | BPF_IMM:
        x = f.k;
        break;
      case BPF_LDX | BPF_W | BPF_LEN:
        x = sizeof(data);
        break;
      case BPF_LD | BPF_MEM:
        if (f.k >= BPF_MEMWORDS) return kInterpreterError;
        a = mem[f.k];
        break;
      case BPF_LDX | BPF_MEM:
        if (f.k >= BPF_MEMWORDS) return kInterpreterError;
        x = mem[f.k];
        break;
      case BPF_ST:
        if (f.k >= BPF_MEMWORDS) return kInterpreterError;
        mem[f.k] = a;
        break;
      case BPF_STX:
        if (f.k >= BPF_MEMWORDS) return kInterpreterError;
        mem[f.k] = x;
        break;
      case BPF_ALU | BPF_AND | BPF_K:
        a &= f.k;
        break;
      case BPF_ALU | BPF_AND | BPF_X:
        a &= x;
        break;
      case BPF_ALU | BPF_OR | BPF_K:
        a |= f.k;
        break;
      case BPF_ALU | BPF_ADD | BPF_K:
        a += f.k;
        break;
      case BPF_ALU | BPF_SUB | BPF_K:
        a -= f.k;
        break;
      case BPF_ALU | BPF_LSH | BPF_K:
        a <<= (f.k & 31);
        break;
      case BPF_ALU | BPF_RSH | BPF_K:
        a >>= (f.k & 31);
        break;
      case BPF_ALU | BPF_NEG:
        a = -a;
        break;
      case BPF_MISC | BPF_TAX:
        x = a;
        break;
      case BPF_MISC | BPF_TXA:
        a = x;
        break;
      case BPF_JMP | BPF_JA:
        pc += f.k;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        pc += (a == f.k) ? f.jt : f.jf;
        break;
      case BPF_JMP | BPF_JGT | BPF_K:
        pc += (a > f.k) ? f.jt : f.jf;
        break;
      case BPF_JMP | BPF_JGE | BPF_K:
        pc += (a >= f.k) ? f.jt : f.jf;
        break;
      case BPF_JMP | BPF_JSET | BPF_K:
        pc += (a & f.k) ? f.jt : f.jf;
        break;
      case BPF_JMP | BPF_JEQ | BPF_X:
        pc += (a == x) ? f.jt : f.jf;
        break;
      case BPF_JMP | BPF_JGT | BPF_X:
        pc += (a > x) ? f.jt : f.jf;
        break;
      case BPF_JMP | BPF_JGE | BPF_X:
        pc += (a >= x) ? f.jt : f.jf;
        break;
      case BPF_JMP | BPF_JSET | BPF_X:
        pc += (a & x) ? f.jt : f.jf;
        break;
      case BPF_RET | BPF_K:
        return f.k;
      case BPF_RET | BPF_A:
        return a;
      default:
        return kInterpreterError;
    }
  }
  return kInterpreterError;  // fell off the end: the kernel's verifier would reject this
}

uint32_t Decide(int nr, std::initializer_list<uint64_t> args = {},
                uint32_t arch = seccomp_arch_native()) {
  seccomp_data data{};
  data.nr = nr;
  data.arch = arch;
  size_t i = 0;
  for (uint64_t arg : args) data.args[i++] = arg;
  return RunFilter(Filter(), data);
}

uint32_t ExpectedAction(SeccompRule::Action action) {
  return action == SeccompRule::Action::kEnosys ? kRetErrnoEnosys : kRetErrnoEperm;
}

// ---------------------------------------------------------------------------------------------
// Running a syscall for real in a forked child under the filter.

struct ChildOutcome {
  bool exited = false;
  int exit_code = -1;  // 0: the call succeeded; otherwise the errno it failed with
  bool signaled = false;
  int signal = 0;
};

std::ostream& operator<<(std::ostream& os, const ChildOutcome& o) {
  if (o.exited) return os << "exited " << o.exit_code << " (" << strerror(o.exit_code) << ")";
  if (o.signaled) return os << "killed by " << strsignal(o.signal);
  return os << "unknown";
}

constexpr int kSetupFailed = 250;

// Forks; the child drops its controlling terminal (so a vhangup or tty ioctl that slipped
// through could not touch the terminal running the tests), disables core dumps (SIGSYS kills
// would write one), optionally installs the filter, and runs `call`, which returns a syscall-
// style result. The exit code reports success (0) or errno, which all fit in a byte.
template <typename Call>
ChildOutcome RunChild(Call call, bool with_filter = true) {
  const std::vector<sock_filter>& filter = Filter();
  pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << strerror(errno);
    return {};
  }
  if (pid == 0) {
    setsid();
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    if (with_filter) {
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(kSetupFailed);
      if (InstallSeccompFilter(filter.data(), static_cast<unsigned short>(filter.size())) != 0) {
        _exit(kSetupFailed);
      }
    }
    errno = 0;
    long r = call();
    _exit(r >= 0 ? 0 : (errno > 0 && errno < kSetupFailed ? errno : kSetupFailed + 1));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      ADD_FAILURE() << "waitpid: " << strerror(errno);
      return {};
    }
  }
  ChildOutcome out;
  out.exited = WIFEXITED(status);
  if (out.exited) out.exit_code = WEXITSTATUS(status);
  out.signaled = WIFSIGNALED(status);
  if (out.signaled) out.signal = WTERMSIG(status);
  EXPECT_FALSE(out.exited && out.exit_code == kSetupFailed) << "child could not install filter";
  return out;
}

::testing::AssertionResult FailsWith(const ChildOutcome& o, int err) {
  if (o.exited && o.exit_code == err) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "expected errno " << err << " (" << strerror(err) << "), child " << o;
}

::testing::AssertionResult Succeeds(const ChildOutcome& o) { return FailsWith(o, 0); }

::testing::AssertionResult KilledBySigsys(const ChildOutcome& o) {
  if (o.signaled && o.signal == SIGSYS) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected SIGSYS, child " << o;
}

// Reaps a process the filtered child created when a denied clone slipped through, so a
// failing test does not leave it behind.
long ReapIfParent(long r) {
  if (r == 0) _exit(0);  // the unexpected new process
  if (r > 0) waitpid(static_cast<pid_t>(r), nullptr, 0);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Shape of the filter and its table.

TEST(SeccompPolicyTest, FilterBuildsWithinKernelLimit) {
  const std::vector<sock_filter>& f = Filter();
  ASSERT_FALSE(f.empty());
  EXPECT_LT(f.size(), size_t{BPF_MAXINSNS});
  // Deterministic: the daemon may rebuild it and compare.
  Result<std::vector<sock_filter>> again = BuildDefaultSeccompFilter();
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), f.size());
  EXPECT_EQ(std::memcmp(again->data(), f.data(), f.size() * sizeof(sock_filter)), 0);
}

TEST(SeccompPolicyTest, DeniedTableNamesAreRealSyscalls) {
  // A typo in the table would silently leave a syscall allowed; libseccomp knows every name
  // across all architectures, so anything it cannot resolve is a typo or newer than it.
  const std::set<std::string> newer_than_libseccomp = {"open_tree_attr"};
  std::set<std::string> seen;
  for (const SeccompRule& rule : DefaultDeniedSyscalls()) {
    EXPECT_TRUE(seen.insert(rule.syscall).second) << "duplicate " << rule.syscall;
    if (newer_than_libseccomp.count(rule.syscall)) continue;
    EXPECT_NE(seccomp_syscall_resolve_name(rule.syscall.c_str()), __NR_SCMP_ERROR) << rule.syscall;
  }
  for (const char* must : {"mount", "ptrace", "unshare", "setns", "bpf", "keyctl", "io_uring_setup",
                           "open_by_handle_at", "userfaultfd", "clone3"}) {
    EXPECT_TRUE(seen.count(must)) << must;
  }
  // Explicitly kept allowed: kcmp is harmless with ptrace denied, and landlock lets a command
  // sandbox itself further.
  for (const char* allowed : {"kcmp", "landlock_create_ruleset", "landlock_add_rule",
                              "landlock_restrict_self", "clone", "personality"}) {
    EXPECT_FALSE(seen.count(allowed)) << allowed;
  }
}

// ---------------------------------------------------------------------------------------------
// Every decision, checked with the interpreter.

TEST(SeccompPolicyDecisionTest, DeniedSyscallsGetTheirAction) {
  int checked = 0;
  for (const SeccompRule& rule : DefaultDeniedSyscalls()) {
    int nr = seccomp_syscall_resolve_name(rule.syscall.c_str());
    if (nr < 0) continue;
    ++checked;
    EXPECT_EQ(Decide(nr), ExpectedAction(rule.action)) << rule.syscall;
    EXPECT_EQ(Decide(nr, {kAllOnes, kAllOnes, kAllOnes, kAllOnes, kAllOnes, kAllOnes}),
              ExpectedAction(rule.action))
        << rule.syscall;
  }
  EXPECT_GT(checked, 50);
}

TEST(SeccompPolicyDecisionTest, EverythingElseIsAllowed) {
  std::set<int> special;
  for (const SeccompRule& rule : DefaultDeniedSyscalls()) {
    special.insert(seccomp_syscall_resolve_name(rule.syscall.c_str()));
  }
  for (const char* name : {"clone", "ioctl", "socket", "socketpair", "personality"}) {
    special.insert(seccomp_syscall_resolve_name(name));
  }
  int allowed = 0;
  for (int nr = 0; nr < 1024; ++nr) {
    if (special.count(nr)) continue;
    ++allowed;
    EXPECT_EQ(Decide(nr), SECCOMP_RET_ALLOW) << "nr " << nr;
    EXPECT_EQ(Decide(nr, {kAllOnes, kAllOnes, kAllOnes, kAllOnes, kAllOnes, kAllOnes}),
              SECCOMP_RET_ALLOW)
        << "nr " << nr;
  }
  EXPECT_GT(allowed, 900);
  for (const char* name : {"read", "write", "getpid", "execve", "openat", "kcmp",
                           "landlock_create_ruleset", "landlock_restrict_self"}) {
    int nr = seccomp_syscall_resolve_name(name);
    ASSERT_GE(nr, 0) << name;
    EXPECT_EQ(Decide(nr), SECCOMP_RET_ALLOW) << name;
  }
}

TEST(SeccompPolicyDecisionTest, CloneNamespaceFlagsAreDenied) {
  const int clone_nr = SYS_clone;
  const uint64_t fork_flags = CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD;
  const uint64_t thread_flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                                CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID |
                                CLONE_CHILD_CLEARTID;
  EXPECT_EQ(Decide(clone_nr, {fork_flags}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Decide(clone_nr, {thread_flags}), SECCOMP_RET_ALLOW);
  // The kernel reads only the low 32 bits of clone()'s flags; high bits must not matter.
  EXPECT_EQ(Decide(clone_nr, {fork_flags | (uint64_t{0xffffffff} << 32)}), SECCOMP_RET_ALLOW);
  for (uint64_t flag : {CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
                        CLONE_NEWNET, CLONE_NEWCGROUP}) {
    EXPECT_EQ(Decide(clone_nr, {flag | SIGCHLD}), kRetErrnoEperm) << std::hex << flag;
    EXPECT_EQ(Decide(clone_nr, {flag | fork_flags | thread_flags}), kRetErrnoEperm)
        << std::hex << flag;
  }
  EXPECT_EQ(Decide(clone_nr, {kAllOnes}), kRetErrnoEperm);
}

TEST(SeccompPolicyDecisionTest, TerminalInjectionIoctlsAreDenied) {
  const int nr = SYS_ioctl;
  for (uint64_t cmd : {uint64_t{TIOCSTI}, uint64_t{TIOCLINUX}}) {
    EXPECT_EQ(Decide(nr, {0, cmd}), kRetErrnoEperm) << std::hex << cmd;
    // The kernel truncates the command to 32 bits, so high bits are a bypass attempt.
    EXPECT_EQ(Decide(nr, {0, cmd | (uint64_t{1} << 32)}), kRetErrnoEperm) << std::hex << cmd;
    EXPECT_EQ(Decide(nr, {0, cmd | (uint64_t{0xffffffff} << 32)}), kRetErrnoEperm);
  }
  for (uint64_t cmd : {uint64_t{TCGETS}, uint64_t{FIONREAD}, uint64_t{TIOCGWINSZ}}) {
    EXPECT_EQ(Decide(nr, {0, cmd}), SECCOMP_RET_ALLOW) << std::hex << cmd;
  }
}

TEST(SeccompPolicyDecisionTest, OnlyUnixAndInetSocketFamilies) {
  const std::set<uint64_t> allowed = {AF_UNIX, AF_INET, AF_INET6};
  for (int nr : {SYS_socket, SYS_socketpair}) {
    for (uint64_t family = 0; family < 64; ++family) {
      EXPECT_EQ(Decide(nr, {family, SOCK_STREAM, 0}),
                allowed.count(family) ? SECCOMP_RET_ALLOW : kRetErrnoEafnosupport)
          << "nr " << nr << " family " << family;
    }
    for (uint64_t family : {uint64_t{0x7fffffff}, uint64_t{0xffffffff}, kAllOnes,
                            uint64_t{AF_NETLINK} | (uint64_t{1} << 32),
                            // Conservative: the kernel would read AF_INET here, but no libc
                            // sends high bits for an int argument, so refusing costs nothing.
                            uint64_t{AF_INET} | (uint64_t{1} << 32)}) {
      EXPECT_EQ(Decide(nr, {family}), kRetErrnoEafnosupport) << std::hex << family;
    }
  }
}

TEST(SeccompPolicyDecisionTest, PersonalityOnlyDefaultOrQuery) {
  const int nr = SYS_personality;
  EXPECT_EQ(Decide(nr, {0}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Decide(nr, {0xffffffff}), SECCOMP_RET_ALLOW);
  // The kernel takes an unsigned int: high bits are dropped before it looks at the value.
  EXPECT_EQ(Decide(nr, {uint64_t{1} << 32}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Decide(nr, {kAllOnes}), SECCOMP_RET_ALLOW);
  for (uint64_t persona :
       {uint64_t{ADDR_NO_RANDOMIZE}, uint64_t{READ_IMPLIES_EXEC}, uint64_t{MMAP_PAGE_ZERO},
        uint64_t{PER_LINUX32}, uint64_t{1}, uint64_t{0xfffffffe},
        uint64_t{ADDR_NO_RANDOMIZE} | (uint64_t{1} << 32)}) {
    EXPECT_EQ(Decide(nr, {persona}), kRetErrnoEperm) << std::hex << persona;
  }
}

TEST(SeccompPolicyDecisionTest, ForeignArchitecturesAreKilled) {
  for (uint32_t arch : {uint32_t{SCMP_ARCH_X86}, uint32_t{SCMP_ARCH_X32},
                        uint32_t{SCMP_ARCH_AARCH64}, uint32_t{SCMP_ARCH_ARM}, uint32_t{0}}) {
    if (arch == seccomp_arch_native()) continue;
    EXPECT_EQ(Decide(20, {}, arch), SECCOMP_RET_KILL_PROCESS) << std::hex << arch;
    EXPECT_EQ(Decide(SYS_personality, {ADDR_NO_RANDOMIZE}, arch), SECCOMP_RET_KILL_PROCESS);
  }
}

#if defined(__x86_64__)
TEST(SeccompPolicyDecisionTest, X32NumbersAreKilled) {
  for (long nr : {long{SYS_getpid}, long{SYS_personality}, long{SYS_mount}, 0L, 511L}) {
    EXPECT_EQ(Decide(static_cast<int>(kX32SyscallBit | nr)), SECCOMP_RET_KILL_PROCESS) << nr;
  }
  // -1 is what a tracer writes to skip a syscall; it must not be mistaken for x32.
  EXPECT_EQ(Decide(-1), SECCOMP_RET_ALLOW);
}
#endif

// ---------------------------------------------------------------------------------------------
// The same decisions, enforced by the running kernel.

TEST(SeccompLiveTest, DeniedSyscallsReturnTheirErrno) {
  // All-ones arguments: should the filter ever let one of these through, the kernel rejects
  // the call (bad pointer, fd, flags or magic) instead of acting on it, even as root.
  for (const SeccompRule& rule : DefaultDeniedSyscalls()) {
    const int nr = seccomp_syscall_resolve_name(rule.syscall.c_str());
    if (nr < 0) continue;
    const int want = rule.action == SeccompRule::Action::kEnosys ? ENOSYS : EPERM;
    ChildOutcome o = RunChild(
        [nr] { return syscall(nr, kAllOnes, kAllOnes, kAllOnes, kAllOnes, kAllOnes, kAllOnes); });
    EXPECT_TRUE(FailsWith(o, want)) << rule.syscall;
  }
}

TEST(SeccompLiveTest, CloneIntoNamespacesIsDeniedButForkWorks) {
  for (unsigned long flag : {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUTS,
                             CLONE_NEWIPC, CLONE_NEWCGROUP}) {
    ChildOutcome o = RunChild([flag] {
      return ReapIfParent(syscall(SYS_clone, flag | SIGCHLD, 0, nullptr, nullptr, 0));
    });
    EXPECT_TRUE(FailsWith(o, EPERM)) << std::hex << flag;
  }
  EXPECT_TRUE(Succeeds(RunChild([] { return ReapIfParent(fork()); })));
  EXPECT_TRUE(
      Succeeds(RunChild([] { return ReapIfParent(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0)); })));
}

TEST(SeccompLiveTest, Clone3ReturnsEnosysAndThreadsFallBack) {
  // struct clone_args, version 0: flags, pidfd, child_tid, parent_tid, exit_signal, stack,
  // stack_size, tls.
  ChildOutcome o = RunChild([] {
    uint64_t args[8] = {0, 0, 0, 0, SIGCHLD, 0, 0, 0};
    return ReapIfParent(syscall(SYS_clone3, args, sizeof(args)));
  });
  EXPECT_TRUE(FailsWith(o, ENOSYS));
  // glibc >= 2.34 starts threads with clone3; the ENOSYS must make it fall back to clone().
  ChildOutcome threads = RunChild([]() -> long {
    pthread_t t;
    int rc = pthread_create(
        &t, nullptr, [](void*) -> void* { return nullptr; }, nullptr);
    if (rc != 0) {
      errno = rc;
      return -1;
    }
    return pthread_join(t, nullptr) == 0 ? 0 : -1;
  });
  EXPECT_TRUE(Succeeds(threads));
}

TEST(SeccompLiveTest, UnshareAndSetnsAreDenied) {
  EXPECT_TRUE(FailsWith(RunChild([] { return long{unshare(CLONE_NEWUSER)}; }), EPERM));
  EXPECT_TRUE(FailsWith(RunChild([] { return long{unshare(CLONE_NEWNS)}; }), EPERM));
  EXPECT_TRUE(FailsWith(RunChild([] { return long{unshare(0)}; }), EPERM));
  EXPECT_TRUE(FailsWith(RunChild([] { return long{setns(0, 0)}; }), EPERM));
}

TEST(SeccompLiveTest, TerminalInjectionIoctlsAreDenied) {
  // /dev/null is not a tty: if the filter let TIOCSTI through, the kernel would answer ENOTTY
  // (which the test tells apart) rather than inject into the terminal running the tests.
  auto ioctl_on_null = [](unsigned long cmd) {
    return [cmd]() -> long {
      int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) return -1;
      char c = 'x';
      return syscall(SYS_ioctl, fd, cmd, &c);
    };
  };
  ASSERT_TRUE(FailsWith(RunChild(ioctl_on_null(TIOCSTI), /*with_filter=*/false), ENOTTY));
  EXPECT_TRUE(FailsWith(RunChild(ioctl_on_null(TIOCSTI)), EPERM));
  EXPECT_TRUE(FailsWith(RunChild(ioctl_on_null(TIOCSTI | (1UL << 32))), EPERM));
  EXPECT_TRUE(FailsWith(RunChild(ioctl_on_null(TIOCLINUX)), EPERM));
  // Other ioctls still reach the driver.
  EXPECT_TRUE(FailsWith(RunChild(ioctl_on_null(TIOCGWINSZ)), ENOTTY));
  EXPECT_TRUE(Succeeds(RunChild([] {
    int fds[2];
    if (pipe(fds) != 0) return -1L;
    int avail = 0;
    return long{ioctl(fds[0], FIONREAD, &avail)};
  })));
}

TEST(SeccompLiveTest, SocketFamilies) {
  auto make_socket = [](int family, int type) {
    return [family, type] { return long{socket(family, type | SOCK_CLOEXEC, 0)}; };
  };
  EXPECT_TRUE(FailsWith(RunChild(make_socket(AF_NETLINK, SOCK_RAW)), EAFNOSUPPORT));
  EXPECT_TRUE(FailsWith(RunChild(make_socket(AF_PACKET, SOCK_RAW)), EAFNOSUPPORT));
  EXPECT_TRUE(FailsWith(RunChild(make_socket(AF_VSOCK, SOCK_STREAM)), EAFNOSUPPORT));
  EXPECT_TRUE(FailsWith(RunChild(make_socket(AF_UNSPEC, SOCK_STREAM)), EAFNOSUPPORT));
  EXPECT_TRUE(FailsWith(RunChild([] {
                          int sv[2];
                          return long{socketpair(AF_NETLINK, SOCK_RAW, 0, sv)};
                        }),
                        EAFNOSUPPORT));
  EXPECT_TRUE(Succeeds(RunChild([] {
    int sv[2];
    return long{socketpair(AF_UNIX, SOCK_STREAM, 0, sv)};
  })));
  // Allowed families behave exactly as without the filter (IPv6 may be off on a host).
  for (int family : {AF_UNIX, AF_INET, AF_INET6}) {
    ChildOutcome bare = RunChild(make_socket(family, SOCK_STREAM), /*with_filter=*/false);
    ChildOutcome filtered = RunChild(make_socket(family, SOCK_STREAM));
    EXPECT_TRUE(FailsWith(filtered, bare.exit_code)) << "family " << family;
  }
  EXPECT_TRUE(Succeeds(RunChild(make_socket(AF_UNIX, SOCK_STREAM))));
}

TEST(SeccompLiveTest, PersonalityOnlyQueries) {
  EXPECT_TRUE(Succeeds(RunChild([] { return long{personality(0xffffffff)}; })));
  EXPECT_TRUE(Succeeds(RunChild([] { return long{personality(PER_LINUX)}; })));
  EXPECT_TRUE(FailsWith(RunChild([] { return long{personality(ADDR_NO_RANDOMIZE)}; }), EPERM));
  EXPECT_TRUE(FailsWith(RunChild([] { return long{personality(READ_IMPLIES_EXEC)}; }), EPERM));
}

TEST(SeccompLiveTest, OrdinarySyscallsWork) {
  EXPECT_TRUE(Succeeds(RunChild([] { return long{getpid()}; })));
  EXPECT_TRUE(Succeeds(RunChild([]() -> long {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    char out = 'p', in = 0;
    if (write(fds[1], &out, 1) != 1) return -1;
    if (read(fds[0], &in, 1) != 1) return -1;
    return in == 'p' ? 0 : -1;
  })));
  EXPECT_TRUE(Succeeds(RunChild([] { return long{open("/dev/null", O_RDONLY | O_CLOEXEC)}; })));
}

#if defined(__x86_64__)
long I386Getpid() {
  long r;
  // int $0x80 enters the kernel's ia32 compat path (AUDIT_ARCH_I386) even from 64-bit code;
  // eax=20 is getpid in the i386 table. The kernel zeroes r8-r11 on that path.
  __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
  return r;
}

TEST(SeccompLiveTest, I386SyscallIsKilled) {
  ChildOutcome bare = RunChild(I386Getpid, /*with_filter=*/false);
  if (!Succeeds(bare)) {
    // Kernels booted with ia32_emulation=0 (and some hypervisors) fault int 0x80 before
    // seccomp sees it (a sanitizer turns that fault into exit 1); the decision itself is
    // covered by ForeignArchitecturesAreKilled.
    GTEST_SKIP() << "int $0x80 unavailable here without seccomp: child " << bare;
  }
  EXPECT_TRUE(KilledBySigsys(RunChild(I386Getpid)));
}

TEST(SeccompLiveTest, X32SyscallIsKilled) {
  // Without the filter this is ENOSYS on kernels built without CONFIG_X86_X32_ABI and getpid
  // on those with it; under the filter it must never run.
  ChildOutcome o = RunChild([] { return syscall(kX32SyscallBit | SYS_getpid); });
  EXPECT_TRUE(KilledBySigsys(o));
}
#endif

}  // namespace
}  // namespace paddock::runtime::linux
