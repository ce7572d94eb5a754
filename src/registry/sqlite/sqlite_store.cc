#include "registry/sqlite/sqlite_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "common/random.h"

namespace paddock::registry {

namespace {

struct Migration {
  int version;
  const char* name;
  const char* sql;  // DDL only: no values, so executing it as text is safe
};

// Append-only: a released binary's migrations never change; new ones get the next version.
// STRICT tables make SQLite reject values of the wrong type instead of silently storing them.
const Migration kMigrations[] = {
    {1, "initial registry schema", R"sql(
CREATE TABLE tenants (
  id TEXT PRIMARY KEY CHECK (id <> ''),
  name TEXT NOT NULL UNIQUE CHECK (name <> ''),
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE api_keys (
  id TEXT PRIMARY KEY CHECK (id <> ''),
  tenant_id TEXT NOT NULL REFERENCES tenants(id),
  key_hash TEXT NOT NULL UNIQUE CHECK (key_hash <> ''),
  key_prefix TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('admin', 'tenant')),
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
) STRICT;
CREATE INDEX api_keys_by_tenant ON api_keys(tenant_id);

CREATE TABLE sandbox_instance (
  sandbox_id TEXT PRIMARY KEY CHECK (sandbox_id <> ''),
  tenant_id TEXT NOT NULL,
  user_id TEXT NOT NULL DEFAULT '',
  session_id TEXT NOT NULL DEFAULT '',
  runtime_provider TEXT NOT NULL DEFAULT '',
  runtime_instance_id TEXT NOT NULL DEFAULT '',
  resource_class TEXT NOT NULL DEFAULT '',
  template_id TEXT NOT NULL DEFAULT '',
  cpus REAL NOT NULL DEFAULT 0,
  memory_mb INTEGER NOT NULL DEFAULT 0,
  disk_mb INTEGER NOT NULL DEFAULT 0,
  pids INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL,
  state_reason TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  last_active_at INTEGER NOT NULL DEFAULT 0,
  expires_at INTEGER NOT NULL DEFAULT 0,
  idle_timeout_ms INTEGER NOT NULL DEFAULT 0,
  expiry_action TEXT NOT NULL DEFAULT 'destroy' CHECK (expiry_action IN ('destroy', 'pause')),
  version INTEGER NOT NULL DEFAULT 1,
  tainted INTEGER NOT NULL DEFAULT 0 CHECK (tainted IN (0, 1)),
  lease_counter INTEGER NOT NULL DEFAULT 0,
  pool TEXT NOT NULL DEFAULT '',
  metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
  env TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(env))
) STRICT;
CREATE INDEX sandbox_instance_by_created ON sandbox_instance(created_at, sandbox_id);
CREATE INDEX sandbox_instance_by_tenant ON sandbox_instance(tenant_id, created_at, sandbox_id);
CREATE INDEX sandbox_instance_by_session ON sandbox_instance(session_id) WHERE session_id <> '';
CREATE INDEX sandbox_instance_by_pool ON sandbox_instance(pool) WHERE pool <> '';

CREATE TABLE sandbox_lease (
  sandbox_id TEXT PRIMARY KEY REFERENCES sandbox_instance(sandbox_id) ON DELETE CASCADE,
  lease_id TEXT NOT NULL,
  lease_owner TEXT NOT NULL,
  lease_version INTEGER NOT NULL,
  acquired_at INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  released_at INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX sandbox_lease_active ON sandbox_lease(expires_at) WHERE released_at = 0;

CREATE TABLE sandbox_environment (
  sandbox_id TEXT PRIMARY KEY CHECK (sandbox_id <> ''),
  base_image_digest TEXT NOT NULL DEFAULT '',
  dependency_hash TEXT NOT NULL DEFAULT '',
  workspace_id TEXT NOT NULL DEFAULT '',
  snapshot_id TEXT NOT NULL DEFAULT '',
  environment_version INTEGER NOT NULL DEFAULT 0,
  dirty_level INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE sandbox_event (
  event_id INTEGER PRIMARY KEY AUTOINCREMENT,
  sandbox_id TEXT NOT NULL,
  event_type TEXT NOT NULL,
  old_state TEXT NOT NULL DEFAULT '',
  new_state TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  request_id TEXT NOT NULL DEFAULT '',
  timestamp INTEGER NOT NULL,
  metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata))
) STRICT;
CREATE INDEX sandbox_event_by_sandbox ON sandbox_event(sandbox_id, event_id);

CREATE TABLE sandbox_allocation (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  sandbox_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  task_id TEXT NOT NULL DEFAULT '',
  planner_input_hash TEXT NOT NULL DEFAULT '',
  recommended_class TEXT NOT NULL DEFAULT '',
  actual_class TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  confidence REAL NOT NULL DEFAULT 0,
  cpu REAL NOT NULL DEFAULT 0,
  memory_mb INTEGER NOT NULL DEFAULT 0,
  duration_ms INTEGER NOT NULL DEFAULT 0,
  peak_cpu REAL NOT NULL DEFAULT 0,
  peak_memory_mb INTEGER NOT NULL DEFAULT 0,
  oom INTEGER NOT NULL DEFAULT 0 CHECK (oom IN (0, 1)),
  timed_out INTEGER NOT NULL DEFAULT 0 CHECK (timed_out IN (0, 1)),
  created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX sandbox_allocation_by_tenant ON sandbox_allocation(tenant_id, id);
)sql"},
    // The planner's history is looked up per (tenant, workload signature), newest first; the
    // second index serves the all-tenants lookup.
    {2, "allocation workload signature", R"sql(
ALTER TABLE sandbox_allocation ADD COLUMN workload_signature TEXT NOT NULL DEFAULT '';
CREATE INDEX sandbox_allocation_by_signature
  ON sandbox_allocation(tenant_id, workload_signature, id);
CREATE INDEX sandbox_allocation_by_signature_all ON sandbox_allocation(workload_signature, id);
)sql"},
    {3, "sandbox plan decision", R"sql(
ALTER TABLE sandbox_instance ADD COLUMN plan TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(plan));
)sql"},
    {4, "allocation cpu time", R"sql(
ALTER TABLE sandbox_allocation ADD COLUMN cpu_seconds REAL NOT NULL DEFAULT 0;
)sql"},
    // Exact-commands history is looked up like the workload signature's (see migration 2).
    {5, "allocation command signature", R"sql(
ALTER TABLE sandbox_allocation ADD COLUMN command_signature TEXT NOT NULL DEFAULT '';
CREATE INDEX sandbox_allocation_by_command
  ON sandbox_allocation(tenant_id, command_signature, id);
CREATE INDEX sandbox_allocation_by_command_all ON sandbox_allocation(command_signature, id);
)sql"},
    // Sessions (SCH-1, REUSE-6), their runs (one active at a time) and checkpoints (STATE-2);
    // the environment manifest (REUSE-2) next to the environment row it refines.
    {6, "sessions runs checkpoints", R"sql(
CREATE TABLE session (
  session_id TEXT PRIMARY KEY CHECK (session_id <> ''),
  tenant_id TEXT NOT NULL CHECK (tenant_id <> ''),
  user_id TEXT NOT NULL DEFAULT '',
  workspace_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('active', 'closed')),
  current_sandbox_id TEXT NOT NULL DEFAULT '',
  active_run_id TEXT NOT NULL DEFAULT '',
  run_count INTEGER NOT NULL DEFAULT 0,
  metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  version INTEGER NOT NULL DEFAULT 1
) STRICT;
CREATE INDEX session_by_tenant ON session(tenant_id, created_at);
CREATE TABLE session_run (
  run_id TEXT PRIMARY KEY CHECK (run_id <> ''),
  session_id TEXT NOT NULL REFERENCES session(session_id),
  tenant_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('running', 'succeeded', 'failed')),
  request TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(request)),
  result TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(result)),
  sandbox_id TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL DEFAULT 0,
  UNIQUE (session_id, seq)
) STRICT;
CREATE INDEX session_run_running ON session_run(state) WHERE state = 'running';
CREATE TABLE checkpoint (
  checkpoint_id TEXT PRIMARY KEY CHECK (checkpoint_id <> ''),
  tenant_id TEXT NOT NULL CHECK (tenant_id <> ''),
  user_id TEXT NOT NULL DEFAULT '',
  session_id TEXT NOT NULL,
  task_id TEXT NOT NULL DEFAULT '',
  run_id TEXT NOT NULL DEFAULT '',
  sandbox_id TEXT NOT NULL DEFAULT '',
  parent_checkpoint_id TEXT NOT NULL DEFAULT '',
  layers TEXT NOT NULL CHECK (json_valid(layers) AND json_type(layers) = 'array'),
  template_id TEXT NOT NULL DEFAULT '',
  base_image_digest TEXT NOT NULL DEFAULT '',
  runtime TEXT NOT NULL DEFAULT '',
  resource_class TEXT NOT NULL DEFAULT '',
  workspace_version INTEGER NOT NULL DEFAULT 0,
  manifest TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(manifest)),
  environment_fingerprint TEXT NOT NULL DEFAULT '',
  files INTEGER NOT NULL DEFAULT 0,
  bytes INTEGER NOT NULL DEFAULT 0,
  runtime_snapshot_ref TEXT NOT NULL DEFAULT '',
  artifact_refs TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(artifact_refs)),
  log_range TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(log_range)),
  encryption_key_ref TEXT NOT NULL DEFAULT '',
  data_classification TEXT NOT NULL DEFAULT 'internal',
  restore_policy TEXT NOT NULL CHECK (restore_policy IN ('same_session', 'same_user')),
  state TEXT NOT NULL CHECK (state IN ('ready', 'deleted')),
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX checkpoint_by_session ON checkpoint(session_id, created_at);
CREATE INDEX checkpoint_expiring ON checkpoint(expires_at) WHERE state = 'ready' AND expires_at > 0;
ALTER TABLE sandbox_environment ADD COLUMN manifest TEXT NOT NULL DEFAULT '{}'
  CHECK (json_valid(manifest));
)sql"},
    // What a sandbox mounts besides its template: checkpoint layers (a fork) and binds (the
    // session workspace, the tenant cache), so a soft reset or a restart recreates it as it was.
    {7, "sandbox storage", R"sql(
ALTER TABLE sandbox_instance ADD COLUMN storage TEXT NOT NULL DEFAULT '{}'
  CHECK (json_valid(storage));
ALTER TABLE checkpoint ADD COLUMN network_profile TEXT NOT NULL DEFAULT 'none';
ALTER TABLE checkpoint ADD COLUMN secret_scope TEXT NOT NULL DEFAULT '';
)sql"},
};

