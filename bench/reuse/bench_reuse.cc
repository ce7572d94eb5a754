// bench_reuse: what a session's reuse machinery costs and saves, measured in one run against a
// real paddockd (loopback, temporary data dir, one class "session": 1 CPU, 512 MiB memory,
// 256 MiB disk, no warm pools, planner skipped by naming the class in every run).
//
//   cold_create_p50_ms     POST /v1/sandboxes {"class": "session"}: a cold create (no pool can
//                          serve it), template only. The route cannot add the binds or layers a
//                          session sandbox gets; that is the difference to the fork below.
//   cold_destroy_p50_ms    DELETE /v1/sandboxes/{id} of that sandbox
//   fork_p50_ms            POST /v1/sessions/{id}/fork {"checkpoint_id"}: a new Ready sandbox
//                          stacked on the session's post-install checkpoint (one layer) with the
//                          workspace and cache binds; the call also destroys the session's
//                          previous sandbox
//   fork_vs_cold           fork_p50 / cold_create_p50; fork_vs_cold_create_destroy compares with
//                          (create + destroy) p50, like for like
//   checkpoint_p50_ms      Runtime::Checkpoint(id, dest) in this process (the API has no
//                          "checkpoint now" route and runs do not report its time) of a sandbox
//                          whose writable layer holds --checkpoint-mib MiB written from
//                          /dev/urandom by dd inside (1 MiB files); each to a new dest dir on
//                          the daemon's data-dir filesystem, deleted afterwards (untimed)
//   cp_sync_p50_ms         the physical floor: `cp -a` of the same layout from a host tmpfs
//                          (/dev/shm) to the same filesystem, then `sync -f` (Checkpoint ends
//                          with syncfs too); checkpoint_vs_cp = checkpoint_p50 / cp_sync_p50
//   raw_copy_sync_p50_ms   the bare copy: the same files sent with sendfile(2) into a new dir in
//                          this process, then syncfs; checkpoint_vs_raw_copy is what the
//                          checkpoint's checks, metadata work and freeze/thaw add
//   reuse_run_p50_ms       POST /v1/sessions/{id}/runs in a session whose first run installed a
//                          local wheel: requires {"python": ["benchkit"]}, imports it; served
//                          by reuse (result.reuse.action == "reuse" is checked)
//   recreate_and_reinstall_run_p50_ms
//                          the same run in a NEW session each time: new sandbox, clean-base
//                          checkpoint, offline pip install of the wheel, import, post-install
//                          checkpoint — what a turn costs without reuse. Creating the session
//                          and staging the wheel into its workspace are not timed.
//
// The series of each phase are interleaved (cold, fork, cold, ...; checkpoint, cp and the raw
// copy rotate which goes first; reuse and recreate alternate) so drift in the machine's speed
// hits all sides alike. Two untimed warm-up rounds come first in every phase. At the end every
// session is closed with purge and the run's sandbox ids are looked for in the daemon, its
// session storage and the host's cgroups and mounts; scripts/check-leftovers (host-wide) runs
// too and its verdict is recorded.
//
// Usage: bench_reuse --out FILE [--iterations N] [--checkpoint-mib N]
// Exit status: 0 when the run completed; 1 on an error or anything left behind; 2 on bad flags.
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../common/stats.h"
#include "runtime/linux/linux_runtime.h"
#include "support/child_process.h"
#include "support/daemon_process.h"
#include "support/json_api.h"
#include "support/runtime_fixture.h"

#ifndef PADDOCK_SOURCE_DIR
#define PADDOCK_SOURCE_DIR "."
#endif

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using paddock::bench::Percentile;
using paddock::bench::Summary;
using paddock::testing::ApiReply;
using paddock::testing::CliResult;
using paddock::testing::DaemonProcess;
using paddock::testing::JsonApi;
using paddock::testing::RunChild;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

constexpr int kWarmup = 2;
constexpr int kModules = 48;  // benchkit's modules, ~9 KiB of source each
const std::string kPackage = "benchkit";
const std::string kVersion = "1.0";
const std::string kClass = "session";

constexpr const char* kConfig = R"(resource_classes:
  - name: session
    cpus: 1
    memory: 512MiB
    disk: 256MiB
    pids: 128
    tmp: 64MiB
lifecycle:
  reconcile_interval: 1h
)";

