// The registry: Paddock's durable record of tenants, API keys, sandboxes, leases, environments,
// lifecycle events and allocation telemetry (REG-1..3), and the home of lease fencing
// (LS-1..3). `Store` is the seam: SQLite is the embedded default (sqlite/sqlite_store.h);
// a PostgreSQL implementation can follow behind the same interface.
//
// Conventions shared by every implementation:
//  - Times are int64 unix milliseconds. Callers pass `now_ms` explicitly to the lease methods
//    so tests (and a Clock seam) control time.
//  - Every method is thread-safe and never throws; failures are a Status whose message names
//    the operation. kNotFound: the named row does not exist; kAlreadyExists: a unique key is
//    taken; kConflict: an optimistic version or lease fencing check failed; kInvalidArgument:
//    a value broke a constraint (bad enum value, malformed JSON, empty id).
//  - JSON columns (metadata, env) are strings holding a JSON object/value; "" is stored as "{}".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace paddock::registry {

struct TenantRecord {
  std::string id;
  std::string name;  // unique across tenants
  int64_t created_at = 0;

  bool operator==(const TenantRecord&) const = default;
};

struct ApiKeyRecord {
  std::string id;
  std::string tenant_id;   // must name an existing tenant
  std::string key_hash;    // sha256 hex of the secret; the secret itself is never stored
  std::string key_prefix;  // first 8 characters of the secret, for display
  std::string role;        // "admin" | "tenant"
  int64_t created_at = 0;
  int64_t revoked_at = 0;  // 0 = active

  bool operator==(const ApiKeyRecord&) const = default;
};

// State that is only meaningful to the lifecycle manager is stored verbatim; the registry
// interprets just `state == "terminated"` (case-insensitive), for SandboxFilter.
struct SandboxRecord {
  std::string sandbox_id;
  std::string tenant_id;
  std::string user_id;
  std::string session_id;
  std::string runtime_provider;
  std::string runtime_instance_id;
  std::string resource_class;
  std::string template_id;
  double cpus = 0;
  int64_t memory_mb = 0;
  int64_t disk_mb = 0;
  int64_t pids = 0;
  std::string state;
  std::string state_reason;
  int64_t created_at = 0;
  int64_t last_active_at = 0;
  int64_t expires_at = 0;  // absolute TTL; 0 = none
  int64_t idle_timeout_ms = 0;
  std::string expiry_action = "destroy";  // "destroy" | "pause"
  int64_t version = 0;                    // optimistic-concurrency counter, +1 on every update
  bool tainted = false;
  int64_t lease_counter = 0;  // last lease_version handed out; owned by the lease methods
  std::string pool;           // warm-pool class while an unleased warm member, else ""
  std::string metadata = "{}";
  std::string env = "{}";
  // How the sandbox was sized: the planner's intent and the policy guard's decision (JSON
  // object; "{}" when the caller named a class itself).
  std::string plan = "{}";
  // What the sandbox mounts besides its template (JSON object): {"layers": [host dirs, top
  // first], "binds": [{"host_path", "target", "read_only"}]}. "{}" = nothing.
  std::string storage = "{}";

  bool operator==(const SandboxRecord&) const = default;
};

// Empty strings / nullopt match anything.
struct SandboxFilter {
  std::string tenant_id;
  std::optional<std::string> state;
  std::string session_id;
  std::string resource_class;
  std::string pool;
  bool include_terminated = false;  // terminated sandboxes are hidden unless asked for
};

struct SandboxPage {
  std::vector<SandboxRecord> records;
  std::string next_after_id;  // pass as after_id for the next page; "" = no more rows
};

struct LeaseRecord {
  std::string sandbox_id;
  std::string lease_id;  // random, for logs and correlation
  std::string lease_owner;
  int64_t lease_version = 0;  // the fencing token: strictly increasing per sandbox, never reused
  int64_t acquired_at = 0;
  int64_t heartbeat_at = 0;
  int64_t expires_at = 0;
  int64_t released_at = 0;  // 0 = not released

  bool operator==(const LeaseRecord&) const = default;
};

struct EnvironmentRecord {
  std::string sandbox_id;
  std::string base_image_digest;
  std::string dependency_hash;
  std::string workspace_id;
  std::string snapshot_id;
  int64_t environment_version = 0;
  int64_t dirty_level = 0;
  // The full environment manifest (sessions/environment_manifest.h) as a JSON object.
  std::string manifest = "{}";

  bool operator==(const EnvironmentRecord&) const = default;
};

struct EventRecord {
  int64_t event_id = 0;  // assigned by the store, increasing
  std::string sandbox_id;
  std::string event_type;
  std::string old_state;
  std::string new_state;
  std::string reason;
  std::string request_id;
  int64_t timestamp = 0;
  std::string metadata = "{}";

