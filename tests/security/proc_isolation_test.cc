// What a sandbox can see and touch through /proc: only its own processes, no host knobs, no
// kernel memory or keys, nothing of the daemon (its fds, its paths), and not the init binary.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "security/security_support.h"

extern char** environ;

namespace paddock::testing {
namespace {

using ProcIsolationTest = PerUserSecurityTest;

// A host process the sandbox must neither see nor signal.
class HostCanaryProcess {
 public:
  explicit HostCanaryProcess(const std::string& unique_arg) {
    const char* argv[] = {"/usr/bin/sleep", unique_arg.c_str(), nullptr};
    if (posix_spawn(&pid_, argv[0], nullptr, nullptr, const_cast<char**>(argv), environ) != 0)
      pid_ = -1;
  }
  ~HostCanaryProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  bool Alive() const {
    int status;
    return pid_ > 0 && waitpid(pid_, &status, WNOHANG) == 0;
  }

 private:
  pid_t pid_ = -1;
};

TEST_P(ProcIsolationTest, HostProcessesAreInvisibleAndUnreachable) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  // The canary's command line carries a random number, so finding it proves visibility.
  const std::string token = std::to_string(3600 + (std::random_device{}() % 100000)) + "." +
                            std::to_string(std::random_device{}() % 1000000);
  HostCanaryProcess canary(token);
  ASSERT_GT(canary.pid(), 0);
  ASSERT_TRUE(canary.Alive());
  const pid_t self = getpid();
  // Small pids exist inside the sandbox's own pid namespace; host pids this large do not.
  ASSERT_GT(canary.pid(), 100);
  ASSERT_GT(self, 100);

  CommandOutput ps = ShAs(id, user(), "ps -e -o pid=,comm=");
  ASSERT_EQ(ps.result.exit_code, 0) << ps.err;
  std::istringstream lines(ps.out);
  std::set<std::string> comms;
  std::string line;
  int count = 0;
  bool init_is_pid1 = false;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    int pid = 0;
    std::string comm;
    f >> pid >> comm;
    comms.insert(comm);
    ++count;
    if (pid == 1 && comm == "paddock-init") init_is_pid1 = true;
    EXPECT_NE(pid, canary.pid()) << ps.out;
    EXPECT_NE(pid, self) << ps.out;
  }
  EXPECT_TRUE(init_is_pid1) << ps.out;
  EXPECT_EQ(comms, (std::set<std::string>{"paddock-init", "sh", "ps"})) << ps.out;
  EXPECT_LE(count, 3) << ps.out;

  CommandOutput cmdlines =
      ShAs(id, user(), "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done");
  EXPECT_EQ(cmdlines.out.find(token), std::string::npos) << cmdlines.out;
  EXPECT_EQ(cmdlines.out.find("paddock_security_tests"), std::string::npos) << cmdlines.out;
  EXPECT_EQ(cmdlines.out.find("sleep"), std::string::npos) << cmdlines.out;

  const std::string cpid = std::to_string(canary.pid());
  EXPECT_EQ(Attack(id, user(), {"listdir", "/proc/" + cpid}), "opendir: ENOENT\n");
  EXPECT_EQ(Attack(id, user(), {"listdir", "/proc/" + std::to_string(self)}), "opendir: ENOENT\n");
  EXPECT_EQ(Attack(id, user(), {"kill", cpid, "9"}), "kill: ESRCH\n");
  EXPECT_EQ(Attack(id, user(), {"kill", std::to_string(self), "0"}), "kill: ESRCH\n");
  // kill(-1) signals everything the caller may signal except itself and its init: here there is
  // nothing else in the namespace, so ESRCH; any reachable host process would make it "ok".
  EXPECT_EQ(Attack(id, user(), {"kill", "-1", "9"}), "kill: ESRCH\n");
  EXPECT_EQ(Attack(id, user(), {"pidfd_open", cpid}), "pidfd_open: ESRCH\n");
  EXPECT_EQ(Attack(id, user(), {"ptrace_attach", cpid}), "ptrace: EPERM\n");
  EXPECT_TRUE(canary.Alive()) << "a sandboxed process killed a host process";
}

