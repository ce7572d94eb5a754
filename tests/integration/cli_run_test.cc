// `paddockd sandbox run`: the one-shot CLI path, run as a real child process. Exit statuses
// (including 128 + signal), timeouts, stdio pass-through, flags, signal forwarding, and that
// the one-shot sandbox is gone when the command returns.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "integration/integration_helpers.h"
#include "support/runtime_fixture.h"

extern char** environ;

namespace paddock::testing {
namespace {

using namespace std::chrono_literals;

struct CliResult {
  int status = -1;  // exit status, or 128 + signal if paddockd itself died of one
  std::string out, err;
  double seconds = 0;
};

std::string PaddockdPath() {
  std::error_code ec;
  return (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "paddockd").string();
}

// Runs paddockd with `args`, feeding `input` to its stdin. `on_stdout` sees each chunk of
// output as it arrives, with the child's pid (to send it signals). Kills it after 60 s.
CliResult RunPaddockd(const std::vector<std::string>& args, const std::string& input = "",
                      const std::function<void(pid_t, const std::string&)>& on_stdout = {}) {
  CliResult res;
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) < 0 || ::pipe2(out, O_CLOEXEC) < 0 || ::pipe2(err, O_CLOEXEC) < 0) {
    ADD_FAILURE() << "pipe: " << strerror(errno);
    return res;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  std::vector<std::string> full = {PaddockdPath(), "--data-dir", TestDataDir()};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child must not inherit a blocked SIGPIPE/SIGTERM mask from gtest threads; spawn with
  // default signal state.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const auto start = SteadyClock::now();
  int rc = ::posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ADD_FAILURE() << "spawn " << argv[0] << ": " << strerror(rc);
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    return res;
  }
  size_t in_off = 0;
  int in_fd = in[1];
  if (input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  } else {
    ::fcntl(in_fd, F_SETFL, O_NONBLOCK);
  }
  int out_fd = out[0], err_fd = err[0];
  bool killed = false;
  while (out_fd >= 0 || err_fd >= 0) {
    pollfd p[3];
    int n = 0;
    if (out_fd >= 0) p[n++] = {out_fd, POLLIN, 0};
    if (err_fd >= 0) p[n++] = {err_fd, POLLIN, 0};
    if (in_fd >= 0) p[n++] = {in_fd, POLLOUT, 0};
    ::poll(p, static_cast<nfds_t>(n), 200);
    for (int i = 0; i < n; ++i) {
      if (!p[i].revents) continue;
      if (p[i].fd == in_fd) {
        ssize_t w = ::write(in_fd, input.data() + in_off, input.size() - in_off);
        if (w > 0) in_off += static_cast<size_t>(w);
        if (w < 0 || in_off == input.size()) {
          ::close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      char buf[65536];
      ssize_t r = ::read(p[i].fd, buf, sizeof buf);
      if (r <= 0) {
        ::close(p[i].fd);
        (p[i].fd == out_fd ? out_fd : err_fd) = -1;
        continue;
      }
      if (p[i].fd == out_fd) {
        res.out.append(buf, static_cast<size_t>(r));
        if (on_stdout) on_stdout(pid, res.out);
      } else {
        res.err.append(buf, static_cast<size_t>(r));
      }
    }
    if (!killed && SteadyClock::now() - start > 60s) {
      ADD_FAILURE() << "paddockd ran for over 60 s; killing it";
      ::kill(pid, SIGKILL);
      killed = true;
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  res.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  res.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return res;
}

class CliRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
    // The template cache under TestDataDir() is shared with the in-process runtime; make sure
    // it exists (and the host template is registered) before the CLI uses it.
    (void)SharedRuntime();
  }
  static std::vector<std::string> Run(std::vector<std::string> cmd,
                                      std::vector<std::string> flags = {}) {
    // Small defaults unless the test sets its own (CLI11 rejects a repeated option).
    std::vector<std::string> args = {"sandbox", "run"};
    for (const char* opt : {"--memory", "--disk"}) {
      if (std::find(flags.begin(), flags.end(), opt) == flags.end()) {
        args.push_back(opt);
        args.push_back(std::string(opt) == "--memory" ? "256M" : "64M");
      }
    }
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), cmd.begin(), cmd.end());
    return args;
  }
};

