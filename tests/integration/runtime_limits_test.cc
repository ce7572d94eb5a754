// Resource limits on a real sandbox: memory (OOM kill), pids (fork bomb), the writable-layer
// and /tmp caps, output caps, CPU quota and the open-files rlimit. Each test pushes a limit
// and checks both that the limit held and that the sandbox (and host) stay usable after.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "integration/integration_helpers.h"
#include "support/runtime_fixture.h"

namespace paddock::testing {
namespace {

using namespace std::chrono_literals;
using runtime::ExecCallbacks;
using runtime::ExecRequest;

class RuntimeLimitsTest : public SandboxTest {
 protected:
  // The host directory of one controller of this sandbox's cgroup (v1: that controller's
  // hierarchy; v2: the unified directory).
  std::string ControllerDir(const std::string& id, const std::string& controller) {
    const auto& layout = rt().cgroup_layout();
    if (layout.version == runtime::linux::CgroupVersion::kV2)
      return layout.v2_root + "/paddock-" + id;
    auto it = layout.v1_mounts.find(controller);
    if (it == layout.v1_mounts.end()) return "";
    return it->second + "/paddock-" + id;
  }
  static std::string ReadHostFile(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
};

TEST_F(RuntimeLimitsTest, MemoryLimitOomKillsTheCommand) {
  auto spec = DefaultSpec();
  spec.limits.memory_bytes = 64ull << 20;
  std::string id = NewSandbox(spec);
  ASSERT_FALSE(id.empty());

  // bytes * n writes every page (a zeroed bytearray could stay lazily mapped and never OOM).
  ExecRequest req;
  req.argv = {"python3", "-c", "b = b'x' * (200 << 20); print(len(b))"};
  req.timeout = 60s;
  std::string out;
  ExecCallbacks cb;
  cb.on_stdout = [&](std::string_view s) { out.append(s); };
  auto r = rt().Exec(id, req, cb);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->oom_killed);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_EQ(r->ShellStatus(), 137);
  EXPECT_FALSE(r->timed_out);
  EXPECT_FALSE(r->killed);
  EXPECT_EQ(out, "") << "the allocation succeeded past the 64 MiB limit";
  auto usage = rt().Usage(id);
  ASSERT_TRUE(usage.ok());
  EXPECT_GE(usage->oom_kills, 1u);
  EXPECT_LE(usage->memory_bytes, 64ull << 20);

  // The sandbox survives the OOM kill, and a later ordinary SIGKILL is not blamed on OOM.
  EXPECT_EQ(Sh(id, "echo alive").out, "alive\n");
  CommandOutput o = Sh(id, "kill -KILL $$");
  EXPECT_EQ(o.result.signal, SIGKILL);
  EXPECT_FALSE(o.result.oom_killed);

