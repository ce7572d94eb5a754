#include "runtime/linux/seccomp_policy.h"

#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "common/unique_fd.h"

namespace paddock::runtime::linux {
namespace {

using Action = SeccompRule::Action;

// The x32 ABI shares AUDIT_ARCH_X86_64 with native code and is told apart only by this bit in
// the syscall number, so an arch check alone does not keep x32 entry points out.
constexpr uint32_t kX32SyscallBit = 0x40000000;
// A tracer that skips a syscall rewrites its number to -1; seccomp sees that value after the
// ptrace stop (kernel >= 4.8), so it must not be mistaken for an x32 call and killed.
constexpr uint32_t kSkippedSyscallNr = 0xffffffff;

// personality(2) takes an unsigned int: 0 is PER_LINUX (the default persona) and 0xffffffff
// only queries. Every other value changes how later execs behave (ADDR_NO_RANDOMIZE turns off
// ASLR, READ_IMPLIES_EXEC makes the heap executable), which a sandboxed command never needs.
constexpr uint32_t kPersonaDefault = 0;
constexpr uint32_t kPersonaQuery = 0xffffffff;

// Where the kernel's struct seccomp_data puts the fields the hand-written prefix reads. Classic
// BPF loads 32-bit words, so an argument's low half sits at +0 on little-endian hosts.
constexpr uint32_t kNrOffset = offsetof(struct seccomp_data, nr);
constexpr uint32_t kArchOffset = offsetof(struct seccomp_data, arch);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr uint32_t kArg0LowOffset = offsetof(struct seccomp_data, args[0]);
#else
constexpr uint32_t kArg0LowOffset = offsetof(struct seccomp_data, args[0]) + 4;
#endif

// On s390 the first two clone() arguments are swapped; everywhere else flags come first.
#if defined(__s390__) || defined(__s390x__)
constexpr unsigned int kCloneFlagsArg = 1;
#else
constexpr unsigned int kCloneFlagsArg = 0;
#endif

// Kept in sync with the man pages' names, which are also libseccomp's names.
const std::vector<SeccompRule>& DeniedSyscallTable() {
  static const std::vector<SeccompRule>* const kTable = new std::vector<SeccompRule>{
      // Mount table and root changes: the sandbox's mounts are fixed by paddock-init before
      // seccomp is installed, and nothing afterwards may reshape or escape them.
      {"mount", Action::kErrno},
      {"umount2", Action::kErrno},
      {"pivot_root", Action::kErrno},
      {"chroot", Action::kErrno},
      {"mount_setattr", Action::kErrno},
      // New namespaces (user namespaces in particular) are the entry point of most container
      // escapes and reach kernel code that is otherwise root-only. clone() is filtered by flags.
      {"unshare", Action::kErrno},
      {"setns", Action::kErrno},
      // Reaching into another process's memory or descriptors.
      {"ptrace", Action::kErrno},
      {"process_vm_readv", Action::kErrno},
      {"process_vm_writev", Action::kErrno},
      {"pidfd_getfd", Action::kErrno},
      // Large, frequently exploited kernel attack surface with no use inside a sandbox.
      {"bpf", Action::kErrno},
      {"perf_event_open", Action::kErrno},
      {"userfaultfd", Action::kErrno},
      {"io_uring_setup", Action::kErrno},
      {"io_uring_enter", Action::kErrno},
      {"io_uring_register", Action::kErrno},
      // The kernel keyring is not namespaced: keys would be shared with the host.
      {"keyctl", Action::kErrno},
      {"add_key", Action::kErrno},
      {"request_key", Action::kErrno},
      // Loading code into or restarting the host kernel.
      {"kexec_load", Action::kErrno},
      {"kexec_file_load", Action::kErrno},
      {"init_module", Action::kErrno},
      {"finit_module", Action::kErrno},
      {"delete_module", Action::kErrno},
      {"reboot", Action::kErrno},
      // Host-global state: swap, accounting, clocks, kernel log, quotas, hostname.
      {"swapon", Action::kErrno},
      {"swapoff", Action::kErrno},
      {"acct", Action::kErrno},
      {"clock_settime", Action::kErrno},
      {"clock_adjtime", Action::kErrno},
      {"settimeofday", Action::kErrno},
      {"adjtimex", Action::kErrno},
      {"stime", Action::kErrno},
      {"syslog", Action::kErrno},
      {"lookup_dcookie", Action::kErrno},
      {"quotactl", Action::kErrno},
      {"quotactl_fd", Action::kErrno},
      {"sethostname", Action::kErrno},
      {"setdomainname", Action::kErrno},
      {"vhangup", Action::kErrno},
      {"nfsservctl", Action::kErrno},
      {"_sysctl", Action::kErrno},
      {"uselib", Action::kErrno},
      // Raw port I/O bypasses every kernel abstraction.
      {"iopl", Action::kErrno},
      {"ioperm", Action::kErrno},
      // File handles resolve inodes without a path walk, escaping any bind-mount root
      // (the "shocker" escape).
      {"open_by_handle_at", Action::kErrno},
      {"name_to_handle_at", Action::kErrno},
      // Watches the whole mount or filesystem, beyond what the sandbox can see.
      {"fanotify_init", Action::kErrno},
      // NUMA placement affects pages shared with other tenants on the same node.
      {"move_pages", Action::kErrno},
      {"mbind", Action::kErrno},
      {"set_mempolicy", Action::kErrno},
      {"migrate_pages", Action::kErrno},
      // ENOSYS rather than EPERM: libcs and tools treat ENOSYS as "kernel too old" and fall
      // back to the classic call, which this filter can see into. clone3 passes its flags in
      // memory that seccomp cannot read, so glibc falling back to clone() lets the flag rules
      // apply; the new mount API falls back to mount(), which is denied.
      {"clone3", Action::kEnosys},
      {"fsopen", Action::kEnosys},
      {"fsconfig", Action::kEnosys},
      {"fsmount", Action::kEnosys},
      {"fspick", Action::kEnosys},
      {"move_mount", Action::kEnosys},
      {"open_tree", Action::kEnosys},
      {"open_tree_attr", Action::kEnosys},
  };
  return *kTable;
}

struct SeccompCtxDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using SeccompCtx = std::unique_ptr<void, SeccompCtxDeleter>;

Status LibseccompError(const std::string& what, int rc) {
  return Status(StatusCode::kInternal, "libseccomp: " + what, -rc);
}

uint32_t ErrnoAction(Action action) {
  return action == Action::kEnosys ? SCMP_ACT_ERRNO(ENOSYS) : SCMP_ACT_ERRNO(EPERM);
}

Status AddRule(scmp_filter_ctx ctx, uint32_t action, const char* name, int nr,
               std::initializer_list<scmp_arg_cmp> cmps) {
  int rc = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned int>(cmps.size()),
                                  cmps.size() ? cmps.begin() : nullptr);
  if (rc < 0) return LibseccompError(std::string("add rule for ") + name, rc);
  return Status::Ok();
}

// Resolves a syscall name for the native architecture. libseccomp answers names it knows from
// other architectures (stime on x86_64) with a negative pseudo number and unknown names with
// __NR_SCMP_ERROR; both mean "does not exist here", which is not an error for a deny list.
int ResolveNative(const char* name) { return seccomp_syscall_resolve_name(name); }

Status AddDeniedSyscalls(scmp_filter_ctx ctx) {
  for (const SeccompRule& rule : DeniedSyscallTable()) {
    int nr = ResolveNative(rule.syscall.c_str());
    if (nr < 0) continue;
    PADDOCK_RETURN_IF_ERROR(AddRule(ctx, ErrnoAction(rule.action), rule.syscall.c_str(), nr, {}));
  }
  return Status::Ok();
}

Status AddCloneNamespaceRules(scmp_filter_ctx ctx) {
  // CLONE_NEWTIME (0x80) is absent on purpose: it lies inside CSIGNAL, the exit-signal byte of
  // clone()'s flags, so the kernel never reads it as a namespace flag there. A time namespace
  // can only come from clone3 or unshare, both refused by the table.
  static constexpr uint64_t kNamespaceFlags[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
                                                 CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
                                                 CLONE_NEWCGROUP};
  // One rule per flag: libseccomp has no "any of these bits" comparison, and a masked
  // equality against several bits would only match when all of them are set.
  for (uint64_t flag : kNamespaceFlags) {
    PADDOCK_RETURN_IF_ERROR(AddRule(ctx, SCMP_ACT_ERRNO(EPERM), "clone", SCMP_SYS(clone),
                                    {SCMP_CMP(kCloneFlagsArg, SCMP_CMP_MASKED_EQ, flag, flag)}));
  }
  return Status::Ok();
}

Status AddIoctlRules(scmp_filter_ctx ctx) {
  // TIOCSTI pushes bytes into the terminal's input queue and TIOCLINUX can paste the console
  // selection: both let a sandboxed command type into the operator's shell once it exits.
  // The kernel reads the command as an unsigned int, so compare the low 32 bits only;
  // otherwise TIOCSTI | (1 << 32) would miss the rule yet still reach the tty driver.
  for (uint64_t cmd : {uint64_t{TIOCSTI}, uint64_t{TIOCLINUX}}) {
    PADDOCK_RETURN_IF_ERROR(AddRule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", SCMP_SYS(ioctl),
                                    {SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, cmd)}));
  }
  return Status::Ok();
}

