// Raw-syscall escape attempts from inside a real sandbox, as the sandbox user and as root inside.
// Each attack is one subcommand of the static attack tool (attack_tool.c); the test asserts the
// exact refusal the sandbox promises (seccomp EPERM / ENOSYS / EAFNOSUPPORT, or the kernel's
// answer once every capability is gone), never just "it exited non-zero".
#include <signal.h>
#include <unistd.h>

#include <ctime>

#include "security/security_support.h"

namespace paddock::testing {
namespace {

struct AttackCase {
  std::vector<std::string> args;
  std::string expected;  // the tool's exact output line
};

// Attacks whose refusal does not depend on the user.
const std::vector<AttackCase>& CommonAttacks() {
  static const std::vector<AttackCase> kCases = {
      // Mount table and root changes.
      {{"mount_tmpfs", "/tmp"}, "mount: EPERM\n"},
      {{"mount_bind", "/", "/tmp"}, "mount: EPERM\n"},
      {{"mount_proc", "/tmp"}, "mount: EPERM\n"},
      {{"remount", "/usr"}, "mount: EPERM\n"},
      {{"remount", "/proc/sys"}, "mount: EPERM\n"},
      {{"umount", "/proc"}, "umount2: EPERM\n"},
      {{"umount", "/proc/kcore"}, "umount2: EPERM\n"},
      {{"umount", "/usr"}, "umount2: EPERM\n"},
      {{"pivot_root"}, "pivot_root: EPERM\n"},
      {{"chroot", "/tmp"}, "chroot: EPERM\n"},
      {{"mount_setattr", "/usr"}, "mount_setattr: EPERM\n"},
      {{"fsopen"}, "fsopen: ENOSYS\n"},
      {{"open_tree", "/usr"}, "open_tree: ENOSYS\n"},
      {{"open_by_handle"}, "open_by_handle_at: EPERM\n"},
      // New namespaces, by every route.
      {{"unshare", "user"}, "unshare: EPERM\n"},
      {{"unshare", "mnt"}, "unshare: EPERM\n"},
      {{"unshare", "net"}, "unshare: EPERM\n"},
      {{"unshare", "pid"}, "unshare: EPERM\n"},
      {{"unshare", "uts"}, "unshare: EPERM\n"},
      {{"unshare", "ipc"}, "unshare: EPERM\n"},
      {{"unshare", "cgroup"}, "unshare: EPERM\n"},
      {{"unshare", "time"}, "unshare: EPERM\n"},
      {{"clone", "user"}, "clone: EPERM\n"},
      {{"clone", "mnt"}, "clone: EPERM\n"},
      {{"clone", "net"}, "clone: EPERM\n"},
      {{"clone", "pid"}, "clone: EPERM\n"},
      {{"clone", "uts"}, "clone: EPERM\n"},
      {{"clone", "ipc"}, "clone: EPERM\n"},
      {{"clone", "cgroup"}, "clone: EPERM\n"},
      {{"clone_hibits", "user"}, "clone: EPERM\n"},
      {{"clone3", "user"}, "clone3: ENOSYS\n"},
      {{"clone3", "none"}, "clone3: ENOSYS\n"},
      {{"setns", "/proc/self/ns/mnt"}, "setns: EPERM\n"},
      {{"setns", "/proc/self/ns/user"}, "setns: EPERM\n"},
      {{"setns", "/proc/self/ns/net"}, "setns: EPERM\n"},
      // Other processes: tracing, memory, stolen descriptors (fd 3 of the init is the daemon's
      // control socket).
      {{"ptrace_child"}, "ptrace: EPERM\n"},
      {{"ptrace_attach", "1"}, "ptrace: EPERM\n"},
      {{"ptrace_traceme"}, "ptrace: EPERM\n"},
      {{"process_vm_readv"}, "process_vm_readv: EPERM\n"},
      {{"pidfd_getfd", "1", "3"}, "pidfd_getfd: EPERM\n"},
      // Kernel attack surface.
      {{"keyctl"}, "keyctl: EPERM\n"},
      {{"add_key"}, "add_key: EPERM\n"},
      {{"request_key"}, "request_key: EPERM\n"},
      {{"bpf"}, "bpf: EPERM\n"},
      {{"io_uring_setup"}, "io_uring_setup: EPERM\n"},
      {{"perf_event_open"}, "perf_event_open: EPERM\n"},
      {{"userfaultfd"}, "userfaultfd: EPERM\n"},
      {{"kexec_load"}, "kexec_load: EPERM\n"},
      {{"kexec_file_load"}, "kexec_file_load: EPERM\n"},
      {{"init_module"}, "init_module: EPERM\n"},
      {{"finit_module"}, "finit_module: EPERM\n"},
      {{"delete_module"}, "delete_module: EPERM\n"},
      {{"reboot"}, "reboot: EPERM\n"},
      {{"swapon"}, "swapon: EPERM\n"},
      {{"swapoff"}, "swapoff: EPERM\n"},
      {{"syslog"}, "syslog: EPERM\n"},
      {{"acct"}, "acct: EPERM\n"},
      {{"iopl"}, "iopl: EPERM\n"},
      {{"ioperm"}, "ioperm: EPERM\n"},
      {{"personality"}, "personality: EPERM\n"},
      {{"mknod"}, "mknod: EPERM\n"},
      // Socket families outside unix/inet/inet6, also with garbage in the upper 32 bits.
      {{"socket", "netlink"}, "socket: EAFNOSUPPORT\n"},
      {{"socket", "packet"}, "socket: EAFNOSUPPORT\n"},
      {{"socket", "vsock"}, "socket: EAFNOSUPPORT\n"},
      {{"socket", "unspec"}, "socket: EAFNOSUPPORT\n"},
      {{"socket_hibits", "netlink"}, "socket: EAFNOSUPPORT\n"},
      {{"socket_hibits", "packet"}, "socket: EAFNOSUPPORT\n"},
      {{"socketpair_netlink"}, "socketpair: EAFNOSUPPORT\n"},
      // Raw sockets need CAP_NET_RAW, which nobody inside has.
      {{"socket", "inet_raw"}, "socket: EPERM\n"},
      // Terminal injection, on a pty that is our controlling terminal (which the kernel itself
      // would allow).
      {{"tiocsti"}, "ioctl: EPERM\n"},
      {{"tiocsti_hibits"}, "ioctl: EPERM\n"},
      {{"tioclinux"}, "ioctl: EPERM\n"},
      // Host-global identity and time.
      {{"sethostname"}, "sethostname: EPERM\n"},
      {{"setdomainname"}, "setdomainname: EPERM\n"},
      {{"clock_settime"}, "clock_settime: EPERM\n"},
      {{"settimeofday"}, "settimeofday: EPERM\n"},
      {{"clock_adjtime"}, "clock_adjtime: EPERM\n"},
      // Capabilities cannot come back.
      {{"capset"}, "capset: EPERM\n"},
  };
  return kCases;
}

using SyscallAttackTest = PerUserSecurityTest;

TEST_P(SyscallAttackTest, EveryDeniedSyscallIsRefused) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  const std::string mounts_before = ShAs(id, user(), "cat /proc/self/mountinfo").out;
  ASSERT_NE(mounts_before.find(" / / "), std::string::npos) << mounts_before;
  for (const AttackCase& c : CommonAttacks()) {
    EXPECT_EQ(Attack(id, user(), c.args), c.expected) << Describe(c.args, user());
  }
  // Joining the init's namespaces: the init's ns links are behind the ptrace check, and setns
  // is refused anyway.
  for (const char* ns : {"/proc/1/ns/mnt", "/proc/1/ns/user", "/proc/1/ns/pid"}) {
    std::string out = Attack(id, user(), {"setns", ns});
    EXPECT_TRUE(out == "open: EACCES\n" || out == "setns: EPERM\n") << ns << ": " << out;
  }
  // The sandbox is intact afterwards: nothing above changed its mounts or its name.
  EXPECT_EQ(ShAs(id, user(), "cat /proc/self/mountinfo").out, mounts_before);
  EXPECT_EQ(ShAs(id, user(), "hostname").out, id + "\n");
}

TEST_P(SyscallAttackTest, ControlsShowTheToolReportsSuccess) {
  // Without these, a broken tool printing errors for everything would pass every test.
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Attack(id, user(), {"clone", "none"}), "ok\n");
  EXPECT_EQ(Attack(id, user(), {"pidfd_open", "1"}), "ok\n");
  EXPECT_EQ(Attack(id, user(), {"read", "/etc/hostname"}),
            "ok " + std::to_string(id.size() + 1) + "\n");
  EXPECT_EQ(Attack(id, user(), {"write", "/tmp/attack-control", "x"}), "open: ENOENT\n");
  EXPECT_EQ(
      ShAs(id, user(), "touch /tmp/attack-control && /tmp/attack write /tmp/attack-control x").out,
      "ok\n");
  const std::string uid = as_root() ? "0" : "1000";
  EXPECT_EQ(Attack(id, user(), {"ids"}),
            "ok uid=" + uid + " euid=" + uid + " suid=" + uid + " capeff=0000000000000000\n");
}