  bool operator==(const EventRecord&) const = default;
};

struct AllocationRecord {
  int64_t id = 0;  // assigned by the store
  std::string sandbox_id;
  std::string tenant_id;
  std::string task_id;
  std::string planner_input_hash;
  std::string recommended_class;
  std::string actual_class;
  std::string reason;
  double confidence = 0;
  double cpu = 0;
  int64_t memory_mb = 0;
  int64_t duration_ms = 0;
  double peak_cpu = 0;     // highest average cores used by one command
  double cpu_seconds = 0;  // CPU time of every command of the lease
  int64_t peak_memory_mb = 0;
  bool oom = false;
  bool timed_out = false;
  int64_t created_at = 0;
  // The planner's workload signature (planner/features.h): the key its history is looked up
  // by. "" for records made without the planner.
  std::string workload_signature;
  // The exact-commands signature (planner/features.h CommandSignature): history of the very
  // same commands, looked up before the workload signature. "" when the plan had no commands.
  std::string command_signature;

  bool operator==(const AllocationRecord&) const = default;
};

// A session (SCH-1, REUSE-6): durable state — a persistent workspace, its runs, its
// checkpoints — served by temporary sandboxes. One run at a time.
struct SessionRecord {
  std::string session_id;
  std::string tenant_id;
  std::string user_id;
  std::string workspace_id;
  std::string state = "active";    // "active" | "closed"
  std::string current_sandbox_id;  // the sandbox serving it between runs; "" = none
  std::string active_run_id;       // "" = no run in progress
  int64_t run_count = 0;
  std::string metadata = "{}";
  int64_t created_at = 0;
  int64_t updated_at = 0;
  int64_t version = 0;  // optimistic-concurrency counter, +1 on every update

  bool operator==(const SessionRecord&) const = default;
};

struct RunRecord {
  std::string run_id;
  std::string session_id;
  std::string tenant_id;
  int64_t seq = 0;                // 1, 2, ... within the session (assigned by BeginRun)
  std::string state = "running";  // "running" | "succeeded" | "failed"
  std::string request = "{}";     // the run request (JSON object)
  std::string result = "{}";      // outcome and decision log (JSON object)
  std::string sandbox_id;         // the sandbox that ran it
  int64_t created_at = 0;
  int64_t finished_at = 0;

  bool operator==(const RunRecord&) const = default;
};

// A checkpoint (STATE-2, REUSE-5): a sandbox's writable layer frozen into a read-only layer,
// stacked on its parents and the template like a commit on its history.
struct CheckpointRecord {
  std::string checkpoint_id;
  std::string tenant_id;
  std::string user_id;
  std::string session_id;
  std::string task_id;
  std::string run_id;
  std::string sandbox_id;            // taken from
  std::string parent_checkpoint_id;  // the checkpoint that sandbox was forked from; "" = none
  std::string layers = "[]";         // JSON array: host layer directories, top first
  std::string template_id;
  std::string base_image_digest;  // the template digest every layer sits on
  std::string runtime;
  std::string resource_class;
  int64_t workspace_version = 0;
  std::string manifest = "{}";  // the environment manifest when taken (JSON object)
  std::string environment_fingerprint;
  int64_t files = 0;
  int64_t bytes = 0;
  std::string runtime_snapshot_ref;  // "" = filesystem only (process state is not captured)
  std::string artifact_refs = "[]";  // JSON array
  std::string log_range = "{}";      // JSON object: the run's event range
  std::string encryption_key_ref;    // "" = not encrypted at rest
  std::string data_classification = "internal";
  std::string restore_policy = "same_session";  // who may restore: "same_session" | "same_user"
  std::string network_profile = "none";         // the security context it was taken under
  std::string secret_scope;
  std::string state = "ready";  // "ready" | "deleted"
  int64_t created_at = 0;
  int64_t expires_at = 0;  // 0 = never

  bool operator==(const CheckpointRecord&) const = default;
};

// Which of an allocation record's signatures a history lookup matches.
enum class SignatureKind {
  kWorkload,  // AllocationRecord::workload_signature: the same kind of task
  kCommand,   // AllocationRecord::command_signature: the very same commands
};

class Store {
 public:
  virtual ~Store() = default;

  // The schema version the store is at after migrations (highest applied migration).
  virtual int SchemaVersion() const = 0;