constexpr int kBusyTimeoutMs = 5000;

// Maps an SQLite result code onto the Status vocabulary. Extended result codes are enabled on
// the connection, so constraint failures say which constraint failed.
Status SqlError(sqlite3* db, int rc, const char* op) {
  std::string msg = std::string(op) + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
      return Status(StatusCode::kAlreadyExists, std::move(msg));
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return NotFound(std::move(msg) + " (references a row that does not exist)");
    case SQLITE_CONSTRAINT_CHECK:
    case SQLITE_CONSTRAINT_NOTNULL:
    case SQLITE_CONSTRAINT_DATATYPE:
    case SQLITE_TOOBIG:
    case SQLITE_RANGE:
      return InvalidArgument(std::move(msg));
    default:
      break;
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status(StatusCode::kUnavailable, std::move(msg));
    case SQLITE_FULL:
      return ResourceExhausted(std::move(msg));
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return PermissionDenied(std::move(msg));
    default:
      return Internal(std::move(msg));
  }
}

Status Conflict(std::string msg) { return Status(StatusCode::kConflict, std::move(msg)); }

const std::string& JsonOrEmptyObject(const std::string& json) {
  static const std::string kEmpty = "{}";
  return json.empty() ? kEmpty : json;
}

int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

namespace sqlite_internal {

// A cached prepared statement in use. Values are only ever bound, never formatted into SQL.
// Destruction resets the statement, which also ends any read transaction it held open.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt, const char* op) : db_(db), stmt_(stmt), op_(op) {}
  Statement(Statement&& o) noexcept
      : db_(o.db_), stmt_(std::exchange(o.stmt_, nullptr)), op_(o.op_) {}
  Statement& operator=(Statement&& o) noexcept {
    if (this != &o) {
      Release();
      db_ = o.db_;
      stmt_ = std::exchange(o.stmt_, nullptr);
      op_ = o.op_;
    }
    return *this;
  }
  ~Statement() { Release(); }

  // Binds args to parameters ?1, ?2, ... in order.
  template <typename... Args>
  Status Bind(const Args&... args) {
    int index = 0;
    int rc = SQLITE_OK;
    ((rc = rc == SQLITE_OK ? BindOne(++index, args) : rc), ...);
    if (rc != SQLITE_OK) return SqlError(db_, rc, op_);
    return Status::Ok();
  }

  // true: a row is available; false: the statement is done.
  Result<bool> Step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqlError(db_, rc, op_);
  }

  // Steps to completion, ignoring any rows.
  Status Run() {
    for (;;) {
      PADDOCK_ASSIGN_OR_RETURN(bool row, Step());
      if (!row) return Status::Ok();
    }
  }

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string Text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    if (p == nullptr) return {};
    return std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }

 private:
  void Release() {
    if (stmt_ != nullptr) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
      stmt_ = nullptr;
    }
  }

  int BindOne(int i, int64_t v) { return sqlite3_bind_int64(stmt_, i, v); }
  int BindOne(int i, int v) { return sqlite3_bind_int(stmt_, i, v); }
  int BindOne(int i, bool v) { return sqlite3_bind_int(stmt_, i, v ? 1 : 0); }
  int BindOne(int i, double v) { return sqlite3_bind_double(stmt_, i, v); }
  int BindOne(int i, std::nullptr_t) { return sqlite3_bind_null(stmt_, i); }
  int BindOne(int i, const std::string& v) {
    return sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  }
  int BindOne(int i, const char* v) { return sqlite3_bind_text(stmt_, i, v, -1, SQLITE_TRANSIENT); }
  int BindOne(int i, const std::optional<std::string>& v) {
    return v ? BindOne(i, *v) : BindOne(i, nullptr);
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  const char* op_;
};

}  // namespace sqlite_internal

// BEGIN IMMEDIATE takes the database write lock at the start, so the reads inside the
// transaction cannot be invalidated by another writer before our write (a DEFERRED transaction
// would fail with SQLITE_BUSY_SNAPSHOT instead of waiting). Rolls back unless committed.
//
// Inside RunInTransaction a Txn is nested: it becomes a savepoint, so a failing inner
// operation undoes only its own writes and the outer transaction decides about the rest.
// Savepoints may share one name: RELEASE and ROLLBACK TO act on the innermost of that name.
class SqliteStore::Txn {
 public:
  explicit Txn(SqliteStore* store) : store_(store) {}
  ~Txn() {
    if (!open_) return;
    if (nested_) {
      (void)store_->Exec("rollback savepoint", "ROLLBACK TO paddock_nested");
      (void)store_->Exec("rollback savepoint", "RELEASE paddock_nested");
    } else if (sqlite3_get_autocommit(store_->db_) == 0) {
      (void)store_->Exec("rollback", "ROLLBACK");
    }
    --store_->txn_depth_;
  }
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;

  Status Begin(const char* op, Durability durability) {
    PADDOCK_RETURN_IF_ERROR(store_->PrepareWrite(op, durability));
    nested_ = store_->txn_depth_ > 0;
    PADDOCK_RETURN_IF_ERROR(
        store_->Exec(op, nested_ ? "SAVEPOINT paddock_nested" : "BEGIN IMMEDIATE"));
    open_ = true;
    ++store_->txn_depth_;
    return Status::Ok();
  }
  Status Commit(const char* op) {
    PADDOCK_RETURN_IF_ERROR(store_->Exec(op, nested_ ? "RELEASE paddock_nested" : "COMMIT"));
    open_ = false;
    --store_->txn_depth_;
    return Status::Ok();
  }

 private:
  SqliteStore* store_;
  bool open_ = false;
  bool nested_ = false;
};

Status SqliteStore::PrepareWrite(const char* op, Durability durability) {
  const bool full = durability == Durability::kFsync || options_.fsync_lifecycle;
  if (txn_depth_ > 0) {
    // SQLite cannot change the level inside a transaction; the outermost one decided it.
    if (full && !sync_full_)
      return Internal(std::string(op) + ": an fsynced write inside a lifecycle transaction");
    return Status::Ok();
  }
  if (full == sync_full_) return Status::Ok();
  PADDOCK_RETURN_IF_ERROR(
      Exec(op, full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL"));
  sync_full_ = full;
  return Status::Ok();
}

Status SqliteStore::RunInTransaction(const std::function<Status()>& body) {
  const char* op = "transaction";
  std::lock_guard lock(mu_);
  Txn txn(this);
  PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kHostLifetime));
  PADDOCK_RETURN_IF_ERROR(body());
  return txn.Commit(op);
}

