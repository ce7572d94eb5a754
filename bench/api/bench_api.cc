// bench_api: what the REST API adds on top of the runtime, measured in one run.
//
//   api_warm_roundtrip_p50_ms   lease a ready sandbox + exec /bin/true + release (keep), through
//                               the REST API with one keep-alive client
//   runtime_warm_exec_p50_ms    exec /bin/true on a sandbox through the Runtime interface, in
//                               this process (the floor the API builds on)
//   api_overhead_p50_ms         the difference (target <= 1 ms)
//   concurrent50_create_exec_p50_ms / _p99_ms
//                               50 clients at once, each: create + lease + exec (reference:
//                               CubeSandbox publishes p99 137 ms at 50 concurrent creates)
//   exec_per_s                  sustained exec throughput (8 clients, one sandbox each, 5 s)
//
// Usage: bench_api --out FILE [--iterations N]
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "../common/stats.h"
#include "api/http_client.h"
#include "common/random.h"
#include "runtime/linux/linux_runtime.h"

extern char** environ;

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using paddock::bench::Percentile;
using paddock::bench::Summary;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

constexpr const char* kConfig = R"(
resource_classes:
  - name: small
    cpus: 1
    memory: 256MiB
    disk: 64MiB
    pids: 128
    tmp: 32MiB
pools: []
)";

struct Daemon {
  pid_t pid = -1;
  uint16_t port = 0;
  std::string key, dir;

  bool Start(const std::string& exe_dir) {
    dir = exe_dir + "/bench-data/api-" + paddock::RandomHex(4);
    std::filesystem::create_directories(dir);
    std::filesystem::create_directories(exe_dir + "/test-data/templates");
    std::filesystem::create_directory_symlink(exe_dir + "/test-data/templates", dir + "/templates");
    std::ofstream(dir + "/paddock.yaml") << kConfig;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return false;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    std::string bin = exe_dir + "/paddockd";
    std::vector<std::string> args = {bin,        "--data-dir",          dir,      "serve",
                                     "--config", dir + "/paddock.yaml", "--port", "0"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc != 0) return false;
    std::string out;
    static const std::regex kListen("listening on http://[^:]+:([0-9]+)");
    static const std::regex kKey("(pdk_[0-9a-f]+)");
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      pollfd pfd{p[0], POLLIN, 0};
      if (poll(&pfd, 1, 200) <= 0) continue;
      char buf[4096];
      ssize_t n = read(p[0], buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
      std::smatch m;
      if (std::regex_search(out, m, kKey)) key = m[1];
      if (std::regex_search(out, m, kListen)) {
        port = static_cast<uint16_t>(std::stoi(m[1]));
        close(p[0]);
        return true;
      }
    }
    close(p[0]);
    return false;
  }
  ~Daemon() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

struct Api {
  paddock::api::HttpClient client;
  std::string key;
  Api(uint16_t port, std::string k) : client("127.0.0.1", port), key(std::move(k)) {}
  json Call(const std::string& method, const std::string& target, const json& body,
            int64_t lease = 0, int expect = 200) {
    paddock::api::Headers h;
    h.Set("Authorization", "Bearer " + key);
    if (lease) h.Set("Paddock-Lease-Version", std::to_string(lease));
    auto r = client.Request(method, target, body.dump(), h);
    if (!r.ok() || r->status != expect) {
      fprintf(stderr, "bench_api: %s %s -> %s\n", method.c_str(), target.c_str(),
              r.ok() ? (std::to_string(r->status) + " " + r->body).c_str()
                     : r.status().ToString().c_str());
      std::exit(1);
    }
    return json::parse(r->body, nullptr, false);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  int iterations = 200;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc)
      out_path = argv[++i];
    else if (a == "--iterations" && i + 1 < argc)
      iterations = std::stoi(argv[++i]);
  }
  if (geteuid() != 0) {
    fprintf(stderr, "bench_api: must run as root\n");
    return 1;
  }
  const std::string exe_dir =
      std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  Daemon d;
  if (!d.Start(exe_dir)) {
    fprintf(stderr, "bench_api: paddockd did not start\n");
    return 1;
  }
  Api admin(d.port, d.key);
  json t = admin.Call("POST", "/v1/tenants", {{"name", "bench"}}, 0, 201);
  const std::string key = t["api_key"];

  // --- API warm round trip -------------------------------------------------------------------
  Api api(d.port, key);
  const std::string id = api.Call("POST", "/v1/sandboxes", json::object(), 0, 201)["id"];
  std::vector<double> roundtrip, lease_ms, exec_ms, release_ms;
  for (int i = 0; i < iterations + 10; ++i) {
    auto t0 = Clock::now();
    int64_t v = api.Call("POST", "/v1/sandboxes/" + id + "/lease", {{"owner", "bench"}}, 0,
                         201)["lease_version"];
    auto t1 = Clock::now();
    api.Call("POST", "/v1/sandboxes/" + id + "/exec", {{"argv", {"/bin/true"}}}, v);
    auto t2 = Clock::now();
    api.Call("POST", "/v1/sandboxes/" + id + "/lease/release",
             {{"lease_version", v}, {"recycle", "keep"}});
    auto t3 = Clock::now();
    if (i < 10) continue;  // warm-up
    roundtrip.push_back(Ms(t3 - t0));
    lease_ms.push_back(Ms(t1 - t0));
    exec_ms.push_back(Ms(t2 - t1));
    release_ms.push_back(Ms(t3 - t2));
  }

