// Sandbox lifecycle on the real host: create/get/list, argument validation, identity and
// isolation seen from inside, pause/resume, destroy (idempotent, leaves nothing behind, ends
// running commands) and orphan discovery/cleanup through ListHostObjects + Destroy.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "integration/integration_helpers.h"
#include "support/runtime_fixture.h"

extern char** environ;

namespace paddock::testing {
namespace {

using namespace std::chrono_literals;
using runtime::ExecRequest;
using runtime::SandboxState;

using RuntimeLifecycleTest = SandboxTest;

std::string UniqueId(const std::string& stem) {
  static int n = 0;
  return stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
}

TEST_F(RuntimeLifecycleTest, CreateGetListAndHostObjects) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(std::regex_match(id, std::regex("sb-[0-9a-f]{12}"))) << id;
  auto info = rt().Get(id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->id, id);
  EXPECT_EQ(info->template_name, "host");
  EXPECT_EQ(info->template_digest.rfind("sha256:", 0), 0u) << info->template_digest;
  EXPECT_EQ(info->state, SandboxState::kRunning);
  EXPECT_GT(info->init_pid, 1);
  EXPECT_TRUE(HostProcessAlive(info->init_pid));
  EXPECT_EQ(info->limits.memory_bytes, DefaultSpec().limits.memory_bytes);
  EXPECT_LE(std::chrono::system_clock::now() - info->created_at, 60s);

  bool listed = false;
  for (const auto& s : rt().List()) listed |= s.id == id;
  EXPECT_TRUE(listed);

  bool found = false;
  for (const auto& h : rt().ListHostObjects()) {
    if (h.id != id) continue;
    found = true;
    EXPECT_TRUE(h.known);
    EXPECT_TRUE(h.has_cgroup);
    EXPECT_NE(std::find(h.pids.begin(), h.pids.end(), info->init_pid), h.pids.end());
  }
  EXPECT_TRUE(found) << "ListHostObjects does not show a live sandbox";
  EXPECT_FALSE(HostCgroupDirsFor(id).empty());

  // A caller-chosen id is kept, and is unique.
  auto spec = DefaultSpec();
  spec.id = UniqueId("named");
  std::string named = NewSandbox(spec);
  EXPECT_EQ(named, spec.id);
  auto dup = rt().Create(spec);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  // The failed duplicate did not disturb the original.
  EXPECT_EQ(Sh(named, "hostname").out, named + "\n");
}

TEST_F(RuntimeLifecycleTest, InvalidSpecsAreRejectedAndLeaveNothing) {
  struct Case {
    const char* field;
    std::function<void(runtime::SandboxSpec&)> mutate;
  };
  std::vector<Case> cases = {
      {"cpus", [](auto& s) { s.limits.cpus = 0; }},
      {"cpus", [](auto& s) { s.limits.cpus = -1; }},
      {"memory", [](auto& s) { s.limits.memory_bytes = 1; }},
      {"pids", [](auto& s) { s.limits.pids = 1; }},
      {"disk", [](auto& s) { s.limits.disk_bytes = 0; }},
      {"tmp", [](auto& s) { s.limits.tmp_bytes = 10; }},
      {"open_files", [](auto& s) { s.limits.open_files = 0; }},
      {"env", [](auto& s) { s.env = {"NO_EQUALS_SIGN"}; }},
      {"id", [](auto& s) { s.id = "Bad_ID"; }},
      {"id", [](auto& s) { s.id = "../escape"; }},
      {"id", [](auto& s) { s.id = std::string(60, 'a'); }},
  };
  for (const auto& c : cases) {
    auto spec = DefaultSpec();
    spec.id = UniqueId("invalid");
    c.mutate(spec);
    auto r = rt().Create(spec);
    if (r.ok()) created_.push_back(r->id);
    ASSERT_FALSE(r.ok()) << "accepted a bad " << c.field;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.field), std::string::npos)
        << "message does not name the field " << c.field << ": " << r.status().message();
    EXPECT_EQ(rt().Get(spec.id).status().code(), StatusCode::kNotFound);
    if (spec.id.find('/') == std::string::npos) {
      EXPECT_TRUE(HostCgroupDirsFor(spec.id).empty());
    }
  }

  auto spec = DefaultSpec();
  spec.id = UniqueId("badtemplate");
  spec.template_name = "no-such-template";
  auto r = rt().Create(spec);
  if (r.ok()) created_.push_back(r->id);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  EXPECT_TRUE(HostCgroupDirsFor(spec.id).empty());
}