TEST_P(ProcIsolationTest, InitSurvivesSignalsFromInside) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  for (const char* sig : {"9", "15", "1", "19", "2"}) {
    // Root inside may signal its pid 1, but the kernel drops signals to a namespace's init
    // that it has no handler for; the sandbox user may not signal it at all.
    EXPECT_EQ(Attack(id, user(), {"kill", "1", sig}), as_root() ? "ok\n" : "kill: EPERM\n")
        << "signal " << sig;
  }
  auto info = rt().Get(id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, runtime::SandboxState::kRunning);
  EXPECT_EQ(ShAs(id, user(), "echo alive").out, "alive\n");
}

TEST_P(ProcIsolationTest, HostKernelKnobsAreNotWritable) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  auto core_pattern = ReadHostFile("/proc/sys/kernel/core_pattern");
  auto modprobe = ReadHostFile("/proc/sys/kernel/modprobe");  // absent without CONFIG_MODULES
  auto host_hostname = ReadHostFile("/proc/sys/kernel/hostname");
  ASSERT_TRUE(core_pattern && host_hostname);
  auto strip = [](std::string s) {
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  };
  // Where a write could matter to the host, the value written is the current one, so even a
  // wrongly allowed write changes nothing; the tool's result line is what is asserted.
  std::vector<std::pair<std::string, std::string>> writes = {
      {"/proc/sys/kernel/hostname", "paddock-pwned"},
      {"/proc/sys/kernel/core_pattern", strip(*core_pattern)},
      {"/proc/sys/vm/drop_caches", "1"},
      {"/proc/sys/net/ipv4/ip_forward", "1"},
      {"/proc/sysrq-trigger", "h"},
  };
  if (modprobe) writes.push_back({"/proc/sys/kernel/modprobe", strip(*modprobe)});
  for (const auto& [path, value] : writes) {
    std::string out = Attack(id, user(), {"write", path, value});
    EXPECT_TRUE(IsRefusal(out)) << path << ": " << out;
    EXPECT_EQ(out.rfind("open: ", 0), 0u) << path << ": " << out;
  }
  for (const char* script :
       {"echo paddock-pwned > /proc/sys/kernel/hostname", "echo 3 > /proc/sys/vm/drop_caches",
        "echo h > /proc/sysrq-trigger", "echo 1 > /proc/sys/net/ipv4/ip_forward"}) {
    CommandOutput o = ShAs(id, user(), script);
    EXPECT_NE(o.result.exit_code, 0) << script;
  }
  // Read-only mounts, not just permissions: without them root inside could write the
  // sysctls of its own namespaces the moment it held a capability there.
  CommandOutput ro = ShAs(id, user(),
                          "grep -E '^[0-9]+ [0-9]+ [^ ]+ [^ ]+ /proc/(sys|sysrq-trigger) ' "
                          "/proc/self/mountinfo | cut -d' ' -f5,6 | cut -d, -f1");
  EXPECT_EQ(ro.out, std::string("/proc/sys ro\n") +
                        (HostPathExists("/proc/sysrq-trigger") ? "/proc/sysrq-trigger ro\n" : ""))
      << ro.err;
  EXPECT_EQ(ReadHostFile("/proc/sys/kernel/core_pattern"), core_pattern);
  EXPECT_EQ(ReadHostFile("/proc/sys/kernel/modprobe"), modprobe);
  EXPECT_EQ(ReadHostFile("/proc/sys/kernel/hostname"), host_hostname);
  EXPECT_EQ(ShAs(id, user(), "cat /proc/sys/kernel/hostname").out, id + "\n");
  // No sysfs at all: no cgroup knobs, no devices, no firmware.
  CommandOutput sys = ShAs(id, user(), "ls -A /sys 2>/dev/null");
  EXPECT_EQ(sys.out, "");
}

