// bench_planner: does the resource planner size sandboxes well, judged by what real agent tasks
// really use? Every task of a corpus (bench/planner/corpus.json: task text, optional plan, the
// shell commands an agent would run) is run for real, in fresh sandboxes, under each strategy.
//
// Method
//   1. measure   each task once in a generous sandbox (2 CPUs, 8 GiB memory): its true peak
//                memory (the sandbox cgroup's peak, which counts every process and the files on
//                the memory-backed writable layer; or ru_maxrss if larger), CPU seconds and wall
//                time. A task failing here is a corpus bug: it is reported and excluded.
//   2. cold      the built-in planner with config/planner.yaml and an empty usage history plans
//                every task; the policy guard decides; the task runs under the decision's cpu
//                and memory_mb. OOM = the exec was OOM-killed, the cgroup counted an OOM kill
//                or the shell exited 137 (not by the timeout). One allocation record per task (real
//                peak, OOM flag, duration, peak CPU = cpu_seconds / wall) goes into a temporary
//                registry store.
//   3. learned   the same planner plans again, now with that history (one run per task; tasks
//                sharing a workload signature share history), and every task runs again.
//                history.min_samples is overridden to 1 (the shipped value is 3) so that one
//                pass can be learned from; nothing else in the shipped file is changed.
//   4. fixed     2 CPU / 4096 MiB for every task, and random: a uniformly random class of the
//                five (std::mt19937, seed 42); both re-run for real like cold and learned.
//   5. Per strategy: oom_rate = tasks OOM'd in that strategy's real run / tasks; waste_ratio =
//      mean over tasks of max(0, allocated - true peak) / allocated, with the true peak of the
//      measure pass for every strategy (comparable across strategies; an OOM'd task counts with
//      its allocation); mean allocated MiB. `*_predicted_oom_rate` (true peak > allocation) is
//      the cross-check of the real runs. per_task_history_floor_waste_ratio is the best the
//      history rule could do (every task its own signature: max(min_memory, true peak x
//      headroom, rounded up to the memory step)), so a miss can be told apart from a structural
//      limit.
//
// Targets: learned_oom_rate <= 0.02 and learned_waste_ratio <= 0.5 x fixed_waste_ratio.
// Usage: bench_planner --out FILE [--corpus FILE] [--planner-config FILE] [--min-samples N]
//                      [--timeout SECONDS] [--only ID,ID...]
// Exit status: 0 when the run completed (a missed target is reported, not an error); 1 on a
// runtime or planner error, an interruption or anything left behind on the host; 2 on bad flags.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/config.h"
#include "planner/builtin_planner.h"
#include "planner/features.h"
#include "planner/history.h"
#include "planner/policy_guard.h"
#include "planner/rules.h"
#include "planner/telemetry.h"
#include "registry/sqlite/sqlite_store.h"
#include "runtime/linux/linux_runtime.h"
#include "support/runtime_fixture.h"

#ifndef PADDOCK_SOURCE_DIR
#define PADDOCK_SOURCE_DIR "."
#endif

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using paddock::ResourceClass;
using paddock::planner::GuardDecision;
using paddock::planner::PlanRequest;
using paddock::planner::ResourceIntent;
using paddock::runtime::ExecCallbacks;
using paddock::runtime::ExecRequest;
using paddock::runtime::SandboxSpec;
using paddock::runtime::linux::LinuxRuntime;

constexpr int64_t kMiB = 1 << 20;
constexpr double kMeasureCpus = 2;
constexpr int64_t kMeasureMemoryMb = 8192;
constexpr double kFixedCpus = 2;
constexpr int64_t kFixedMemoryMb = 4096;
constexpr uint64_t kRandomSeed = 42;
// The writable layer and /tmp are memory-backed and capped by these: generous, so that a disk
// cap never masquerades as an OOM. The memory limit is what each strategy varies.
constexpr uint64_t kDiskBytes = 2ull << 30;
constexpr uint64_t kTmpBytes = 2ull << 30;
constexpr uint64_t kPids = 512;
const std::string kTenant = "bench-planner";

volatile sig_atomic_t g_interrupted = 0;
void OnSignal(int) { g_interrupted = 1; }

struct Task {
  std::string id, text;
  std::vector<std::string> plan, commands;
};