namespace {

// Column lists and readers. The order of each list matches its reader.
TenantRecord ReadTenant(const sqlite_internal::Statement& s) {
  return TenantRecord{s.Text(0), s.Text(1), s.Int(2)};
}

ApiKeyRecord ReadApiKey(const sqlite_internal::Statement& s) {
  ApiKeyRecord k;
  k.id = s.Text(0);
  k.tenant_id = s.Text(1);
  k.key_hash = s.Text(2);
  k.key_prefix = s.Text(3);
  k.role = s.Text(4);
  k.created_at = s.Int(5);
  k.revoked_at = s.IsNull(6) ? 0 : s.Int(6);
  return k;
}

#define PADDOCK_SANDBOX_COLUMNS                                                         \
  "sandbox_id, tenant_id, user_id, session_id, runtime_provider, runtime_instance_id, " \
  "resource_class, template_id, cpus, memory_mb, disk_mb, pids, state, state_reason, "  \
  "created_at, last_active_at, expires_at, idle_timeout_ms, expiry_action, version, "   \
  "tainted, lease_counter, pool, metadata, env, plan, storage"

SandboxRecord ReadSandbox(const sqlite_internal::Statement& s) {
  SandboxRecord r;
  r.sandbox_id = s.Text(0);
  r.tenant_id = s.Text(1);
  r.user_id = s.Text(2);
  r.session_id = s.Text(3);
  r.runtime_provider = s.Text(4);
  r.runtime_instance_id = s.Text(5);
  r.resource_class = s.Text(6);
  r.template_id = s.Text(7);
  r.cpus = s.Real(8);
  r.memory_mb = s.Int(9);
  r.disk_mb = s.Int(10);
  r.pids = s.Int(11);
  r.state = s.Text(12);
  r.state_reason = s.Text(13);
  r.created_at = s.Int(14);
  r.last_active_at = s.Int(15);
  r.expires_at = s.Int(16);
  r.idle_timeout_ms = s.Int(17);
  r.expiry_action = s.Text(18);
  r.version = s.Int(19);
  r.tainted = s.Int(20) != 0;
  r.lease_counter = s.Int(21);
  r.pool = s.Text(22);
  r.metadata = s.Text(23);
  r.env = s.Text(24);
  r.plan = s.Text(25);
  r.storage = s.Text(26);
  return r;
}

#define PADDOCK_LEASE_COLUMNS                                                                 \
  "sandbox_id, lease_id, lease_owner, lease_version, acquired_at, heartbeat_at, expires_at, " \
  "released_at"

LeaseRecord ReadLease(const sqlite_internal::Statement& s) {
  LeaseRecord l;
  l.sandbox_id = s.Text(0);
  l.lease_id = s.Text(1);
  l.lease_owner = s.Text(2);
  l.lease_version = s.Int(3);
  l.acquired_at = s.Int(4);
  l.heartbeat_at = s.Int(5);
  l.expires_at = s.Int(6);
  l.released_at = s.Int(7);
  return l;
}

#define PADDOCK_EVENT_COLUMNS                                                               \
  "event_id, sandbox_id, event_type, old_state, new_state, reason, request_id, timestamp, " \
  "metadata"

EventRecord ReadEvent(const sqlite_internal::Statement& s) {
  EventRecord e;
  e.event_id = s.Int(0);
  e.sandbox_id = s.Text(1);
  e.event_type = s.Text(2);
  e.old_state = s.Text(3);
  e.new_state = s.Text(4);
  e.reason = s.Text(5);
  e.request_id = s.Text(6);
  e.timestamp = s.Int(7);
  e.metadata = s.Text(8);
  return e;
}

#define PADDOCK_ALLOCATION_COLUMNS                                                            \
  "id, sandbox_id, tenant_id, task_id, planner_input_hash, recommended_class, actual_class, " \
  "reason, confidence, cpu, memory_mb, duration_ms, peak_cpu, peak_memory_mb, oom, "          \
  "timed_out, created_at, workload_signature, cpu_seconds, command_signature"

AllocationRecord ReadAllocation(const sqlite_internal::Statement& s) {
  AllocationRecord a;
  a.id = s.Int(0);
  a.sandbox_id = s.Text(1);
  a.tenant_id = s.Text(2);
  a.task_id = s.Text(3);
  a.planner_input_hash = s.Text(4);
  a.recommended_class = s.Text(5);
  a.actual_class = s.Text(6);
  a.reason = s.Text(7);
  a.confidence = s.Real(8);
  a.cpu = s.Real(9);
  a.memory_mb = s.Int(10);
  a.duration_ms = s.Int(11);
  a.peak_cpu = s.Real(12);
  a.peak_memory_mb = s.Int(13);
  a.oom = s.Int(14) != 0;
  a.timed_out = s.Int(15) != 0;
  a.created_at = s.Int(16);
  a.workload_signature = s.Text(17);
  a.cpu_seconds = s.Real(18);
  a.command_signature = s.Text(19);
  return a;
}

constexpr const char* kInsertEventSql =
    "INSERT INTO sandbox_event (sandbox_id, event_type, old_state, new_state, reason, "
    "request_id, timestamp, metadata) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING event_id";

Status CheckLimit(const char* op, int limit) {
  if (limit < 1) return InvalidArgument(std::string(op) + ": limit must be at least 1");
  return Status::Ok();
}

Status CheckLeaseTimes(const char* op, int64_t ttl_ms, int64_t now_ms) {
  // released_at == 0 means "active", so a lease must never be released at time 0.
  if (now_ms <= 0) return InvalidArgument(std::string(op) + ": now_ms must be positive");
  if (ttl_ms <= 0) return InvalidArgument(std::string(op) + ": ttl_ms must be positive");
  return Status::Ok();
}

}  // namespace

// --- open and migrate --------------------------------------------------------------------------

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                       SqliteStoreOptions options) {
  if (path.empty()) return InvalidArgument("open registry: empty path");
  const bool in_memory = path == ":memory:";
  if (!in_memory) {
    // Create the file ourselves so it is born 0600: it holds API key hashes and the fencing
    // counters. SQLite gives its -wal and -shm files the database file's permissions.
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return ErrnoStatus("open registry " + path);
    ::close(fd);
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status st = SqlError(db, rc, ("open registry " + path).c_str());
    sqlite3_close_v2(db);
    return st;
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db, options));
  std::lock_guard lock(store->mu_);
  PADDOCK_RETURN_IF_ERROR(store->Configure(in_memory));
  PADDOCK_RETURN_IF_ERROR(store->Migrate());
  return store;
}

int SqliteStore::LatestSchemaVersion() { return std::end(kMigrations)[-1].version; }

SqliteStore::~SqliteStore() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

int SqliteStore::SchemaVersion() const {
  std::lock_guard lock(mu_);
  return schema_version_;
}

Result<int> SqliteStore::SynchronousLevel() {
  const char* op = "synchronous level";
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op, "PRAGMA synchronous"));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Internal("synchronous level: no row");
  return static_cast<int>(s.Int(0));
}

Status SqliteStore::Configure(bool in_memory) {
  const char* op = "configure registry";
  sqlite3_extended_result_codes(db_, 1);
  // Set before anything that needs a lock: changing the journal mode does.
  int rc = sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  if (rc != SQLITE_OK) return SqlError(db_, rc, op);
  if (options_.exclusive) {
    // Before the first access, so WAL never sets up its shared-memory index: the file lock is
    // taken once and held, instead of shared locks taken and dropped on every transaction.
    PADDOCK_RETURN_IF_ERROR(Exec(op, "PRAGMA locking_mode = EXCLUSIVE"));
  }
  PADDOCK_RETURN_IF_ERROR(Exec(op, "PRAGMA foreign_keys = ON"));
  {
    PADDOCK_ASSIGN_OR_RETURN(Stmt check, Prepare(op, "PRAGMA foreign_keys"));
    PADDOCK_ASSIGN_OR_RETURN(bool row, check.Step());
    if (!row || check.Int(0) != 1) return Internal("configure registry: foreign keys stay off");
  }
  if (!in_memory) {
    PADDOCK_ASSIGN_OR_RETURN(Stmt wal, Prepare(op, "PRAGMA journal_mode = WAL"));
    PADDOCK_ASSIGN_OR_RETURN(bool row, wal.Step());
    if (!row || wal.Text(0) != "wal") {
      return Internal("configure registry: cannot enable WAL journal mode");
    }
  }
  // Each write then picks FULL or NORMAL (PrepareWrite); FULL until told otherwise.
  PADDOCK_RETURN_IF_ERROR(Exec(op, "PRAGMA synchronous = FULL"));
  sync_full_ = true;
  return Status::Ok();
}

Status SqliteStore::Migrate() {
  const char* op = "migrate registry";
  PADDOCK_RETURN_IF_ERROR(
      Exec(op,
           "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
           "name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT"));
  auto current_version = [&]() -> Result<int> {
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt q, Prepare(op, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
    PADDOCK_ASSIGN_OR_RETURN(bool row, q.Step());
    return row ? static_cast<int>(q.Int(0)) : 0;
  };
  for (const Migration& m : kMigrations) {
    Txn txn(this);
    PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kFsync));
    // Read inside the write transaction: another process may have migrated meanwhile.
    PADDOCK_ASSIGN_OR_RETURN(int current, current_version());
    if (current >= m.version) continue;  // Txn rolls back the empty transaction
    char* err = nullptr;
    int rc = sqlite3_exec(db_, m.sql, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string what = std::string(op) + " to " + std::to_string(m.version) + " (" + m.name +
                         "): " + (err ? err : sqlite3_errstr(rc));
      sqlite3_free(err);
      return Internal(std::move(what));
    }
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt record,
        Prepare(op,
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)"));
    PADDOCK_RETURN_IF_ERROR(record.Bind(m.version, m.name, WallClockMs()));
    PADDOCK_RETURN_IF_ERROR(record.Run());
    PADDOCK_RETURN_IF_ERROR(txn.Commit(op));
  }
  PADDOCK_ASSIGN_OR_RETURN(schema_version_, current_version());
  if (schema_version_ > LatestSchemaVersion()) {
    return FailedPrecondition("migrate registry: database schema version " +
                              std::to_string(schema_version_) + " is newer than this binary's " +
                              std::to_string(LatestSchemaVersion()));
  }
  return Status::Ok();
}

