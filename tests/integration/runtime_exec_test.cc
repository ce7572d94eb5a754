// Exec on a real sandbox: environment, stdin, cwd, users, argv vs shell, errors, exit
// statuses, streaming, timeouts that kill the whole tree, background commands and Kill, and
// many concurrent execs in one sandbox.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "integration/integration_helpers.h"
#include "support/runtime_fixture.h"

namespace paddock::testing {
namespace {

using namespace std::chrono_literals;
using runtime::ExecCallbacks;
using runtime::ExecRequest;
using runtime::ExecResult;

class RuntimeExecTest : public SandboxTest {
 protected:
  static ExecRequest Shell(std::string script) {
    ExecRequest req;
    req.shell = std::move(script);
    req.timeout = 30s;
    return req;
  }
  static ExecRequest Argv(std::vector<std::string> argv) {
    ExecRequest req;
    req.argv = std::move(argv);
    req.timeout = 30s;
    return req;
  }
};

TEST_F(RuntimeExecTest, EnvComesFromSpecAndRequestWithRequestWinning) {
  auto spec = DefaultSpec();
  spec.env = {"SPEC_ONLY=from-spec", "BOTH=spec-value", "PATH_LIKE=a=b=c"};
  std::string id = NewSandbox(spec);
  ASSERT_FALSE(id.empty());

  ExecRequest req = Shell("echo \"$SPEC_ONLY|$REQ_ONLY|$BOTH|$PATH_LIKE\"");
  req.env = {{"REQ_ONLY", "from req"}, {"BOTH", "req-value"}};
  CommandOutput o = Run(id, req);
  EXPECT_EQ(o.out, "from-spec|from req|req-value|a=b=c\n");
  EXPECT_EQ(o.result.exit_code, 0);

  // The request's overrides apply to that exec only.
  o = Run(id, Shell("echo \"$SPEC_ONLY|$REQ_ONLY|$BOTH\""));
  EXPECT_EQ(o.out, "from-spec||spec-value\n");

  // The runtime's defaults are there too.
  o = Run(
      id,
      Shell("echo \"$HOME|$USER|$HOSTNAME\"; echo \"$PATH\" | grep -q /usr/bin && echo path-ok"));
  EXPECT_EQ(o.out, "/home/sandbox|sandbox|" + id + "\npath-ok\n");

  // Nothing of the test process's own environment leaks in.
  ::setenv("PADDOCK_TEST_HOST_ONLY", "leak", 1);
  o = Run(id, Shell("echo \"[${PADDOCK_TEST_HOST_ONLY}]\""));
  ::unsetenv("PADDOCK_TEST_HOST_ONLY");
  EXPECT_EQ(o.out, "[]\n");

  ExecRequest bad = Shell("true");
  bad.env = {{"A=B", "x"}};
  auto r = rt().Exec(id, bad, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
}

TEST_F(RuntimeExecTest, StdinDataIsDeliveredThenEof) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());

  ExecRequest req = Argv({"wc", "-c"});
  req.stdin_data = "hello\n";
  CommandOutput o = Run(id, req);
  EXPECT_EQ(Trimmed(o.out), "6");
  EXPECT_EQ(o.result.exit_code, 0);

  // Larger than a pipe buffer in both directions: stdin must be written while stdout is
  // drained, or the two would deadlock.
  std::string big;
  for (int i = 0; big.size() < (3u << 20); ++i) big += "line " + std::to_string(i) + "\n";
  req = Argv({"cat"});
  req.stdin_data = big;
  o = Run(id, req);
  EXPECT_EQ(o.out.size(), big.size());
  EXPECT_TRUE(o.out == big) << "cat did not echo stdin back byte for byte";
  EXPECT_EQ(o.result.exit_code, 0);

  // Without stdin_data the command sees EOF immediately (not the daemon's stdin).
  o = Run(id, Argv({"wc", "-c"}));
  EXPECT_EQ(Trimmed(o.out), "0");

  // A command that never reads its stdin must not wedge the exec (or SIGPIPE the daemon).
  req = Shell("exec 0<&-; echo closed");
  req.stdin_data = std::string(1 << 20, 'x');
  o = Run(id, req);
  EXPECT_EQ(o.out, "closed\n");
  EXPECT_EQ(o.result.exit_code, 0);

