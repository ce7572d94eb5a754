// bench_api: what the REST API adds on top of the runtime, measured in one run.
//
//   api_warm_roundtrip_p50_ms   lease a ready sandbox + exec /bin/true + release (keep), through
//                               the REST API with one keep-alive client, default configuration
//   runtime_warm_exec_p50_ms    exec /bin/true on a sandbox through the Runtime interface, in
//                               this process (the floor the API builds on)
//   api_overhead_p50_ms         the difference (target <= 1 ms)
//   api_overhead_fsync_p50_ms   the same with registry.fsync_lifecycle: true (every lifecycle
//                               write fsynced), from a second daemon
//   concurrent50_create_exec_p50_ms / _p99_ms
//                               50 clients at once, each: create + lease + exec, served by the
//                               class's warm pool (reference: CubeSandbox publishes p99 137 ms
//                               at 50 concurrent creates; target p99 <= 100 ms)
//   concurrent50_cold_create_exec_p50_ms / _p99_ms
//                               the same for a class without a pool: 50 cold creates at once
//   exec_per_s                  sustained exec throughput (8 clients, one sandbox each, 5 s)
//
// The three single-client series are interleaved (API, API with fsync, runtime, API, ...) so
// that drift in the machine's speed during the run hits all of them alike.
//
// Usage: bench_api --out FILE [--iterations N]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "../common/stats.h"
#include "runtime/linux/linux_runtime.h"
#include "support/daemon_process.h"
#include "support/json_api.h"
#include "support/runtime_fixture.h"

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using paddock::bench::Percentile;
using paddock::bench::Summary;
using paddock::testing::ApiReply;
using paddock::testing::DaemonProcess;
using paddock::testing::JsonApi;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

constexpr int kConcurrent = 50;

// "small" has a warm pool big enough for the concurrent phase; "cold" is the same size without
// one. The background pass interval is long so it does not run during measurements.
std::string BenchConfig(bool fsync_lifecycle) {
  return paddock::testing::SmallClassConfig("128MiB", "") + R"(  - name: cold
    cpus: 1
    memory: 128MiB
    disk: 32MiB
    pids: 64
    tmp: 16MiB
pools:
  - class: small
    min: 50
    max: 50
    buffer: 50
lifecycle:
  reconcile_interval: 1h
registry:
  fsync_lifecycle: )" +
         std::string(fsync_lifecycle ? "true" : "false") + "\n";
}

// Daemons to stop when the benchmark dies: exit() runs no destructors, and an orphaned
// paddockd would keep its sandboxes (and this process's output pipe) alive.
std::mutex g_daemons_mu;
std::vector<DaemonProcess*> g_daemons;

[[noreturn]] void Die(const std::string& what) {
  fprintf(stderr, "bench_api: %s\n", what.c_str());
  {
    std::lock_guard lock(g_daemons_mu);
    for (DaemonProcess* d : g_daemons) d->Stop();
  }
  std::exit(1);
}

json Expect(JsonApi& api, const char* method, const std::string& target, const json& body,
            int64_t lease, int status) {
  ApiReply r = api.Call(method, target, body, lease);
  if (r.status != status)
    Die(std::string(method) + " " + target + " -> " + std::to_string(r.status) + " " + r.raw);
  return r.body;
}

struct Daemon {
  DaemonProcess process;
  std::string tenant_key;

  explicit Daemon(bool fsync_lifecycle) : process(BenchConfig(fsync_lifecycle)) {
    {
      std::lock_guard lock(g_daemons_mu);
      g_daemons.push_back(&process);
    }
    std::string err;
    if (!process.Start(&err)) Die("paddockd did not start: " + err);
    JsonApi admin(process.port(), process.admin_key());
    tenant_key = Expect(admin, "POST", "/v1/tenants", {{"name", "bench"}}, 0, 201)["api_key"]
                     .get<std::string>();
  }
  ~Daemon() {
    std::lock_guard lock(g_daemons_mu);
    std::erase(g_daemons, &process);
  }
  int Warm() {
    JsonApi api(process.port(), tenant_key);
    json pools = Expect(api, "GET", "/v1/pools", nullptr, 0, 200);
    for (const auto& p : pools["items"])
      if (p["class"] == "small") return p["warm"].get<int>();
    Die("no pool 'small' in " + pools.dump());
  }
  void WaitForFullPool() {
    if (!paddock::testing::Eventually([&] { return Warm() == kConcurrent; },
                                      std::chrono::minutes(3)))
      Die("the warm pool did not fill: " + std::to_string(Warm()));
  }
};