Status AddSocketFamilyRules(scmp_filter_ctx ctx) {
  // Only AF_UNIX (1), AF_INET (2) and AF_INET6 (10) are allowed: netlink, packet, vsock and
  // the long tail of rarely used families are where socket CVEs cluster. libseccomp cannot
  // express "not in a set", so deny the complement: 0, 3..9 and >= 11. The kernel reads the
  // family as an int; the equalities compare its low 32 bits, and the 64-bit ">= 11" also
  // catches any value with high bits set, so garbage above bit 31 cannot smuggle a family in.
  static_assert(AF_UNIX == 1 && AF_INET == 2 && AF_INET6 == 10);
  for (const char* name : {"socket", "socketpair"}) {
    int nr = ResolveNative(name);
    if (nr < 0) continue;  // i386 before 4.3 multiplexed these through socketcall().
    const uint32_t action = SCMP_ACT_ERRNO(EAFNOSUPPORT);
    for (uint64_t family : {0, 3, 4, 5, 6, 7, 8, 9}) {
      PADDOCK_RETURN_IF_ERROR(
          AddRule(ctx, action, name, nr, {SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffULL, family)}));
    }
    PADDOCK_RETURN_IF_ERROR(AddRule(ctx, action, name, nr, {SCMP_A0(SCMP_CMP_GE, 11)}));
  }
  return Status::Ok();
}

