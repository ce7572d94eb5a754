// The default seccomp policy for commands run in a sandbox (ISO-3). Built once in the daemon
// with libseccomp and shipped to the sandbox init as raw classic-BPF, so each exec only pays
// for one seccomp(2) call, not for libseccomp's filter compilation.
#pragma once

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace paddock::runtime::linux {

struct SeccompRule {
  std::string syscall;
  enum class Action { kErrno, kEnosys } action = Action::kErrno;
};

// The syscalls denied outright (EPERM), and those answered with ENOSYS so that libcs fall back
// (clone3 -> clone, which the filter can inspect; the new mount API -> mount, which is denied).
std::vector<SeccompRule> DefaultDeniedSyscalls();

// Builds the default filter for the native architecture:
//  - default action ALLOW; every syscall in DefaultDeniedSyscalls() gets its action;
//  - clone with any CLONE_NEW* flag, and unshare/setns -> EPERM;
//  - ioctl(fd, TIOCSTI / TIOCLINUX) -> EPERM (terminal injection);
//  - socket/socketpair for any family other than AF_UNIX/AF_INET/AF_INET6 -> EAFNOSUPPORT;
//  - personality() other than the default persona -> EPERM;
//  - any syscall made with a foreign architecture (e.g. i386 int 0x80 on x86_64, x32)
//    -> SECCOMP_RET_KILL_PROCESS.
// Returns the BPF instructions, ready for seccomp(SECCOMP_SET_MODE_FILTER).
Result<std::vector<sock_filter>> BuildDefaultSeccompFilter();

// Installs a filter on the calling thread's process with seccomp(2). The caller must already
// have PR_SET_NO_NEW_PRIVS (or CAP_SYS_ADMIN). Async-signal-safe (one syscall), so usable
// after fork().
// Inline (no libseccomp) so the static paddock-init can use it.
inline int InstallSeccompFilter(const sock_filter* insns, unsigned short count) {
  sock_fprog prog{count, const_cast<sock_filter*>(insns)};
  return static_cast<int>(::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
}

}  // namespace paddock::runtime::linux