  // Runs `body` as one atomic write transaction: the store calls `body` makes on this thread
  // join it (a call's own transaction becomes a nested one that undoes only itself when it
  // fails), and everything commits together — one durable write — when body returns OK, or
  // rolls back when it fails. Other threads' calls wait meanwhile, so body must do registry
  // work only (no runtime calls, no waiting).
  virtual Status RunInTransaction(const std::function<Status()>& body) = 0;

  // --- tenants and API keys ----------------------------------------------------------------
  // Creates a tenant; kAlreadyExists if the id or name is taken.
  virtual Status CreateTenant(const TenantRecord& tenant) = 0;
  // kNotFound if no tenant has this id.
  virtual Result<TenantRecord> GetTenant(const std::string& id) = 0;
  // Every tenant, ordered by name.
  virtual Result<std::vector<TenantRecord>> ListTenants() = 0;
  // Stores a key; kAlreadyExists on a duplicate id or hash, kNotFound for an unknown tenant,
  // kInvalidArgument for a role other than "admin"/"tenant".
  virtual Status CreateApiKey(const ApiKeyRecord& key) = 0;
  // The unrevoked key with this hash; kNotFound if none (revoked keys are never found).
  virtual Result<ApiKeyRecord> FindApiKeyByHash(const std::string& key_hash) = 0;
  // Marks a key revoked at now_ms; kNotFound if unknown or already revoked.
  virtual Status RevokeApiKey(const std::string& id, int64_t now_ms) = 0;
  // Number of stored keys, revoked ones included (0 tells bootstrap to mint an admin key).
  virtual Result<int64_t> CountApiKeys() = 0;

  // --- sandboxes -----------------------------------------------------------------------------
  // Inserts a sandbox with version 1 and lease_counter 0 (the record's values are ignored);
  // kAlreadyExists if the id is taken.
  virtual Status InsertSandbox(const SandboxRecord& sandbox) = 0;
  // kNotFound if unknown.
  virtual Result<SandboxRecord> GetSandbox(const std::string& sandbox_id) = 0;
  // At most `limit` (>= 1) matching sandboxes ordered by (created_at, sandbox_id), starting
  // after the sandbox `after_id` ("" = from the start; kInvalidArgument if it does not exist).
  virtual Result<SandboxPage> ListSandboxes(const SandboxFilter& filter, int limit,
                                            const std::string& after_id) = 0;
  // Writes every field except sandbox_id, tenant_id, created_at, lease_counter and version, if
  // the stored version still equals sandbox.version. Returns the new version; kConflict if the
  // version moved, kNotFound if the sandbox does not exist.
  virtual Result<int64_t> UpdateSandbox(const SandboxRecord& sandbox) = 0;
  // Sets state/state_reason and appends `event` (sandbox_id, old_state and new_state filled in
  // by the store) in one transaction; returns the new version. kConflict (and no event) if the
  // version is not expected_version; kNotFound if the sandbox does not exist.
  virtual Result<int64_t> TransitionSandbox(const std::string& sandbox_id, int64_t expected_version,
                                            const std::string& new_state, const std::string& reason,
                                            EventRecord event) = 0;

  // POOL-3 late binding: atomically takes the oldest Ready sandbox of warm pool `pool` and binds
  // it to the tenant (pool cleared, session, TTL and idle timeout set, version +1). Returns its
  // id; kNotFound when the pool has no ready member. Concurrent claimers never get the same one.
  virtual Result<std::string> ClaimWarmSandbox(const std::string& pool,
                                               const std::string& tenant_id,
                                               const std::string& session_id, int64_t expires_at,
                                               int64_t idle_timeout_ms) = 0;

  // --- events --------------------------------------------------------------------------------
  // Appends an event; returns its event_id.
  virtual Result<int64_t> AppendEvent(const EventRecord& event) = 0;
  // At most `limit` (>= 1) events of the sandbox with event_id > after_event_id, oldest first.
  virtual Result<std::vector<EventRecord>> ListEvents(const std::string& sandbox_id, int limit,
                                                      int64_t after_event_id) = 0;