// A prefix of hand-written classic BPF that runs before libseccomp's program, for the two
// checks libseccomp cannot express:
//  - personality(): allowing exactly {0, 0xffffffff} is "argument not in a set", which
//    libseccomp rejects (one comparison per argument per rule);
//  - x32 on x86_64: libseccomp 2.5 does route x32 numbers to the bad-arch action, but that is
//    an implementation detail; the prefix states the policy itself.
// Classic BPF only jumps forward, so "fall through to libseccomp" is simply a jump to the end
// of the prefix and the library's program needs no relocation.
std::vector<sock_filter> BuildPrefix(uint32_t native_arch) {
  constexpr int kEnd = -1;  // jump target: first instruction after the prefix
  struct Insn {
    sock_filter f;
    int jt = 0;  // absolute jump targets (kEnd: after the prefix), made relative below
    int jf = 0;
  };
  std::vector<Insn> p;
  auto next = [&p] { return static_cast<int>(p.size()) + 1; };

  p.push_back({BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArchOffset)});
  // Foreign architectures fall through to libseccomp, whose bad-arch action kills them.
  p.push_back({BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, native_arch, 0, 0), next(), kEnd});
  p.push_back({BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNrOffset)});
  if (native_arch == SCMP_ARCH_X86_64) {
    const int after_x32 = next() + 2;  // skip this jump's two successors
    p.push_back({BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, kX32SyscallBit, 0, 0), next(), after_x32});
    p.push_back({BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kSkippedSyscallNr, 0, 0), kEnd, next()});
    p.push_back({BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)});
  }
  p.push_back({BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_personality, 0, 0), next(), kEnd});
  p.push_back({BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kArg0LowOffset)});
  p.push_back({BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kPersonaDefault, 0, 0), kEnd, next()});
  p.push_back({BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kPersonaQuery, 0, 0), kEnd, next()});
  p.push_back({BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))});

  const int end = static_cast<int>(p.size());
  std::vector<sock_filter> out;
  out.reserve(p.size());
  for (int i = 0; i < end; ++i) {
    sock_filter f = p[i].f;
    if (BPF_CLASS(f.code) == BPF_JMP) {
      const int jt = p[i].jt == kEnd ? end : p[i].jt;
      const int jf = p[i].jf == kEnd ? end : p[i].jf;
      f.jt = static_cast<uint8_t>(jt - (i + 1));
      f.jf = static_cast<uint8_t>(jf - (i + 1));
    }
    out.push_back(f);
  }
  return out;
}