  // Nor one that neither reads nor closes it: the timeout still ends it.
  req = Argv({"sleep", "1000"});
  req.stdin_data = std::string(1 << 20, 'x');
  req.timeout = 1s;
  o = Run(id, req);
  EXPECT_TRUE(o.result.timed_out);
}

TEST_F(RuntimeExecTest, CwdDefaultsToHomeAndCanBeSet) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Run(id, Argv({"pwd"})).out, "/home/sandbox\n");

  ExecRequest req = Argv({"pwd"});
  req.cwd = "/tmp";
  EXPECT_EQ(Run(id, req).out, "/tmp\n");

  req.user = "root";
  req.cwd = "";
  EXPECT_EQ(Run(id, req).out, "/root\n");

  // A missing working directory is an error, not a silent fallback.
  req = Argv({"pwd"});
  req.cwd = "/no/such/dir";
  auto r = rt().Exec(id, req, {});
  EXPECT_FALSE(r.ok()) << "exec in a missing cwd succeeded";
}

TEST_F(RuntimeExecTest, UserRootVersusSandbox) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Sh(id, "id -u; id -g; id -un").out, "1000\n1000\nsandbox\n");
  EXPECT_EQ(Sh(id, "id -u; id -g; id -un", 30s, "root").out, "0\n0\nroot\n");

  // Root inside is root of the sandbox's user namespace only: its home is /root, and it has no
  // effective capabilities.
  CommandOutput o = Sh(id, "echo $HOME; grep CapEff /proc/self/status", 30s, "root");
  EXPECT_EQ(o.out, "/root\nCapEff:\t0000000000000000\n");

  // The sandbox user cannot write where only root can; root inside can.
  o = Sh(id, "touch /etc/x-by-sandbox");
  EXPECT_NE(o.result.exit_code, 0);
  o = Sh(id, "touch /etc/x-by-root && stat -c %u /etc/x-by-root", 30s, "root");
  EXPECT_EQ(o.out, "0\n");

  ExecRequest req = Argv({"id"});
  req.user = "admin";
  auto r = rt().Exec(id, req, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RuntimeExecTest, RootCanUseItsHomeDirectory) {
  // Regression: the host template's skeleton /root was 0700 host-root; overlayfs looks names
  // up in the lower layer with the mounter's credentials, which do not cover unmapped inodes,
  // so even root inside got EACCES under /root.
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  CommandOutput o =
      Sh(id, "cd && echo x > f && cat f && ls -a | wc -l && stat -c '%u %a' .", 30s, "root");
  EXPECT_EQ(o.result.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, "x\n3\n0 700\n");
}