TEST_F(RuntimeLifecycleTest, DestroyIsIdempotentAndLeavesNothing) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  auto info = rt().Get(id);
  ASSERT_TRUE(info.ok());
  const pid_t init_pid = info->init_pid;
  ASSERT_EQ(Sh(id, "sleep 1000 & echo started").out, "started\n");
  std::vector<pid_t> pids;
  for (const auto& h : rt().ListHostObjects())
    if (h.id == id) pids = h.pids;
  ASSERT_GE(pids.size(), 2u);

  Status st = rt().Destroy(id);
  EXPECT_TRUE(st.ok()) << st.ToString();
  st = rt().Destroy(id);
  EXPECT_TRUE(st.ok()) << "second destroy: " << st.ToString();
  EXPECT_TRUE(rt().Destroy("never-existed-" + std::to_string(::getpid())).ok());
  EXPECT_EQ(rt().Destroy("Not A Valid Id").code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(rt().Get(id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(rt().Exec(id, ExecRequest{.shell = "true"}, {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(rt().Usage(id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(rt().Pause(id).code(), StatusCode::kNotFound);
  for (const auto& s : rt().List()) EXPECT_NE(s.id, id);
  for (const auto& h : rt().ListHostObjects()) EXPECT_NE(h.id, id);
  EXPECT_TRUE(HostCgroupDirsFor(id).empty());
  EXPECT_FALSE(HostProcessAlive(init_pid)) << "paddock-init survived Destroy";
  for (pid_t p : pids) EXPECT_FALSE(HostProcessAlive(p)) << "sandbox process " << p << " survived";
}

TEST_F(RuntimeLifecycleTest, DestroyEndsRunningCommands) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  auto bg = rt().StartBackground(id, ExecRequest{.shell = "sleep 1000"});
  ASSERT_TRUE(bg.ok());
  auto fg = std::async(std::launch::async, [&] {
    return rt().Exec(id, ExecRequest{.shell = "echo running; sleep 1000"}, {});
  });
  ASSERT_TRUE(WaitFor([&] { return rt().Usage(id).ok() && rt().Usage(id)->pids >= 3; }));
  auto wait_bg = std::async(std::launch::async, [&] { return rt().Wait(id, *bg); });
  std::this_thread::sleep_for(100ms);  // let the Wait block (usually; see below)
  ASSERT_TRUE(rt().Destroy(id).ok());

  ASSERT_EQ(fg.wait_for(10s), std::future_status::ready) << "Exec outlived Destroy";
  // Destroy ends commands with a result saying so ("killed through Kill() or Destroy()").
  auto r = fg.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->killed);
  EXPECT_EQ(r->signal, SIGKILL);
  ASSERT_EQ(wait_bg.wait_for(10s), std::future_status::ready) << "Wait outlived Destroy";
  // A Wait already blocked when Destroy ran reports the kill; one that only got going after
  // it finds no sandbox. Either way it must not hang.
  auto w = wait_bg.get();
  if (w.ok()) {
    EXPECT_TRUE(w->killed);
  } else {
    EXPECT_EQ(w.status().code(), StatusCode::kNotFound) << w.status().ToString();
  }
  EXPECT_TRUE(HostCgroupDirsFor(id).empty());
}

TEST_F(RuntimeLifecycleTest, IdIsReusableAfterDestroy) {
  auto spec = DefaultSpec();
  spec.id = UniqueId("reuse");
  for (int round = 0; round < 3; ++round) {
    auto info = rt().Create(spec);
    ASSERT_TRUE(info.ok()) << "round " << round << ": " << info.status().ToString();
    created_.push_back(info->id);
    // Each incarnation starts from a clean writable layer.
    EXPECT_EQ(
        Sh(spec.id, "test -e /home/sandbox/mark && echo stale; touch /home/sandbox/mark; hostname")
            .out,
        spec.id + "\n");
    ASSERT_TRUE(rt().Destroy(spec.id).ok());
  }
}

TEST_F(RuntimeLifecycleTest, ConcurrentCreateExecDestroy) {
  constexpr int kThreads = 6, kRounds = 3;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::string> problems;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        auto info = rt().Create(DefaultSpec());
        if (!info.ok()) {
          std::lock_guard lock(mu);
          problems.push_back("create: " + info.status().ToString());
          continue;
        }
        std::string out;
        runtime::ExecCallbacks cb;
        cb.on_stdout = [&](std::string_view s) { out.append(s); };
        auto e = rt().Exec(info->id, ExecRequest{.shell = "hostname; id -u"}, cb);
        Status d = rt().Destroy(info->id);
        std::lock_guard lock(mu);
        if (!e.ok() || out != info->id + "\n1000\n") {
          problems.push_back(info->id + ": exec gave '" + out + "' " + e.status().ToString());
        } else if (!d.ok()) {
          problems.push_back(info->id + ": destroy: " + d.ToString());
        } else if (!HostCgroupDirsFor(info->id).empty()) {
          problems.push_back(info->id + ": cgroups left after destroy");
        } else {
          ++ok;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), kThreads * kRounds);
  for (const auto& p : problems) ADD_FAILURE() << p;
}

TEST_F(RuntimeLifecycleTest, InitIgnoresSignalsFromInside) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  // pid 1 of a pid namespace only gets signals it handles; SIGKILL/SIGTERM from inside, even
  // from root inside, must not take the sandbox down.
  Sh(id, "kill -KILL 1; kill -TERM 1; kill -INT 1; kill -CHLD 1; true", 30s, "root");
  Sh(id, "kill -KILL 1; kill -TERM 1", 30s);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rt().Get(id)->state, SandboxState::kRunning);
  EXPECT_EQ(Sh(id, "echo alive").out, "alive\n");
}

TEST_F(RuntimeLifecycleTest, InitDeathMarksTheSandboxDead) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  auto bg = rt().StartBackground(id, ExecRequest{.shell = "sleep 1000"});
  ASSERT_TRUE(bg.ok());
  const pid_t init_pid = rt().Get(id)->init_pid;
  // Something outside the runtime kills the init (an admin, the host OOM killer).
  ASSERT_EQ(::kill(init_pid, SIGKILL), 0);
  EXPECT_TRUE(WaitFor([&] { return rt().Get(id)->state == SandboxState::kDead; }, 5s));
  auto w = rt().Wait(id, *bg);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE(w->killed);
  EXPECT_EQ(w->signal, SIGKILL);
  auto r = rt().Exec(id, ExecRequest{.shell = "true"}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_TRUE(rt().Destroy(id).ok());
  EXPECT_TRUE(HostCgroupDirsFor(id).empty());
  EXPECT_FALSE(HostProcessAlive(init_pid));
}

TEST_F(RuntimeLifecycleTest, IdentityInsideTheSandbox) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Sh(id, "hostname; cat /etc/hostname").out, id + "\n" + id + "\n");
  EXPECT_EQ(Sh(id, "grep '^sandbox:' /etc/passwd | cut -d: -f3,4,6").out,
            "1000:1000:/home/sandbox\n");
  EXPECT_EQ(Sh(id, "echo $HOME; cd; pwd; stat -c %u .").out,
            "/home/sandbox\n/home/sandbox\n1000\n");
  // pid 1 is the init; our shell is in its own pid namespace.
  EXPECT_EQ(Sh(id, "cat /proc/1/cmdline | tr '\\0' ' '").out, "paddock-init ");
  // Only loopback networking.
  CommandOutput o = Sh(id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
  EXPECT_EQ(o.out, "lo\n");
}

TEST_F(RuntimeLifecycleTest, SandboxesAreIsolatedFromEachOther) {
  std::string a = NewSandbox(), b = NewSandbox();
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(Sh(a,
               "echo secret > /home/sandbox/secret-a; echo t > /tmp/secret-a; "
               "echo w > /workspace/secret-a; exec sleep 4242 >/dev/null 2>&1 &")
                .result.exit_code,
            0);
  ASSERT_TRUE(WriteString(rt(), a, "/home/sandbox/api-a", "x").ok());
  CommandOutput o =
      Sh(b,
         "for f in /home/sandbox/secret-a /tmp/secret-a /workspace/secret-a "
         "/home/sandbox/api-a; do test -e $f && echo visible $f; done; "
         "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'sleep 424[2]'");
  EXPECT_EQ(o.out, "0\n");
  EXPECT_EQ(ReadString(rt(), b, "/home/sandbox/api-a").status().code(), StatusCode::kNotFound);
  // Distinct host uid ranges: a's sandbox user is not b's.
  auto ia = rt().Get(a), ib = rt().Get(b);
  ASSERT_TRUE(ia.ok() && ib.ok());
  auto host_uid = [](pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("Uid:", 0) == 0) return line;
    return std::string();
  };
  EXPECT_NE(host_uid(ia->init_pid), host_uid(ib->init_pid));
  EXPECT_EQ(host_uid(ia->init_pid).find("\t0\t"), std::string::npos)
      << "sandbox init runs as host root: " << host_uid(ia->init_pid);
}