// Writes <out>/<name>-<version>-py3-none-any.whl: a package of `modules` generated modules (real
// functions, so pip byte-compiles them and an import executes them), imported by __init__.
constexpr const char* kWheelBuilder = R"PY(
import base64, hashlib, sys, zipfile
out, name, version, modules = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
dist = f"{name}-{version}.dist-info"
files = {}
for i in range(modules):
    lines = [f'"""{name} module {i}: generated code for the reuse benchmark."""', "import math", ""]
    for j in range(60):
        lines += [f"def f_{j}(x, scale={j + 1}):",
                  f"    '''Return a transformed value ({i}.{j}).'''",
                  f"    y = x * scale + {i * 7 + j}",
                  f"    return math.sqrt(abs(y)) + y % {j + 3}",
                  ""]
    lines.append("def value():")
    lines.append("    return sum(f(1.5) for f in (" + ", ".join(f"f_{j}" for j in range(60)) + "))")
    files[f"{name}/mod_{i:02d}.py"] = "\n".join(lines) + "\n"
init = [f"VERSION = '{version}'"]
init += [f"from . import mod_{i:02d}" for i in range(modules)]
init.append("MODULES = [" + ", ".join(f"mod_{i:02d}" for i in range(modules)) + "]")
init.append("def total():\n    return sum(m.value() for m in MODULES)")
files[f"{name}/__init__.py"] = "\n".join(init) + "\n"
files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
files[f"{dist}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: paddock-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
record = []
with zipfile.ZipFile(f"{out}/{name}-{version}-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
    for path, text in files.items():
        z.writestr(path, text)
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
print(sum(len(t.encode()) for p, t in files.items() if p.startswith(name + "/")))
)PY";

std::string PipInstall() {
  return "python3 -m pip install --quiet --user --break-system-packages --no-index "
         "--find-links /workspace/pkgs '" +
         kPackage + "==" + kVersion + "'";
}
std::string ImportCommand() {
  return "python3 -c 'import " + kPackage + " as k; print(len(k.MODULES), round(k.total()))'";
}

// Everything to undo when the benchmark stops early: exit() runs no destructors.
struct Cleanup {
  DaemonProcess* daemon = nullptr;
  std::string tenant_key;
  paddock::runtime::linux::LinuxRuntime* rt = nullptr;
  std::string sandbox_id;  // the checkpoint phase's sandbox
  std::vector<std::string> dirs;
} g_cleanup;

// Every sandbox id this run created (daemon and in-process), to look for on the host at the end.
std::set<std::string> g_ids;

// This run's sandboxes still visible on the host: cgroup directories (v1 controllers and the
// unified tree), mounts and paddock-init processes' cgroups naming one of them.
std::vector<std::string> HostLeftovers() {
  std::vector<std::string> out;
  std::error_code ec;
  auto scan = [&](const fs::path& dir) {
    std::error_code ec2;
    for (const auto& e : fs::directory_iterator(dir, ec2)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("paddock-", 0) == 0 && g_ids.count(name.substr(8)))
        out.push_back(e.path().string());
    }
  };
  scan("/sys/fs/cgroup");
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    if (h.is_directory(ec)) scan(h.path());
  }
  std::ifstream mounts("/proc/mounts");
  for (std::string line; std::getline(mounts, line);) {
    for (const std::string& id : g_ids) {
      if (line.find(id) != std::string::npos) out.push_back("mount: " + line);
    }
  }
  return out;
}

// Closes (with purge) every session and deletes every sandbox of the tenant; returns what it
// could not. Raw calls: it also runs on the failure path.
std::vector<std::string> CleanDaemon() {
  std::vector<std::string> problems;
  if (!g_cleanup.daemon || g_cleanup.tenant_key.empty()) return problems;
  JsonApi api(g_cleanup.daemon->port(), g_cleanup.tenant_key);
  ApiReply sessions = api.Call("GET", "/v1/sessions?limit=1000");
  if (sessions.status == 200) {
    for (const auto& s : sessions.body["items"]) {
      if (s.value("state", "") != "active") continue;
      const std::string id = s.value("id", "");
      ApiReply r = api.Call("DELETE", "/v1/sessions/" + id + "?purge=1");
      if (r.status != 200) problems.push_back("close session " + id + ": " + r.raw);
    }
  } else {
    problems.push_back("list sessions: " + sessions.raw);
  }
  ApiReply sandboxes = api.Call("GET", "/v1/sandboxes?limit=1000");
  if (sandboxes.status == 200) {
    for (const auto& s : sandboxes.body["items"]) {
      const std::string id = s.value("id", "");
      ApiReply r = api.Call("DELETE", "/v1/sandboxes/" + id);
      if (r.status != 204) problems.push_back("delete sandbox " + id + ": " + r.raw);
    }
  } else {
    problems.push_back("list sandboxes: " + sandboxes.raw);
  }
  return problems;
}

void CleanHost() {
  if (g_cleanup.rt && !g_cleanup.sandbox_id.empty()) {
    (void)g_cleanup.rt->Destroy(g_cleanup.sandbox_id);
    g_cleanup.sandbox_id.clear();
  }
  for (const std::string& d : g_cleanup.dirs) {
    std::error_code ec;
    fs::remove_all(d, ec);
  }
}