Result<SqliteStore::Stmt> SqliteStore::Prepare(const char* op, std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  auto it = statements_.find(sql);
  if (it != statements_.end()) {
    stmt = it->second;
  } else {
    int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return SqlError(db_, rc, op);
    statements_.emplace(sql, stmt);
  }
  return Stmt(db_, stmt, op);
}

Status SqliteStore::Exec(const char* op, std::string_view sql) {
  PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op, sql));
  return s.Run();
}

// --- tenants and API keys ----------------------------------------------------------------------

Status SqliteStore::CreateTenant(const TenantRecord& t) {
  const char* op = "create tenant";
  std::lock_guard lock(mu_);
  PADDOCK_RETURN_IF_ERROR(PrepareWrite(op, Durability::kFsync));
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op, "INSERT INTO tenants (id, name, created_at) VALUES (?1, ?2, ?3)"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(t.id, t.name, t.created_at));
  return s.Run();
}

Result<TenantRecord> SqliteStore::GetTenant(const std::string& id) {
  const char* op = "get tenant";
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op,
                                           "SELECT id, name, created_at FROM tenants "
                                           "WHERE id = ?1"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(id));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFound("get tenant: tenant " + id + " not found");
  return ReadTenant(s);
}

Result<std::vector<TenantRecord>> SqliteStore::ListTenants() {
  const char* op = "list tenants";
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(Stmt s,
                           Prepare(op, "SELECT id, name, created_at FROM tenants ORDER BY name"));
  std::vector<TenantRecord> out;
  for (;;) {
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadTenant(s));
  }
  return out;
}

Status SqliteStore::CreateApiKey(const ApiKeyRecord& k) {
  const char* op = "create api key";
  std::lock_guard lock(mu_);
  PADDOCK_RETURN_IF_ERROR(PrepareWrite(op, Durability::kFsync));
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op,
                      "INSERT INTO api_keys (id, tenant_id, key_hash, key_prefix, role, "
                      "created_at, revoked_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
  if (k.revoked_at != 0) {
    PADDOCK_RETURN_IF_ERROR(
        s.Bind(k.id, k.tenant_id, k.key_hash, k.key_prefix, k.role, k.created_at, k.revoked_at));
  } else {
    PADDOCK_RETURN_IF_ERROR(
        s.Bind(k.id, k.tenant_id, k.key_hash, k.key_prefix, k.role, k.created_at, nullptr));
  }
  return s.Run();
}

Result<ApiKeyRecord> SqliteStore::FindApiKeyByHash(const std::string& key_hash) {
  const char* op = "find api key";
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op,
                      "SELECT id, tenant_id, key_hash, key_prefix, role, created_at, revoked_at "
                      "FROM api_keys WHERE key_hash = ?1 AND revoked_at IS NULL"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(key_hash));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  // The hash is a credential: keep it out of the message.
  if (!row) return NotFound("find api key: no active key with this hash");
  return ReadApiKey(s);
}

Status SqliteStore::RevokeApiKey(const std::string& id, int64_t now_ms) {
  const char* op = "revoke api key";
  std::lock_guard lock(mu_);
  PADDOCK_RETURN_IF_ERROR(PrepareWrite(op, Durability::kFsync));
  PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op,
                                           "UPDATE api_keys SET revoked_at = ?2 "
                                           "WHERE id = ?1 AND revoked_at IS NULL RETURNING id"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(id, now_ms));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFound("revoke api key: no active key " + id);
  return s.Run();
}

Result<int64_t> SqliteStore::CountApiKeys() {
  const char* op = "count api keys";
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op, "SELECT COUNT(*) FROM api_keys"));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.Int(0) : int64_t{0};
}

// --- sandboxes ---------------------------------------------------------------------------------

Status SqliteStore::InsertSandbox(const SandboxRecord& r) {
  const char* op = "insert sandbox";
  std::lock_guard lock(mu_);
  PADDOCK_RETURN_IF_ERROR(PrepareWrite(op, Durability::kHostLifetime));
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op, "INSERT INTO sandbox_instance (" PADDOCK_SANDBOX_COLUMNS
                          ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
                          "?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(
      r.sandbox_id, r.tenant_id, r.user_id, r.session_id, r.runtime_provider, r.runtime_instance_id,
      r.resource_class, r.template_id, r.cpus, r.memory_mb, r.disk_mb, r.pids, r.state,
      r.state_reason, r.created_at, r.last_active_at, r.expires_at, r.idle_timeout_ms,
      r.expiry_action, int64_t{1}, r.tainted, int64_t{0}, r.pool, JsonOrEmptyObject(r.metadata),
      JsonOrEmptyObject(r.env), JsonOrEmptyObject(r.plan), JsonOrEmptyObject(r.storage)));
  return s.Run();
}

Result<SandboxRecord> SqliteStore::GetSandbox(const std::string& sandbox_id) {
  const char* op = "get sandbox";
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op, "SELECT " PADDOCK_SANDBOX_COLUMNS
                                               " FROM sandbox_instance WHERE sandbox_id = ?1"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFound("get sandbox: sandbox " + sandbox_id + " not found");
  return ReadSandbox(s);
}

Result<SandboxPage> SqliteStore::ListSandboxes(const SandboxFilter& f, int limit,
                                               const std::string& after_id) {
  const char* op = "list sandboxes";
  PADDOCK_RETURN_IF_ERROR(CheckLimit(op, limit));
  std::lock_guard lock(mu_);
  // Keyset pagination on (created_at, sandbox_id): created_at never changes after insert, so
  // the cursor's position is stable while rows are added or updated between pages.
  bool has_cursor = !after_id.empty();
  int64_t cursor_created_at = 0;
  if (has_cursor) {
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt c, Prepare(op, "SELECT created_at FROM sandbox_instance WHERE sandbox_id = ?1"));
    PADDOCK_RETURN_IF_ERROR(c.Bind(after_id));
    PADDOCK_ASSIGN_OR_RETURN(bool row, c.Step());
    if (!row) return InvalidArgument("list sandboxes: unknown cursor sandbox " + after_id);
    cursor_created_at = c.Int(0);
  }
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s,
      Prepare(op, "SELECT " PADDOCK_SANDBOX_COLUMNS " FROM sandbox_instance"
                  " WHERE (?1 = '' OR tenant_id = ?1)"
                  " AND (?2 IS NULL OR state = ?2)"
                  " AND (?3 = '' OR session_id = ?3)"
                  " AND (?4 = '' OR resource_class = ?4)"
                  " AND (?5 = '' OR pool = ?5)"
                  " AND (?6 OR lower(state) <> 'terminated')"
                  " AND (NOT ?7 OR created_at > ?8 OR (created_at = ?8 AND sandbox_id > ?9))"
                  " ORDER BY created_at, sandbox_id LIMIT ?10"));
  // One row more than asked tells whether another page exists.
  PADDOCK_RETURN_IF_ERROR(s.Bind(f.tenant_id, f.state, f.session_id, f.resource_class, f.pool,
                                 f.include_terminated, has_cursor, cursor_created_at, after_id,
                                 static_cast<int64_t>(limit) + 1));
  SandboxPage page;
  for (;;) {
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    if (page.records.size() == static_cast<size_t>(limit)) {
      page.next_after_id = page.records.back().sandbox_id;
      break;
    }
    page.records.push_back(ReadSandbox(s));
  }
  return page;
}

Result<bool> SqliteStore::SandboxExistsLocked(const char* op, const std::string& sandbox_id) {
  PADDOCK_ASSIGN_OR_RETURN(Stmt s,
                           Prepare(op, "SELECT 1 FROM sandbox_instance WHERE sandbox_id = ?1"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id));
  return s.Step();
}