TEST_F(RuntimeLifecycleTest, PauseFreezesAndResumeContinues) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  auto bg = rt().StartBackground(
      id, ExecRequest{.shell = "i=0; while :; do i=$((i+1)); echo $i > /home/sandbox/c.tmp; "
                               "mv /home/sandbox/c.tmp /home/sandbox/counter; sleep 0.05; done"});
  ASSERT_TRUE(bg.ok()) << bg.status().ToString();
  auto counter = [&]() -> long {
    auto s = ReadString(rt(), id, "/home/sandbox/counter");
    if (!s.ok() || s->empty()) return -1;
    return std::stol(*s);
  };
  ASSERT_TRUE(WaitFor([&] { return counter() >= 3; })) << "the counter never started";

  ASSERT_TRUE(rt().Pause(id).ok());
  EXPECT_EQ(rt().Get(id)->state, SandboxState::kPaused);
  long v1 = counter();
  std::this_thread::sleep_for(500ms);
  long v2 = counter();
  EXPECT_GE(v1, 3);
  EXPECT_EQ(v1, v2) << "the counter advanced while paused";

  auto r = rt().Exec(id, ExecRequest{.shell = "echo hi"}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  auto r2 = rt().StartBackground(id, ExecRequest{.shell = "echo hi"});
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().code(), StatusCode::kFailedPrecondition);
  // The host side still works on a paused sandbox.
  EXPECT_TRUE(rt().Usage(id).ok());
  EXPECT_TRUE(rt().Pause(id).ok()) << "pausing twice should be harmless";

  ASSERT_TRUE(rt().Resume(id).ok());
  EXPECT_EQ(rt().Get(id)->state, SandboxState::kRunning);
  EXPECT_TRUE(WaitFor([&] { return counter() > v2 + 2; }, 5s)) << "the counter did not resume";
  EXPECT_EQ(Sh(id, "echo hi").out, "hi\n");

  ASSERT_TRUE(rt().Kill(id, *bg, SIGKILL).ok());
  auto w = rt().Wait(id, *bg);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->killed);
  EXPECT_EQ(w->signal, SIGKILL);
  long stopped = counter();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(counter(), stopped);
}