TEST_P(ProcIsolationTest, KernelMemoryKeysAndTimersAreMasked) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  int checked = 0;
  for (const char* f : {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
                        "/proc/kallsyms", "/proc/latency_stats", "/proc/kpagecount",
                        "/proc/kpageflags", "/proc/kpagecgroup", "/proc/config.gz"}) {
    if (!HostPathExists(f)) continue;
    ++checked;
    std::string out = Attack(id, user(), {"read", f});
    EXPECT_TRUE(out == "ok 0\n" || IsRefusal(out)) << f << ": " << out;
    // Masked, not merely unreadable: some of these are 0400 on the host, which hides them from
    // root inside today, but the mask must not depend on a kernel's permission choices.
    CommandOutput type = ShAs(id, user(), std::string("stat -c '%F %t:%T' ") + f);
    EXPECT_EQ(type.out, "character special file 1:3\n") << f << " is not masked by /dev/null";
    CommandOutput cat = ShAs(id, user(), std::string("cat ") + f + " 2>/dev/null | wc -c");
    EXPECT_EQ(cat.out, "0\n") << f;
  }
  // The test means something only if the host really has these files.
  EXPECT_GE(checked, 3);
  auto host_timers = ReadHostFile("/proc/timer_list");
  ASSERT_TRUE(host_timers.has_value());
  EXPECT_FALSE(host_timers->empty());
  for (const char* d : {"/proc/acpi", "/proc/scsi"}) {
    if (!HostPathExists(d)) continue;
    std::string out = Attack(id, user(), {"listdir", d});
    EXPECT_TRUE(out == "ok 0\n" || IsRefusal(out)) << d << ": " << out;
  }
}

TEST_P(ProcIsolationTest, DaemonAndInitDescriptorsAreInvisible) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  CommandOutput fds = ShAs(id, user(),
                           "ls -l /proc/[0-9]*/fd/ 2>&1; "
                           "for p in /proc/[0-9]*; do readlink $p/exe $p/cwd $p/root; done 2>&1");
  for (const std::string& leak :
       {TestDataDir(), std::string("/run/paddock"), std::string("/work/"), std::string("memfd:"),
        std::string("socket:"), std::string("cgroup"), std::string("anon_inode:"),
        std::string("paddock_security_tests")}) {
    EXPECT_EQ(fds.out.find(leak), std::string::npos) << "leaked " << leak << ":\n" << fds.out;
  }
  // The init is not dumpable: neither user may look into it, root inside included (it has no
  // CAP_SYS_PTRACE).
  for (const char* p : {"/proc/1/root", "/proc/1/map_files", "/proc/1/cwd"}) {
    std::string out = Attack(id, user(), {"listdir", p});
    EXPECT_TRUE(IsRefusal(out)) << p << ": " << out;
  }
  if (as_root()) {
    // The kernel gives a non-dumpable task's /proc entries to root of the user namespace its
    // binary was exec'd in, i.e. root inside; directory permissions are plain DAC, so root
    // inside can list the init's fd *numbers* (that much is visible). What each descriptor is
    // stays behind the ptrace check: every entry listed must refuse readlink and open.
    CommandOutput each = ShAs(id, user(),
                              "for d in /proc/1/fd /proc/1/task/1/fd; do for f in $(ls $d); do "
                              "/tmp/attack readlink $d/$f; /tmp/attack read $d/$f; "
                              "/tmp/attack read /proc/1/fdinfo/$f; done; done");
    std::istringstream lines(each.out);
    std::string line;
    int refusals = 0;
    while (std::getline(lines, line)) {
      EXPECT_TRUE(IsRefusal(line + "\n")) << line;
      ++refusals;
    }
    EXPECT_GE(refusals, 3 * 3 * 2) << each.out << each.err;  // at least stdio + control + cgroup
  } else {
    EXPECT_EQ(Attack(id, user(), {"listdir", "/proc/1/fd"}), "opendir: EACCES\n");
    EXPECT_EQ(Attack(id, user(), {"listdir", "/proc/1/task/1/fd"}), "opendir: EACCES\n");
  }
  for (const char* p : {"/proc/1/fd/0", "/proc/1/fd/3", "/proc/1/fd/4", "/proc/1/exe",
                        "/proc/1/cwd", "/proc/1/root"}) {
    std::string out = Attack(id, user(), {"readlink", p});
    EXPECT_TRUE(IsRefusal(out)) << p << ": " << out;
  }
  for (const char* p : {"/proc/1/environ", "/proc/1/mem", "/proc/1/maps", "/proc/1/auxv",
                        "/proc/1/fd/3", "/proc/1/root/proc/1/environ"}) {
    std::string out = Attack(id, user(), {"read", p});
    EXPECT_TRUE(IsRefusal(out)) << p << ": " << out;
  }
  // The cgroup namespace hides where the sandbox sits in the host's hierarchy.
  CommandOutput cgroup = ShAs(id, user(), "cat /proc/self/cgroup /proc/1/cgroup");
  EXPECT_EQ(cgroup.out.find("paddock"), std::string::npos) << cgroup.out;
  EXPECT_EQ(cgroup.out.find(id), std::string::npos) << cgroup.out;
  // A command starts with stdio and nothing else: the control socket and cgroup directory of
  // the init, and the daemon's descriptors, are all closed at exec. The tool's own listing
  // adds the directory it reads.
  EXPECT_EQ(Attack(id, user(), {"listdir", "/proc/self/fd"}), "ok 4\n");
}

