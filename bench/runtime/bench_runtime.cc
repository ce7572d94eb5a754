// Runtime benchmark (`bench/run runtime`): what a sandbox costs on this host, measured against
// the peers that matter in one run, so machine noise hits every number alike.
//
//   cold   Create + Exec("/bin/true") + Destroy of a fresh sandbox, vs. a bubblewrap one-shot
//          (`bwrap --unshare-all ... /bin/true`), measured in alternating blocks.
//   warm   Exec("/bin/true") in one existing sandbox, vs. the floor: posix_spawn + waitpid of
//          /bin/true straight from this process, measured in alternating blocks.
//   idle   host memory per idle sandbox (MemAvailable delta over N sandboxes; Pss of their
//          paddock-init processes and their cgroups' memory usage as secondary views), the
//          sequential create rate, and a check that destroying them leaves nothing behind.
//
// Writes JSON (--out) and prints a table with the targets. Exit status: 0 when the run
// completed and nothing was left behind (a missed target is reported, not an error); 1 on a
// runtime error or leftovers; 2 on bad flags.
#include <signal.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/stats.h"
#include "runtime/linux/linux_runtime.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;
using paddock::runtime::ExecCallbacks;
using paddock::runtime::ExecRequest;
using paddock::runtime::SandboxSpec;
using paddock::runtime::linux::LinuxRuntime;
using paddock::runtime::linux::LinuxRuntimeOptions;

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Options {
  std::string out;
  int iterations = 200;        // cold and bwrap samples each
  int warm_iterations = 1000;  // warm and floor samples each
  int idle_count = 500;
  int block = 20;            // cold/bwrap alternate in blocks of this many
  int warm_block = 50;       // warm/floor alternate in blocks of this many
  int warmup = 5;            // unmeasured iterations of each kind first
  int settle_ms = 2000;      // before each MemAvailable reading
  std::string template_dir;  // default: <exe dir>/test-data/templates
  std::string state_dir = "/run/paddock";
  std::string phases = "cold,warm,idle";  // subset to run (cold includes bwrap, warm the floor)
  bool Has(const std::string& phase) const {
    return ("," + phases + ",").find("," + phase + ",") != std::string::npos;
  }
};

void Usage() {
  fprintf(stderr,
          "usage: bench_runtime [--out FILE] [--iterations N] [--warm-iterations N]\n"
          "                     [--idle-count N] [--block N] [--warm-block N] [--warmup N]\n"
          "                     [--settle-ms MS] [--template-dir DIR] [--state-dir DIR]\n"
          "                     [--phases cold,warm,idle]\n");
}

bool ParseArgs(int argc, char** argv, Options* o) {
  std::map<std::string, int*> ints = {
      {"--iterations", &o->iterations}, {"--warm-iterations", &o->warm_iterations},
      {"--idle-count", &o->idle_count}, {"--block", &o->block},
      {"--warm-block", &o->warm_block}, {"--warmup", &o->warmup},
      {"--settle-ms", &o->settle_ms},
  };
  std::map<std::string, std::string*> strs = {{"--out", &o->out},
                                              {"--template-dir", &o->template_dir},
                                              {"--state-dir", &o->state_dir},
                                              {"--phases", &o->phases}};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return false;
    std::string val;
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (i + 1 < argc) {
      val = argv[++i];
    } else {
      fprintf(stderr, "missing value for %s\n", a.c_str());
      return false;
    }
    if (auto it = ints.find(a); it != ints.end()) {
      char* end = nullptr;
      long v = std::strtol(val.c_str(), &end, 10);
      if (!end || *end || v < 0 || v > 1000000) {
        fprintf(stderr, "bad value for %s: %s\n", a.c_str(), val.c_str());
        return false;
      }
      *it->second = static_cast<int>(v);
    } else if (auto st = strs.find(a); st != strs.end()) {
      *st->second = val;
    } else {
      fprintf(stderr, "unknown flag %s\n", a.c_str());
      return false;
    }
  }
  if (o->iterations < 1 || o->warm_iterations < 1 || o->block < 1 || o->warm_block < 1) {
    fprintf(stderr, "iterations and blocks must be >= 1\n");
    return false;
  }
  return true;
}