TEST_F(RuntimeExecTest, ArgvIsNotInterpretedShellIs) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  CommandOutput o = Run(id, Argv({"echo", "$HOME", "a  b", "*", "; exit 3"}));
  EXPECT_EQ(o.out, "$HOME a  b * ; exit 3\n");
  EXPECT_EQ(o.result.exit_code, 0);

  o = Run(id, Shell("echo $HOME; exit 3"));
  EXPECT_EQ(o.out, "/home/sandbox\n");
  EXPECT_EQ(o.result.exit_code, 3);

  ExecRequest both = Shell("true");
  both.argv = {"true"};
  auto r = rt().Exec(id, both, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);

  ExecRequest neither;
  r = rt().Exec(id, neither, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RuntimeExecTest, CommandNotFoundIsAnError) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  auto r = rt().Exec(id, Argv({"no-such-command-paddock"}), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();

  r = rt().Exec(id, Argv({"/no/such/binary"}), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();

  // Not executable: an error too, but not "not found".
  r = rt().Exec(id, Argv({"/etc/passwd"}), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().code(), StatusCode::kNotFound) << r.status().ToString();

  // A background command that cannot start reports it from Wait.
  auto bg = rt().StartBackground(id, Argv({"no-such-command-paddock"}));
  ASSERT_TRUE(bg.ok()) << bg.status().ToString();
  auto w = rt().Wait(id, *bg);
  EXPECT_FALSE(w.ok());

  // In shell form the shell itself runs and reports 127.
  CommandOutput o = Sh(id, "no-such-command-paddock");
  EXPECT_EQ(o.result.exit_code, 127);
  EXPECT_NE(o.err.find("not found"), std::string::npos) << o.err;

  // The sandbox is fine afterwards.
  EXPECT_EQ(Sh(id, "echo ok").out, "ok\n");
}

TEST_F(RuntimeExecTest, ExitCodesAndSignals) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  for (int code : {0, 1, 42, 255}) {
    CommandOutput o = Sh(id, "exit " + std::to_string(code));
    EXPECT_EQ(o.result.exit_code, code);
    EXPECT_EQ(o.result.signal, 0);
    EXPECT_EQ(o.result.ShellStatus(), code);
  }
  CommandOutput o = Sh(id, "kill -TERM $$");
  EXPECT_EQ(o.result.signal, SIGTERM);
  EXPECT_EQ(o.result.ShellStatus(), 143);
  EXPECT_FALSE(o.result.timed_out);
  EXPECT_FALSE(o.result.killed);

  o = Sh(id, "kill -KILL $$");
  EXPECT_EQ(o.result.signal, SIGKILL);
  EXPECT_EQ(o.result.ShellStatus(), 137);
  EXPECT_FALSE(o.result.oom_killed) << "a self-inflicted SIGKILL is not an OOM kill";
  EXPECT_FALSE(o.result.killed);
  EXPECT_FALSE(o.result.timed_out);

  o = Sh(id, "kill -SEGV $$");
  EXPECT_EQ(o.result.signal, SIGSEGV);
  EXPECT_EQ(o.result.ShellStatus(), 128 + SIGSEGV);
}

TEST_F(RuntimeExecTest, OutputStreamsWhileTheCommandRuns) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  struct Chunk {
    SteadyClock::time_point at;
    std::string data;
    bool err;
  };
  std::vector<Chunk> chunks;
  ExecCallbacks cb;
  cb.on_stdout = [&](std::string_view s) {
    chunks.push_back({SteadyClock::now(), std::string(s), false});
  };
  cb.on_stderr = [&](std::string_view s) {
    chunks.push_back({SteadyClock::now(), std::string(s), true});
  };
  ExecRequest req = Shell("echo first; sleep 1; echo second >&2; sleep 1; echo third");
  auto start = SteadyClock::now();
  auto r = rt().Exec(id, req, cb);
  auto end = SteadyClock::now();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0);
  ASSERT_GE(chunks.size(), 3u);
  std::string out, err;
  for (const auto& c : chunks) (c.err ? err : out) += c.data;
  EXPECT_EQ(out, "first\nthird\n");
  EXPECT_EQ(err, "second\n");
  EXPECT_EQ(chunks.front().data, "first\n");
  EXPECT_FALSE(chunks.front().err);
  // The first line arrived while the command was still sleeping, not at exit (exit is at least
  // 2 s after it was printed; the margins only absorb scheduling delays on a loaded host).
  EXPECT_LT(chunks.front().at - start, end - start - 1500ms);
  auto second = std::find_if(chunks.begin(), chunks.end(), [](const Chunk& c) { return c.err; });
  ASSERT_NE(second, chunks.end());
  EXPECT_LT(second->at, end - 600ms) << "stderr line was not streamed before exit";
}