[[noreturn]] void Die(const std::string& what) {
  fprintf(stderr, "bench_reuse: %s\n", what.c_str());
  (void)CleanDaemon();
  CleanHost();
  if (g_cleanup.daemon) {
    g_cleanup.daemon->Stop();
    std::error_code ec;
    fs::remove_all(g_cleanup.daemon->data_dir(), ec);
  }
  std::exit(1);
}

json Expect(JsonApi& api, const char* method, const std::string& target, const json& body,
            int status) {
  ApiReply r = api.Call(method, target, body);
  if (r.status != status)
    Die(std::string(method) + " " + target + " -> " + std::to_string(r.status) + " " + r.raw);
  return r.body;
}

// A timed API call; dies on an unexpected status.
json Timed(JsonApi& api, const char* method, const std::string& target, const json& body,
           int status, double* ms) {
  auto t0 = Clock::now();
  ApiReply r = api.Call(method, target, body);
  *ms = Ms(Clock::now() - t0);
  if (r.status != status)
    Die(std::string(method) + " " + target + " -> " + std::to_string(r.status) + " " + r.raw);
  return r.body;
}

void Run(const std::vector<std::string>& argv, const char* what) {
  CliResult r = RunChild(argv);
  if (r.status != 0)
    Die(std::string(what) + " failed (" + std::to_string(r.status) + "): " + r.err);
}

class Bench {
 public:
  Bench(DaemonProcess& d, std::string key, std::string wheel)
      : d_(d), api_(d.port(), key), wheel_(std::move(wheel)) {}

  JsonApi& api() { return api_; }

  // A session with the wheel in its workspace, as a user uploading files.
  std::string NewSession(const std::string& user) {
    const std::string sid = Expect(api_, "POST", "/v1/sessions", {{"user_id", user}}, 201)["id"];
    const std::string ws = d_.data_dir() + "/sessions/workspaces/" + sid;
    std::error_code ec;
    fs::create_directories(ws + "/pkgs", ec);
    const std::string dst = ws + "/pkgs/" + fs::path(wheel_).filename().string();
    if (ec || !fs::copy_file(wheel_, dst, ec)) Die("stage " + dst + ": " + ec.message());
    for (const std::string& p : {ws, ws + "/pkgs", dst}) {
      if (::lchown(p.c_str(), 1000, 1000) < 0) Die("chown " + p);
    }
    return sid;
  }

  void CloseSession(const std::string& sid) {
    Expect(api_, "DELETE", "/v1/sessions/" + sid + "?purge=1", nullptr, 200);
  }

  // POST /v1/sessions/{sid}/runs; checks the run succeeded, printed the expected output and took
  // the expected reuse action. Returns the run's result.
  json SessionRun(const std::string& sid, const std::vector<std::string>& commands,
                  const std::string& want_action, double* ms) {
    json body = {{"task", "use the benchkit package"},
                 {"class", kClass},
                 {"requires", {{"python", {kPackage}}}},
                 {"commands", commands}};
    json reply = Timed(api_, "POST", "/v1/sessions/" + sid + "/runs", body, 201, ms);
    const json& result = reply["result"];
    if (reply.value("state", "") != "succeeded")
      Die("run in " + sid + " did not succeed: " + reply.dump());
    const std::string action = result["reuse"].value("action", "");
    if (!want_action.empty() && action != want_action)
      Die("run in " + sid + ": reuse action " + action + ", expected " + want_action + ": " +
          result["reuse"].dump());
    const std::string out = result["commands"].back().value("stdout", "");
    if (out.rfind(std::to_string(kModules) + " ", 0) != 0)
      Die("run in " + sid + ": unexpected output '" + out + "'");
    g_ids.insert(result.value("sandbox_id", ""));
    return result;
  }

 private:
  DaemonProcess& d_;
  JsonApi api_;
  std::string wheel_;
};

// Wall seconds of the command at `index` of a run result, in ms.
double CommandMs(const json& result, size_t index) {
  return result["commands"].at(index).value("wall_seconds", 0.0) * 1000.0;
}

// The bare copy the checkpoint does, without its checks: every regular file of the flat
// directory `src` sent with sendfile(2) into a new directory `dest`, then syncfs.
void RawCopy(const std::string& src, const std::string& dest) {
  if (::mkdir(dest.c_str(), 0700) < 0) Die("mkdir " + dest);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(src, ec)) {
    const std::string from = e.path().string();
    const std::string to = dest + "/" + e.path().filename().string();
    int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
    int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    struct stat st {};
    if (in < 0 || out < 0 || ::fstat(in, &st) < 0) Die("raw copy " + from);
    off_t pos = 0;
    while (pos < st.st_size) {
      ssize_t n = ::sendfile(out, in, &pos, static_cast<size_t>(st.st_size - pos));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) Die("sendfile " + from);
    }
    ::close(in);
    ::close(out);
  }
  if (ec) Die("list " + src + ": " + ec.message());
  int d = ::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0 || ::syncfs(d) < 0) Die("syncfs " + dest);
  ::close(d);
}