// --- statistics: bench/common/stats.h ----------------------------------------------------

using paddock::bench::Mean;
using paddock::bench::Percentile;
using paddock::bench::Summary;

// --- host probes ----------------------------------------------------------------------------

std::string ReadFileStr(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// /proc/meminfo as key -> KiB.
std::map<std::string, int64_t> MemInfo() {
  std::map<std::string, int64_t> m;
  std::istringstream in(ReadFileStr("/proc/meminfo"));
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    m[line.substr(0, colon)] = std::atoll(line.c_str() + colon + 1);
  }
  return m;
}

// The median of a few readings spread over ~1 s: one reading can land on a neighbour's burst.
std::map<std::string, int64_t> SettledMemInfo(int settle_ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
  std::vector<std::map<std::string, int64_t>> reads;
  for (int i = 0; i < 5; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    reads.push_back(MemInfo());
  }
  std::map<std::string, int64_t> out;
  for (const auto& [k, v] : reads[0]) {
    std::vector<int64_t> vals;
    for (const auto& r : reads) vals.push_back(r.count(k) ? r.at(k) : v);
    std::sort(vals.begin(), vals.end());
    out[k] = vals[vals.size() / 2];
  }
  return out;
}

// Field `key` ("Pss:", "Rss:") of /proc/<pid>/smaps_rollup in KiB, or -1.
int64_t SmapsRollup(pid_t pid, const std::string& key) {
  std::istringstream in(ReadFileStr("/proc/" + std::to_string(pid) + "/smaps_rollup"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + key.size());
  }
  return -1;
}

// Field `key` ("VmPTE:") of /proc/<pid>/status in KiB, or -1.
int64_t StatusField(pid_t pid, const std::string& key) {
  std::istringstream in(ReadFileStr("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + key.size());
  }
  return -1;
}

// Field 22 of /proc/<pid>/stat (start time in clock ticks), or 0 if the process is gone. With
// the pid it identifies a process without pid-reuse ambiguity.
uint64_t StartTime(pid_t pid) {
  std::string s = ReadFileStr("/proc/" + std::to_string(pid) + "/stat");
  auto rp = s.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream in(s.substr(rp + 2));
  std::string tok;
  for (int field = 3; in >> tok; ++field) {
    if (field == 22) return std::strtoull(tok.c_str(), nullptr, 10);
  }
  return 0;
}

// Processes on the host that run paddock-init (exec'd from a memfd, so /proc/<pid>/exe reads
// "/memfd:paddock-init (deleted)"; a plain file path ends in /paddock-init).
std::vector<pid_t> PaddockInitPids() {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::error_code ec2;
    std::string exe = fs::read_symlink(e.path() / "exe", ec2).string();
    if (ec2) continue;
    if (exe.find("memfd:paddock-init") != std::string::npos || exe.ends_with("/paddock-init") ||
        exe.ends_with("/paddock-init (deleted)"))
      out.push_back(std::atoi(name.c_str()));
  }
  return out;
}

// Every cgroup directory named paddock-<prefix>* in any hierarchy under /sys/fs/cgroup
// (v1 controllers and the unified tree).
std::vector<std::string> CgroupDirs(const std::string& id_prefix) {
  std::vector<std::string> out;
  const std::string want = "paddock-" + id_prefix;
  std::error_code ec;
  auto scan = [&](const fs::path& dir) {
    std::error_code ec2;
    for (const auto& e : fs::directory_iterator(dir, ec2)) {
      if (e.is_directory(ec2) && e.path().filename().string().rfind(want, 0) == 0)
        out.push_back(e.path().string());
    }
  };
  scan("/sys/fs/cgroup");
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    if (h.is_directory(ec)) scan(h.path());
  }
  return out;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

json HostInfo() {
  json h;
  utsname u{};
  uname(&u);
  h["kernel"] = std::string(u.sysname) + " " + u.release;
  h["machine"] = u.machine;
  h["nproc"] = sysconf(_SC_NPROCESSORS_ONLN);
  std::istringstream cpu(ReadFileStr("/proc/cpuinfo"));
  std::string line;
  while (std::getline(cpu, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      h["cpu_model"] = c == std::string::npos ? "" : Trim(line.substr(c + 2));
      break;
    }
  }
  h["mem_total_kib"] = MemInfo()["MemTotal"];
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  h["hostname"] = host;
  return h;
}