TEST_F(RuntimeExecTest, TimeoutKillsTheWholeProcessTree) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  auto info = rt().Get(id);
  ASSERT_TRUE(info.ok());
  ExecRequest req = Shell("sleep 1000 & sleep 1000 & (sleep 1000 &); echo started; sleep 1000");
  req.timeout = 1s;
  CommandOutput o = Run(id, req);
  EXPECT_TRUE(o.result.timed_out);
  EXPECT_EQ(o.result.signal, SIGKILL);
  EXPECT_FALSE(o.result.oom_killed);
  EXPECT_GE(o.result.wall_seconds, 0.9);
  EXPECT_LT(o.result.wall_seconds, 5.0);
  EXPECT_EQ(o.out, "started\n");

  // Nothing of the tree survives: only the init is left in the sandbox's cgroup.
  auto only_init = [&] {
    for (const auto& h : rt().ListHostObjects()) {
      if (h.id == id) return h.pids == std::vector<pid_t>{info->init_pid};
    }
    return false;
  };
  EXPECT_TRUE(WaitFor(only_init, 3s)) << "processes left in the sandbox cgroup after a timeout";
  auto usage = rt().Usage(id);
  ASSERT_TRUE(usage.ok());
  EXPECT_TRUE(WaitFor([&] { return rt().Usage(id)->pids == 1; }, 3s));
  // And from the inside: no sleep process anywhere in the pid namespace.
  o = Sh(id, "for p in /proc/[0-9]*; do cat $p/comm 2>/dev/null; done | grep -c '^sleep$'");
  EXPECT_EQ(o.out, "0\n");
}

TEST_F(RuntimeExecTest, ExecReturnsWhenMainProcessExitsDespiteBackgroundChildren) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  // The background sleep inherits stdout; the exec must still complete when the shell exits.
  auto start = SteadyClock::now();
  CommandOutput o = Sh(id, "sleep 1000 & echo done");
  EXPECT_LT(SteadyClock::now() - start, 10s);
  EXPECT_EQ(o.out, "done\n");
  EXPECT_EQ(o.result.exit_code, 0);
  // The leftover keeps running in the sandbox (it was not timed out or killed).
  o = Sh(id, "for p in /proc/[0-9]*; do cat $p/comm 2>/dev/null; done | grep -c '^sleep$'");
  EXPECT_EQ(o.out, "1\n");
}

TEST_F(RuntimeExecTest, BackgroundExecKillAndWait) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ExecRequest req = Shell("sleep 1000");
  auto bg = rt().StartBackground(id, req);
  ASSERT_TRUE(bg.ok()) << bg.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return rt().Usage(id)->pids >= 2; }));
  ASSERT_TRUE(rt().Kill(id, *bg, SIGKILL).ok());
  auto w = rt().Wait(id, *bg);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE(w->killed);
  EXPECT_EQ(w->signal, SIGKILL);
  EXPECT_FALSE(w->timed_out);
  EXPECT_FALSE(w->oom_killed) << "Kill() is not an OOM kill";

  // Killing or waiting for a finished exec is harmless.
  EXPECT_TRUE(rt().Kill(id, *bg, SIGKILL).ok());
  auto again = rt().Wait(id, *bg);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(rt().Kill(id, *bg, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Sh(id, "echo alive").out, "alive\n");

  // A catchable signal is delivered as is, and is not "killed".
  bg = rt().StartBackground(id, Shell("sleep 1000"));
  ASSERT_TRUE(bg.ok());
  ASSERT_TRUE(WaitFor([&] { return rt().Usage(id)->pids >= 2; }));
  ASSERT_TRUE(rt().Kill(id, *bg, SIGTERM).ok());
  w = rt().Wait(id, *bg);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->signal, SIGTERM);
  EXPECT_FALSE(w->killed);

  // A background command's exit status comes back through Wait.
  bg = rt().StartBackground(id, Shell("exit 9"));
  ASSERT_TRUE(bg.ok());
  w = rt().Wait(id, *bg);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->exit_code, 9);

  EXPECT_EQ(rt().Wait(id, 424242).status().code(), StatusCode::kNotFound);
}

TEST_F(RuntimeExecTest, KillAfterExitReachesLeftoverProcesses) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  auto bg = rt().StartBackground(id, Shell("sleep 1000 & sleep 1000 & exit 0"));
  ASSERT_TRUE(bg.ok());
  auto w = rt().Wait(id, *bg);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->exit_code, 0);
  EXPECT_EQ(rt().Usage(id)->pids, 3u) << "init + two leftover sleeps";
  // The exec's cgroup still holds its leftovers; SIGKILL to the exec kills them.
  ASSERT_TRUE(rt().Kill(id, *bg, SIGKILL).ok());
  EXPECT_TRUE(WaitFor([&] { return rt().Usage(id)->pids == 1; }, 5s))
      << "leftovers of a finished exec survived Kill(SIGKILL)";
}