  // --- leases (fencing) ---------------------------------------------------------------------
  // Atomically: kConflict if an active lease exists (released_at == 0 && expires_at > now_ms);
  // otherwise lease_counter and version +1 on the sandbox and a new lease whose lease_version
  // is the new counter, expiring at now_ms + ttl_ms. kNotFound for an unknown sandbox.
  virtual Result<LeaseRecord> AcquireLease(const std::string& sandbox_id, const std::string& owner,
                                           int64_t ttl_ms, int64_t now_ms) = 0;
  // Extends the current active lease to now_ms + ttl_ms and records the heartbeat; returns the
  // new expires_at. kConflict unless lease_version is the current, active, unexpired lease.
  virtual Result<int64_t> RenewLease(const std::string& sandbox_id, int64_t lease_version,
                                     int64_t ttl_ms, int64_t now_ms) = 0;
  // Releases the current lease at now_ms; kConflict if lease_version is stale, released or
  // expired.
  virtual Status ReleaseLease(const std::string& sandbox_id, int64_t lease_version,
                              int64_t now_ms) = 0;
  // OK iff lease_version is the sandbox's current, unreleased, unexpired lease; otherwise
  // kConflict saying why (stale version, expired, released, no lease). kNotFound for an
  // unknown sandbox.
  virtual Status CheckLease(const std::string& sandbox_id, int64_t lease_version,
                            int64_t now_ms) = 0;
  // The latest lease of the sandbox, active or not; kNotFound if it was never leased.
  virtual Result<LeaseRecord> GetLease(const std::string& sandbox_id) = 0;
  // Marks every active lease with expires_at <= now_ms released (released_at = expires_at), in
  // one transaction; returns those sandbox ids, sorted.
  virtual Result<std::vector<std::string>> ExpireLeases(int64_t now_ms) = 0;

  // --- environment manifests -----------------------------------------------------------------
  // Inserts or replaces the sandbox's environment record.
  virtual Status UpsertEnvironment(const EnvironmentRecord& env) = 0;
  // kNotFound if none recorded.
  virtual Result<EnvironmentRecord> GetEnvironment(const std::string& sandbox_id) = 0;

  // --- allocation telemetry ------------------------------------------------------------------
  // Appends an allocation record; returns its id.
  virtual Result<int64_t> InsertAllocation(const AllocationRecord& alloc) = 0;
  // At most `limit` (>= 1) records of the tenant ("" = every tenant), newest first.
  virtual Result<std::vector<AllocationRecord>> ListAllocations(const std::string& tenant_id,
                                                                int limit) = 0;
  // At most `limit` (>= 1) records whose signature of `kind` is `signature`, of the tenant
  // ("" = every tenant), newest first: the planner's usage history (PLAN-4).
  virtual Result<std::vector<AllocationRecord>> ListAllocationsBySignature(
      const std::string& tenant_id, SignatureKind kind, const std::string& signature,
      int limit) = 0;

  // --- sessions, runs, checkpoints -------------------------------------------------------------
  // Inserts with version 1; kAlreadyExists if the id is taken.
  virtual Status CreateSession(const SessionRecord& session) = 0;
  virtual Result<SessionRecord> GetSession(const std::string& session_id) = 0;
  // At most `limit` (>= 1) sessions of the tenant ("" = all), newest first.
  virtual Result<std::vector<SessionRecord>> ListSessions(const std::string& tenant_id,
                                                          int limit) = 0;
  // Writes state, current_sandbox_id, metadata and updated_at if the stored version equals
  // session.version; returns the new version. kConflict if it moved.
  virtual Result<int64_t> UpdateSession(const SessionRecord& session) = 0;
  // Starts a run atomically: kFailedPrecondition if the session is closed, kConflict if it
  // already has an active run (one run per session); otherwise inserts the run with the next
  // seq and marks it the session's active run. Returns the stored run.
  virtual Result<RunRecord> BeginRun(const RunRecord& run) = 0;
  // Finishes a running run (state "succeeded"/"failed", result, sandbox_id, finished_at) and
  // clears the session's active run. kConflict if the run is not running.
  virtual Status FinishRun(const RunRecord& run) = 0;
  virtual Result<RunRecord> GetRun(const std::string& run_id) = 0;
  // At most `limit` runs of the session, newest first.
  virtual Result<std::vector<RunRecord>> ListRuns(const std::string& session_id, int limit) = 0;
  // After a crash: every running run becomes failed ("interrupted") and its session's active
  // run is cleared. Returns the run ids.
  virtual Result<std::vector<std::string>> FailInterruptedRuns(int64_t now_ms) = 0;

  virtual Status InsertCheckpoint(const CheckpointRecord& checkpoint) = 0;
  virtual Result<CheckpointRecord> GetCheckpoint(const std::string& checkpoint_id) = 0;
  // Ready checkpoints of the session, newest first.
  virtual Result<std::vector<CheckpointRecord>> ListCheckpoints(const std::string& session_id,
                                                                int limit) = 0;
  // Ready checkpoints with 0 < expires_at <= now_ms.
  virtual Result<std::vector<CheckpointRecord>> ListExpiredCheckpoints(int64_t now_ms,
                                                                       int limit) = 0;
  // Marks a checkpoint deleted (its layer is gone); kNotFound if unknown.
  virtual Status MarkCheckpointDeleted(const std::string& checkpoint_id) = 0;
};

}  // namespace paddock::registry