// One real run of a task's script in a fresh sandbox.
struct Run {
  double cpus = 0;
  int64_t memory_mb = 0;
  int exit_status = -1;  // shell convention (128 + signal)
  bool oom = false;
  bool timed_out = false;
  double cpu_seconds = 0;
  double wall_seconds = 0;
  int64_t cgroup_peak_mb = 0;
  int64_t rss_peak_mb = 0;
  std::string output_tail;

  int64_t peak_mb() const { return std::max(cgroup_peak_mb, rss_peak_mb); }
  bool ok() const { return exit_status == 0 && !oom && !timed_out; }
  double peak_cpu() const { return wall_seconds > 0 ? cpu_seconds / wall_seconds : 0; }
};

// What a strategy gave one task, and what happened when it ran.
struct Allocation {
  std::string resource_class;  // "" for fixed
  double cpus = 0;
  int64_t memory_mb = 0;
  std::vector<std::string> reasons;
  Run run;
};

int64_t CeilMiB(uint64_t bytes) { return static_cast<int64_t>((bytes + kMiB - 1) / kMiB); }

std::string Tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(s.size() - n);
}

class Bench {
 public:
  Bench(LinuxRuntime& rt, std::chrono::seconds timeout)
      : rt_(rt), timeout_(timeout), prefix_("pplan-" + std::to_string(getpid()) + "-") {}

  const std::string& prefix() const { return prefix_; }

  // Runs the task's commands as one `set -e` script in a fresh sandbox with these limits, and
  // destroys the sandbox whatever happens. An error only when the runtime itself fails.
  paddock::Result<Run> RunTask(const Task& t, double cpus, int64_t memory_mb, std::string* id_out) {
    SandboxSpec spec;
    spec.id = prefix_ + std::to_string(next_++);
    spec.limits.cpus = cpus;
    spec.limits.memory_bytes = static_cast<uint64_t>(memory_mb) * kMiB;
    spec.limits.disk_bytes = kDiskBytes;
    spec.limits.tmp_bytes = kTmpBytes;
    spec.limits.pids = kPids;
    if (id_out) *id_out = spec.id;
    auto info = rt_.Create(spec);
    if (!info.ok()) return info.status();
    ExecRequest req;
    req.shell = "set -e\ncd ~\n";
    for (const std::string& c : t.commands) req.shell += c + "\n";
    req.timeout = timeout_;
    req.output_cap_bytes = 1 << 20;
    // stdout and stderr interleaved, bounded: shown when a task fails.
    std::string out;
    auto keep = [&out](std::string_view s) {
      out.append(s);
      if (out.size() > 8192) out.erase(0, out.size() - 4096);
    };
    ExecCallbacks cb;
    cb.on_stdout = keep;
    cb.on_stderr = keep;
    auto r = rt_.Exec(spec.id, req, cb);
    auto usage = rt_.Usage(spec.id);
    paddock::Status destroyed = rt_.Destroy(spec.id);
    if (!r.ok()) return r.status();
    if (!usage.ok()) return usage.status();
    if (!destroyed.ok()) return destroyed;
    Run run;
    run.cpus = cpus;
    run.memory_mb = memory_mb;
    run.exit_status = r->ShellStatus();
    run.timed_out = r->timed_out;
    // 137 = SIGKILL: the OOM killer's signal, unless the timeout sent it.
    run.oom = r->oom_killed || usage->oom_kills > 0 || (run.exit_status == 137 && !r->timed_out);
    // The command tree's own CPU time, not the cgroup's: that also counts the sandbox's setup,
    // which on a 0.1 s task reads as "more than one core".
    run.cpu_seconds = r->cpu_seconds;
    run.wall_seconds = r->wall_seconds;
    run.cgroup_peak_mb = CeilMiB(usage->memory_peak_bytes);
    run.rss_peak_mb = CeilMiB(r->peak_memory_bytes);
    run.output_tail = Tail(out, 600);
    return run;
  }