std::string LoadAvg() {
  std::string s = ReadFileStr("/proc/loadavg");
  std::istringstream in(s);
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string UtcNow() {
  char buf[64];
  time_t t = time(nullptr);
  tm tmv{};
  gmtime_r(&t, &tmv);
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tmv);
  return buf;
}

// --- process spawning (the peers) -----------------------------------------------------------

// posix_spawn + waitpid; returns false if the child did not exit 0.
bool SpawnWait(const std::vector<std::string>& args) {
  std::vector<char*> av;
  for (const auto& a : args) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, av[0], nullptr, nullptr, av.data(), environ);
  if (rc != 0) {
    fprintf(stderr, "posix_spawn %s: %s\n", av[0], strerror(rc));
    return false;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// bwrap as found on PATH (set in main).
std::vector<std::string> kBwrapTrue = {
    "bwrap",  "--unshare-all", "--ro-bind", "/usr", "/usr",      "--symlink", "usr/bin",
    "/bin",   "--symlink",     "usr/lib",   "/lib", "--symlink", "usr/lib64", "/lib64",
    "--proc", "/proc",         "--dev",     "/dev", "--tmpfs",   "/tmp",      "/bin/true"};
const std::vector<std::string> kTrue = {"/bin/true"};

// --- the benchmark --------------------------------------------------------------------------

class Bench {
 public:
  Bench(LinuxRuntime& rt, const Options& o) : rt_(rt), o_(o) {
    tag_ = "bench-" + std::to_string(getpid()) + "-";
  }

  const std::string& tag() const { return tag_; }

  static SandboxSpec Spec() {
    SandboxSpec s;
    s.limits.cpus = 1;
    s.limits.memory_bytes = 256ull << 20;
    s.limits.pids = 128;
    s.limits.disk_bytes = 64ull << 20;
    s.limits.tmp_bytes = 32ull << 20;
    return s;
  }

  bool Fail(const std::string& what, const paddock::Status& st) {
    fprintf(stderr, "bench_runtime: %s: %s\n", what.c_str(), st.ToString().c_str());
    ok_ = false;
    g_stop = true;
    return false;
  }

  std::string NextId() { return tag_ + std::to_string(next_++); }

  bool ExecTrue(const std::string& id) {
    ExecRequest req;
    req.argv = {"/bin/true"};
    auto r = rt_.Exec(id, req, ExecCallbacks{});
    if (!r.ok()) return Fail("exec /bin/true in " + id, r.status());
    if (r->ShellStatus() != 0)
      return Fail("exec /bin/true in " + id,
                  paddock::Internal("exit status " + std::to_string(r->ShellStatus())));
    return true;
  }

  // One cold cycle; appends its phases to the sample vectors when `record`.
  bool ColdOnce(bool record) {
    SandboxSpec spec = Spec();
    spec.id = NextId();
    auto t0 = Clock::now();
    auto info = rt_.Create(spec);
    auto t1 = Clock::now();
    if (!info.ok()) return Fail("create " + spec.id, info.status());
    spawned_inits_.push_back({info->init_pid, StartTime(info->init_pid)});
    auto t2 = Clock::now();
    bool ok = ExecTrue(spec.id);
    auto t3 = Clock::now();
    auto st = rt_.Destroy(spec.id);
    auto t4 = Clock::now();
    if (!st.ok()) return Fail("destroy " + spec.id, st);
    if (!ok) return false;
    if (record) {
      cold_create_.push_back(Ms(t1 - t0));
      cold_exec_.push_back(Ms(t3 - t2));
      cold_destroy_.push_back(Ms(t4 - t3));
      cold_.push_back(Ms(t1 - t0) + Ms(t4 - t2));
    }
    return true;
  }

  bool BwrapOnce(bool record) {
    auto t0 = Clock::now();
    bool ok = SpawnWait(kBwrapTrue);
    auto t1 = Clock::now();
    if (!ok) return Fail("bwrap /bin/true", paddock::Internal("did not exit 0 (is bwrap usable?)"));
    if (record) bwrap_.push_back(Ms(t1 - t0));
    return true;
  }

  bool FloorOnce(bool record) {
    auto t0 = Clock::now();
    bool ok = SpawnWait(kTrue);
    auto t1 = Clock::now();
    if (!ok) return Fail("spawn /bin/true", paddock::Internal("did not exit 0"));
    if (record) floor_.push_back(Ms(t1 - t0));
    return true;
  }

  bool WarmOnce(const std::string& id, bool record) {
    auto t0 = Clock::now();
    bool ok = ExecTrue(id);
    auto t1 = Clock::now();
    if (ok && record) warm_.push_back(Ms(t1 - t0));
    return ok;
  }

  // Cold vs bwrap in alternating blocks (which one leads flips every round).
  void RunCold() {
    fprintf(stderr, "cold: %d warm-up + %d measured cycles each of paddock and bwrap...\n",
            o_.warmup, o_.iterations);
    for (int i = 0; i < o_.warmup && !g_stop; ++i) ColdOnce(false) && BwrapOnce(false);
    int done_cold = 0, done_bwrap = 0, round = 0;
    while (!g_stop && (done_cold < o_.iterations || done_bwrap < o_.iterations)) {
      auto cold_block = [&] {
        for (int i = 0; i < o_.block && done_cold < o_.iterations && !g_stop; ++i, ++done_cold)
          ColdOnce(true);
      };
      auto bwrap_block = [&] {
        for (int i = 0; i < o_.block && done_bwrap < o_.iterations && !g_stop; ++i, ++done_bwrap)
          BwrapOnce(true);
      };
      if (round++ % 2 == 0) {
        cold_block();
        bwrap_block();
      } else {
        bwrap_block();
        cold_block();
      }
    }
  }

  // Warm exec vs the spawn floor in alternating blocks, in one long-lived sandbox.
  void RunWarm() {
    if (g_stop) return;
    fprintf(stderr, "warm: %d measured execs in one sandbox, %d spawns of /bin/true...\n",
            o_.warm_iterations, o_.warm_iterations);
    SandboxSpec spec = Spec();
    spec.id = NextId();
    auto info = rt_.Create(spec);
    if (!info.ok()) {
      Fail("create " + spec.id, info.status());
      return;
    }
    spawned_inits_.push_back({info->init_pid, StartTime(info->init_pid)});
    for (int i = 0; i < std::max(o_.warmup, 20) && !g_stop; ++i)
      WarmOnce(spec.id, false) && FloorOnce(false);
    int done_warm = 0, done_floor = 0, round = 0;
    while (!g_stop && (done_warm < o_.warm_iterations || done_floor < o_.warm_iterations)) {
      auto warm_block = [&] {
        for (int i = 0; i < o_.warm_block && done_warm < o_.warm_iterations && !g_stop;
             ++i, ++done_warm)
          WarmOnce(spec.id, true);
      };
      auto floor_block = [&] {
        for (int i = 0; i < o_.warm_block && done_floor < o_.warm_iterations && !g_stop;
             ++i, ++done_floor)
          FloorOnce(true);
      };
      if (round++ % 2 == 0) {
        warm_block();
        floor_block();
      } else {
        floor_block();
        warm_block();
      }
    }
    if (auto st = rt_.Destroy(spec.id); !st.ok()) Fail("destroy " + spec.id, st);
  }

  void RunIdle(json* out) {
    if (g_stop || o_.idle_count == 0) return;
    const int n = o_.idle_count;
    fprintf(stderr, "idle: creating %d sandboxes...\n", n);
    auto before = SettledMemInfo(o_.settle_ms);
    std::vector<std::string> ids;
    std::vector<pid_t> pids;
    auto t0 = Clock::now();
    for (int i = 0; i < n && !g_stop; ++i) {
      SandboxSpec spec = Spec();
      spec.id = NextId();
      auto info = rt_.Create(spec);
      if (!info.ok()) {
        Fail("create " + spec.id + " (idle #" + std::to_string(i) + ")", info.status());
        break;
      }
      ids.push_back(spec.id);
      pids.push_back(info->init_pid);
    }
    auto t1 = Clock::now();
    const double create_s = std::chrono::duration<double>(t1 - t0).count();
    for (pid_t p : pids) spawned_inits_.push_back({p, StartTime(p)});

    if (static_cast<int>(ids.size()) == n) {
      auto after = SettledMemInfo(o_.settle_ms);
      int64_t pss = 0, rss = 0, pte = 0;
      for (pid_t p : pids) {
        int64_t v = SmapsRollup(p, "Pss:");
        int64_t r = SmapsRollup(p, "Rss:");
        int64_t t = StatusField(p, "VmPTE:");
        if (v > 0) pss += v;
        if (r > 0) rss += r;
        if (t > 0) pte += t;
      }
      uint64_t cg_bytes = 0;
      for (const auto& id : ids) {
        if (auto u = rt_.Usage(id); u.ok()) cg_bytes += u->memory_bytes;
      }
      auto per = [&](double kib) { return kib / n; };
      auto delta = [&](const char* k) { return per(static_cast<double>(before[k] - after[k])); };
      auto growth = [&](const char* k) { return per(static_cast<double>(after[k] - before[k])); };
      json& j = *out;
      j["idle_count"] = n;
      j["idle_host_kib_per_sandbox"] = delta("MemAvailable");
      j["idle_init_pss_kib_per_sandbox"] = per(static_cast<double>(pss));
      j["idle_init_rss_kib_per_sandbox"] = per(static_cast<double>(rss));
      j["idle_cgroup_kib_per_sandbox"] = per(static_cast<double>(cg_bytes) / 1024.0);
      // A noise-resistant cross-check of the MemAvailable delta (which neighbours' builds move
      // by hundreds of MiB): what the inits map (Pss + page tables) plus the kernel memory
      // lines that nothing else on a busy host moves much (unreclaimable slab, kernel stacks,
      // per-cpu data, shmem i.e. the sandboxes' tmpfs files).
      j["idle_accounted_kib_per_sandbox"] = per(static_cast<double>(pss + pte)) +
                                            growth("SUnreclaim") + growth("KernelStack") +
                                            growth("Percpu") + growth("Shmem");
      j["idle_init_pte_kib_per_sandbox"] = per(static_cast<double>(pte));
      j["create_per_s"] = n / create_s;
      j["idle_create_total_s"] = create_s;
      // Where the MemAvailable delta went, per sandbox (KiB; growth of each /proc/meminfo line).
      j["idle_meminfo_growth_kib_per_sandbox"] = {
          {"MemFree_drop", delta("MemFree")},     {"Slab", growth("Slab")},
          {"SUnreclaim", growth("SUnreclaim")},   {"SReclaimable", growth("SReclaimable")},
          {"KernelStack", growth("KernelStack")}, {"PageTables", growth("PageTables")},
          {"Percpu", growth("Percpu")},           {"Shmem", growth("Shmem")},
          {"AnonPages", growth("AnonPages")},     {"Cached", growth("Cached")},
      };
      j["idle_mem_available_before_kib"] = before["MemAvailable"];
      j["idle_mem_available_after_kib"] = after["MemAvailable"];
    }

    fprintf(stderr, "idle: destroying %zu sandboxes...\n", ids.size());
    auto t2 = Clock::now();
    for (const auto& id : ids) {
      if (auto st = rt_.Destroy(id); !st.ok()) Fail("destroy " + id, st);
    }
    auto t3 = Clock::now();
    if (!ids.empty())
      (*out)["destroy_per_s"] =
          static_cast<double>(ids.size()) / std::chrono::duration<double>(t3 - t2).count();
    // A noise indicator for the headline number: what came back once they were destroyed
    // (the kernel frees some of it lazily, so expect this to be somewhat lower).
    if (out->contains("idle_mem_available_after_kib")) {
      auto released = SettledMemInfo(o_.settle_ms);
      (*out)["idle_mem_available_released_kib"] = released["MemAvailable"];
      (*out)["idle_host_released_kib_per_sandbox"] =
          static_cast<double>(released["MemAvailable"] -
                              (*out)["idle_mem_available_after_kib"].get<int64_t>()) /
          static_cast<double>(ids.size());
    }
  }

  // What is left on the host of the sandboxes this run created: their cgroup directories and
  // their paddock-init processes (matched by pid + start time, so other users' sandboxes on a
  // shared machine do not count).
  int Leftovers(json* out) {
    auto dirs = CgroupDirs(tag_);
    int alive = 0;
    for (const auto& [pid, start] : spawned_inits_) {
      if (start != 0 && StartTime(pid) == start) ++alive;
    }
    if (!dirs.empty()) {
      fprintf(stderr, "leftover cgroups:\n");
      for (const auto& d : dirs) fprintf(stderr, "  %s\n", d.c_str());
    }
    if (alive) fprintf(stderr, "leftover paddock-init processes: %d\n", alive);
    (*out)["leftover_cgroup_dirs"] = dirs.size();
    (*out)["leftover_init_processes"] = alive;
    // Informational: every paddock-init / paddock-* cgroup on the host, including those of
    // other runtimes (tests running concurrently on a shared machine).
    (*out)["host_paddock_init_processes_after"] = PaddockInitPids().size();
    (*out)["host_paddock_cgroup_dirs_after"] = CgroupDirs("").size();
    return static_cast<int>(dirs.size()) + alive;
  }

  LinuxRuntime& rt_;
  const Options& o_;
  std::string tag_;
  uint64_t next_ = 0;
  bool ok_ = true;
  std::vector<double> cold_, cold_create_, cold_exec_, cold_destroy_, bwrap_, warm_, floor_;
  std::vector<std::pair<pid_t, uint64_t>> spawned_inits_;
};

const char* Verdict(double v, double target) {
  return std::isfinite(v) && v <= target ? "PASS" : "MISS";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    Usage();
    return 2;
  }
  if (geteuid() != 0) {
    fprintf(stderr, "bench_runtime: needs root (sandboxes use cgroups and namespaces)\n");
    return 1;
  }
  {
    const char* path = getenv("PATH");
    std::istringstream dirs(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
    std::string dir, found;
    while (found.empty() && std::getline(dirs, dir, ':')) {
      std::string cand = (dir.empty() ? "." : dir) + "/bwrap";
      if (access(cand.c_str(), X_OK) == 0) found = cand;
    }
    if (found.empty()) {
      fprintf(stderr,
              "bench_runtime: bwrap not found on PATH (scripts/bootstrap installs "
              "bubblewrap)\n");
      return 1;
    }
    kBwrapTrue[0] = found;
  }
  if (o.template_dir.empty()) {
    std::error_code ec;
    o.template_dir =
        (fs::read_symlink("/proc/self/exe", ec).parent_path() / "test-data" / "templates").string();
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  json result;
  result["benchmark"] = "runtime";
  result["timestamp"] = UtcNow();
  result["host"] = HostInfo();
  result["loadavg_start"] = LoadAvg();
  result["bwrap"] = kBwrapTrue;
  result["config"] = {{"iterations", o.iterations},
                      {"warm_iterations", o.warm_iterations},
                      {"idle_count", o.idle_count},
                      {"block", o.block},
                      {"warm_block", o.warm_block},
                      {"warmup", o.warmup},
                      {"phases", o.phases},
                      {"limits", "1 cpu, 256 MiB memory, 128 pids, 64 MiB disk, 32 MiB /tmp"},
                      {"template", "host"},
                      {"template_dir", o.template_dir},
                      {"state_dir", o.state_dir}};

  LinuxRuntimeOptions ro;
  ro.template_dir = o.template_dir;
  ro.state_dir = o.state_dir;
  auto t_open = Clock::now();
  auto opened = LinuxRuntime::Open(ro);
  if (!opened.ok()) {
    fprintf(stderr, "bench_runtime: cannot open runtime: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<LinuxRuntime> rt = std::move(opened).value();
  result["host"]["cgroup"] =
      rt->cgroup_layout().version == paddock::runtime::linux::CgroupVersion::kV2 ? "v2" : "v1";

  Bench b(*rt, o);
  // The first Create of the host template computes its digest (seconds, once per template dir);
  // keep it out of every measurement.
  fprintf(stderr, "preparing the host template (first run computes its digest)...\n");
  {
    SandboxSpec spec = Bench::Spec();
    spec.id = b.NextId();
    auto info = rt->Create(spec);
    if (!info.ok()) {
      fprintf(stderr, "bench_runtime: create: %s\n", info.status().ToString().c_str());
      return 1;
    }
    b.spawned_inits_.push_back({info->init_pid, StartTime(info->init_pid)});
    if (auto st = rt->Destroy(spec.id); !st.ok()) {
      fprintf(stderr, "bench_runtime: destroy: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  result["open_and_template_s"] = std::chrono::duration<double>(Clock::now() - t_open).count();

  if (o.Has("cold")) b.RunCold();
  if (o.Has("warm")) b.RunWarm();
  json idle = json::object();
  if (o.Has("idle")) b.RunIdle(&idle);
  rt.reset();  // destroys anything still registered
  json left;
  const int leftovers = b.Leftovers(&left);
  result["loadavg_end"] = LoadAvg();

  const double cold_p50 = Percentile(b.cold_, 50), cold_p95 = Percentile(b.cold_, 95);
  const double bwrap_p50 = Percentile(b.bwrap_, 50), bwrap_p95 = Percentile(b.bwrap_, 95);
  const double warm_p50 = Percentile(b.warm_, 50), warm_p95 = Percentile(b.warm_, 95);
  const double floor_p50 = Percentile(b.floor_, 50), floor_p95 = Percentile(b.floor_, 95);
  const double cold_vs_bwrap = cold_p50 / bwrap_p50;
  const double warm_vs_floor = warm_p50 / floor_p50;
  const double idle_kib = idle.contains("idle_host_kib_per_sandbox")
                              ? idle["idle_host_kib_per_sandbox"].get<double>()
                              : NAN;

  result["cold_p50_ms"] = cold_p50;
  result["cold_p95_ms"] = cold_p95;
  result["bwrap_cold_p50_ms"] = bwrap_p50;
  result["bwrap_cold_p95_ms"] = bwrap_p95;
  result["cold_vs_bwrap"] = cold_vs_bwrap;
  result["warm_p50_ms"] = warm_p50;
  result["warm_p95_ms"] = warm_p95;
  result["floor_p50_ms"] = floor_p50;
  result["floor_p95_ms"] = floor_p95;
  result["warm_vs_floor"] = warm_vs_floor;
  for (auto it = idle.begin(); it != idle.end(); ++it) result[it.key()] = it.value();
  result["leftovers_after"] = leftovers;
  result["leftovers_detail"] = left;
  result["samples"] = {
      {"cold", Summary(b.cold_)},           {"cold_create", Summary(b.cold_create_)},
      {"cold_exec", Summary(b.cold_exec_)}, {"cold_destroy", Summary(b.cold_destroy_)},
      {"bwrap_cold", Summary(b.bwrap_)},    {"warm", Summary(b.warm_)},
      {"floor", Summary(b.floor_)}};
  result["targets"] = {
      {"cold_vs_bwrap",
       {{"max", 1.0}, {"value", cold_vs_bwrap}, {"verdict", Verdict(cold_vs_bwrap, 1.0)}}},
      {"warm_vs_floor",
       {{"max", 1.5}, {"value", warm_vs_floor}, {"verdict", Verdict(warm_vs_floor, 1.5)}}},
      {"idle_host_kib_per_sandbox",
       {{"max", 2048}, {"value", idle_kib}, {"verdict", Verdict(idle_kib, 2048)}}},
  };
  result["completed"] = b.ok_ && !g_stop.load();

  // --- report -------------------------------------------------------------------------------
  auto row = [](const char* name, const std::vector<double>& v) {
    printf("  %-26s %6zu %9.3f %9.3f %9.3f %9.3f\n", name, v.size(), Percentile(v, 50),
           Percentile(v, 95), Percentile(v, 99), Mean(v));
  };
  printf("\nPaddock runtime benchmark  %s  %s, %ld cpus, cgroup %s, load %s -> %s\n",
         result["timestamp"].get<std::string>().c_str(),
         result["host"]["kernel"].get<std::string>().c_str(), sysconf(_SC_NPROCESSORS_ONLN),
         result["host"]["cgroup"].get<std::string>().c_str(),
         result["loadavg_start"].get<std::string>().c_str(),
         result["loadavg_end"].get<std::string>().c_str());
  printf("\n  %-26s %6s %9s %9s %9s %9s\n", "latency (ms)", "n", "p50", "p95", "p99", "mean");
  row("paddock cold (total)", b.cold_);
  row("  create", b.cold_create_);
  row("  exec /bin/true", b.cold_exec_);
  row("  destroy", b.cold_destroy_);
  row("bwrap cold", b.bwrap_);
  row("paddock warm exec", b.warm_);
  row("floor (posix_spawn)", b.floor_);
  if (idle.contains("idle_host_kib_per_sandbox")) {
    printf("\n  idle, %d sandboxes (KiB per sandbox):\n", o.idle_count);
    printf("    host (MemAvailable delta) %10.1f\n", idle_kib);
    printf(
        "    host, released on destroy %10.1f   (noise indicator: far from the line above = "
        "noisy)\n",
        idle.value("idle_host_released_kib_per_sandbox", 0.0));
    printf("    paddock-init Pss          %10.1f   (Rss %.1f)\n",
           idle["idle_init_pss_kib_per_sandbox"].get<double>(),
           idle["idle_init_rss_kib_per_sandbox"].get<double>());
    printf("    cgroup memory usage       %10.1f\n",
           idle["idle_cgroup_kib_per_sandbox"].get<double>());
    printf(
        "    accounted (cross-check)   %10.1f   (init Pss + page tables + unreclaimable slab,"
        " kernel stacks, percpu, shmem growth)\n",
        idle["idle_accounted_kib_per_sandbox"].get<double>());
    const auto& g = idle["idle_meminfo_growth_kib_per_sandbox"];
    printf(
        "    meminfo growth: Slab %.1f (unreclaimable %.1f), KernelStack %.1f, PageTables %.1f,"
        " Percpu %.1f, Shmem %.1f, AnonPages %.1f\n",
        g["Slab"].get<double>(), g["SUnreclaim"].get<double>(), g["KernelStack"].get<double>(),
        g["PageTables"].get<double>(), g["Percpu"].get<double>(), g["Shmem"].get<double>(),
        g["AnonPages"].get<double>());
    printf("    create rate               %10.1f /s sequential   (destroy %.1f /s)\n",
           idle["create_per_s"].get<double>(), idle.value("destroy_per_s", 0.0));
  }
  printf("\n  %-30s %10s %10s  %s\n", "target", "measured", "target", "");
  printf("  %-30s %10.3f %10s  %s   (cold p50 %.2f ms vs bwrap p50 %.2f ms)\n", "cold_vs_bwrap",
         cold_vs_bwrap, "<= 1.0", Verdict(cold_vs_bwrap, 1.0), cold_p50, bwrap_p50);
  printf("  %-30s %10.3f %10s  %s   (warm p50 %.3f ms vs floor p50 %.3f ms)\n", "warm_vs_floor",
         warm_vs_floor, "<= 1.5", Verdict(warm_vs_floor, 1.5), warm_p50, floor_p50);
  printf("  %-30s %10.1f %10s  %s\n", "idle_host_kib_per_sandbox", idle_kib, "<= 2048",
         Verdict(idle_kib, 2048));
  printf("  %-30s %10d %10s  %s\n", "leftovers_after", leftovers, "0",
         leftovers == 0 ? "PASS" : "FAIL");
  (void)floor_p95;

  if (!o.out.empty()) {
    std::error_code ec;
    fs::create_directories(fs::path(o.out).parent_path(), ec);
    std::ofstream f(o.out);
    f << result.dump(2) << "\n";
    if (!f) {
      fprintf(stderr, "bench_runtime: cannot write %s\n", o.out.c_str());
      return 1;
    }
    printf("\n  results: %s\n", o.out.c_str());
  }
  if (leftovers != 0) {
    fprintf(stderr, "bench_runtime: FAILED: %d host objects left behind\n", leftovers);
    return 1;
  }
  if (!b.ok_ || g_stop) {
    fprintf(stderr, "bench_runtime: FAILED: the run did not complete\n");
    return 1;
  }
  return 0;
}