  // A command within the limit runs fine.
  req.argv = {"python3", "-c", "b = b'x' * (16 << 20); print(len(b))"};
  out.clear();
  r = rt().Exec(id, req, cb);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(out, std::to_string(16 << 20) + "\n");
  EXPECT_FALSE(r->oom_killed);
  EXPECT_GT(r->peak_memory_bytes, 16ull << 20);
}

TEST_F(RuntimeLimitsTest, ForkBombIsContainedByThePidsLimit) {
  auto spec = DefaultSpec();
  spec.limits.pids = 64;
  std::string id = NewSandbox(spec);
  ASSERT_FALSE(id.empty());

  std::atomic<bool> running{true};
  std::atomic<uint64_t> max_pids{0};
  std::atomic<int> samples{0};
  std::thread sampler([&] {
    while (running) {
      if (auto u = rt().Usage(id); u.ok()) {
        uint64_t cur = max_pids.load();
        while (u->pids > cur && !max_pids.compare_exchange_weak(cur, u->pids)) {
        }
        ++samples;
      }
      std::this_thread::sleep_for(5ms);
    }
  });
  // The host must stay able to fork while the sandbox is saturated.
  std::vector<double> host_fork_seconds;
  std::thread host_checker([&] {
    std::this_thread::sleep_for(500ms);
    for (int i = 0; i < 5 && running; ++i) {
      auto t0 = SteadyClock::now();
      int rc = std::system("/bin/true");
      host_fork_seconds.push_back(
          rc == 0 ? std::chrono::duration<double>(SteadyClock::now() - t0).count() : -1);
      std::this_thread::sleep_for(300ms);
    }
  });

  // bash retries a failed fork (with back-off) instead of exiting, so the bomb keeps pushing
  // against the limit until the timeout kills the tree.
  ExecRequest req;
  req.argv = {"bash", "-c", "while :; do sleep 100 & done"};
  req.timeout = 3s;
  auto r = rt().Exec(id, req, {});
  host_checker.join();
  running = false;
  sampler.join();

  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(r->wall_seconds, 15.0);
  EXPECT_GT(samples.load(), 10);
  EXPECT_LE(max_pids.load(), 64u) << "pids.current exceeded the limit";
  EXPECT_GE(max_pids.load(), 32u) << "the bomb never got going; the test proves nothing";
  // The kernel recorded fork attempts refused at the limit.
  std::string events = ReadHostFile(ControllerDir(id, "pids") + "/pids.events");
  uint64_t refused = 0;
  if (auto p = events.find("max "); p != std::string::npos)
    refused = std::stoull(events.substr(p + 4));
  EXPECT_GT(refused, 0u) << "pids.events: " << events;

  ASSERT_FALSE(host_fork_seconds.empty());
  for (double s : host_fork_seconds) {
    EXPECT_GE(s, 0) << "host could not run /bin/true during the fork bomb";
    EXPECT_LT(s, 2.0) << "host fork took " << s << " s during the fork bomb";
  }
  // Everything the bomb made is gone, and the sandbox works again.
  EXPECT_TRUE(WaitFor([&] { return rt().Usage(id)->pids == 1; }, 10s))
      << "pids left: " << rt().Usage(id)->pids;
  EXPECT_EQ(Sh(id, "echo alive").out, "alive\n");
}

TEST_F(RuntimeLimitsTest, DiskFillStopsAtTheWritableLayerCap) {
  auto spec = DefaultSpec();
  spec.limits.disk_bytes = 16ull << 20;
  std::string id = NewSandbox(spec);
  ASSERT_FALSE(id.empty());

  CommandOutput o = Sh(id, "dd if=/dev/zero of=/home/sandbox/big bs=1M count=64");
  EXPECT_NE(o.result.exit_code, 0);
  EXPECT_NE(o.err.find("No space left"), std::string::npos) << o.err;
  o = Sh(id, "stat -c %s /home/sandbox/big");
  ASSERT_EQ(o.result.exit_code, 0);
  uint64_t size = std::stoull(o.out);
  EXPECT_GT(size, 0u);
  EXPECT_LE(size, 16ull << 20);
  auto usage = rt().Usage(id);
  ASSERT_TRUE(usage.ok());
  EXPECT_LE(usage->disk_used_bytes, 16ull << 20);
  EXPECT_GE(usage->disk_used_bytes, size / 2);

  // Other places in the writable layer share the same cap.
  o = Sh(id, "dd if=/dev/zero of=/workspace/more bs=1M count=4");
  EXPECT_NE(o.result.exit_code, 0);

  // Freeing space makes the sandbox usable again.
  o = Sh(
      id,
      "rm /home/sandbox/big && dd if=/dev/zero of=/home/sandbox/ok bs=1M count=4 2>&1 && echo ok");
  EXPECT_EQ(o.result.exit_code, 0) << o.out << o.err;
}

TEST_F(RuntimeLimitsTest, TmpAndShmHaveTheirOwnCap) {
  auto spec = DefaultSpec();
  spec.limits.disk_bytes = 64ull << 20;
  spec.limits.tmp_bytes = 8ull << 20;
  std::string id = NewSandbox(spec);
  ASSERT_FALSE(id.empty());

  CommandOutput o = Sh(id, "dd if=/dev/zero of=/tmp/big bs=1M count=32");
  EXPECT_NE(o.result.exit_code, 0);
  EXPECT_NE(o.err.find("No space left"), std::string::npos) << o.err;
  o = Sh(id, "stat -c %s /tmp/big");
  ASSERT_EQ(o.result.exit_code, 0);
  EXPECT_LE(std::stoull(o.out), 8ull << 20);

  o = Sh(id, "dd if=/dev/zero of=/dev/shm/big bs=1M count=32");
  EXPECT_NE(o.result.exit_code, 0);
  o = Sh(id, "stat -c %s /dev/shm/big");
  ASSERT_EQ(o.result.exit_code, 0);
  EXPECT_LE(std::stoull(o.out), 8ull << 20);

  // A full /tmp does not eat into the writable layer, which still takes 20 MiB.
  o = Sh(id, "dd if=/dev/zero of=/home/sandbox/f bs=1M count=20");
  EXPECT_EQ(o.result.exit_code, 0) << o.err;
}

TEST_F(RuntimeLimitsTest, StdoutFloodIsCappedExactly) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  constexpr uint64_t kCap = 1 << 20;
  ExecRequest req;
  req.argv = {"yes"};
  req.timeout = 20s;
  req.output_cap_bytes = kCap;
  uint64_t got = 0;
  bool all_y = true;
  ExecCallbacks cb;
  cb.on_stdout = [&](std::string_view s) {
    for (size_t i = 0; i < s.size(); ++i) all_y &= s[i] == ((got + i) % 2 ? '\n' : 'y');
    got += s.size();
  };
  auto r = rt().Exec(id, req, cb);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->stdout_truncated);
  EXPECT_FALSE(r->stderr_truncated);
  EXPECT_EQ(got, kCap);
  EXPECT_TRUE(all_y);
  EXPECT_FALSE(r->timed_out) << "closing the pipe did not stop the flood";
  // yes dies of SIGPIPE (or exits with a write error) once the pipe is closed.
  EXPECT_TRUE(r->signal == SIGPIPE || (r->signal == 0 && r->exit_code != 0))
      << "signal " << r->signal << " exit " << r->exit_code;
}

