// The lifecycle manager: the control plane's single owner of a sandbox's life (LC-1..4,
// LS-1..3). Every change of state goes through the state machine and is recorded as an event
// in the registry; every exec, file, pause and resume call is fenced by the lease version; a
// background loop expires leases, TTLs and idle sandboxes and reconciles the registry with
// what the runtime really has.
//
// The registry is the source of record; the runtime is the source of truth about what exists.
// Operations on one sandbox that change its state are serialized (striped mutexes by id);
// execs and file operations only read state and may run concurrently under one lease.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/config.h"
#include "common/status.h"
#include "lifecycle/state_machine.h"
#include "registry/store.h"
#include "runtime/runtime.h"

namespace paddock::lifecycle {

// Who is calling: a tenant (sees only its own sandboxes) or an admin (sees all).
struct Principal {
  std::string tenant_id;
  bool admin = false;
};

struct CreateSandboxRequest {
  std::string resource_class;  // "" = the first configured class
  // Explicit resources, each within the class's limits (kInvalidArgument otherwise).
  std::optional<double> cpus;
  std::optional<uint64_t> memory_bytes;
  std::optional<uint64_t> disk_bytes;
  std::optional<uint32_t> pids;
  std::string template_name;  // "" = the class's template
  std::optional<int64_t> ttl_ms;
  std::optional<int64_t> idle_timeout_ms;
  std::map<std::string, std::string> env;
  std::string metadata_json = "{}";
  std::string session_id;
  std::string user_id;
  // How the request was sized when a planner did it (PLAN-4): a JSON object with "intent" (the
  // planner's ResourceIntent), "decision" (the policy guard's) and "task_id"; kept on the
  // sandbox and copied into each lease's allocation record. "" = sized by the caller.
  std::string plan_json;
  std::string plan_summary;  // one line for the sandbox's "plan" event
  // Storage beyond the template (sessions): checkpoint layers to stack the sandbox on (a fork,
  // top first) and host directories to mount (the session workspace, the tenant cache). Such a
  // sandbox is always provisioned, never taken from a warm pool: mounts are made at creation.
  std::vector<std::string> layers;
  std::vector<runtime::BindMount> binds;
};

// SandboxRecord::storage <-> layers and binds.
std::string SandboxStorageJson(const std::vector<std::string>& layers,
                               const std::vector<runtime::BindMount>& binds);
Status ParseSandboxStorage(const std::string& json, std::vector<std::string>* layers,
                           std::vector<runtime::BindMount>* binds);

// What happens to a sandbox when its lease is released (LC-3).
enum class RecycleMode {
  kKeep,     // same tenant keeps it as it is (files and background processes) for a next lease
  kSoft,     // level 1: fresh writable layer, no processes, same identity — for the same tenant
  kDestroy,  // level 3: hard destroy
};
Result<RecycleMode> ParseRecycleMode(std::string_view name);

class SandboxManager {
 public:
  SandboxManager(registry::Store& store, runtime::Runtime& runtime, PaddockConfig config,
                 const Clock& clock);
  ~SandboxManager();  // stops the background loop

  // Creates a sandbox owned by the caller's tenant and returns it in state Ready: a warm pool
  // member of the class bound to the caller when the request takes the class as it is (no
  // explicit resources or template) and the pool has one ready, else a newly provisioned one.
  Result<registry::SandboxRecord> Create(const Principal& who, const CreateSandboxRequest& req,
                                         const std::string& request_id);
  // kNotFound for unknown ids and for other tenants' sandboxes (no existence oracle).
  Result<registry::SandboxRecord> Get(const Principal& who, const std::string& id);
  Result<registry::SandboxPage> List(const Principal& who, registry::SandboxFilter filter,
                                     int limit, const std::string& after_id);
  // Hard destroy; idempotent (an already terminated sandbox is OK).
  Status Destroy(const Principal& who, const std::string& id, const std::string& reason,
                 const std::string& request_id);