TEST_P(SyscallAttackTest, CannotBecomeRootOrRegainCapabilities) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  if (as_root()) {
    // Already uid 0 inside: the call is a no-op and must not bring capabilities with it.
    EXPECT_EQ(Attack(id, user(), {"setuid0"}), "ok\n");
  } else {
    EXPECT_EQ(Attack(id, user(), {"setuid0"}), "setresuid: EPERM\n");
  }
  EXPECT_EQ(Attack(id, user(), {"capset"}), "capset: EPERM\n");
  const std::string uid = as_root() ? "0" : "1000";
  EXPECT_EQ(Attack(id, user(), {"ids"}),
            "ok uid=" + uid + " euid=" + uid + " suid=" + uid + " capeff=0000000000000000\n");
}

TEST_P(SyscallAttackTest, ForeignSyscallAbisKillTheProcess) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  // x32 numbers on x86_64: the filter's prefix kills the process (SIGSYS) instead of letting a
  // second syscall table past the native rules.
  CommandOutput x32 = Run(id, user(), {"/tmp/attack", "x32"});
  EXPECT_EQ(x32.result.signal, SIGSYS) << x32.out << x32.err;
  EXPECT_EQ(x32.out, "");
  // i386 int 0x80: killed by the filter (SIGSYS), or SIGSEGV where the kernel has no ia32
  // emulation; it must never return a result.
  CommandOutput i386 = Run(id, user(), {"/tmp/attack", "int80"});
  EXPECT_TRUE(i386.result.signal == SIGSYS || i386.result.signal == SIGSEGV)
      << "signal " << i386.result.signal << " exit " << i386.result.exit_code << " " << i386.out;
  EXPECT_EQ(i386.out, "");
}