  // This run's sandboxes still visible on the host: cgroup directories (v1 controllers and the
  // unified tree) and mounts whose path names one of them.
  std::vector<std::string> Leftovers() const {
    std::vector<std::string> out;
    const std::string want = "paddock-" + prefix_;
    std::error_code ec;
    auto scan = [&](const fs::path& dir) {
      std::error_code ec2;
      for (const auto& e : fs::directory_iterator(dir, ec2)) {
        std::string name = e.path().filename().string();
        if (e.is_directory(ec2) && (name.rfind(want, 0) == 0 || name.rfind(prefix_, 0) == 0))
          out.push_back(e.path().string());
      }
    };
    scan("/sys/fs/cgroup");
    for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
      if (h.is_directory(ec)) scan(h.path());
    }
    std::ifstream mounts("/proc/mounts");
    std::string line;
    while (std::getline(mounts, line)) {
      if (line.find(prefix_) != std::string::npos) out.push_back("mount: " + line);
    }
    return out;
  }

 private:
  LinuxRuntime& rt_;
  std::chrono::seconds timeout_;
  std::string prefix_;
  uint64_t next_ = 0;
};

paddock::Result<std::vector<Task>> LoadCorpus(const std::string& path) {
  std::ifstream in(path);
  if (!in) return paddock::NotFound("cannot open corpus " + path);
  json j;
  try {
    j = json::parse(in);
    std::vector<Task> out;
    std::set<std::string> seen;
    for (const auto& t : j.at("tasks")) {
      Task task;
      task.id = t.at("id").get<std::string>();
      task.text = t.at("task").get<std::string>();
      if (t.contains("plan")) task.plan = t["plan"].get<std::vector<std::string>>();
      task.commands = t.at("commands").get<std::vector<std::string>>();
      if (task.commands.empty() || !seen.insert(task.id).second)
        return paddock::InvalidArgument(path + ": task '" + task.id +
                                        "' has no commands or a duplicate id");
      out.push_back(std::move(task));
    }
    return out;
  } catch (const std::exception& e) {
    return paddock::InvalidArgument(path + ": " + e.what());
  }
}

struct StrategyStats {
  int tasks = 0, oom = 0, predicted_oom = 0, failed_other = 0;
  double waste_sum = 0, own_waste_sum = 0, alloc_sum = 0, wasted_mb_sum = 0, wall_sum = 0;

  void Add(const Allocation& a, int64_t true_peak_mb) {
    ++tasks;
    const double alloc = static_cast<double>(a.memory_mb);
    const double wasted = std::max(0.0, alloc - static_cast<double>(true_peak_mb));
    waste_sum += wasted / alloc;
    wasted_mb_sum += wasted;
    own_waste_sum += std::max(0.0, alloc - static_cast<double>(a.run.peak_mb())) / alloc;
    alloc_sum += alloc;
    wall_sum += a.run.wall_seconds;
    if (a.run.oom) ++oom;
    if (true_peak_mb > a.memory_mb) ++predicted_oom;
    if (!a.run.oom && !a.run.ok()) ++failed_other;
  }
  double oom_rate() const { return tasks ? static_cast<double>(oom) / tasks : NAN; }
  double predicted_oom_rate() const {
    return tasks ? static_cast<double>(predicted_oom) / tasks : NAN;
  }
  double waste_ratio() const { return tasks ? waste_sum / tasks : NAN; }
  double mean_alloc_mb() const { return tasks ? alloc_sum / tasks : NAN; }
  json ToJson() const {
    return json{{"tasks", tasks},
                {"oom", oom},
                {"oom_rate", oom_rate()},
                {"predicted_oom_rate", predicted_oom_rate()},
                {"failed_other", failed_other},
                {"waste_ratio", waste_ratio()},
                {"waste_ratio_vs_own_run_peak", tasks ? own_waste_sum / tasks : NAN},
                // Σ wasted MiB / Σ allocated MiB: big allocations weigh more than in the mean.
                {"aggregate_waste_ratio", alloc_sum > 0 ? wasted_mb_sum / alloc_sum : NAN},
                {"mean_allocated_mb", mean_alloc_mb()},
                {"mean_wall_s", tasks ? wall_sum / tasks : NAN}};
  }
};

json RunJson(const Run& r) {
  return json{{"cpus", r.cpus},
              {"memory_mb", r.memory_mb},
              {"exit_status", r.exit_status},
              {"oom", r.oom},
              {"timed_out", r.timed_out},
              {"peak_mb", r.peak_mb()},
              {"cgroup_peak_mb", r.cgroup_peak_mb},
              {"rss_peak_mb", r.rss_peak_mb},
              {"cpu_seconds", r.cpu_seconds},
              {"wall_s", r.wall_seconds}};
}