Result<int64_t> SqliteStore::UpdateSandbox(const SandboxRecord& r) {
  const char* op = "update sandbox";
  std::lock_guard lock(mu_);
  Txn txn(this);
  PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kHostLifetime));
  int64_t new_version = 0;
  {
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt s, Prepare(op,
                        "UPDATE sandbox_instance SET user_id = ?2, session_id = ?3, "
                        "runtime_provider = ?4, runtime_instance_id = ?5, resource_class = ?6, "
                        "template_id = ?7, cpus = ?8, memory_mb = ?9, disk_mb = ?10, pids = ?11, "
                        "state = ?12, state_reason = ?13, last_active_at = ?14, expires_at = ?15, "
                        "idle_timeout_ms = ?16, expiry_action = ?17, tainted = ?18, pool = ?19, "
                        "metadata = ?20, env = ?21, plan = ?23, storage = ?24, "
                        "version = version + 1 "
                        "WHERE sandbox_id = ?1 AND version = ?22 RETURNING version"));
    PADDOCK_RETURN_IF_ERROR(
        s.Bind(r.sandbox_id, r.user_id, r.session_id, r.runtime_provider, r.runtime_instance_id,
               r.resource_class, r.template_id, r.cpus, r.memory_mb, r.disk_mb, r.pids, r.state,
               r.state_reason, r.last_active_at, r.expires_at, r.idle_timeout_ms, r.expiry_action,
               r.tainted, r.pool, JsonOrEmptyObject(r.metadata), JsonOrEmptyObject(r.env),
               r.version, JsonOrEmptyObject(r.plan), JsonOrEmptyObject(r.storage)));
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) new_version = s.Int(0);
  }
  if (new_version == 0) {
    PADDOCK_ASSIGN_OR_RETURN(bool exists, SandboxExistsLocked(op, r.sandbox_id));
    if (!exists) return NotFound("update sandbox: sandbox " + r.sandbox_id + " not found");
    return Conflict("update sandbox: sandbox " + r.sandbox_id + " is no longer at version " +
                    std::to_string(r.version));
  }
  PADDOCK_RETURN_IF_ERROR(txn.Commit(op));
  return new_version;
}

Result<std::string> SqliteStore::ClaimWarmSandbox(const std::string& pool,
                                                  const std::string& tenant_id,
                                                  const std::string& session_id, int64_t expires_at,
                                                  int64_t idle_timeout_ms) {
  const char* op = "claim warm sandbox";
  if (pool.empty()) return InvalidArgument("claim warm sandbox: pool is required");
  if (tenant_id.empty()) return InvalidArgument("claim warm sandbox: tenant_id is required");
  std::lock_guard lock(mu_);
  Txn txn(this);
  PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kHostLifetime));
  std::string id;
  {
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt s, Prepare(op,
                        "UPDATE sandbox_instance SET tenant_id = ?2, session_id = ?3, pool = '', "
                        "expires_at = ?4, idle_timeout_ms = ?5, version = version + 1 "
                        "WHERE sandbox_id = (SELECT sandbox_id FROM sandbox_instance "
                        "WHERE pool = ?1 AND state = 'ready' "
                        "ORDER BY created_at, sandbox_id LIMIT 1) RETURNING sandbox_id"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(pool, tenant_id, session_id, expires_at, idle_timeout_ms));
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return NotFound("claim warm sandbox: pool " + pool + " has no ready sandbox");
    id = s.Text(0);
  }
  PADDOCK_RETURN_IF_ERROR(txn.Commit(op));
  return id;
}

Result<int64_t> SqliteStore::TransitionSandbox(const std::string& sandbox_id,
                                               int64_t expected_version,
                                               const std::string& new_state,
                                               const std::string& reason, EventRecord event) {
  const char* op = "transition sandbox";
  std::lock_guard lock(mu_);
  Txn txn(this);
  PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kHostLifetime));
  std::string old_state;
  int64_t version = 0;
  {
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt s, Prepare(op, "SELECT state, version FROM sandbox_instance WHERE sandbox_id = ?1"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id));
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return NotFound("transition sandbox: sandbox " + sandbox_id + " not found");
    old_state = s.Text(0);
    version = s.Int(1);
  }
  if (version != expected_version) {
    return Conflict("transition sandbox: sandbox " + sandbox_id + " is at version " +
                    std::to_string(version) + ", expected " + std::to_string(expected_version));
  }
  {
    PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op,
                                             "UPDATE sandbox_instance SET state = ?2, "
                                             "state_reason = ?3, version = version + 1 "
                                             "WHERE sandbox_id = ?1"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id, new_state, reason));
    PADDOCK_RETURN_IF_ERROR(s.Run());
  }
  {
    PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op, kInsertEventSql));
    PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id, event.event_type, old_state, new_state,
                                   event.reason.empty() ? reason : event.reason, event.request_id,
                                   event.timestamp, JsonOrEmptyObject(event.metadata)));
    PADDOCK_RETURN_IF_ERROR(s.Run());
  }
  PADDOCK_RETURN_IF_ERROR(txn.Commit(op));
  return version + 1;
}

// --- events ------------------------------------------------------------------------------------

Result<int64_t> SqliteStore::AppendEvent(const EventRecord& e) {
  const char* op = "append event";
  std::lock_guard lock(mu_);
  PADDOCK_RETURN_IF_ERROR(PrepareWrite(op, Durability::kHostLifetime));
  PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op, kInsertEventSql));
  PADDOCK_RETURN_IF_ERROR(s.Bind(e.sandbox_id, e.event_type, e.old_state, e.new_state, e.reason,
                                 e.request_id, e.timestamp, JsonOrEmptyObject(e.metadata)));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Internal("append event: no event id returned");
  int64_t id = s.Int(0);
  PADDOCK_RETURN_IF_ERROR(s.Run());
  return id;
}

Result<std::vector<EventRecord>> SqliteStore::ListEvents(const std::string& sandbox_id, int limit,
                                                         int64_t after_event_id) {
  const char* op = "list events";
  PADDOCK_RETURN_IF_ERROR(CheckLimit(op, limit));
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(Stmt s,
                           Prepare(op, "SELECT " PADDOCK_EVENT_COLUMNS
                                       " FROM sandbox_event WHERE sandbox_id = ?1 AND event_id > ?2"
                                       " ORDER BY event_id LIMIT ?3"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id, after_event_id, limit));
  std::vector<EventRecord> out;
  for (;;) {
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadEvent(s));
  }
  return out;
}

// --- leases ------------------------------------------------------------------------------------

Result<std::optional<LeaseRecord>> SqliteStore::LoadLeaseLocked(const char* op,
                                                                const std::string& sandbox_id) {
  PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op, "SELECT " PADDOCK_LEASE_COLUMNS
                                               " FROM sandbox_lease WHERE sandbox_id = ?1"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<LeaseRecord>();
  return std::optional<LeaseRecord>(ReadLease(s));
}

Status SqliteStore::CheckLeaseLocked(const char* op, const std::string& sandbox_id,
                                     int64_t lease_version, int64_t now_ms) {
  PADDOCK_ASSIGN_OR_RETURN(std::optional<LeaseRecord> lease, LoadLeaseLocked(op, sandbox_id));
  std::string what = std::string(op) + ": sandbox " + sandbox_id + ": lease version " +
                     std::to_string(lease_version);
  if (!lease) {
    PADDOCK_ASSIGN_OR_RETURN(bool exists, SandboxExistsLocked(op, sandbox_id));
    if (!exists) return NotFound(std::string(op) + ": sandbox " + sandbox_id + " not found");
    return Conflict(what + " rejected: the sandbox has no lease");
  }
  if (lease_version < lease->lease_version) {
    return Conflict(what + " is stale: current lease version is " +
                    std::to_string(lease->lease_version));
  }
  if (lease_version > lease->lease_version) {
    return Conflict(what + " was never issued: current lease version is " +
                    std::to_string(lease->lease_version));
  }
  if (lease->released_at != 0) {
    return Conflict(what + " was released at " + std::to_string(lease->released_at));
  }
  if (lease->expires_at <= now_ms) {
    return Conflict(what + " expired at " + std::to_string(lease->expires_at));
  }
  return Status::Ok();
}