TEST_F(RuntimeExecTest, ResultReportsResourceUse) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  CommandOutput o = Sh(id, "sleep 0.5");
  EXPECT_EQ(o.result.exit_code, 0);
  EXPECT_GE(o.result.wall_seconds, 0.45);
  EXPECT_LT(o.result.wall_seconds, 10.0);
  EXPECT_LT(o.result.cpu_seconds, 0.4) << "sleeping is not CPU time";

  ExecRequest req = Argv({"python3", "-c",
                          "import time\nb = b'x' * (40 << 20)\nt = time.process_time()\n"
                          "while time.process_time() - t < 0.3: pass"});
  o = Run(id, req);
  EXPECT_EQ(o.result.exit_code, 0) << o.err;
  EXPECT_GE(o.result.cpu_seconds, 0.25);
  EXPECT_GE(o.result.peak_memory_bytes, 40ull << 20);
  EXPECT_LT(o.result.peak_memory_bytes, 200ull << 20);
}

// Each exec gets its own sub-cgroup; once its processes are gone the sub-cgroup must go too,
// or a long-lived sandbox would accumulate thousands of them.
TEST_F(RuntimeExecTest, ExecCgroupsAreRemovedWhenEmpty) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  const auto& layout = rt().cgroup_layout();
  const std::string parent = layout.version == runtime::linux::CgroupVersion::kV2
                                 ? layout.v2_root + "/paddock-" + id
                                 : layout.v1_mounts.at("freezer") + "/paddock-" + id;
  auto exec_dirs = [&] {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(parent, ec))
      if (e.is_directory(ec)) out.push_back(e.path().filename().string());
    return out;
  };
  ASSERT_TRUE(std::filesystem::exists(parent));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Sh(id, "echo " + std::to_string(i)).result.exit_code, 0);
  ExecRequest req = Shell("sleep 1000");
  req.timeout = 200ms;
  EXPECT_TRUE(Run(id, req).result.timed_out);
  EXPECT_EQ(Sh(id, "sleep 0.3 & echo bg").out, "bg\n");  // leaves a short-lived child behind
  auto bg = rt().StartBackground(id, Shell("sleep 1000"));
  ASSERT_TRUE(bg.ok());
  ASSERT_TRUE(rt().Kill(id, *bg, SIGKILL).ok());
  ASSERT_TRUE(rt().Wait(id, *bg).ok());
  EXPECT_TRUE(WaitFor([&] { return exec_dirs().empty(); }, 5s))
      << "exec cgroups left: " << ::testing::PrintToString(exec_dirs());
}

TEST_F(RuntimeExecTest, ManyConcurrentExecsInOneSandbox) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  constexpr int kThreads = 8, kPerThread = 20;
  std::atomic<int> ok{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string tag = "t" + std::to_string(t) + "-" + std::to_string(i);
        ExecRequest req;
        req.argv = {"sh", "-c", "echo \"$1\"; echo \"err-$1\" >&2; exit $2",
                    "sh", tag,  std::to_string((t * kPerThread + i) % 200)};
        req.timeout = 60s;
        std::string out, err;
        ExecCallbacks cb;
        cb.on_stdout = [&](std::string_view s) { out.append(s); };
        cb.on_stderr = [&](std::string_view s) { err.append(s); };
        auto r = rt().Exec(id, req, cb);
        std::string problem;
        if (!r.ok()) {
          problem = r.status().ToString();
        } else if (out != tag + "\n" || err != "err-" + tag + "\n" ||
                   r->exit_code != (t * kPerThread + i) % 200) {
          problem = "got out='" + out + "' err='" + err + "' exit=" + std::to_string(r->exit_code);
        }
        if (problem.empty()) {
          ++ok;
        } else {
          std::lock_guard lock(mu);
          failures.push_back(tag + ": " + problem);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), kThreads * kPerThread);
  for (size_t i = 0; i < failures.size() && i < 10; ++i) ADD_FAILURE() << failures[i];
}

}  // namespace
}  // namespace paddock::testing
