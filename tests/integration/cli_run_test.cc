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
#include "support/child_process.h"
#include "support/daemon_process.h"
#include "support/runtime_fixture.h"

extern char** environ;

namespace paddock::testing {
namespace {

using namespace std::chrono_literals;

// Runs paddockd with `args`, feeding `input` to its stdin (see RunChild).
CliResult RunPaddockd(const std::vector<std::string>& args, const std::string& input = "",
                      const std::function<void(pid_t, const std::string&)>& on_stdout = {}) {
  std::vector<std::string> full = {PaddockdPath(), "--data-dir", TestDataDir()};
  full.insert(full.end(), args.begin(), args.end());
  return RunChild(full, input, on_stdout);
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