  // --- the runtime floor, same machine, same moment -------------------------------------------
  std::vector<double> runtime_exec;
  {
    paddock::runtime::linux::LinuxRuntimeOptions opts;
    opts.template_dir = exe_dir + "/test-data/templates";
    auto rt = paddock::runtime::linux::LinuxRuntime::Open(opts);
    if (!rt.ok()) {
      fprintf(stderr, "bench_api: %s\n", rt.status().ToString().c_str());
      return 1;
    }
    paddock::runtime::SandboxSpec spec;
    spec.limits.memory_bytes = 256ull << 20;
    spec.limits.disk_bytes = 64ull << 20;
    auto sb = (*rt)->Create(spec);
    if (!sb.ok()) return 1;
    paddock::runtime::ExecRequest req;
    req.argv = {"/bin/true"};
    for (int i = 0; i < iterations + 10; ++i) {
      auto t0 = Clock::now();
      auto r = (*rt)->Exec(sb->id, req, {});
      if (!r.ok()) return 1;
      if (i >= 10) runtime_exec.push_back(Ms(Clock::now() - t0));
    }
    (void)(*rt)->Destroy(sb->id);
  }

  // --- 50 concurrent create + lease + exec ----------------------------------------------------
  std::vector<double> concurrent(50);
  {
    std::vector<std::thread> threads;
    std::atomic<bool> go{false};
    for (int i = 0; i < 50; ++i) {
      threads.emplace_back([&, i] {
        Api c(d.port, key);
        while (!go) std::this_thread::yield();
        auto t0 = Clock::now();
        std::string sid = c.Call("POST", "/v1/sandboxes", json::object(), 0, 201)["id"];
        int64_t v = c.Call("POST", "/v1/sandboxes/" + sid + "/lease", {{"owner", "c"}}, 0,
                           201)["lease_version"];
        c.Call("POST", "/v1/sandboxes/" + sid + "/exec", {{"argv", {"/bin/true"}}}, v);
        concurrent[i] = Ms(Clock::now() - t0);
        c.Call("DELETE", "/v1/sandboxes/" + sid, nullptr, 0, 204);
      });
    }
    go = true;
    for (auto& th : threads) th.join();
  }

  // --- sustained exec throughput --------------------------------------------------------------
  std::atomic<int64_t> execs{0};
  const auto window = std::chrono::seconds(5);
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&] {
        Api c(d.port, key);
        std::string sid = c.Call("POST", "/v1/sandboxes", json::object(), 0, 201)["id"];
        int64_t v = c.Call("POST", "/v1/sandboxes/" + sid + "/lease", {{"owner", "t"}}, 0,
                           201)["lease_version"];
        const auto end = Clock::now() + window;
        while (Clock::now() < end) {
          c.Call("POST", "/v1/sandboxes/" + sid + "/exec", {{"argv", {"/bin/true"}}}, v);
          ++execs;
        }
        c.Call("DELETE", "/v1/sandboxes/" + sid, nullptr, 0, 204);
      });
    }
    for (auto& th : threads) th.join();
  }
  api.Call("DELETE", "/v1/sandboxes/" + id, nullptr, 0, 204);

  json r;
  r["benchmark"] = "api";
  r["api_warm_roundtrip_p50_ms"] = Percentile(roundtrip, 50);
  r["api_warm_roundtrip_p95_ms"] = Percentile(roundtrip, 95);
  r["runtime_warm_exec_p50_ms"] = Percentile(runtime_exec, 50);
  r["api_overhead_p50_ms"] = Percentile(roundtrip, 50) - Percentile(runtime_exec, 50);
  r["api_lease_p50_ms"] = Percentile(lease_ms, 50);
  r["api_exec_p50_ms"] = Percentile(exec_ms, 50);
  r["api_release_p50_ms"] = Percentile(release_ms, 50);
  r["api_exec_overhead_p50_ms"] = Percentile(exec_ms, 50) - Percentile(runtime_exec, 50);
  r["concurrent50_create_exec_p50_ms"] = Percentile(concurrent, 50);
  r["concurrent50_create_exec_p99_ms"] = Percentile(concurrent, 99);
  r["exec_per_s"] = static_cast<double>(execs.load()) / 5.0;
  r["samples"] = {{"roundtrip", Summary(roundtrip)},
                  {"runtime_exec", Summary(runtime_exec)},
                  {"concurrent50", Summary(concurrent)}};
  auto row = [](const char* name, double v, const char* target, bool pass) {
    printf("  %-36s %10.3f  %-10s %s\n", name, v, target,
           target[0] ? (pass ? "PASS" : "MISS") : "");
  };
  printf("\nAPI benchmark (%d iterations)\n", iterations);
  row("api_warm_roundtrip_p50_ms", r["api_warm_roundtrip_p50_ms"], "", true);
  printf("  %-36s %.3f / %.3f / %.3f\n", "  lease / exec / release p50", Percentile(lease_ms, 50),
         Percentile(exec_ms, 50), Percentile(release_ms, 50));
  row("runtime_warm_exec_p50_ms", r["runtime_warm_exec_p50_ms"], "", true);
  double overhead = r["api_overhead_p50_ms"];
  row("api_overhead_p50_ms", overhead, "<= 1 ms", overhead <= 1.0);
  row("api_exec_overhead_p50_ms (exec only)", r["api_exec_overhead_p50_ms"], "", true);
  double p99 = r["concurrent50_create_exec_p99_ms"];
  row("concurrent50_create_exec_p50_ms", r["concurrent50_create_exec_p50_ms"], "", true);
  row("concurrent50_create_exec_p99_ms", p99, "<= 100 ms", p99 <= 100.0);
  row("exec_per_s", r["exec_per_s"], "", true);
  if (!out_path.empty()) std::ofstream(out_path) << r.dump(2) << "\n";
  return 0;
}