double MiBps(uint64_t bytes, double ms) {
  return ms > 0 ? static_cast<double>(bytes) / (1 << 20) / (ms / 1000.0) : NAN;
}

std::string LoadAvg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string UtcNow() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

int Usage() {
  fprintf(stderr, "usage: bench_reuse --out FILE [--iterations N] [--checkpoint-mib N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  int iterations = 15;
  int checkpoint_mib = 100;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has = i + 1 < argc;
    if (a == "--out" && has) {
      out_path = argv[++i];
    } else if (a == "--iterations" && has) {
      iterations = std::atoi(argv[++i]);
    } else if (a == "--checkpoint-mib" && has) {
      checkpoint_mib = std::atoi(argv[++i]);
    } else {
      return Usage();
    }
  }
  if (iterations < 1 || checkpoint_mib < 1 || checkpoint_mib > 200) return Usage();
  if (geteuid() != 0) {
    fprintf(stderr, "bench_reuse: must run as root\n");
    return 1;
  }
  const auto started = Clock::now();
  const std::string load_start = LoadAvg();
  const std::string timestamp = UtcNow();

  // Scratch space on the data dir's filesystem (checkpoint and cp destinations, the wheel), and
  // the cp source on a host tmpfs like the sandbox's writable layer.
  const std::string work =
      paddock::testing::TestDataDir() + "/bench-reuse-" + std::to_string(getpid());
  const std::string shm = "/dev/shm/bench-reuse-" + std::to_string(getpid());
  g_cleanup.dirs = {work, shm};
  std::error_code ec;
  fs::create_directories(work, ec);
  if (ec) Die("create " + work + ": " + ec.message());

  // The package: built once, staged into every session's workspace.
  std::ofstream(work + "/mkwheel.py") << kWheelBuilder;
  CliResult built = RunChild({"/usr/bin/python3", work + "/mkwheel.py", work, kPackage, kVersion,
                              std::to_string(kModules)});
  if (built.status != 0) Die("wheel build failed: " + built.err);
  const std::string wheel = work + "/" + kPackage + "-" + kVersion + "-py3-none-any.whl";
  const uint64_t wheel_bytes = fs::file_size(wheel, ec);
  const uint64_t source_bytes = std::stoull(built.out);

  DaemonProcess daemon(kConfig);
  g_cleanup.daemon = &daemon;
  std::string err;
  if (!daemon.Start(&err)) Die("paddockd did not start: " + err);
  JsonApi admin(daemon.port(), daemon.admin_key());
  g_cleanup.tenant_key =
      Expect(admin, "POST", "/v1/tenants", {{"name", "bench"}}, 201)["api_key"].get<std::string>();
  Bench bench(daemon, g_cleanup.tenant_key, wheel);
  JsonApi& api = bench.api();
  fprintf(stderr,
          "bench_reuse: paddockd on port %u, %d iterations, wheel %llu bytes (%llu of source)\n",
          daemon.port(), iterations, static_cast<unsigned long long>(wheel_bytes),
          static_cast<unsigned long long>(source_bytes));

  // --- 1. cold create vs fork -----------------------------------------------------------------
  const std::string fork_session = bench.NewSession("bench-fork");
  double ms = 0;
  json first = bench.SessionRun(fork_session, {PipInstall(), ImportCommand()}, "new_sandbox", &ms);
  const std::string fork_checkpoint = first.value("checkpoint_id", "");
  if (fork_checkpoint.empty()) Die("the install run took no checkpoint: " + first.dump());
  json fork_layer;
  const json listing =
      Expect(api, "GET", "/v1/sessions/" + fork_session + "/checkpoints", nullptr, 200);
  for (const auto& c : listing["items"]) {
    if (c["id"] == fork_checkpoint)
      fork_layer = {{"files", c["files"]}, {"bytes", c["bytes"]}, {"layers", c["layer_count"]}};
  }
  std::vector<double> cold_create, cold_destroy, fork;
  for (int i = 0; i < iterations + kWarmup; ++i) {
    double c = 0, d = 0, f = 0;
    json sb = Timed(api, "POST", "/v1/sandboxes", {{"class", kClass}}, 201, &c);
    g_ids.insert(sb.value("id", ""));
    if (sb.value("state", "") != "ready") Die("cold create: not Ready: " + sb.dump());
    Timed(api, "DELETE", "/v1/sandboxes/" + sb["id"].get<std::string>(), nullptr, 204, &d);
    json forked = Timed(api, "POST", "/v1/sessions/" + fork_session + "/fork",
                        {{"checkpoint_id", fork_checkpoint}}, 201, &f);
    g_ids.insert(forked.value("id", ""));
    if (forked.value("state", "") != "ready") Die("fork: not Ready: " + forked.dump());
    if (i < kWarmup) continue;
    cold_create.push_back(c);
    cold_destroy.push_back(d);
    fork.push_back(f);
  }
  // The forked sandbox works and has the package (one run, untimed). Its reuse action is
  // recorded, not required: the fork route records the checkpoint's manifest as the new
  // sandbox's environment, whose fingerprint a live measurement of the fork does not reproduce
  // (see docs/benchmarks.md).
  const json after_fork = bench.SessionRun(fork_session, {ImportCommand()}, "", &ms)["reuse"];
  bench.CloseSession(fork_session);
  std::vector<double> cold_create_destroy;
  for (size_t i = 0; i < cold_create.size(); ++i)
    cold_create_destroy.push_back(cold_create[i] + cold_destroy[i]);
  fprintf(stderr, "bench_reuse: cold/fork done (%.0f s)\n",
          std::chrono::duration<double>(Clock::now() - started).count());

  // --- 2. checkpoint of a writable layer vs cp -a ---------------------------------------------
  paddock::runtime::linux::LinuxRuntimeOptions opts;
  opts.template_dir = paddock::testing::TestDataDir() + "/templates";
  auto rt = paddock::runtime::linux::LinuxRuntime::Open(opts);
  if (!rt.ok()) Die(rt.status().ToString());
  g_cleanup.rt = rt->get();
  paddock::runtime::SandboxSpec spec;
  spec.id = "pbreuse-" + std::to_string(getpid());
  spec.limits.cpus = 1;
  spec.limits.memory_bytes = 512ull << 20;
  spec.limits.disk_bytes = 256ull << 20;
  spec.limits.tmp_bytes = 64ull << 20;
  spec.limits.pids = 128;
  auto sb = (*rt)->Create(spec);
  if (!sb.ok()) Die("create: " + sb.status().ToString());
  g_cleanup.sandbox_id = sb->id;
  g_ids.insert(sb->id);
  const std::string fill = "mkdir -p data && i=0; while [ $i -lt " +
                           std::to_string(checkpoint_mib) +
                           " ]; do dd if=/dev/urandom of=data/f$i bs=1M count=1 status=none || "
                           "exit 1; i=$((i+1)); done";
  paddock::runtime::ExecRequest req;
  req.shell = "cd ~ && " + fill;
  req.timeout = std::chrono::seconds(120);
  std::string fill_err;
  paddock::runtime::ExecCallbacks cb;
  cb.on_stderr = [&](std::string_view s) { fill_err.append(s); };
  auto filled = (*rt)->Exec(sb->id, req, cb);
  if (!filled.ok()) Die("fill: " + filled.status().ToString());
  if (filled->ShellStatus() != 0)
    Die("fill exited " + std::to_string(filled->ShellStatus()) + ": " + fill_err);
  // The same layout on the host tmpfs, for the floor.
  fs::create_directories(shm, ec);
  Run({"/bin/sh", "-c", "cd " + shm + " && " + fill}, "host fill");

  std::vector<double> checkpoint, cp, cp_sync, raw;
  paddock::runtime::LayerStats layer;
  for (int i = 0; i < iterations + kWarmup; ++i) {
    double ck_ms = 0, cp_ms = 0, sync_ms = 0, raw_ms = 0;
    auto do_checkpoint = [&] {
      const std::string dest = work + "/ck-" + std::to_string(i);
      auto t0 = Clock::now();
      auto st = (*rt)->Checkpoint(sb->id, dest);
      ck_ms = Ms(Clock::now() - t0);
      if (!st.ok()) Die("checkpoint: " + st.status().ToString());
      layer = *st;
      fs::remove_all(dest, ec);
    };
    auto do_cp = [&] {
      const std::string dest = work + "/cp-" + std::to_string(i);
      auto t0 = Clock::now();
      Run({"/bin/cp", "-a", shm, dest}, "cp -a");
      auto t1 = Clock::now();
      Run({"/bin/sync", "-f", dest}, "sync -f");
      cp_ms = Ms(t1 - t0);
      sync_ms = Ms(Clock::now() - t0);
      fs::remove_all(dest, ec);
    };
    auto do_raw = [&] {
      const std::string dest = work + "/raw-" + std::to_string(i);
      auto t0 = Clock::now();
      RawCopy(shm + "/data", dest);
      raw_ms = Ms(Clock::now() - t0);
      fs::remove_all(dest, ec);
    };
    // Rotate which goes first.
    const std::function<void()> order[3] = {do_checkpoint, do_cp, do_raw};
    for (int k = 0; k < 3; ++k) order[(i + k) % 3]();
    if (i < kWarmup) continue;
    checkpoint.push_back(ck_ms);
    cp.push_back(cp_ms);
    cp_sync.push_back(sync_ms);
    raw.push_back(raw_ms);
  }
  if (auto st = (*rt)->Destroy(sb->id); !st.ok()) Die("destroy: " + st.ToString());
  g_cleanup.sandbox_id.clear();
  fs::remove_all(shm, ec);
  const uint64_t layer_bytes = layer.bytes;
  fprintf(stderr, "bench_reuse: checkpoint/cp done (%.0f s)\n",
          std::chrono::duration<double>(Clock::now() - started).count());

  // --- 3. reuse vs a new session with a reinstall ---------------------------------------------
  const std::string reuse_session = bench.NewSession("bench-reuse");
  json installed =
      bench.SessionRun(reuse_session, {PipInstall(), ImportCommand()}, "new_sandbox", &ms);
  const double first_run_ms = ms;
  std::vector<double> reuse, recreate, reuse_import, recreate_install, recreate_import;
  std::vector<double> reuse_overhead, recreate_overhead;  // the run minus its commands
  json reuse_decision;
  for (int i = 0; i < iterations + kWarmup; ++i) {
    double r_ms = 0, n_ms = 0;
    json r = bench.SessionRun(reuse_session, {ImportCommand()}, "reuse", &r_ms);
    const std::string sid = bench.NewSession("bench-new-" + std::to_string(i));
    json n = bench.SessionRun(sid, {PipInstall(), ImportCommand()}, "new_sandbox", &n_ms);
    bench.CloseSession(sid);
    if (i < kWarmup) continue;
    reuse_decision = r["reuse"];
    reuse.push_back(r_ms);
    reuse_import.push_back(CommandMs(r, 0));
    recreate.push_back(n_ms);
    recreate_install.push_back(CommandMs(n, 0));
    recreate_import.push_back(CommandMs(n, 1));
    reuse_overhead.push_back(r_ms - CommandMs(r, 0));
    recreate_overhead.push_back(n_ms - CommandMs(n, 0) - CommandMs(n, 1));
  }
  bench.CloseSession(reuse_session);
  fprintf(stderr, "bench_reuse: reuse/recreate done (%.0f s)\n",
          std::chrono::duration<double>(Clock::now() - started).count());

  // --- leftovers: nothing live in the daemon, nothing in its session storage, nothing on the
  // host once it has stopped ---------------------------------------------------------------------
  std::vector<std::string> leftovers = CleanDaemon();  // nothing to do when all went well
  const json live = Expect(api, "GET", "/v1/sandboxes?limit=1000", nullptr, 200)["items"];
  for (const auto& s : live) leftovers.push_back("sandbox " + s.value("id", "") + " still listed");
  for (const char* sub : {"/sessions/workspaces", "/sessions/checkpoints"}) {
    const std::string dir = daemon.data_dir() + sub;
    for (const auto& e : fs::directory_iterator(dir, ec))
      leftovers.push_back("left in " + dir + ": " + e.path().filename().string());
  }
  g_cleanup.tenant_key.clear();
  daemon.Stop();
  CleanHost();
  g_ids.erase("");
  for (const std::string& l : HostLeftovers()) leftovers.push_back(l);
  rt->reset();
  g_cleanup.rt = nullptr;
  const std::string check_script = std::string(PADDOCK_SOURCE_DIR) + "/scripts/check-leftovers";
  CliResult check = RunChild({check_script});
  // check-leftovers is host-wide: other users' sandboxes count too. Our own objects are
  // reported under `leftovers` (and fail the run); its verdict is recorded as is.
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - started).count();
  for (const std::string& l : leftovers)
    fprintf(stderr, "bench_reuse: left behind: %s\n", l.c_str());

  // --- results ----------------------------------------------------------------------------------
  const double cold_p50 = Percentile(cold_create, 50);
  const double fork_p50 = Percentile(fork, 50);
  const double ck_p50 = Percentile(checkpoint, 50);
  const double cp_p50 = Percentile(cp, 50);
  const double cp_sync_p50 = Percentile(cp_sync, 50);
  const double raw_p50 = Percentile(raw, 50);
  const double reuse_p50 = Percentile(reuse, 50);
  const double recreate_p50 = Percentile(recreate, 50);

  json r;
  r["benchmark"] = "reuse";
  r["timestamp"] = timestamp;
  r["iterations"] = iterations;
  r["cold_create_p50_ms"] = cold_p50;
  r["cold_destroy_p50_ms"] = Percentile(cold_destroy, 50);
  r["fork_p50_ms"] = fork_p50;
  r["fork_p95_ms"] = Percentile(fork, 95);
  r["fork_vs_cold"] = fork_p50 / cold_p50;
  r["fork_vs_cold_create_destroy"] = fork_p50 / Percentile(cold_create_destroy, 50);
  r["checkpoint_mib"] = checkpoint_mib;
  r["checkpoint_p50_ms"] = ck_p50;
  r["checkpoint_p95_ms"] = Percentile(checkpoint, 95);
  r["checkpoint_files"] = layer.files;
  r["checkpoint_bytes"] = layer_bytes;
  r["checkpoint_mib_per_s"] = MiBps(layer_bytes, ck_p50);
  r["cp_p50_ms"] = cp_p50;
  r["cp_sync_p50_ms"] = cp_sync_p50;
  r["cp_sync_mib_per_s"] = MiBps(layer_bytes, cp_sync_p50);
  r["checkpoint_vs_cp"] = ck_p50 / cp_sync_p50;
  r["checkpoint_vs_cp_nosync"] = ck_p50 / cp_p50;
  r["raw_copy_sync_p50_ms"] = raw_p50;
  r["raw_copy_sync_mib_per_s"] = MiBps(layer_bytes, raw_p50);
  r["checkpoint_vs_raw_copy"] = ck_p50 / raw_p50;
  r["reuse_run_p50_ms"] = reuse_p50;
  r["reuse_run_p95_ms"] = Percentile(reuse, 95);
  r["recreate_and_reinstall_run_p50_ms"] = recreate_p50;
  r["recreate_and_reinstall_run_p95_ms"] = Percentile(recreate, 95);
  r["reuse_vs_recreate"] = reuse_p50 / recreate_p50;
  r["reuse_import_cmd_p50_ms"] = Percentile(reuse_import, 50);
  r["recreate_pip_install_cmd_p50_ms"] = Percentile(recreate_install, 50);
  r["recreate_import_cmd_p50_ms"] = Percentile(recreate_import, 50);
  r["reuse_overhead_p50_ms"] = Percentile(reuse_overhead, 50);
  r["recreate_overhead_p50_ms"] = Percentile(recreate_overhead, 50);
  r["leftovers_after"] = leftovers.size();
  r["sandboxes_created"] = g_ids.size();
  r["check_leftovers_exit"] = check.status;
  r["elapsed_s"] = elapsed_s;
  r["targets"] = json::object();  // none were given: report only
  r["samples"] = {{"cold_create", Summary(cold_create)},
                  {"cold_destroy", Summary(cold_destroy)},
                  {"cold_create_destroy", Summary(cold_create_destroy)},
                  {"fork", Summary(fork)},
                  {"checkpoint", Summary(checkpoint)},
                  {"cp", Summary(cp)},
                  {"cp_sync", Summary(cp_sync)},
                  {"raw_copy_sync", Summary(raw)},
                  {"reuse_run", Summary(reuse)},
                  {"reuse_import_cmd", Summary(reuse_import)},
                  {"recreate_run", Summary(recreate)},
                  {"recreate_pip_install_cmd", Summary(recreate_install)},
                  {"recreate_import_cmd", Summary(recreate_import)},
                  {"reuse_overhead", Summary(reuse_overhead)},
                  {"recreate_overhead", Summary(recreate_overhead)}};
  r["leftovers_detail"] = {{"own", leftovers}, {"check_leftovers_output", check.out + check.err}};
  r["config"] = {
      {"method",
       {"cold_create: POST /v1/sandboxes {\"class\": \"session\"}; no pools are configured, so "
        "every create is cold; template only (the route cannot add the binds/layers a session "
        "sandbox gets); cold_destroy: DELETE of that sandbox, timed separately",
        "fork: POST /v1/sessions/{id}/fork {checkpoint_id} of the session's post-install "
        "checkpoint (one layer), returns the new Ready sandbox with the /workspace and /cache "
        "binds; the call includes destroying the session's previous sandbox. Cold and fork "
        "alternate.",
        "checkpoint: LinuxRuntime::Checkpoint(id, new dest dir) called in the benchmark process "
        "(the API has no checkpoint route and a run does not report the checkpoint's time) on a "
        "sandbox whose writable layer (tmpfs) holds checkpoint_mib x 1 MiB files written by dd "
        "from /dev/urandom inside; includes the freeze/thaw, the copy and the syncfs; the dest "
        "is removed after each iteration (untimed)",
        "cp / cp_sync: cp -a of the same layout from /dev/shm (host tmpfs) to the same "
        "filesystem as the checkpoint dest, then sync -f (cp_sync = both, the like-for-like "
        "floor since Checkpoint ends with syncfs)",
        "raw_copy_sync: the same files copied in this process with sendfile(2) (what the "
        "checkpoint's copier uses) into a new dir, then syncfs: the copy without the "
        "checkpoint's per-entry checks, ownership/xattr/times work and freeze/thaw. The three "
        "series rotate which goes first",
        "reuse_run: POST /v1/sessions/{id}/runs {class, requires: {python: [benchkit]}, "
        "commands: [python3 -c 'import benchkit ...']} in a session whose first run pip-installed "
        "the wheel; result.reuse.action == reuse is checked on every run",
        "recreate_and_reinstall_run: the same run plus the offline pip install as its first "
        "command, in a NEW session each time (new sandbox, clean-base checkpoint, install, "
        "import, post-install checkpoint); creating the session, staging the wheel and closing "
        "it are not timed. Reuse and recreate alternate.",
        "all times are client-side wall clock (steady_clock) around one HTTP call on loopback "
        "with a keep-alive connection, or around the runtime call / child process; percentiles "
        "nearest-rank; 2 untimed warm-up rounds per phase"}},
      {"class",
       {{"name", kClass},
        {"cpus", 1},
        {"memory_mb", 512},
        {"disk_mb", 256},
        {"tmp_mb", 64},
        {"pids", 128}}},
      {"pools", "none"},
      {"package",
       {{"name", kPackage},
        {"version", kVersion},
        {"modules", kModules},
        {"source_bytes", source_bytes},
        {"wheel_bytes", wheel_bytes}}},
      {"fork_checkpoint", fork_layer},
      {"run_after_fork_reuse", after_fork},
      {"first_install_run_ms", first_run_ms},
      {"reuse_decision_sample", reuse_decision},
      {"warmup_rounds", kWarmup}};
  r["host"] = {{"cpus", std::thread::hardware_concurrency()},
               {"load_start", load_start},
               {"load_end", LoadAvg()}};

  auto row = [](const char* name, double v) { printf("  %-40s %10.3f\n", name, v); };
  printf("\nReuse benchmark (%d iterations, %.0f s, load %s -> %s)\n", iterations, elapsed_s,
         load_start.c_str(), LoadAvg().c_str());
  row("cold_create_p50_ms", cold_p50);
  row("cold_destroy_p50_ms", r["cold_destroy_p50_ms"]);
  row("fork_p50_ms (incl. destroying the previous)", fork_p50);
  row("fork_vs_cold", r["fork_vs_cold"]);
  row("fork_vs_cold_create_destroy", r["fork_vs_cold_create_destroy"]);
  printf("  checkpoint of %d MiB: %llu entries, %llu bytes\n", checkpoint_mib,
         static_cast<unsigned long long>(layer.files),
         static_cast<unsigned long long>(layer_bytes));
  row("checkpoint_p50_ms", ck_p50);
  row("checkpoint_mib_per_s", r["checkpoint_mib_per_s"]);
  row("cp_p50_ms (cp -a)", cp_p50);
  row("cp_sync_p50_ms (cp -a + sync -f)", cp_sync_p50);
  row("checkpoint_vs_cp (vs cp -a + sync)", r["checkpoint_vs_cp"]);
  row("checkpoint_vs_cp_nosync", r["checkpoint_vs_cp_nosync"]);
  row("raw_copy_sync_p50_ms (sendfile + syncfs)", raw_p50);
  row("checkpoint_vs_raw_copy", r["checkpoint_vs_raw_copy"]);
  row("reuse_run_p50_ms", reuse_p50);
  row("  import command alone p50", r["reuse_import_cmd_p50_ms"]);
  row("  run minus its command p50", r["reuse_overhead_p50_ms"]);
  row("recreate_and_reinstall_run_p50_ms", recreate_p50);
  row("  pip install command p50", r["recreate_pip_install_cmd_p50_ms"]);
  row("  run minus its commands p50", r["recreate_overhead_p50_ms"]);
  row("reuse_vs_recreate", r["reuse_vs_recreate"]);
  printf("  %-40s %10zu  %s\n", "leftovers_after", leftovers.size(),
         leftovers.empty() ? "PASS" : "FAIL");
  printf("  %-40s %10d  %s\n", "scripts/check-leftovers exit", check.status,
         check.status == 0 ? "(nothing left on the host)" : "(host-wide: see leftovers_detail)");

  if (!out_path.empty()) std::ofstream(out_path) << r.dump(2) << "\n";
  {
    std::error_code ec2;
    fs::remove_all(work, ec2);
  }
  if (!leftovers.empty()) {
    fprintf(stderr, "bench_reuse: objects left behind\n");
    return 1;
  }
  return 0;
}