TEST_F(RuntimeLifecycleTest, DestroyWhilePausedLeavesNothing) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  auto bg = rt().StartBackground(id, ExecRequest{.shell = "sleep 1000"});
  ASSERT_TRUE(bg.ok());
  const pid_t init_pid = rt().Get(id)->init_pid;
  ASSERT_TRUE(rt().Pause(id).ok());
  auto t0 = SteadyClock::now();
  ASSERT_TRUE(rt().Destroy(id).ok());
  EXPECT_LT(SteadyClock::now() - t0, 10s);
  EXPECT_TRUE(HostCgroupDirsFor(id).empty());
  EXPECT_FALSE(HostProcessAlive(init_pid));
}

// An orphan as a crashed daemon would leave it: cgroups named paddock-<id> with a live process
// in them, unknown to this runtime instance. `only` restricts the orphan to one v1 hierarchy
// (e.g. "pids"); empty = every hierarchy the runtime uses.
void CheckOrphanCleanup(runtime::linux::LinuxRuntime& rt, const std::string& stem,
                        const std::string& only) {
  const auto& layout = rt.cgroup_layout();
  const std::string id = stem + "-" + std::to_string(::getpid());
  std::vector<std::string> dirs;
  if (layout.version == runtime::linux::CgroupVersion::kV2) {
    dirs.push_back(layout.v2_root + "/paddock-" + id);
  } else {
    std::set<std::string> mounts;
    for (const auto& [ctrl, mount] : layout.v1_mounts)
      if (only.empty() || ctrl == only) mounts.insert(mount);
    for (const auto& m : mounts) dirs.push_back(m + "/paddock-" + id);
  }
  ASSERT_FALSE(dirs.empty());
  pid_t child = -1;
  // Whatever happens, leave nothing behind.
  struct Cleanup {
    std::vector<std::string>* dirs;
    pid_t* child;
    ~Cleanup() {
      if (*child > 0) {
        ::kill(*child, SIGKILL);
        ::waitpid(*child, nullptr, 0);
      }
      for (auto it = dirs->rbegin(); it != dirs->rend(); ++it) ::rmdir(it->c_str());
    }
  } cleanup{&dirs, &child};

  for (const auto& d : dirs) ASSERT_EQ(::mkdir(d.c_str(), 0755), 0) << d << ": " << strerror(errno);
  const char* argv[] = {"sleep", "1000", nullptr};
  ASSERT_EQ(
      ::posix_spawn(&child, "/bin/sleep", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  for (const auto& d : dirs) {
    std::ofstream procs(d + "/cgroup.procs");
    procs << child << std::flush;
    ASSERT_TRUE(procs.good()) << "cannot move the orphan into " << d;
  }

  bool found = false;
  for (const auto& h : rt.ListHostObjects()) {
    if (h.id != id) continue;
    found = true;
    EXPECT_FALSE(h.known);
    EXPECT_TRUE(h.has_cgroup);
    EXPECT_EQ(h.pids, std::vector<pid_t>{child});
  }
  ASSERT_TRUE(found) << "the orphan cgroup was not reported";
  EXPECT_EQ(rt.Get(id).status().code(), StatusCode::kNotFound);

  Status st = rt.Destroy(id);
  EXPECT_TRUE(st.ok()) << st.ToString();
  int status = 0;
  // Do not hang if Destroy failed to kill it: check, then let Cleanup do it.
  if (!WaitFor([&] { return ::waitpid(child, &status, WNOHANG) == child; }, 5s)) {
    ADD_FAILURE() << "Destroy did not kill the orphan's process";
    return;
  }
  child = -1;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  for (const auto& d : dirs) EXPECT_FALSE(std::filesystem::exists(d)) << d << " left behind";
  for (const auto& h : rt.ListHostObjects()) EXPECT_NE(h.id, id);
  EXPECT_TRUE(rt.Destroy(id).ok());
}

TEST_F(RuntimeLifecycleTest, OrphanIsReportedAndDestroyCleansIt) {
  CheckOrphanCleanup(rt(), "orphan-test", "");
}

// What a crash part-way through cgroup creation, or an admin's stray mkdir, can leave: the
// cgroup exists in only some hierarchies (here only pids), with a process in it.
TEST_F(RuntimeLifecycleTest, OrphanInOneHierarchyIsReportedAndCleaned) {
  if (rt().cgroup_layout().version != runtime::linux::CgroupVersion::kV1)
    GTEST_SKIP() << "v1 only: v2 has a single hierarchy";
  // Regression: Pids()/KillAll() once looked only at the freezer hierarchy, so such an
  // orphan was listed with no pids and Destroy failed with EBUSY.
  CheckOrphanCleanup(rt(), "orphan-pids-test", "pids");
}

}  // namespace
}  // namespace paddock::testing