// One lease + exec + release round trip on a kept sandbox; returns the three durations.
struct RoundTrip {
  double lease, exec, release;
  double total() const { return lease + exec + release; }
};
RoundTrip LeaseExecRelease(JsonApi& api, const std::string& id) {
  auto t0 = Clock::now();
  int64_t v = Expect(api, "POST", "/v1/sandboxes/" + id + "/lease", {{"owner", "bench"}}, 0,
                     201)["lease_version"];
  auto t1 = Clock::now();
  Expect(api, "POST", "/v1/sandboxes/" + id + "/exec", {{"argv", {"/bin/true"}}}, v, 200);
  auto t2 = Clock::now();
  Expect(api, "POST", "/v1/sandboxes/" + id + "/lease/release",
         {{"lease_version", v}, {"recycle", "keep"}}, 0, 200);
  auto t3 = Clock::now();
  return {Ms(t1 - t0), Ms(t2 - t1), Ms(t3 - t2)};
}

// kConcurrent clients at once, each creating a sandbox of `cls`, leasing it and running one
// command; returns each client's latency. The sandboxes are destroyed afterwards.
std::vector<double> ConcurrentCreateExec(Daemon& d, const std::string& cls) {
  std::vector<double> latency(kConcurrent);
  std::vector<std::string> ids(kConcurrent);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  for (int i = 0; i < kConcurrent; ++i) {
    threads.emplace_back([&, i] {
      JsonApi c(d.process.port(), d.tenant_key);
      // Connect first: the measurement is of the API, not of 50 TCP handshakes at once.
      Expect(c, "GET", "/v1/classes", nullptr, 0, 200);
      ++ready;
      while (!go) std::this_thread::yield();
      auto t0 = Clock::now();
      ids[i] = Expect(c, "POST", "/v1/sandboxes", {{"class", cls}}, 0, 201)["id"];
      int64_t v = Expect(c, "POST", "/v1/sandboxes/" + ids[i] + "/lease", {{"owner", "c"}}, 0,
                         201)["lease_version"];
      Expect(c, "POST", "/v1/sandboxes/" + ids[i] + "/exec", {{"argv", {"/bin/true"}}}, v, 200);
      latency[i] = Ms(Clock::now() - t0);
    });
  }
  while (ready < kConcurrent) std::this_thread::yield();
  go = true;
  for (auto& th : threads) th.join();
  JsonApi c(d.process.port(), d.tenant_key);
  for (const auto& id : ids) Expect(c, "DELETE", "/v1/sandboxes/" + id, nullptr, 0, 204);
  return latency;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  int iterations = 300;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc)
      out_path = argv[++i];
    else if (a == "--iterations" && i + 1 < argc)
      iterations = std::stoi(argv[++i]);
  }
  if (geteuid() != 0) Die("must run as root");

  Daemon d(false), fsync(true);
  d.WaitForFullPool();
  fsync.WaitForFullPool();

  // --- single client: API (default), API (fsync), runtime floor, interleaved ------------------
  JsonApi api(d.process.port(), d.tenant_key);
  JsonApi api_fsync(fsync.process.port(), fsync.tenant_key);
  const std::string id = Expect(api, "POST", "/v1/sandboxes", {{"class", "cold"}}, 0, 201)["id"];
  const std::string id_fsync =
      Expect(api_fsync, "POST", "/v1/sandboxes", {{"class", "cold"}}, 0, 201)["id"];
  paddock::runtime::linux::LinuxRuntimeOptions opts;
  opts.template_dir = paddock::testing::TestDataDir() + "/templates";
  auto rt = paddock::runtime::linux::LinuxRuntime::Open(opts);
  if (!rt.ok()) Die(rt.status().ToString());
  paddock::runtime::SandboxSpec spec;
  spec.limits.memory_bytes = 128ull << 20;
  spec.limits.disk_bytes = 32ull << 20;
  auto sb = (*rt)->Create(spec);
  if (!sb.ok()) Die(sb.status().ToString());
  paddock::runtime::ExecRequest true_req;
  true_req.argv = {"/bin/true"};

  std::vector<double> roundtrip, lease_ms, exec_ms, release_ms, roundtrip_fsync, runtime_exec;
  for (int i = 0; i < iterations + 10; ++i) {
    RoundTrip a = LeaseExecRelease(api, id);
    RoundTrip b = LeaseExecRelease(api_fsync, id_fsync);
    auto t0 = Clock::now();
    if (!(*rt)->Exec(sb->id, true_req, {}).ok()) Die("runtime exec failed");
    const double floor = Ms(Clock::now() - t0);
    if (i < 10) continue;  // warm-up
    roundtrip.push_back(a.total());
    lease_ms.push_back(a.lease);
    exec_ms.push_back(a.exec);
    release_ms.push_back(a.release);
    roundtrip_fsync.push_back(b.total());
    runtime_exec.push_back(floor);
  }
  (void)(*rt)->Destroy(sb->id);
  Expect(api_fsync, "DELETE", "/v1/sandboxes/" + id_fsync, nullptr, 0, 204);
  fsync.process.Stop();

  // --- 50 concurrent create + lease + exec: warm pool, then cold ------------------------------
  const std::vector<double> concurrent = ConcurrentCreateExec(d, "small");
  d.WaitForFullPool();  // the refill would compete with the cold creates
  const std::vector<double> concurrent_cold = ConcurrentCreateExec(d, "cold");

  // --- sustained exec throughput --------------------------------------------------------------
  std::atomic<int64_t> execs{0};
  const auto window = std::chrono::seconds(5);
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&] {
        JsonApi c(d.process.port(), d.tenant_key);
        std::string sid = Expect(c, "POST", "/v1/sandboxes", {{"class", "cold"}}, 0, 201)["id"];
        int64_t v = Expect(c, "POST", "/v1/sandboxes/" + sid + "/lease", {{"owner", "t"}}, 0,
                           201)["lease_version"];
        const auto end = Clock::now() + window;
        while (Clock::now() < end) {
          Expect(c, "POST", "/v1/sandboxes/" + sid + "/exec", {{"argv", {"/bin/true"}}}, v, 200);
          ++execs;
        }
        Expect(c, "DELETE", "/v1/sandboxes/" + sid, nullptr, 0, 204);
      });
    }
    for (auto& th : threads) th.join();
  }
  Expect(api, "DELETE", "/v1/sandboxes/" + id, nullptr, 0, 204);

  json r;
  r["benchmark"] = "api";
  r["iterations"] = iterations;
  r["api_warm_roundtrip_p50_ms"] = Percentile(roundtrip, 50);
  r["api_warm_roundtrip_p95_ms"] = Percentile(roundtrip, 95);
  r["runtime_warm_exec_p50_ms"] = Percentile(runtime_exec, 50);
  r["api_overhead_p50_ms"] = Percentile(roundtrip, 50) - Percentile(runtime_exec, 50);
  r["api_overhead_fsync_p50_ms"] = Percentile(roundtrip_fsync, 50) - Percentile(runtime_exec, 50);
  r["api_lease_p50_ms"] = Percentile(lease_ms, 50);
  r["api_exec_p50_ms"] = Percentile(exec_ms, 50);
  r["api_release_p50_ms"] = Percentile(release_ms, 50);
  r["api_exec_overhead_p50_ms"] = Percentile(exec_ms, 50) - Percentile(runtime_exec, 50);
  r["concurrent50_create_exec_p50_ms"] = Percentile(concurrent, 50);
  r["concurrent50_create_exec_p99_ms"] = Percentile(concurrent, 99);
  r["concurrent50_cold_create_exec_p50_ms"] = Percentile(concurrent_cold, 50);
  r["concurrent50_cold_create_exec_p99_ms"] = Percentile(concurrent_cold, 99);
  r["exec_per_s"] = static_cast<double>(execs.load()) / 5.0;
  r["samples"] = {{"roundtrip", Summary(roundtrip)},
                  {"roundtrip_fsync", Summary(roundtrip_fsync)},
                  {"runtime_exec", Summary(runtime_exec)},
                  {"concurrent50", Summary(concurrent)},
                  {"concurrent50_cold", Summary(concurrent_cold)}};
  auto row = [](const char* name, double v, const char* target, bool pass) {
    printf("  %-40s %10.3f  %-10s %s\n", name, v, target,
           target[0] ? (pass ? "PASS" : "MISS") : "");
  };
  printf("\nAPI benchmark (%d iterations)\n", iterations);
  row("api_warm_roundtrip_p50_ms", r["api_warm_roundtrip_p50_ms"], "", true);
  printf("  %-40s %.3f / %.3f / %.3f\n", "  lease / exec / release p50", Percentile(lease_ms, 50),
         Percentile(exec_ms, 50), Percentile(release_ms, 50));
  row("runtime_warm_exec_p50_ms", r["runtime_warm_exec_p50_ms"], "", true);
  double overhead = r["api_overhead_p50_ms"];
  row("api_overhead_p50_ms", overhead, "<= 1 ms", overhead <= 1.0);
  row("api_overhead_fsync_p50_ms", r["api_overhead_fsync_p50_ms"], "", true);
  row("api_exec_overhead_p50_ms (exec only)", r["api_exec_overhead_p50_ms"], "", true);
  double p99 = r["concurrent50_create_exec_p99_ms"];
  row("concurrent50_create_exec_p50_ms", r["concurrent50_create_exec_p50_ms"], "", true);
  row("concurrent50_create_exec_p99_ms", p99, "<= 100 ms", p99 <= 100.0);
  row("concurrent50_cold_create_exec_p50_ms", r["concurrent50_cold_create_exec_p50_ms"], "", true);
  row("concurrent50_cold_create_exec_p99_ms", r["concurrent50_cold_create_exec_p99_ms"], "", true);
  row("exec_per_s", r["exec_per_s"], "", true);
  if (!out_path.empty()) std::ofstream(out_path) << r.dump(2) << "\n";
  return 0;
}