TEST_P(SyscallAttackTest, HostnameAndClockCannotChange) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  char host_name_before[256] = {};
  ASSERT_EQ(gethostname(host_name_before, sizeof host_name_before - 1), 0);

  EXPECT_EQ(Attack(id, user(), {"sethostname"}), "sethostname: EPERM\n");
  EXPECT_EQ(Attack(id, user(), {"clock_settime"}), "clock_settime: EPERM\n");
  EXPECT_EQ(Attack(id, user(), {"settimeofday"}), "settimeofday: EPERM\n");

  CommandOutput hn = ShAs(id, user(), "hostname paddock-pwned");
  EXPECT_NE(hn.result.exit_code, 0) << hn.out << hn.err;
  CommandOutput date = ShAs(id, user(), "date -s '2001-02-03 04:05:06'");
  EXPECT_NE(date.result.exit_code, 0) << date.out << date.err;
  // Writing the UTS knob through /proc is the other way in.
  CommandOutput proc = ShAs(id, user(), "echo paddock-pwned > /proc/sys/kernel/hostname");
  EXPECT_NE(proc.result.exit_code, 0) << proc.out << proc.err;

  EXPECT_EQ(ShAs(id, user(), "hostname").out, id + "\n");
  char host_name_after[256] = {};
  ASSERT_EQ(gethostname(host_name_after, sizeof host_name_after - 1), 0);
  EXPECT_STREQ(host_name_after, host_name_before);
  // The host clock was not set back to 2001.
  EXPECT_GT(std::time(nullptr), 1700000000);
  CommandOutput year = ShAs(id, user(), "date +%Y");
  EXPECT_GE(std::stoi(year.out.empty() ? "0" : year.out), 2023);
}

TEST_P(SyscallAttackTest, ProcessStatusShowsNoPrivilege) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  CommandOutput o = ShAs(id, user(),
                         "grep -E '^(Uid|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' "
                         "/proc/self/status");
  const std::string uid = as_root() ? "0" : "1000";
  EXPECT_EQ(o.out, "Uid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid +
                       "\n"
                       "CapInh:\t0000000000000000\n"
                       "CapPrm:\t0000000000000000\n"
                       "CapEff:\t0000000000000000\n"
                       "CapBnd:\t0000000000000000\n"
                       "CapAmb:\t0000000000000000\n"
                       "NoNewPrivs:\t1\n"
                       "Seccomp:\t2\n")
      << o.err;
}

PADDOCK_INSTANTIATE_PER_USER(SyscallAttackTest);

}  // namespace
}  // namespace paddock::testing