// libseccomp 2.5 can only export to a file descriptor; a memfd keeps the round trip in memory.
Result<std::vector<sock_filter>> ExportBpf(scmp_filter_ctx ctx) {
  UniqueFd fd(memfd_create("paddock-seccomp", MFD_CLOEXEC));
  if (!fd) return ErrnoStatus("memfd_create for seccomp export");
  int rc = seccomp_export_bpf(ctx, fd.get());
  if (rc < 0) return LibseccompError("export BPF", rc);
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat seccomp memfd");
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0 || size % sizeof(sock_filter) != 0) {
    return Internal("libseccomp exported " + std::to_string(size) +
                    " bytes, not a whole number of BPF instructions");
  }
  std::vector<sock_filter> insns(size / sizeof(sock_filter));
  auto* dst = reinterpret_cast<char*>(insns.data());
  size_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd.get(), dst + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read seccomp memfd");
    if (n == 0) return Internal("short read of exported seccomp filter");
    done += static_cast<size_t>(n);
  }
  return insns;
}

}  // namespace

std::vector<SeccompRule> DefaultDeniedSyscalls() { return DeniedSyscallTable(); }

Result<std::vector<sock_filter>> BuildDefaultSeccompFilter() {
  SeccompCtx ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return Internal("libseccomp: seccomp_init failed");
  // i386 (int 0x80) and other foreign ABIs see different syscall numbers, so a filter written
  // for native numbers would let them through unchecked: kill the whole process instead.
  int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc < 0) return LibseccompError("set bad-arch action", rc);
  // A binary search over syscall numbers keeps the per-syscall cost logarithmic for the
  // syscalls the kernel's constant-action cache cannot short-circuit.
  rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);
  if (rc < 0) return LibseccompError("set optimize level", rc);

  PADDOCK_RETURN_IF_ERROR(AddDeniedSyscalls(ctx.get()));
  PADDOCK_RETURN_IF_ERROR(AddCloneNamespaceRules(ctx.get()));
  PADDOCK_RETURN_IF_ERROR(AddIoctlRules(ctx.get()));
  PADDOCK_RETURN_IF_ERROR(AddSocketFamilyRules(ctx.get()));

  PADDOCK_ASSIGN_OR_RETURN(std::vector<sock_filter> body, ExportBpf(ctx.get()));
  std::vector<sock_filter> filter = BuildPrefix(seccomp_arch_native());
  filter.insert(filter.end(), body.begin(), body.end());
  // The kernel refuses longer programs (BPF_MAXINSNS), and sock_fprog counts in 16 bits.
  if (filter.size() > BPF_MAXINSNS) {
    return Internal("seccomp filter has " + std::to_string(filter.size()) +
                    " instructions, over the kernel limit of " + std::to_string(BPF_MAXINSNS));
  }
  return filter;
}

}  // namespace paddock::runtime::linux