json AllocationJson(const Allocation& a) {
  json j = RunJson(a.run);
  j["class"] = a.resource_class;
  if (!a.reasons.empty()) j["reasons"] = a.reasons;
  if (!a.run.ok() && !a.run.output_tail.empty()) j["output_tail"] = a.run.output_tail;
  return j;
}

int Usage() {
  fprintf(stderr,
          "usage: bench_planner --out FILE [--corpus FILE] [--planner-config FILE] "
          "[--min-samples N] [--timeout SECONDS] [--only ID,ID...]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  std::string corpus_path = std::string(PADDOCK_SOURCE_DIR) + "/bench/planner/corpus.json";
  std::string planner_path = std::string(PADDOCK_SOURCE_DIR) + "/config/planner.yaml";
  int min_samples = 1;
  int timeout_s = 120;
  std::set<std::string> only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has = i + 1 < argc;
    if (a == "--out" && has) {
      out_path = argv[++i];
    } else if (a == "--corpus" && has) {
      corpus_path = argv[++i];
    } else if (a == "--planner-config" && has) {
      planner_path = argv[++i];
    } else if (a == "--min-samples" && has) {
      min_samples = std::atoi(argv[++i]);
    } else if (a == "--timeout" && has) {
      timeout_s = std::atoi(argv[++i]);
    } else if (a == "--only" && has) {
      std::stringstream ss(argv[++i]);
      for (std::string id; std::getline(ss, id, ',');) only.insert(id);
    } else {
      return Usage();
    }
  }
  if (min_samples < 1 || timeout_s < 1) return Usage();
  if (geteuid() != 0) {
    fprintf(stderr, "bench_planner: must run as root\n");
    return 1;
  }
  auto fail = [](const std::string& what) {
    fprintf(stderr, "bench_planner: %s\n", what.c_str());
    return 1;
  };

  auto corpus = LoadCorpus(corpus_path);
  if (!corpus.ok()) return fail(corpus.status().ToString());
  std::vector<Task> tasks;
  for (Task& t : *corpus)
    if (only.empty() || only.count(t.id)) tasks.push_back(std::move(t));
  if (tasks.empty()) return fail("no tasks selected");

  // The classes as paddockd would run them on this host, and the shipped planner config.
  paddock::PaddockConfig cfg = paddock::DefaultConfig();
  const paddock::HostCapacity host = paddock::DetectHost();
  const std::vector<std::string> scale_notes = paddock::ScaleToHost(cfg, host);
  const std::vector<ResourceClass> classes = cfg.resource_classes;
  auto loaded = paddock::planner::LoadPlannerConfigFile(planner_path, classes);
  if (!loaded.ok()) return fail(loaded.status().ToString());
  paddock::planner::PlannerConfig pcfg = *loaded;
  const int shipped_min_samples = pcfg.history.min_samples;
  pcfg.history.min_samples = min_samples;

  auto store = paddock::registry::SqliteStore::Open(":memory:");
  if (!store.ok()) return fail(store.status().ToString());
  paddock::planner::RegistryUsageHistory history(store->get(), pcfg.history.window);
  paddock::planner::BuiltinPlanner planner(classes, pcfg, &history);
  paddock::planner::PolicyGuard guard(classes, pcfg.policy, pcfg.default_ttl_seconds);

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  paddock::runtime::linux::LinuxRuntimeOptions opts;
  opts.template_dir = paddock::testing::TestDataDir() + "/templates";
  opts.state_dir = "/run/paddock";
  std::error_code ec;
  fs::create_directories(opts.template_dir, ec);
  auto rt = paddock::runtime::linux::LinuxRuntime::Open(opts);
  if (!rt.ok()) return fail("runtime: " + rt.status().ToString());
  Bench bench(**rt, std::chrono::seconds(timeout_s));

  // Every pass: one task after another, each in its own fresh sandbox. A runtime error ends
  // the run (the runtime's destructor destroys anything still alive).
  std::string error;
  auto run = [&](const char* pass, const Task& t, double cpus,
                 int64_t memory_mb) -> std::optional<Run> {
    if (g_interrupted) {
      error = "interrupted";
      return std::nullopt;
    }
    std::string id;
    auto r = bench.RunTask(t, cpus, memory_mb, &id);
    if (!r.ok()) {
      error = std::string(pass) + " " + t.id + " (" + id + "): " + r.status().ToString();
      return std::nullopt;
    }
    fprintf(stderr, "  %-8s %-16s cpu %.1f mem %6lld MiB -> peak %6lld MiB%s%s %6.2fs\n", pass,
            t.id.c_str(), cpus, static_cast<long long>(memory_mb),
            static_cast<long long>(r->peak_mb()), r->oom ? " OOM" : "",
            r->ok() || r->oom ? "" : (" exit " + std::to_string(r->exit_status)).c_str(),
            r->wall_seconds);
    return *r;
  };
  auto plan = [&](const Task& t, Allocation* a, ResourceIntent* intent_out,
                  GuardDecision* decision_out) -> bool {
    PlanRequest req;
    req.tenant_id = kTenant;
    req.task = t.text;
    req.plan_steps = t.plan;
    req.commands = t.commands;
    auto intent = planner.Plan(req);
    if (!intent.ok()) {
      error = "plan " + t.id + ": " + intent.status().ToString();
      return false;
    }
    GuardDecision d = guard.Review(*intent, kTenant);
    if (!d.allowed) {
      error = "guard denied " + t.id + ": " + d.denial;
      return false;
    }
    a->resource_class = d.resource_class;
    a->cpus = d.cpu;
    a->memory_mb = d.memory_mb;
    a->reasons = intent->reasons;
    for (const std::string& r : d.reasons) a->reasons.push_back("guard: " + r);
    if (intent_out) *intent_out = *intent;
    if (decision_out) *decision_out = d;
    return true;
  };

  const auto started = std::chrono::steady_clock::now();
  fprintf(stderr, "bench_planner: %zu tasks, sandboxes %s*, history.min_samples %d (shipped %d)\n",
          tasks.size(), bench.prefix().c_str(), min_samples, shipped_min_samples);

  // 1. Measure.
  struct Row {
    const Task* task;
    std::string signature, signature_key, command_signature;
    Run measure;
    Allocation cold, learned, fixed, random;
  };
  std::vector<Row> rows;
  std::vector<json> excluded;
  for (const Task& t : tasks) {
    auto m = run("measure", t, kMeasureCpus, kMeasureMemoryMb);
    if (!m) break;
    if (!m->ok()) {
      fprintf(stderr,
              "bench_planner: corpus task '%s' fails in the measure pass (exit %d%s%s); "
              "excluded:\n%s\n",
              t.id.c_str(), m->exit_status, m->oom ? ", OOM" : "",
              m->timed_out ? ", timed out" : "", m->output_tail.c_str());
      excluded.push_back(json{{"id", t.id}, {"run", RunJson(*m)}, {"output_tail", m->output_tail}});
      continue;
    }
    Row row;
    row.task = &t;
    row.measure = *m;
    rows.push_back(std::move(row));
  }

  // 2. Cold: every task planned before any history exists, then run; the records are written
  // only after the pass, so no task of the cold pass benefits from another's run.
  std::vector<paddock::registry::AllocationRecord> records;
  if (error.empty()) {
    for (Row& row : rows) {
      ResourceIntent intent;
      GuardDecision decision;
      if (!plan(*row.task, &row.cold, &intent, &decision)) break;
      row.signature = intent.workload_signature;
      row.command_signature = intent.command_signature;
      row.signature_key =
          paddock::planner::ExtractFeatures(PlanRequest{.tenant_id = kTenant,
                                                        .task = row.task->text,
                                                        .plan_steps = row.task->plan,
                                                        .commands = row.task->commands})
              .signature_key;
      auto r = run("cold", *row.task, row.cold.cpus, row.cold.memory_mb);
      if (!r) break;
      row.cold.run = *r;
      paddock::planner::MeasuredUsage usage;
      usage.peak_memory_mb = r->peak_mb();
      usage.peak_cpu = r->peak_cpu();
      usage.cpu_seconds = r->cpu_seconds;
      usage.duration_ms = static_cast<int64_t>(r->wall_seconds * 1000);
      usage.oom = r->oom;
      usage.timed_out = r->timed_out;
      const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
      records.push_back(paddock::planner::MakeAllocationRecord(
          "cold-" + row.task->id, kTenant, row.task->id, intent, decision, usage, now_ms));
    }
  }
  if (error.empty()) {
    for (const auto& rec : records) {
      auto ins = (*store)->InsertAllocation(rec);
      if (!ins.ok()) {
        error = "history insert: " + ins.status().ToString();
        break;
      }
    }
  }

  // 3. Learned, 4. fixed and random.
  std::mt19937 rng(kRandomSeed);
  std::uniform_int_distribution<size_t> pick(0, classes.size() - 1);
  if (error.empty()) {
    for (Row& row : rows) {
      if (!plan(*row.task, &row.learned, nullptr, nullptr)) break;
      auto r = run("learned", *row.task, row.learned.cpus, row.learned.memory_mb);
      if (!r) break;
      row.learned.run = *r;
    }
  }
  if (error.empty()) {
    for (Row& row : rows) {
      row.fixed.resource_class = "fixed";
      row.fixed.cpus = kFixedCpus;
      row.fixed.memory_mb = kFixedMemoryMb;
      auto r = run("fixed", *row.task, kFixedCpus, kFixedMemoryMb);
      if (!r) break;
      row.fixed.run = *r;
    }
  }
  if (error.empty()) {
    for (Row& row : rows) {
      const ResourceClass& c = classes[pick(rng)];
      row.random.resource_class = c.name;
      row.random.cpus = c.cpus;
      row.random.memory_mb = CeilMiB(c.memory_bytes);
      auto r = run("random", *row.task, row.random.cpus, row.random.memory_mb);
      if (!r) break;
      row.random.run = *r;
    }
  }
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  rt->reset();  // destroys anything an error path left alive
  const std::vector<std::string> leftovers = bench.Leftovers();
  for (const std::string& l : leftovers)
    fprintf(stderr, "bench_planner: left behind: %s\n", l.c_str());
  if (!error.empty()) return fail(error);
  if (rows.empty()) return fail("every task failed in the measure pass");

  // 5. Results.
  StrategyStats cold, learned, fixed, random;
  std::map<std::string, int> cold_classes, learned_classes, random_classes;
  std::map<std::string, std::set<std::string>> by_signature;
  json task_rows = json::array();
  for (const Row& row : rows) {
    const int64_t peak = row.measure.peak_mb();
    cold.Add(row.cold, peak);
    learned.Add(row.learned, peak);
    fixed.Add(row.fixed, peak);
    random.Add(row.random, peak);
    ++cold_classes[row.cold.resource_class];
    ++learned_classes[row.learned.resource_class];
    ++random_classes[row.random.resource_class];
    by_signature[row.signature].insert(row.task->id);
    json measure = RunJson(row.measure);
    measure["peak_cpu"] = row.measure.peak_cpu();
    task_rows.push_back(json{{"id", row.task->id},
                             {"signature", row.signature},
                             {"signature_key", row.signature_key},
                             {"command_signature", row.command_signature},
                             {"true_peak_mb", peak},
                             {"measure", measure},
                             {"cold", AllocationJson(row.cold)},
                             {"learned", AllocationJson(row.learned)},
                             {"fixed", AllocationJson(row.fixed)},
                             {"random", AllocationJson(row.random)}});
  }

  // What the history rule could reach at best: every task with history of its own exact
  // commands, allocated max(exact_min_memory, true peak x exact_headroom rounded up to
  // memory_step). The gap to learned_waste_ratio is what run-to-run variation and shared signatures
  // cost; the rest is the headroom and the floor.
  double floor_waste_sum = 0;
  for (const Row& row : rows) {
    const int64_t peak = row.measure.peak_mb();
    const int64_t need = std::max<int64_t>(
        static_cast<int64_t>(std::ceil(static_cast<double>(peak) * pcfg.history.exact_headroom)),
        pcfg.history.exact_min_memory_mb);
    const int64_t step = pcfg.history.memory_step_mb;
    const double alloc = static_cast<double>((need + step - 1) / step * step);
    floor_waste_sum += std::max(0.0, alloc - static_cast<double>(peak)) / alloc;
  }
  const double per_task_floor_waste = floor_waste_sum / static_cast<double>(rows.size());

  json r;
  r["benchmark"] = "planner";
  r["tasks"] = task_rows;
  r["task_count"] = rows.size();
  r["tasks_excluded"] = excluded.size();
  r["cold_oom_rate"] = cold.oom_rate();
  r["cold_waste_ratio"] = cold.waste_ratio();
  r["cold_mean_allocated_mb"] = cold.mean_alloc_mb();
  r["learned_oom_rate"] = learned.oom_rate();
  r["learned_waste_ratio"] = learned.waste_ratio();
  r["learned_mean_allocated_mb"] = learned.mean_alloc_mb();
  r["fixed_oom_rate"] = fixed.oom_rate();
  r["fixed_waste_ratio"] = fixed.waste_ratio();
  r["fixed_mean_allocated_mb"] = fixed.mean_alloc_mb();
  r["random_oom_rate"] = random.oom_rate();
  r["random_waste_ratio"] = random.waste_ratio();
  r["random_mean_allocated_mb"] = random.mean_alloc_mb();
  r["learned_vs_fixed_waste"] = learned.waste_ratio() / fixed.waste_ratio();
  r["learned_vs_cold_waste"] = learned.waste_ratio() / cold.waste_ratio();
  r["learned_vs_fixed_allocated"] = learned.mean_alloc_mb() / fixed.mean_alloc_mb();
  r["per_task_history_floor_waste_ratio"] = per_task_floor_waste;
  r["cold_predicted_oom_rate"] = cold.predicted_oom_rate();
  r["learned_predicted_oom_rate"] = learned.predicted_oom_rate();
  r["fixed_predicted_oom_rate"] = fixed.predicted_oom_rate();
  r["random_predicted_oom_rate"] = random.predicted_oom_rate();
  r["failed_other_runs"] =
      cold.failed_other + learned.failed_other + fixed.failed_other + random.failed_other;
  r["leftovers_after"] = leftovers.size();
  r["elapsed_s"] = elapsed_s;
  const bool oom_pass = learned.oom_rate() <= 0.02;
  const bool waste_pass = learned.waste_ratio() <= 0.5 * fixed.waste_ratio();
  r["targets"] = {
      {"learned_oom_rate", {{"target", "<= 0.02"}, {"pass", oom_pass}}},
      {"learned_waste_ratio", {{"target", "<= 0.5 x fixed_waste_ratio"}, {"pass", waste_pass}}}};
  json signatures = json::object();
  for (const auto& [sig, ids] : by_signature) signatures[sig] = ids;
  json class_json = json::array();
  for (const ResourceClass& c : classes)
    class_json.push_back({{"name", c.name},
                          {"cpus", c.cpus},
                          {"memory_mb", CeilMiB(c.memory_bytes)},
                          {"disk_mb", CeilMiB(c.disk_bytes)}});
  r["samples"] = {
      {"strategies",
       {{"cold", cold.ToJson()},
        {"learned", learned.ToJson()},
        {"fixed", fixed.ToJson()},
        {"random", random.ToJson()}}},
      {"class_distribution",
       {{"cold", cold_classes}, {"learned", learned_classes}, {"random", random_classes}}},
      {"signatures", signatures},
      {"excluded", excluded}};
  r["config"] = {
      {"method",
       {"measure: each task once in a 2 CPU / 8 GiB sandbox; true peak = max(cgroup memory peak "
        "incl. files on the memory-backed writable layer, ru_maxrss); failing tasks excluded",
        "cold: built-in planner (shipped config/planner.yaml, empty history) -> policy guard -> "
        "run for real under the decision's cpu and memory_mb; one allocation record per task "
        "written to an in-memory registry after the pass",
        "learned: planned again with that history (history.min_samples overridden to 1), run "
        "for real",
        "fixed (2 CPU / 4096 MiB) and random (uniform class, mt19937 seed 42): run for real too",
        "OOM: exec OOM-killed, cgroup oom_kills > 0 or exit 137; oom_rate = OOM'd runs / tasks",
        "waste_ratio = mean over tasks of max(0, allocated - true peak) / allocated MiB, true "
        "peak from the measure pass for every strategy; *_predicted_oom_rate = true peak > "
        "allocation",
        "per_task_history_floor_waste_ratio: the waste if every task had history of its own "
        "commands and it allocated max(exact_min_memory, ceil_step(true peak x exact_headroom))"}},
      {"corpus", corpus_path},
      {"planner_config", planner_path},
      {"overrides",
       {{"history.min_samples", {{"shipped", shipped_min_samples}, {"used", min_samples}}}}},
      {"history",
       {{"min_samples", pcfg.history.min_samples},
        {"headroom", pcfg.history.headroom},
        {"oom_growth", pcfg.history.oom_growth},
        {"window", pcfg.history.window},
        {"min_memory_mb", pcfg.history.min_memory_mb},
        {"exact_headroom", pcfg.history.exact_headroom},
        {"exact_min_memory_mb", pcfg.history.exact_min_memory_mb},
        {"memory_step_mb", pcfg.history.memory_step_mb}}},
      {"classes", class_json},
      {"scale_to_host", scale_notes},
      {"measure_limits", {{"cpus", kMeasureCpus}, {"memory_mb", kMeasureMemoryMb}}},
      {"fixed", {{"cpus", kFixedCpus}, {"memory_mb", kFixedMemoryMb}}},
      {"random_seed", kRandomSeed},
      {"sandbox",
       {{"disk_mb", CeilMiB(kDiskBytes)}, {"tmp_mb", CeilMiB(kTmpBytes)}, {"pids", kPids}}},
      {"exec_timeout_s", timeout_s},
      {"tenant", kTenant}};
  r["host"] = {{"cpus", host.cpus}, {"memory_mb", CeilMiB(host.memory_bytes)}};

  // The table.
  printf("\nPlanner benchmark: %zu tasks (%zu excluded), %.0f s\n", rows.size(), excluded.size(),
         elapsed_s);
  printf("  %-16s %7s  %-14s %6s %4s  %-14s %6s %4s  %-14s %6s %4s\n", "task", "peak", "cold",
         "MiB", "", "learned", "MiB", "", "random", "MiB", "");
  for (const Row& row : rows) {
    auto cell = [](const Allocation& a) {
      char buf[64];
      snprintf(buf, sizeof buf, "%-14s %6lld %4s", a.resource_class.c_str(),
               static_cast<long long>(a.memory_mb), a.run.oom ? "OOM" : (a.run.ok() ? "" : "FAIL"));
      return std::string(buf);
    };
    printf("  %-16s %7lld  %s  %s  %s\n", row.task->id.c_str(),
           static_cast<long long>(row.measure.peak_mb()), cell(row.cold).c_str(),
           cell(row.learned).c_str(), cell(row.random).c_str());
  }
  printf("\n  %-10s %10s %12s %16s %14s\n", "strategy", "oom_rate", "waste_ratio", "mean_alloc_MiB",
         "pred_oom_rate");
  for (auto [name, s] : {std::pair<const char*, const StrategyStats*>{"cold", &cold},
                         {"learned", &learned},
                         {"fixed", &fixed},
                         {"random", &random}}) {
    printf("  %-10s %10.3f %12.3f %16.0f %14.3f\n", name, s->oom_rate(), s->waste_ratio(),
           s->mean_alloc_mb(), s->predicted_oom_rate());
  }
  auto row = [](const char* name, double v, const char* target, bool pass) {
    printf("  %-40s %10.3f  %-22s %s\n", name, v, target,
           target[0] ? (pass ? "PASS" : "MISS") : "");
  };
  printf("\n");
  row("learned_oom_rate", learned.oom_rate(), "<= 0.02", oom_pass);
  row("learned_waste_ratio", learned.waste_ratio(), "<= 0.5 x fixed", waste_pass);
  row("fixed_waste_ratio", fixed.waste_ratio(), "", true);
  row("learned_vs_fixed_waste", r["learned_vs_fixed_waste"].get<double>(), "", true);
  row("per_task_history_floor_waste_ratio", per_task_floor_waste, "", true);
  row("cold_oom_rate", cold.oom_rate(), "", true);
  row("cold_waste_ratio", cold.waste_ratio(), "", true);
  row("random_oom_rate", random.oom_rate(), "", true);
  row("random_waste_ratio", random.waste_ratio(), "", true);
  printf("  %-40s %10zu  %-22s %s\n", "leftovers_after", leftovers.size(), "0",
         leftovers.empty() ? "PASS" : "FAIL");

  if (!out_path.empty()) std::ofstream(out_path) << r.dump(2) << "\n";
  if (!leftovers.empty()) return fail("host objects left behind");
  return 0;
}