  // Leases. Acquire: exactly one of any number of concurrent callers wins; the others get
  // kConflict. ttl_ms 0 = the configured default; above the maximum is kInvalidArgument.
  Result<registry::LeaseRecord> AcquireLease(const Principal& who, const std::string& id,
                                             const std::string& owner, int64_t ttl_ms,
                                             const std::string& request_id);
  Result<int64_t> RenewLease(const Principal& who, const std::string& id, int64_t lease_version,
                             int64_t ttl_ms);
  Status ReleaseLease(const Principal& who, const std::string& id, int64_t lease_version,
                      RecycleMode mode, const std::string& request_id);

  // Fenced operations: kConflict when lease_version is not the current, live lease (a stale
  // holder is rejected even after it comes back), kFailedPrecondition when the sandbox is in a
  // state that cannot serve them (e.g. paused).
  Result<runtime::ExecResult> Exec(const Principal& who, const std::string& id,
                                   int64_t lease_version, runtime::ExecRequest req,
                                   const runtime::ExecCallbacks& cb);
  // Checks the fence and runs `op` on the runtime (files API); marks the sandbox active.
  Status WithFence(const Principal& who, const std::string& id, int64_t lease_version,
                   const std::function<Status(runtime::Runtime&)>& op);
  Status Pause(const Principal& who, const std::string& id, int64_t lease_version,
               const std::string& request_id);
  Status Resume(const Principal& who, const std::string& id, int64_t lease_version,
                const std::string& request_id);

  // Warm pools (POOL-1..3). AcquireFromPool leases a warm sandbox of the class, binding it to
  // the caller only now (tenant, session, TTL), or creates one when the pool is empty; either
  // way the caller gets a Leased sandbox. A pool member never returns to its pool once leased:
  // sharing across tenants would need a reset the recycler cannot prove (LC-3).
  struct Acquired {
    registry::SandboxRecord sandbox;
    registry::LeaseRecord lease;
    bool from_pool = false;
  };
  Result<Acquired> AcquireFromPool(const Principal& who, const std::string& resource_class,
                                   const std::string& owner, int64_t ttl_ms,
                                   const std::string& session_id, const std::string& request_id);
  struct PoolStatus {
    std::string resource_class;
    int warm = 0;    // ready, unbound members
    int leased = 0;  // sandboxes of the class under a lease, pool-born or not
    uint32_t min = 0, max = 0, buffer = 0;
  };
  std::vector<PoolStatus> Pools();
  // Creates warm sandboxes up to each pool's target (max(min, buffer), capped by max). Returns
  // how many it created.
  int RefillPoolsOnce();

  Result<std::vector<registry::EventRecord>> Events(const Principal& who, const std::string& id,
                                                    int limit, int64_t after_event_id);

  // One pass of lease expiry, TTL and idle expiry. Returns how many sandboxes it acted on.
  int ExpireOnce();
  // One reconciliation pass (LC-4). Returns how many rows/objects it repaired.
  int ReconcileOnce();
  // Runs ReconcileOnce + ExpireOnce every `interval` on a background thread.
  void StartBackground(std::chrono::milliseconds interval);
  void StopBackground();

  const PaddockConfig& config() const { return config_; }