TEST_P(ProcIsolationTest, InitBinaryCannotBeOverwritten) {
  // CVE-2019-5736: a container that opens its init's /proc/<pid>/exe for writing rewrites the
  // host binary the next container starts with.
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  const std::string init_on_disk =
      (std::filesystem::path(TestDataDir()).parent_path() / "paddock-init").string();
  auto before = ReadHostFile(init_on_disk);
  ASSERT_TRUE(before.has_value());
  for (const char* p : {"/proc/1/exe", "/proc/self/exe"}) {
    std::string out = Attack(id, user(), {"openw", p});
    EXPECT_TRUE(IsRefusal(out)) << p << ": " << out;
    out = Attack(id, user(),
                 {"write", p,
                  "\x7f"
                  "ELF-pwned"});
    EXPECT_TRUE(IsRefusal(out)) << p << ": " << out;
  }
  CommandOutput sh = ShAs(id, user(), "echo pwned > /proc/1/exe; echo pwned >> /proc/1/exe");
  EXPECT_NE(sh.result.exit_code, 0);
  EXPECT_EQ(ReadHostFile(init_on_disk), before);
  // New sandboxes still start from an intact init.
  std::string second = NewAttackSandbox();
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(ShAs(second, user(), "echo fine").out, "fine\n");
}