Result<LeaseRecord> SqliteStore::AcquireLease(const std::string& sandbox_id,
                                              const std::string& owner, int64_t ttl_ms,
                                              int64_t now_ms) {
  const char* op = "acquire lease";
  PADDOCK_RETURN_IF_ERROR(CheckLeaseTimes(op, ttl_ms, now_ms));
  std::lock_guard lock(mu_);
  // Check-then-write under one write lock: two acquirers (threads or processes) serialise on
  // BEGIN IMMEDIATE and the second sees the first's lease.
  Txn txn(this);
  PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kHostLifetime));
  int64_t counter = 0;
  {
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt s, Prepare(op, "SELECT lease_counter FROM sandbox_instance WHERE sandbox_id = ?1"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id));
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return NotFound("acquire lease: sandbox " + sandbox_id + " not found");
    counter = s.Int(0);
  }
  PADDOCK_ASSIGN_OR_RETURN(std::optional<LeaseRecord> current, LoadLeaseLocked(op, sandbox_id));
  if (current && current->released_at == 0 && current->expires_at > now_ms) {
    return Conflict("acquire lease: sandbox " + sandbox_id + " is leased by " +
                    current->lease_owner + " (version " + std::to_string(current->lease_version) +
                    ") until " + std::to_string(current->expires_at));
  }
  LeaseRecord lease;
  lease.sandbox_id = sandbox_id;
  lease.lease_id = RandomHex(16);
  lease.lease_owner = owner;
  // The counter lives on the sandbox row so it survives the lease row being replaced; max()
  // keeps tokens increasing even if a row was ever written by something else.
  lease.lease_version = std::max(counter, current ? current->lease_version : 0) + 1;
  lease.acquired_at = now_ms;
  lease.heartbeat_at = now_ms;
  lease.expires_at = now_ms + ttl_ms;
  {
    PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op,
                                             "UPDATE sandbox_instance SET lease_counter = ?2, "
                                             "version = version + 1 WHERE sandbox_id = ?1"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id, lease.lease_version));
    PADDOCK_RETURN_IF_ERROR(s.Run());
  }
  {
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt s, Prepare(op, "INSERT INTO sandbox_lease (" PADDOCK_LEASE_COLUMNS
                            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)"
                            " ON CONFLICT (sandbox_id) DO UPDATE SET lease_id = excluded.lease_id,"
                            " lease_owner = excluded.lease_owner,"
                            " lease_version = excluded.lease_version,"
                            " acquired_at = excluded.acquired_at,"
                            " heartbeat_at = excluded.heartbeat_at,"
                            " expires_at = excluded.expires_at, released_at = 0"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id, lease.lease_id, lease.lease_owner,
                                   lease.lease_version, lease.acquired_at, lease.heartbeat_at,
                                   lease.expires_at));
    PADDOCK_RETURN_IF_ERROR(s.Run());
  }
  PADDOCK_RETURN_IF_ERROR(txn.Commit(op));
  return lease;
}

Result<int64_t> SqliteStore::RenewLease(const std::string& sandbox_id, int64_t lease_version,
                                        int64_t ttl_ms, int64_t now_ms) {
  const char* op = "renew lease";
  PADDOCK_RETURN_IF_ERROR(CheckLeaseTimes(op, ttl_ms, now_ms));
  std::lock_guard lock(mu_);
  Txn txn(this);
  PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kHostLifetime));
  PADDOCK_RETURN_IF_ERROR(CheckLeaseLocked(op, sandbox_id, lease_version, now_ms));
  int64_t expires_at = now_ms + ttl_ms;
  {
    PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op,
                                             "UPDATE sandbox_lease SET expires_at = ?2, "
                                             "heartbeat_at = ?3 WHERE sandbox_id = ?1"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id, expires_at, now_ms));
    PADDOCK_RETURN_IF_ERROR(s.Run());
  }
  PADDOCK_RETURN_IF_ERROR(txn.Commit(op));
  return expires_at;
}

Status SqliteStore::ReleaseLease(const std::string& sandbox_id, int64_t lease_version,
                                 int64_t now_ms) {
  const char* op = "release lease";
  PADDOCK_RETURN_IF_ERROR(CheckLeaseTimes(op, 1, now_ms));
  std::lock_guard lock(mu_);
  Txn txn(this);
  PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kHostLifetime));
  PADDOCK_RETURN_IF_ERROR(CheckLeaseLocked(op, sandbox_id, lease_version, now_ms));
  {
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt s, Prepare(op, "UPDATE sandbox_lease SET released_at = ?2 WHERE sandbox_id = ?1"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id, now_ms));
    PADDOCK_RETURN_IF_ERROR(s.Run());
  }
  return txn.Commit(op);
}

Status SqliteStore::CheckLease(const std::string& sandbox_id, int64_t lease_version,
                               int64_t now_ms) {
  const char* op = "check lease";
  std::lock_guard lock(mu_);
  return CheckLeaseLocked(op, sandbox_id, lease_version, now_ms);
}

Result<LeaseRecord> SqliteStore::GetLease(const std::string& sandbox_id) {
  const char* op = "get lease";
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(std::optional<LeaseRecord> lease, LoadLeaseLocked(op, sandbox_id));
  if (!lease) return NotFound("get lease: sandbox " + sandbox_id + " has never been leased");
  return *std::move(lease);
}

Result<std::vector<std::string>> SqliteStore::ExpireLeases(int64_t now_ms) {
  const char* op = "expire leases";
  std::lock_guard lock(mu_);
  Txn txn(this);
  PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kHostLifetime));
  std::vector<std::string> expired;
  {
    PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op,
                                             "UPDATE sandbox_lease SET released_at = expires_at "
                                             "WHERE released_at = 0 AND expires_at <= ?1 "
                                             "RETURNING sandbox_id"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(now_ms));
    for (;;) {
      PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      expired.push_back(s.Text(0));
    }
  }
  PADDOCK_RETURN_IF_ERROR(txn.Commit(op));
  std::sort(expired.begin(), expired.end());
  return expired;
}

// --- environment manifests ---------------------------------------------------------------------

Status SqliteStore::UpsertEnvironment(const EnvironmentRecord& e) {
  const char* op = "upsert environment";
  std::lock_guard lock(mu_);
  PADDOCK_RETURN_IF_ERROR(PrepareWrite(op, Durability::kHostLifetime));
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op,
                      "INSERT INTO sandbox_environment (sandbox_id, base_image_digest, "
                      "dependency_hash, workspace_id, snapshot_id, environment_version, "
                      "dirty_level, manifest) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                      "ON CONFLICT (sandbox_id) DO UPDATE SET "
                      "base_image_digest = excluded.base_image_digest, "
                      "dependency_hash = excluded.dependency_hash, "
                      "workspace_id = excluded.workspace_id, snapshot_id = excluded.snapshot_id, "
                      "environment_version = excluded.environment_version, "
                      "dirty_level = excluded.dirty_level, manifest = excluded.manifest"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(e.sandbox_id, e.base_image_digest, e.dependency_hash,
                                 e.workspace_id, e.snapshot_id, e.environment_version,
                                 e.dirty_level, JsonOrEmptyObject(e.manifest)));
  return s.Run();
}

Result<EnvironmentRecord> SqliteStore::GetEnvironment(const std::string& sandbox_id) {
  const char* op = "get environment";
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op,
                      "SELECT sandbox_id, base_image_digest, dependency_hash, workspace_id, "
                      "snapshot_id, environment_version, dirty_level, manifest FROM "
                      "sandbox_environment "
                      "WHERE sandbox_id = ?1"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(sandbox_id));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFound("get environment: no environment for sandbox " + sandbox_id);
  EnvironmentRecord e;
  e.sandbox_id = s.Text(0);
  e.base_image_digest = s.Text(1);
  e.dependency_hash = s.Text(2);
  e.workspace_id = s.Text(3);
  e.snapshot_id = s.Text(4);
  e.environment_version = s.Int(5);
  e.dirty_level = s.Int(6);
  e.manifest = s.Text(7);
  return e;
}

// --- allocation telemetry ----------------------------------------------------------------------

Result<int64_t> SqliteStore::InsertAllocation(const AllocationRecord& a) {
  const char* op = "insert allocation";
  std::lock_guard lock(mu_);
  PADDOCK_RETURN_IF_ERROR(PrepareWrite(op, Durability::kHostLifetime));
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op,
                      "INSERT INTO sandbox_allocation (sandbox_id, tenant_id, task_id, "
                      "planner_input_hash, recommended_class, actual_class, reason, confidence, "
                      "cpu, memory_mb, duration_ms, peak_cpu, peak_memory_mb, oom, timed_out, "
                      "created_at, workload_signature, cpu_seconds, command_signature) VALUES (?1, "
                      "?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
                      "?18, ?19) RETURNING id"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(a.sandbox_id, a.tenant_id, a.task_id, a.planner_input_hash,
                                 a.recommended_class, a.actual_class, a.reason, a.confidence, a.cpu,
                                 a.memory_mb, a.duration_ms, a.peak_cpu, a.peak_memory_mb, a.oom,
                                 a.timed_out, a.created_at, a.workload_signature, a.cpu_seconds,
                                 a.command_signature));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Internal("insert allocation: no id returned");
  int64_t id = s.Int(0);
  PADDOCK_RETURN_IF_ERROR(s.Run());
  return id;
}

Result<std::vector<AllocationRecord>> SqliteStore::ListAllocations(const std::string& tenant_id,
                                                                   int limit) {
  const char* op = "list allocations";
  PADDOCK_RETURN_IF_ERROR(CheckLimit(op, limit));
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(Stmt s,
                           Prepare(op, "SELECT " PADDOCK_ALLOCATION_COLUMNS
                                       " FROM sandbox_allocation WHERE (?1 = '' OR tenant_id = ?1)"
                                       " ORDER BY id DESC LIMIT ?2"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(tenant_id, limit));
  std::vector<AllocationRecord> out;
  for (;;) {
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadAllocation(s));
  }
  return out;
}