TEST_F(RuntimeLimitsTest, StderrFloodIsCappedIndependently) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  constexpr uint64_t kCap = 64 << 10;
  ExecRequest req;
  req.shell = "echo to-stdout; exec cat /dev/zero >&2";
  req.timeout = 20s;
  req.output_cap_bytes = kCap;
  std::string out;
  uint64_t err_bytes = 0;
  ExecCallbacks cb;
  cb.on_stdout = [&](std::string_view s) { out.append(s); };
  cb.on_stderr = [&](std::string_view s) { err_bytes += s.size(); };
  auto r = rt().Exec(id, req, cb);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->stderr_truncated);
  EXPECT_FALSE(r->stdout_truncated);
  EXPECT_EQ(err_bytes, kCap);
  EXPECT_EQ(out, "to-stdout\n");
  EXPECT_FALSE(r->timed_out);
}

TEST_F(RuntimeLimitsTest, OutputExactlyAtTheCapIsNotTruncated) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  constexpr uint64_t kCap = 256 << 10;
  ExecRequest req;
  req.argv = {"head", "-c", std::to_string(kCap), "/dev/zero"};
  req.timeout = 20s;
  req.output_cap_bytes = kCap;
  uint64_t got = 0;
  ExecCallbacks cb;
  cb.on_stdout = [&](std::string_view s) { got += s.size(); };
  auto r = rt().Exec(id, req, cb);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(got, kCap);
  EXPECT_FALSE(r->stdout_truncated);
  EXPECT_EQ(r->exit_code, 0);

  req.argv = {"head", "-c", std::to_string(kCap + 1), "/dev/zero"};
  got = 0;
  r = rt().Exec(id, req, cb);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(got, kCap);
  EXPECT_TRUE(r->stdout_truncated);

  req.output_cap_bytes = 0;
  EXPECT_EQ(rt().Exec(id, req, cb).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RuntimeLimitsTest, CpuQuotaBoundsCpuTime) {
  auto spec = DefaultSpec();
  spec.limits.cpus = 0.5;
  std::string id = NewSandbox(spec);
  ASSERT_FALSE(id.empty());
  // Two busy processes for 2 s of wall time: without a quota they could use up to 4 CPU-s on
  // this 2-core host; with cpus=0.5 the sandbox gets about 1 CPU-s. The bound is generous: it
  // only separates "limited" from "not limited".
  CommandOutput o = Sh(id, "while :; do :; done & while :; do :; done", 2s);
  EXPECT_TRUE(o.result.timed_out);
  auto usage = rt().Usage(id);
  ASSERT_TRUE(usage.ok());
  EXPECT_GT(usage->cpu_seconds, 0.1) << "the busy loops never ran";
  EXPECT_LT(usage->cpu_seconds, 1.6) << "cpus=0.5 did not limit CPU time";
}

TEST_F(RuntimeLimitsTest, OpenFilesLimitApplies) {
  auto spec = DefaultSpec();
  spec.limits.open_files = 64;
  std::string id = NewSandbox(spec);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Sh(id, "ulimit -n; ulimit -Hn").out, "64\n64\n");
  // And it cannot be raised from inside, not even by root.
  CommandOutput o = Sh(id, "ulimit -n 4096", 30s, "root");
  EXPECT_NE(o.result.exit_code, 0);
}

}  // namespace
}  // namespace paddock::testing