 private:
  std::mutex& LockFor(const std::string& id);
  Result<registry::SandboxRecord> Load(const Principal& who, const std::string& id);
  Result<registry::SandboxRecord> CreateImpl(const Principal& who, const CreateSandboxRequest& req,
                                             const std::string& request_id, bool* from_pool);
  // Binds the oldest ready member of the class's pool to the caller with `want`'s session, env,
  // metadata and lifetime; kNotFound when the class has no pool or the pool is empty.
  Result<registry::SandboxRecord> ClaimFromPool(const Principal& who, const ResourceClass& cls,
                                                const registry::SandboxRecord& want,
                                                const std::string& plan_summary,
                                                const std::string& request_id);
  // Appends the "plan" event of a planner-sized create (inside the caller's transaction).
  Status AppendPlanEvent(const registry::SandboxRecord& rec, const std::string& summary,
                         const std::string& request_id);
  // Usage of the current lease, from its execs; written to sandbox_allocation when the lease
  // ends (release, expiry, destroy) — the telemetry the planner learns from (PLAN-4).
  struct LeaseUsage {
    int64_t started_ms = 0;
    uint64_t peak_rss_bytes = 0;  // largest single process of any exec
    double cpu_seconds = 0;
    double peak_cpu = 0;  // highest cores used on average by one exec
    bool oom = false;
    bool timed_out = false;
    int execs = 0;
  };
  void StartLeaseUsage(const std::string& id);
  void AddExecUsage(const std::string& id, const runtime::ExecResult& r);
  void RecordLeaseEnd(const registry::SandboxRecord& rec);
  // Wakes the background loop for a pool refill only (a claim took a warm member).
  void KickRefill();
  // Waits until no foreground operation (create, lease, exec, files, release) is in flight, or
  // `limit` passed: background work that costs CPU (pool refills) gives way to requests, but
  // a constant stream of them cannot starve it.
  void WaitForQuiet(std::chrono::milliseconds limit);
  struct ForegroundScope {
    explicit ForegroundScope(std::atomic<int>& n) : n_(n) { ++n_; }
    ~ForegroundScope() { --n_; }
    std::atomic<int>& n_;
  };
  // Moves `rec` to `to` (checked against the state machine) and records the event; refreshes
  // rec (state, version) on success.
  Status Transition(registry::SandboxRecord& rec, SandboxState to, const std::string& reason,
                    const std::string& request_id);
  Status Fence(const registry::SandboxRecord& rec, int64_t lease_version);
  // Inserts `rec` (state Requested, with its "plan" event when plan_summary is set) and
  // provisions it to Ready.
  Result<registry::SandboxRecord> Provision(registry::SandboxRecord rec,
                                            const std::string& request_id,
                                            const std::string& plan_summary = "");
  int CountInState(const registry::SandboxFilter& filter,
                   const std::function<bool(SandboxState)>& pred);
  runtime::SandboxSpec SpecFor(const registry::SandboxRecord& rec) const;
  // Destroys the runtime object and moves the row to Terminated (via Recycling when leased).
  Status HardDestroy(registry::SandboxRecord& rec, const std::string& reason,
                     const std::string& request_id);
  Status Recycle(registry::SandboxRecord& rec, RecycleMode mode, const std::string& reason,
                 const std::string& request_id);
  void MarkActive(const std::string& id);
  // An exec or file operation in flight: the sandbox is not idle while one exists.
  class ActivityScope {
   public:
    ActivityScope(SandboxManager& m, std::string id);
    ~ActivityScope();

   private:
    SandboxManager& m_;
    std::string id_;
  };
  // True when nothing runs in the sandbox and its last activity is idle_timeout_ms old.
  bool IdleSince(const registry::SandboxRecord& rec, int64_t now);
  std::vector<registry::SandboxRecord> LiveRecords();

  registry::Store& store_;
  runtime::Runtime& runtime_;
  const PaddockConfig config_;
  const Clock& clock_;
  std::array<std::mutex, 64> locks_;
  std::atomic<int> foreground_{0};  // foreground operations in flight
  std::mutex usage_mu_;
  std::map<std::string, LeaseUsage> lease_usage_;
  std::mutex activity_mu_;
  struct Activity {
    int64_t last_ms = 0;  // last exec/file activity (newer than the registry's last_active_at)
    int in_flight = 0;    // execs and file operations running now
  };
  std::map<std::string, Activity> activity_;

  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool bg_stop_ = false;
  bool refill_requested_ = false;
  std::thread bg_thread_;
};

}  // namespace paddock::lifecycle