Result<std::vector<AllocationRecord>> SqliteStore::ListAllocationsBySignature(
    const std::string& tenant_id, SignatureKind kind, const std::string& signature, int limit) {
  const char* op = "list allocations by signature";
  PADDOCK_RETURN_IF_ERROR(CheckLimit(op, limit));
  std::lock_guard lock(mu_);
  // Two statements per kind rather than "(?1 = '' OR tenant_id = ?1)": with the OR, SQLite
  // cannot use the (tenant_id, <signature>, id) index for the per-tenant lookup the planner
  // makes. The column name comes from this fixed table, never from the caller.
  const bool by_command = kind == SignatureKind::kCommand;
  std::optional<Stmt> s;
  if (tenant_id.empty()) {
    PADDOCK_ASSIGN_OR_RETURN(
        s, Prepare(op, by_command ? "SELECT " PADDOCK_ALLOCATION_COLUMNS
                                    " FROM sandbox_allocation WHERE command_signature = ?1"
                                    " ORDER BY id DESC LIMIT ?2"
                                  : "SELECT " PADDOCK_ALLOCATION_COLUMNS
                                    " FROM sandbox_allocation WHERE workload_signature = ?1"
                                    " ORDER BY id DESC LIMIT ?2"));
    PADDOCK_RETURN_IF_ERROR(s->Bind(signature, limit));
  } else {
    PADDOCK_ASSIGN_OR_RETURN(
        s, Prepare(op, by_command ? "SELECT " PADDOCK_ALLOCATION_COLUMNS
                                    " FROM sandbox_allocation WHERE tenant_id = ?1 AND "
                                    "command_signature = ?2 ORDER BY id DESC LIMIT ?3"
                                  : "SELECT " PADDOCK_ALLOCATION_COLUMNS
                                    " FROM sandbox_allocation WHERE tenant_id = ?1 AND "
                                    "workload_signature = ?2 ORDER BY id DESC LIMIT ?3"));
    PADDOCK_RETURN_IF_ERROR(s->Bind(tenant_id, signature, limit));
  }
  std::vector<AllocationRecord> out;
  for (;;) {
    PADDOCK_ASSIGN_OR_RETURN(bool row, s->Step());
    if (!row) break;
    out.push_back(ReadAllocation(*s));
  }
  return out;
}

}  // namespace paddock::registry

// --- sessions, runs, checkpoints -----------------------------------------------------------------
// Sessions and checkpoints describe state that outlives every sandbox (a workspace, a frozen
// layer on disk), so they are fsynced like tenants; runs too, since a run row is what keeps a
// second run of the session out.

namespace paddock::registry {

#define PADDOCK_SESSION_COLUMNS                                                              \
  "session_id, tenant_id, user_id, workspace_id, state, current_sandbox_id, active_run_id, " \
  "run_count, metadata, created_at, updated_at, version"

#define PADDOCK_RUN_COLUMNS                                                              \
  "run_id, session_id, tenant_id, seq, state, request, result, sandbox_id, created_at, " \
  "finished_at"

#define PADDOCK_CHECKPOINT_COLUMNS                                                          \
  "checkpoint_id, tenant_id, user_id, session_id, task_id, run_id, sandbox_id, "            \
  "parent_checkpoint_id, layers, template_id, base_image_digest, runtime, resource_class, " \
  "workspace_version, manifest, environment_fingerprint, files, bytes, "                    \
  "runtime_snapshot_ref, artifact_refs, log_range, encryption_key_ref, "                    \
  "data_classification, restore_policy, state, created_at, expires_at, network_profile, "   \
  "secret_scope"

namespace {

SessionRecord ReadSession(const sqlite_internal::Statement& s) {
  SessionRecord r;
  r.session_id = s.Text(0);
  r.tenant_id = s.Text(1);
  r.user_id = s.Text(2);
  r.workspace_id = s.Text(3);
  r.state = s.Text(4);
  r.current_sandbox_id = s.Text(5);
  r.active_run_id = s.Text(6);
  r.run_count = s.Int(7);
  r.metadata = s.Text(8);
  r.created_at = s.Int(9);
  r.updated_at = s.Int(10);
  r.version = s.Int(11);
  return r;
}

RunRecord ReadRun(const sqlite_internal::Statement& s) {
  RunRecord r;
  r.run_id = s.Text(0);
  r.session_id = s.Text(1);
  r.tenant_id = s.Text(2);
  r.seq = s.Int(3);
  r.state = s.Text(4);
  r.request = s.Text(5);
  r.result = s.Text(6);
  r.sandbox_id = s.Text(7);
  r.created_at = s.Int(8);
  r.finished_at = s.Int(9);
  return r;
}

CheckpointRecord ReadCheckpoint(const sqlite_internal::Statement& s) {
  CheckpointRecord c;
  c.checkpoint_id = s.Text(0);
  c.tenant_id = s.Text(1);
  c.user_id = s.Text(2);
  c.session_id = s.Text(3);
  c.task_id = s.Text(4);
  c.run_id = s.Text(5);
  c.sandbox_id = s.Text(6);
  c.parent_checkpoint_id = s.Text(7);
  c.layers = s.Text(8);
  c.template_id = s.Text(9);
  c.base_image_digest = s.Text(10);
  c.runtime = s.Text(11);
  c.resource_class = s.Text(12);
  c.workspace_version = s.Int(13);
  c.manifest = s.Text(14);
  c.environment_fingerprint = s.Text(15);
  c.files = s.Int(16);
  c.bytes = s.Int(17);
  c.runtime_snapshot_ref = s.Text(18);
  c.artifact_refs = s.Text(19);
  c.log_range = s.Text(20);
  c.encryption_key_ref = s.Text(21);
  c.data_classification = s.Text(22);
  c.restore_policy = s.Text(23);
  c.state = s.Text(24);
  c.created_at = s.Int(25);
  c.expires_at = s.Int(26);
  c.network_profile = s.Text(27);
  c.secret_scope = s.Text(28);
  return c;
}

const std::string& JsonOrEmptyArray(const std::string& json) {
  static const std::string kEmpty = "[]";
  return json.empty() ? kEmpty : json;
}

}  // namespace

Status SqliteStore::CreateSession(const SessionRecord& r) {
  const char* op = "create session";
  std::lock_guard lock(mu_);
  PADDOCK_RETURN_IF_ERROR(PrepareWrite(op, Durability::kFsync));
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op, "INSERT INTO session (" PADDOCK_SESSION_COLUMNS
                          ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1)"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(r.session_id, r.tenant_id, r.user_id, r.workspace_id, r.state,
                                 r.current_sandbox_id, r.active_run_id, r.run_count,
                                 JsonOrEmptyObject(r.metadata), r.created_at, r.updated_at));
  return s.Run();
}

Result<SessionRecord> SqliteStore::GetSession(const std::string& session_id) {
  const char* op = "get session";
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op, "SELECT " PADDOCK_SESSION_COLUMNS " FROM session WHERE session_id = ?1"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(session_id));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFound("get session: session " + session_id + " not found");
  return ReadSession(s);
}

Result<std::vector<SessionRecord>> SqliteStore::ListSessions(const std::string& tenant_id,
                                                             int limit) {
  const char* op = "list sessions";
  PADDOCK_RETURN_IF_ERROR(CheckLimit(op, limit));
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(Stmt s,
                           Prepare(op, "SELECT " PADDOCK_SESSION_COLUMNS
                                       " FROM session WHERE (?1 = '' OR tenant_id = ?1)"
                                       " ORDER BY created_at DESC, session_id DESC LIMIT ?2"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(tenant_id, limit));
  std::vector<SessionRecord> out;
  for (;;) {
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadSession(s));
  }
  return out;
}

Result<int64_t> SqliteStore::UpdateSession(const SessionRecord& r) {
  const char* op = "update session";
  std::lock_guard lock(mu_);
  PADDOCK_RETURN_IF_ERROR(PrepareWrite(op, Durability::kFsync));
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op,
                      "UPDATE session SET state = ?3, current_sandbox_id = ?4, metadata = ?5, "
                      "updated_at = ?6, version = version + 1 WHERE session_id = ?1 AND "
                      "version = ?2 RETURNING version"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(r.session_id, r.version, r.state, r.current_sandbox_id,
                                 JsonOrEmptyObject(r.metadata), r.updated_at));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) {
    auto current = GetSession(r.session_id);
    if (!current.ok()) return current.status();
    return Conflict("update session: session " + r.session_id + " is at version " +
                    std::to_string(current->version) + ", not " + std::to_string(r.version));
  }
  int64_t version = s.Int(0);
  PADDOCK_RETURN_IF_ERROR(s.Run());
  return version;
}