TEST_F(CliRunTest, ExitStatusPassesThrough) {
  CliResult r = RunPaddockd(Run({"sh", "-c", "exit 3"}));
  EXPECT_EQ(r.status, 3) << r.err;
  r = RunPaddockd(Run({"true"}));
  EXPECT_EQ(r.status, 0) << r.err;
  r = RunPaddockd(Run({"sh", "-c", "exit 255"}));
  EXPECT_EQ(r.status, 255) << r.err;
}

TEST_F(CliRunTest, SignalDeathIs128PlusSignal) {
  CliResult r = RunPaddockd(Run({"sh", "-c", "kill -9 $$"}));
  EXPECT_EQ(r.status, 137) << r.err;
  r = RunPaddockd(Run({"sh", "-c", "kill -TERM $$"}));
  EXPECT_EQ(r.status, 143) << r.err;
}

TEST_F(CliRunTest, TimeoutKillsTheCommand) {
  CliResult r = RunPaddockd(Run({"sleep", "100"}, {"--timeout", "1"}));
  EXPECT_EQ(r.status, 137) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
}

TEST_F(CliRunTest, StdioPassesThrough) {
  CliResult r = RunPaddockd(Run({"sh", "-c", "echo out-line; echo err-line >&2; echo second"}));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "out-line\nsecond\n");
  EXPECT_NE(r.err.find("err-line\n"), std::string::npos) << r.err;

  r = RunPaddockd(Run({"wc", "-c"}), "hello");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Trimmed(r.out), "5");

  std::string big(300000, 'q');
  r = RunPaddockd(Run({"cat"}), big);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.out == big) << "got " << r.out.size() << " bytes back";
}

TEST_F(CliRunTest, FlagsApply) {
  CliResult r = RunPaddockd(Run({"sh", "-c", "id -u; echo \"$FOO\"; pwd; ulimit -n"},
                                {"--user", "root", "-e", "FOO=bar baz", "--cwd", "/tmp"}));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "0\nbar baz\n/tmp\n1024\n");

  r = RunPaddockd(Run({"python3", "-c", "b = b'x' * (200 << 20)"}, {"--memory", "64M"}));
  EXPECT_EQ(r.status, 137) << r.err;
  EXPECT_NE(r.err.find("out of memory"), std::string::npos) << r.err;

  r = RunPaddockd(
      Run({"sh", "-c", "dd if=/dev/zero of=/home/sandbox/f bs=1M count=64"}, {"--disk", "8M"}));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("No space left"), std::string::npos) << r.err;
}

TEST_F(CliRunTest, RuntimeErrorsAreDistinguishable) {
  // 125 (like docker run): the runtime failed, not the command.
  CliResult r = RunPaddockd(Run({"no-such-command-paddock"}));
  EXPECT_EQ(r.status, 125) << r.err;
  EXPECT_NE(r.err.find("paddockd:"), std::string::npos) << r.err;
  r = RunPaddockd(Run({"true"}, {"--memory", "lots"}));
  EXPECT_EQ(r.status, 125) << r.err;
  r = RunPaddockd(Run({"true"}, {"--template", "no-such-template"}));
  EXPECT_EQ(r.status, 125) << r.err;
  r = RunPaddockd(Run({"true"}, {"--pids", "1"}));
  EXPECT_EQ(r.status, 125) << r.err;
}

TEST_F(CliRunTest, SandboxIsGoneAfterTheCommand) {
  CliResult r = RunPaddockd(Run({"sh", "-c", "echo $HOSTNAME; sleep 1000 & echo bg"}));
  EXPECT_EQ(r.status, 0) << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(r.out, id + "\nbg\n");
  EXPECT_TRUE(HostCgroupDirsFor(id).empty()) << "cgroups of " << id << " left behind";
}

TEST_F(CliRunTest, TerminalSignalsAreForwardedToTheCommand) {
  bool sent = false;
  CliResult r = RunPaddockd(Run({"sh", "-c", "echo ready; exec sleep 100"}), "",
                            [&](pid_t pid, const std::string& out) {
                              if (!sent && out.find("ready\n") != std::string::npos) {
                                sent = true;
                                ::kill(pid, SIGTERM);
                              }
                            });
  EXPECT_TRUE(sent);
  EXPECT_EQ(r.status, 143) << r.err;
  EXPECT_LT(r.seconds, 20.0);
}

}  // namespace
}  // namespace paddock::testing
