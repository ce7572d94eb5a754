// SQLite implementation of the registry Store: the embedded default (REG-2).
//
// One connection guarded by a (recursive) mutex: every call is short and SQLite serialises
// writers anyway, so a pool would buy little on one machine. The mutex is recursive so that the
// store calls made inside RunInTransaction's body, on the same thread, join its transaction.
// Read-modify-write operations run in `BEGIN IMMEDIATE` transactions, which take the write lock up
// front, so they are also atomic against another process (or another SqliteStore) on the same file;
// waits for that lock are bounded by busy_timeout (5 s). Every value reaches SQL as a bound
// parameter.
#pragma once

#include <sqlite3.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "registry/store.h"

namespace paddock::registry {

namespace sqlite_internal {
class Statement;
}  // namespace sqlite_internal

struct SqliteStoreOptions {
  bool fsync_lifecycle = false;  // fsync sandbox lifecycle writes too (see above)
  // Hold the database file's lock for the connection's whole life (SQLite's EXCLUSIVE locking
  // mode): no per-transaction file locking, and a second process (a second paddockd on the same
  // data dir, whose reconciler would destroy this one's sandboxes) cannot open it — Open fails
  // with kUnavailable after the busy timeout.
  bool exclusive = false;
};

class SqliteStore final : public Store {
 public:
  // Opens (creating with mode 0600 if needed) the database at `path` and applies pending
  // migrations in order, each in its own transaction. WAL journal, synchronous=FULL, foreign
  // keys on. kFailedPrecondition if the file's schema is newer than this binary knows.
  // ":memory:" opens a private in-memory database (tests).
  static Result<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                   SqliteStoreOptions options = {});

  // The newest schema version this binary can migrate to.
  static int LatestSchemaVersion();

  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  int SchemaVersion() const override;
  // The connection's PRAGMA synchronous value now (1 NORMAL, 2 FULL): lets tests see which
  // level a write ran at.
  Result<int> SynchronousLevel();
  Status RunInTransaction(const std::function<Status()>& body) override;

  Status CreateTenant(const TenantRecord& tenant) override;
  Result<TenantRecord> GetTenant(const std::string& id) override;
  Result<std::vector<TenantRecord>> ListTenants() override;
  Status CreateApiKey(const ApiKeyRecord& key) override;
  Result<ApiKeyRecord> FindApiKeyByHash(const std::string& key_hash) override;
  Status RevokeApiKey(const std::string& id, int64_t now_ms) override;
  Result<int64_t> CountApiKeys() override;

  Status InsertSandbox(const SandboxRecord& sandbox) override;
  Result<SandboxRecord> GetSandbox(const std::string& sandbox_id) override;
  Result<SandboxPage> ListSandboxes(const SandboxFilter& filter, int limit,
                                    const std::string& after_id) override;
  Result<std::string> ClaimWarmSandbox(const std::string& pool, const std::string& tenant_id,
                                       const std::string& session_id, int64_t expires_at,
                                       int64_t idle_timeout_ms) override;
  Result<int64_t> UpdateSandbox(const SandboxRecord& sandbox) override;
  Result<int64_t> TransitionSandbox(const std::string& sandbox_id, int64_t expected_version,
                                    const std::string& new_state, const std::string& reason,
                                    EventRecord event) override;

  Result<int64_t> AppendEvent(const EventRecord& event) override;
  Result<std::vector<EventRecord>> ListEvents(const std::string& sandbox_id, int limit,
                                              int64_t after_event_id) override;

  Result<LeaseRecord> AcquireLease(const std::string& sandbox_id, const std::string& owner,
                                   int64_t ttl_ms, int64_t now_ms) override;
  Result<int64_t> RenewLease(const std::string& sandbox_id, int64_t lease_version, int64_t ttl_ms,
                             int64_t now_ms) override;
  Status ReleaseLease(const std::string& sandbox_id, int64_t lease_version,
                      int64_t now_ms) override;
  Status CheckLease(const std::string& sandbox_id, int64_t lease_version, int64_t now_ms) override;
  Result<LeaseRecord> GetLease(const std::string& sandbox_id) override;
  Result<std::vector<std::string>> ExpireLeases(int64_t now_ms) override;

  Status UpsertEnvironment(const EnvironmentRecord& env) override;
  Result<EnvironmentRecord> GetEnvironment(const std::string& sandbox_id) override;

  Result<int64_t> InsertAllocation(const AllocationRecord& alloc) override;
  Result<std::vector<AllocationRecord>> ListAllocations(const std::string& tenant_id,
                                                        int limit) override;
  Result<std::vector<AllocationRecord>> ListAllocationsBySignature(const std::string& tenant_id,
                                                                   SignatureKind kind,
                                                                   const std::string& signature,
                                                                   int limit) override;

  Status CreateSession(const SessionRecord& session) override;
  Result<SessionRecord> GetSession(const std::string& session_id) override;
  Result<std::vector<SessionRecord>> ListSessions(const std::string& tenant_id, int limit) override;
  Result<int64_t> UpdateSession(const SessionRecord& session) override;
  Result<RunRecord> BeginRun(const RunRecord& run) override;
  Status FinishRun(const RunRecord& run) override;
  Result<RunRecord> GetRun(const std::string& run_id) override;
  Result<std::vector<RunRecord>> ListRuns(const std::string& session_id, int limit) override;
  Result<std::vector<std::string>> FailInterruptedRuns(int64_t now_ms) override;
  Status InsertCheckpoint(const CheckpointRecord& checkpoint) override;
  Result<CheckpointRecord> GetCheckpoint(const std::string& checkpoint_id) override;
  Result<std::vector<CheckpointRecord>> ListCheckpoints(const std::string& session_id,
                                                        int limit) override;
  Result<std::vector<CheckpointRecord>> ListExpiredCheckpoints(int64_t now_ms, int limit) override;
  Status MarkCheckpointDeleted(const std::string& checkpoint_id) override;

 private:
  using Stmt = sqlite_internal::Statement;
  class Txn;

  // How far a write must reach before the call returns (see the class comment).
  enum class Durability { kFsync, kHostLifetime };

  SqliteStore(sqlite3* db, SqliteStoreOptions options) : db_(db), options_(options) {}

  Status Configure(bool in_memory);
  Status Migrate();
  // A cached prepared statement for `sql` (a string literal), reset and unbound when the
  // returned Stmt goes out of scope. Caller holds mu_.
  Result<Stmt> Prepare(const char* op, std::string_view sql);
  Status Exec(const char* op, std::string_view sql);
  // Sets the synchronous level for a write about to start; inside a transaction, checks that
  // the transaction's level is enough. Caller holds mu_.
  Status PrepareWrite(const char* op, Durability durability);
  // Lease row of the sandbox inside the caller's transaction; nullopt if never leased.
  Result<std::optional<LeaseRecord>> LoadLeaseLocked(const char* op, const std::string& sandbox_id);
  Result<bool> SandboxExistsLocked(const char* op, const std::string& sandbox_id);
  Status CheckLeaseLocked(const char* op, const std::string& sandbox_id, int64_t lease_version,
                          int64_t now_ms);

  mutable std::recursive_mutex mu_;
  int txn_depth_ = 0;      // open Txns on this connection (guarded by mu_)
  bool sync_full_ = true;  // the connection's synchronous level is FULL (guarded by mu_)
  sqlite3* db_;
  const SqliteStoreOptions options_;
  int schema_version_ = 0;
  std::unordered_map<std::string_view, sqlite3_stmt*> statements_;  // keys point at literals
};

}  // namespace paddock::registry