Result<RunRecord> SqliteStore::BeginRun(const RunRecord& run) {
  const char* op = "begin run";
  std::lock_guard lock(mu_);
  Txn txn(this);
  PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kFsync));
  SessionRecord session;
  {
    PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op, "SELECT " PADDOCK_SESSION_COLUMNS
                                                 " FROM session WHERE session_id = ?1"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(run.session_id));
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return NotFound("begin run: session " + run.session_id + " not found");
    session = ReadSession(s);
  }
  if (session.state != "active") {
    return FailedPrecondition("begin run: session " + run.session_id + " is " + session.state);
  }
  if (!session.active_run_id.empty()) {
    return Conflict("begin run: session " + run.session_id + " already has an active run (" +
                    session.active_run_id + ")");
  }
  RunRecord stored = run;
  stored.tenant_id = session.tenant_id;
  stored.seq = session.run_count + 1;
  stored.state = "running";
  stored.finished_at = 0;
  {
    PADDOCK_ASSIGN_OR_RETURN(Stmt s,
                             Prepare(op, "INSERT INTO session_run (" PADDOCK_RUN_COLUMNS
                                         ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0)"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(stored.run_id, stored.session_id, stored.tenant_id, stored.seq,
                                   stored.state, JsonOrEmptyObject(stored.request),
                                   JsonOrEmptyObject(stored.result), stored.sandbox_id,
                                   stored.created_at));
    PADDOCK_RETURN_IF_ERROR(s.Run());
  }
  {
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt s, Prepare(op,
                        "UPDATE session SET active_run_id = ?2, run_count = ?3, updated_at = ?4, "
                        "version = version + 1 WHERE session_id = ?1"));
    PADDOCK_RETURN_IF_ERROR(
        s.Bind(stored.session_id, stored.run_id, stored.seq, stored.created_at));
    PADDOCK_RETURN_IF_ERROR(s.Run());
  }
  PADDOCK_RETURN_IF_ERROR(txn.Commit(op));
  return stored;
}

Status SqliteStore::FinishRun(const RunRecord& run) {
  const char* op = "finish run";
  if (run.state != "succeeded" && run.state != "failed") {
    return InvalidArgument("finish run: state must be succeeded or failed");
  }
  std::lock_guard lock(mu_);
  Txn txn(this);
  PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kFsync));
  {
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt s, Prepare(op,
                        "UPDATE session_run SET state = ?2, result = ?3, sandbox_id = ?4, "
                        "finished_at = ?5 WHERE run_id = ?1 AND state = 'running' "
                        "RETURNING session_id"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(run.run_id, run.state, JsonOrEmptyObject(run.result),
                                   run.sandbox_id, run.finished_at));
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return Conflict("finish run: run " + run.run_id + " is not running");
    const std::string session_id = s.Text(0);
    PADDOCK_RETURN_IF_ERROR(s.Run());
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt u, Prepare(op,
                        "UPDATE session SET active_run_id = '', updated_at = ?3, "
                        "version = version + 1 WHERE session_id = ?1 AND active_run_id = ?2"));
    PADDOCK_RETURN_IF_ERROR(u.Bind(session_id, run.run_id, run.finished_at));
    PADDOCK_RETURN_IF_ERROR(u.Run());
  }
  return txn.Commit(op);
}

Result<RunRecord> SqliteStore::GetRun(const std::string& run_id) {
  const char* op = "get run";
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op, "SELECT " PADDOCK_RUN_COLUMNS " FROM session_run WHERE run_id = ?1"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(run_id));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFound("get run: run " + run_id + " not found");
  return ReadRun(s);
}

Result<std::vector<RunRecord>> SqliteStore::ListRuns(const std::string& session_id, int limit) {
  const char* op = "list runs";
  PADDOCK_RETURN_IF_ERROR(CheckLimit(op, limit));
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op, "SELECT " PADDOCK_RUN_COLUMNS " FROM session_run WHERE session_id = ?1"
                          " ORDER BY seq DESC LIMIT ?2"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(session_id, limit));
  std::vector<RunRecord> out;
  for (;;) {
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadRun(s));
  }
  return out;
}

Result<std::vector<std::string>> SqliteStore::FailInterruptedRuns(int64_t now_ms) {
  const char* op = "fail interrupted runs";
  std::lock_guard lock(mu_);
  Txn txn(this);
  PADDOCK_RETURN_IF_ERROR(txn.Begin(op, Durability::kFsync));
  std::vector<std::string> ids;
  {
    PADDOCK_ASSIGN_OR_RETURN(
        Stmt s, Prepare(op,
                        "UPDATE session_run SET state = 'failed', finished_at = ?1, result = "
                        "json_set(result, '$.error', 'interrupted: the daemon stopped during the "
                        "run') WHERE state = 'running' RETURNING run_id"));
    PADDOCK_RETURN_IF_ERROR(s.Bind(now_ms));
    for (;;) {
      PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      ids.push_back(s.Text(0));
    }
  }
  for (const std::string& id : ids) {
    PADDOCK_ASSIGN_OR_RETURN(Stmt u,
                             Prepare(op,
                                     "UPDATE session SET active_run_id = '', updated_at = ?2, "
                                     "version = version + 1 WHERE active_run_id = ?1"));
    PADDOCK_RETURN_IF_ERROR(u.Bind(id, now_ms));
    PADDOCK_RETURN_IF_ERROR(u.Run());
  }
  PADDOCK_RETURN_IF_ERROR(txn.Commit(op));
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status SqliteStore::InsertCheckpoint(const CheckpointRecord& c) {
  const char* op = "insert checkpoint";
  std::lock_guard lock(mu_);
  PADDOCK_RETURN_IF_ERROR(PrepareWrite(op, Durability::kFsync));
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op, "INSERT INTO checkpoint (" PADDOCK_CHECKPOINT_COLUMNS
                          ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
                          "?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, "
                          "?29)"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(
      c.checkpoint_id, c.tenant_id, c.user_id, c.session_id, c.task_id, c.run_id, c.sandbox_id,
      c.parent_checkpoint_id, JsonOrEmptyArray(c.layers), c.template_id, c.base_image_digest,
      c.runtime, c.resource_class, c.workspace_version, JsonOrEmptyObject(c.manifest),
      c.environment_fingerprint, c.files, c.bytes, c.runtime_snapshot_ref,
      JsonOrEmptyArray(c.artifact_refs), JsonOrEmptyObject(c.log_range), c.encryption_key_ref,
      c.data_classification, c.restore_policy, c.state, c.created_at, c.expires_at,
      c.network_profile, c.secret_scope));
  return s.Run();
}

Result<CheckpointRecord> SqliteStore::GetCheckpoint(const std::string& checkpoint_id) {
  const char* op = "get checkpoint";
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(Stmt s, Prepare(op, "SELECT " PADDOCK_CHECKPOINT_COLUMNS
                                               " FROM checkpoint WHERE checkpoint_id = ?1"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(checkpoint_id));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFound("get checkpoint: checkpoint " + checkpoint_id + " not found");
  return ReadCheckpoint(s);
}

Result<std::vector<CheckpointRecord>> SqliteStore::ListCheckpoints(const std::string& session_id,
                                                                   int limit) {
  const char* op = "list checkpoints";
  PADDOCK_RETURN_IF_ERROR(CheckLimit(op, limit));
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(Stmt s,
                           Prepare(op, "SELECT " PADDOCK_CHECKPOINT_COLUMNS
                                       " FROM checkpoint WHERE session_id = ?1 AND state = 'ready'"
                                       " ORDER BY created_at DESC, checkpoint_id DESC LIMIT ?2"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(session_id, limit));
  std::vector<CheckpointRecord> out;
  for (;;) {
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadCheckpoint(s));
  }
  return out;
}

Result<std::vector<CheckpointRecord>> SqliteStore::ListExpiredCheckpoints(int64_t now_ms,
                                                                          int limit) {
  const char* op = "list expired checkpoints";
  PADDOCK_RETURN_IF_ERROR(CheckLimit(op, limit));
  std::lock_guard lock(mu_);
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op, "SELECT " PADDOCK_CHECKPOINT_COLUMNS
                          " FROM checkpoint WHERE state = 'ready' AND expires_at > 0 AND "
                          "expires_at <= ?1 ORDER BY expires_at LIMIT ?2"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(now_ms, limit));
  std::vector<CheckpointRecord> out;
  for (;;) {
    PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadCheckpoint(s));
  }
  return out;
}

Status SqliteStore::MarkCheckpointDeleted(const std::string& checkpoint_id) {
  const char* op = "delete checkpoint";
  std::lock_guard lock(mu_);
  PADDOCK_RETURN_IF_ERROR(PrepareWrite(op, Durability::kFsync));
  PADDOCK_ASSIGN_OR_RETURN(
      Stmt s, Prepare(op,
                      "UPDATE checkpoint SET state = 'deleted' WHERE checkpoint_id = ?1 "
                      "RETURNING checkpoint_id"));
  PADDOCK_RETURN_IF_ERROR(s.Bind(checkpoint_id));
  PADDOCK_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFound("delete checkpoint: checkpoint " + checkpoint_id + " not found");
  return s.Run();
}

}  // namespace paddock::registry