TEST_P(ProcIsolationTest, WorkingDirectoryCannotLeadOutThroughInitDescriptors) {
  // CVE-2024-21626: the init still holds the daemon's descriptors (the control socket, a
  // directory in the host's cgroupfs) when it changes into the command's working directory. A
  // cwd through /proc/self/fd/N -- given by the API caller, or planted inside the sandbox as a
  // symlink at a default cwd (/root, /home/sandbox) -- would leave the command in a host
  // directory from which ".." walks up the host's whole filesystem.
  HostCleanup cleanup;
  const std::string token = RandomToken(16);
  const std::string probe = "/tmp/paddock-cwd-" + token;
  const std::string secret = "PADDOCK-SECRET-" + token;
  cleanup.Add(probe);
  cleanup.Add(probe + "-written");
  ASSERT_TRUE(WriteHostFile(probe, secret + "\n", 0644));

  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  const std::string up = "../../../../../../../../../..";
  const std::string script = "ls -a " + up + "/; cat " + up + probe + "; echo pwned > " + up +
                             probe + "-written; ls -la /proc/self/cwd";
  auto run_with_cwd = [&](const std::string& cwd, const std::string& as) {
    runtime::ExecRequest req;
    req.shell = script;
    req.user = as;
    req.cwd = cwd;
    req.timeout = std::chrono::seconds(30);
    std::string out;
    runtime::ExecCallbacks cb;
    cb.on_stdout = [&](std::string_view s) { out.append(s); };
    cb.on_stderr = [&](std::string_view s) { out.append(s); };
    auto r = rt().Exec(id, req, cb);
    // Refusing to start the command is a safe answer; running it outside the root is not.
    EXPECT_EQ(out.find(secret), std::string::npos) << "cwd " << cwd << " as " << as << ":\n" << out;
    EXPECT_EQ(out.find("cgroup"), std::string::npos) << "cwd " << cwd << " as " << as << ":\n"
                                                     << out;
    EXPECT_FALSE(HostPathExists(probe + "-written")) << "cwd " << cwd << " as " << as;
    return r.ok();
  };
  for (const std::string& cwd :
       {std::string("/proc/self/fd/3"), std::string("/proc/self/fd/4"),
        std::string("/proc/self/fd/5"), std::string("/proc/self/fd/6"),
        std::string("/proc/self/fd/4/.."), std::string("/proc/1/fd/4"), std::string("/proc/1/cwd"),
        std::string("/proc/1/root"), std::string("/dev/fd/4")}) {
    run_with_cwd(cwd, user());
  }
  // Planted from inside: root inside owns / and /home, so it can turn the default working
  // directories into links to the init's descriptors.
  CommandOutput plant = ShAs(id, "root",
                             "mv /home/sandbox /home/sandbox.real && "
                             "ln -s /proc/self/fd/4 /home/sandbox && "
                             "rm -rf /root && ln -s /proc/self/fd/4 /root && "
                             "mkdir -p /tmp/w && ln -s /proc/self/fd/4 /tmp/w/link && echo ok");
  ASSERT_EQ(plant.out, "ok\n") << plant.err;
  run_with_cwd("", user());
  run_with_cwd("/tmp/w/link", user());
  run_with_cwd("/tmp/w/link/..", user());
  // An ordinary working directory still works.
  EXPECT_TRUE(run_with_cwd("/tmp", user()));
  EXPECT_EQ(ReadHostFile(probe), secret + "\n");
}

TEST_P(ProcIsolationTest, ProgramPathCannotLeadOutThroughInitDescriptors) {
  // The same trick on the program path (or PATH): resolved by execve while the init's
  // descriptors could still be open, it would run a binary from anywhere on the host. The
  // attack tool exists on the host next to the test binary and nowhere inside the sandbox.
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  const std::string host_tool = AttackToolHostPath();
  const std::string host_dir = std::filesystem::path(host_tool).parent_path().string();
  const std::string up = "/../../../../../../../../../..";
  auto expect_not_run = [&](runtime::ExecRequest req, const std::string& what) {
    req.user = user();
    std::string out;
    runtime::ExecCallbacks cb;
    cb.on_stdout = [&](std::string_view s) { out.append(s); };
    cb.on_stderr = [&](std::string_view s) { out.append(s); };
    auto r = rt().Exec(id, req, cb);
    EXPECT_FALSE(r.ok() && r->exit_code == 0) << what << " ran a host binary: " << out;
    EXPECT_EQ(out.find("ok uid="), std::string::npos) << what << ": " << out;
  };
  for (const char* fd :
       {"/proc/self/fd/3", "/proc/self/fd/4", "/proc/self/fd/5", "/proc/1/fd/4", "/dev/fd/4"}) {
    runtime::ExecRequest direct;
    direct.argv = {std::string(fd) + up + host_tool, "ids"};
    expect_not_run(direct, direct.argv[0]);
    runtime::ExecRequest via_path;
    via_path.argv = {"paddock-attack", "ids"};
    via_path.env["PATH"] = std::string(fd) + up + host_dir;
    expect_not_run(via_path, "PATH=" + via_path.env["PATH"]);
  }
  // Control: the copy inside the sandbox runs.
  EXPECT_EQ(Attack(id, user(), {"ids"}).rfind("ok uid=", 0), 0u);
}

PADDOCK_INSTANTIATE_PER_USER(ProcIsolationTest);

}  // namespace
}  // namespace paddock::testing
