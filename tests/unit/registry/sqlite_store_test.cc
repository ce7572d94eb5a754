#include "registry/sqlite/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <latch>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace paddock::registry {
namespace {

namespace fs = std::filesystem;

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "paddock-registry-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/registry.db";
    store_ = OpenStore();
  }
  void TearDown() override {
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::unique_ptr<SqliteStore> OpenStore() {
    auto r = SqliteStore::Open(path_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  // A raw connection to inspect the file behind the store's back.
  sqlite3* RawDb() {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    return db;
  }
  std::string RawQueryText(const char* sql) {
    sqlite3* db = RawDb();
    sqlite3_stmt* st = nullptr;
    std::string out;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    if (sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(st, 0);
      out = t ? reinterpret_cast<const char*>(t) : "";
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  }

  static SandboxRecord Sandbox(const std::string& id, const std::string& tenant = "t1",
                               int64_t created_at = 1000) {
    SandboxRecord r;
    r.sandbox_id = id;
    r.tenant_id = tenant;
    r.state = "ready";
    r.created_at = created_at;
    return r;
  }

  void Insert(const SandboxRecord& r) {
    Status st = store_->InsertSandbox(r);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<SqliteStore> store_;
};

// --- schema and open ---------------------------------------------------------------------------

TEST_F(SqliteStoreTest, MigrationsAreIdempotentAndKeepData) {
  ASSERT_NE(store_, nullptr);
  const int version = store_->SchemaVersion();
  EXPECT_GE(version, 1);
  EXPECT_EQ(version, SqliteStore::LatestSchemaVersion());
  ASSERT_TRUE(store_->CreateTenant({"t1", "acme", 5}).ok());
  Insert(Sandbox("sb-1"));

  store_.reset();
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->SchemaVersion(), version);
  auto tenant = store_->GetTenant("t1");
  ASSERT_TRUE(tenant.ok()) << tenant.status().ToString();
  EXPECT_EQ(tenant->name, "acme");
  EXPECT_TRUE(store_->GetSandbox("sb-1").ok());

  store_.reset();
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->SchemaVersion(), version);
  // One row per migration, however often the file is opened.
  EXPECT_EQ(RawQueryText("SELECT COUNT(*) FROM schema_migrations"), std::to_string(version));
}

TEST_F(SqliteStoreTest, OpenCreatesPrivateWalFileWithForeignKeys) {
  ASSERT_NE(store_, nullptr);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // journal_mode=WAL is persistent in the file, so a fresh connection sees it.
  EXPECT_EQ(RawQueryText("PRAGMA journal_mode"), "wal");
  // foreign_keys is per connection: the store's own connection must enforce it.
  ApiKeyRecord orphan{"k1", "no-such-tenant", std::string(64, 'a'), "aaaaaaaa", "admin", 1, 0};
  EXPECT_EQ(store_->CreateApiKey(orphan).code(), StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, RefusesSchemaNewerThanBinary) {
  store_.reset();
  sqlite3* db = RawDb();
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO schema_migrations VALUES (999, 'future', 0)", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto r = SqliteStore::Open(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(SqliteStoreTest, InMemoryDatabaseWorks) {
  auto r = SqliteStore::Open(":memory:");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->SchemaVersion(), SqliteStore::LatestSchemaVersion());
  EXPECT_TRUE((*r)->InsertSandbox(Sandbox("m1")).ok());
  EXPECT_TRUE((*r)->GetSandbox("m1").ok());
}

// --- tenants and keys --------------------------------------------------------------------------

TEST_F(SqliteStoreTest, TenantsRoundTripAndDuplicateNameIsAlreadyExists) {
  ASSERT_TRUE(store_->CreateTenant({"t2", "zeta", 20}).ok());
  ASSERT_TRUE(store_->CreateTenant({"t1", "acme", 10}).ok());
  EXPECT_EQ(store_->CreateTenant({"t3", "acme", 30}).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->CreateTenant({"t1", "other", 30}).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->CreateTenant({"", "empty-id", 30}).code(), StatusCode::kInvalidArgument);

  auto got = store_->GetTenant("t1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, (TenantRecord{"t1", "acme", 10}));
  EXPECT_EQ(store_->GetTenant("t9").status().code(), StatusCode::kNotFound);

  auto all = store_->ListTenants();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "acme");
  EXPECT_EQ((*all)[1].name, "zeta");
}

TEST_F(SqliteStoreTest, ApiKeysFoundByHashUntilRevoked) {
  ASSERT_TRUE(store_->CreateTenant({"t1", "acme", 1}).ok());
  EXPECT_EQ(*store_->CountApiKeys(), 0);
  const std::string hash_a(64, 'a'), hash_b(64, 'b'), hash_c(64, 'c');
  ApiKeyRecord a{"ka", "t1", hash_a, "sk_aaaaa", "admin", 100, 0};
  ASSERT_TRUE(store_->CreateApiKey(a).ok());
  ApiKeyRecord b{"kb", "t1", hash_b, "sk_bbbbb", "tenant", 101, 0};
  ASSERT_TRUE(store_->CreateApiKey(b).ok());
  ApiKeyRecord c{"kc", "t1", hash_c, "sk_ccccc", "tenant", 102, 150};  // born revoked
  ASSERT_TRUE(store_->CreateApiKey(c).ok());
  EXPECT_EQ(*store_->CountApiKeys(), 3);

  auto found = store_->FindApiKeyByHash(hash_a);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, a);
  EXPECT_EQ(store_->FindApiKeyByHash(hash_c).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->FindApiKeyByHash(std::string(64, 'f')).status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(store_->RevokeApiKey("kb", 200).ok());
  EXPECT_EQ(store_->FindApiKeyByHash(hash_b).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->RevokeApiKey("kb", 201).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->RevokeApiKey("nope", 201).code(), StatusCode::kNotFound);
  EXPECT_EQ(*store_->CountApiKeys(), 3);  // revoked keys still count

  ApiKeyRecord dup_hash{"kd", "t1", hash_a, "sk_aaaaa", "tenant", 103, 0};
  EXPECT_EQ(store_->CreateApiKey(dup_hash).code(), StatusCode::kAlreadyExists);
  ApiKeyRecord bad_role{"ke", "t1", std::string(64, 'e'), "sk_eeeee", "root", 104, 0};
  EXPECT_EQ(store_->CreateApiKey(bad_role).code(), StatusCode::kInvalidArgument);
}

// --- sandboxes ---------------------------------------------------------------------------------

TEST_F(SqliteStoreTest, SandboxRoundTripsEveryField) {
  SandboxRecord r;
  r.sandbox_id = "sb-full";
  r.tenant_id = "t1";
  r.user_id = "u1";
  r.session_id = "s1";
  r.runtime_provider = "linux";
  r.runtime_instance_id = "rt-77";
  r.resource_class = "python-small";
  r.template_id = "host";
  r.cpus = 1.5;
  r.memory_mb = 2048;
  r.disk_mb = 10240;
  r.pids = 256;
  r.state = "provisioning";
  r.state_reason = "requested by api";
  r.created_at = 1700000000123;
  r.last_active_at = 1700000000456;
  r.expires_at = 1700000999000;
  r.idle_timeout_ms = 600000;
  r.expiry_action = "pause";
  r.version = 7;        // ignored: inserts start at 1
  r.lease_counter = 9;  // ignored: starts at 0
  r.tainted = true;
  r.pool = "python-small";
  r.metadata = R"({"purpose":"test","n":[1,2]})";
  r.env = R"({"LANG":"C.UTF-8"})";
  r.plan = R"({"decision":{"resource_class":"python-small"}})";
  r.storage = R"({"layers":["/var/lib/paddock/sessions/checkpoints/ck-1/layer"]})";
  Insert(r);

  auto got = store_->GetSandbox("sb-full");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  SandboxRecord want = r;
  want.version = 1;
  want.lease_counter = 0;
  EXPECT_EQ(*got, want);

  EXPECT_EQ(store_->InsertSandbox(r).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->GetSandbox("sb-none").status().code(), StatusCode::kNotFound);

  SandboxRecord bad_json = Sandbox("sb-bad-json");
  bad_json.metadata = "{not json";
  EXPECT_EQ(store_->InsertSandbox(bad_json).code(), StatusCode::kInvalidArgument);
  SandboxRecord bad_action = Sandbox("sb-bad-action");
  bad_action.expiry_action = "explode";
  EXPECT_EQ(store_->InsertSandbox(bad_action).code(), StatusCode::kInvalidArgument);
  SandboxRecord empty_json = Sandbox("sb-empty-json");
  empty_json.metadata = "";
  Insert(empty_json);
  EXPECT_EQ(store_->GetSandbox("sb-empty-json")->metadata, "{}");
}

TEST_F(SqliteStoreTest, KeysetPaginationIsStableAndComplete) {
  // created_at has ties so the sandbox_id tie-breaker matters; insertion order is scrambled.
  std::vector<std::pair<int64_t, std::string>> want;
  for (int i = 0; i < 25; ++i) {
    int j = (i * 7) % 25;
    std::string id = "sb-" + std::string(j < 10 ? "0" : "") + std::to_string(j);
    int64_t created = 1000 + (j % 4);
    Insert(Sandbox(id, "t1", created));
    want.emplace_back(created, id);
  }
  std::sort(want.begin(), want.end());

  std::vector<std::string> seen;
  std::vector<size_t> page_sizes;
  std::string cursor;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = store_->ListSandboxes({}, 10, cursor);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    page_sizes.push_back(page->records.size());
    for (const auto& r : page->records) seen.push_back(r.sandbox_id);
    if (pages == 0) {
      // A row inserted before the cursor position must not shift later pages.
      Insert(Sandbox("sb-early", "t1", 1));
    }
    cursor = page->next_after_id;
    if (cursor.empty()) break;
    EXPECT_EQ(cursor, page->records.back().sandbox_id);
  }
  EXPECT_EQ(page_sizes, (std::vector<size_t>{10, 10, 5}));
  std::vector<std::string> want_ids;
  for (const auto& [created, id] : want) want_ids.push_back(id);
  EXPECT_EQ(seen, want_ids);

  EXPECT_EQ(store_->ListSandboxes({}, 10, "sb-missing").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->ListSandboxes({}, 0, "").status().code(), StatusCode::kInvalidArgument);
  // Exactly one full page left: no next cursor.
  auto last = store_->ListSandboxes({}, 6, want_ids[19]);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->records.size(), 5u);
  EXPECT_TRUE(last->next_after_id.empty());
}

TEST_F(SqliteStoreTest, ListFiltersAndHidesTerminated) {
  auto make = [&](const std::string& id, const std::string& tenant, const std::string& state,
                  const std::string& session, const std::string& cls, const std::string& pool) {
    SandboxRecord r = Sandbox(id, tenant);
    r.state = state;
    r.session_id = session;
    r.resource_class = cls;
    r.pool = pool;
    Insert(r);
  };
  make("a", "t1", "ready", "s1", "small", "");
  make("b", "t1", "leased", "s2", "small", "");
  make("c", "t2", "ready", "", "small", "small");
  make("d", "t1", "terminated", "s1", "large", "");
  make("e", "t2", "Terminated", "", "large", "");

  auto ids = [&](const SandboxFilter& f) {
    std::vector<std::string> out;
    auto page = store_->ListSandboxes(f, 100, "");
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) return out;
    for (const auto& r : page->records) out.push_back(r.sandbox_id);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(ids({}), (V{"a", "b", "c"}));
  EXPECT_EQ(ids({.include_terminated = true}), (V{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(ids({.tenant_id = "t1"}), (V{"a", "b"}));
  EXPECT_EQ(ids({.tenant_id = "t1", .include_terminated = true}), (V{"a", "b", "d"}));
  EXPECT_EQ(ids({.state = "ready"}), (V{"a", "c"}));
  EXPECT_EQ(ids({.session_id = "s1", .include_terminated = true}), (V{"a", "d"}));
  EXPECT_EQ(ids({.resource_class = "large", .include_terminated = true}), (V{"d", "e"}));
  EXPECT_EQ(ids({.pool = "small"}), (V{"c"}));
  EXPECT_EQ(ids({.tenant_id = "t3"}), V{});
}

TEST_F(SqliteStoreTest, SqlInjectionInValuesIsInert) {
  ASSERT_TRUE(store_->CreateTenant({"t1", "acme", 1}).ok());
  Insert(Sandbox("sb-1", "t1"));
  Insert(Sandbox("sb-2", "t2"));

  auto page = store_->ListSandboxes({.tenant_id = "x' OR '1'='1"}, 100, "");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->records.empty());
  page = store_->ListSandboxes({.state = "ready' OR 1=1 --", .include_terminated = true}, 100, "");
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->records.empty());
  EXPECT_EQ(store_->GetSandbox("' OR 1=1 --").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->FindApiKeyByHash("' OR revoked_at IS NULL --").status().code(),
            StatusCode::kNotFound);

  const std::string evil = "'); DROP TABLE tenants; --";
  ASSERT_TRUE(store_->CreateTenant({"t-evil", evil, 2}).ok());
  auto tenants = store_->ListTenants();
  ASSERT_TRUE(tenants.ok()) << tenants.status().ToString();
  ASSERT_EQ(tenants->size(), 2u);
  EXPECT_EQ(store_->GetTenant("t-evil")->name, evil);
  // The unfiltered list still sees both sandboxes: nothing was dropped or rewritten.
  EXPECT_EQ(store_->ListSandboxes({}, 100, "")->records.size(), 2u);
}

TEST_F(SqliteStoreTest, UpdateSandboxIsOptimistic) {
  Insert(Sandbox("sb-1"));
  auto v1 = store_->GetSandbox("sb-1");
  ASSERT_TRUE(v1.ok());
  ASSERT_EQ(v1->version, 1);

  SandboxRecord first = *v1;
  first.state = "leased";
  first.cpus = 2;
  first.tainted = true;
  first.lease_counter = 99;   // owned by the lease methods: not written
  first.created_at = 424242;  // immutable: not written
  auto v2 = store_->UpdateSandbox(first);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(*v2, 2);

  SandboxRecord stale = *v1;  // still claims version 1
  stale.state = "idle";
  auto conflict = store_->UpdateSandbox(stale);
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.status().code(), StatusCode::kConflict);

  auto now = store_->GetSandbox("sb-1");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->version, 2);
  EXPECT_EQ(now->state, "leased");
  EXPECT_EQ(now->cpus, 2);
  EXPECT_TRUE(now->tainted);
  EXPECT_EQ(now->lease_counter, 0);
  EXPECT_EQ(now->created_at, 1000);

  SandboxRecord fresh = *now;
  fresh.state = "idle";
  EXPECT_EQ(*store_->UpdateSandbox(fresh), 3);

  SandboxRecord missing = Sandbox("sb-missing");
  missing.version = 1;
  EXPECT_EQ(store_->UpdateSandbox(missing).status().code(), StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, TransitionWritesStateAndEventAtomically) {
  Insert(Sandbox("sb-1"));
  EventRecord ev;
  ev.event_type = "state_change";
  ev.request_id = "req-1";
  ev.timestamp = 2000;
  ev.metadata = R"({"by":"test"})";
  auto v = store_->TransitionSandbox("sb-1", 1, "leased", "acquired by s1", ev);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 2);

  auto events = store_->ListEvents("sb-1", 100, 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  const EventRecord& e = (*events)[0];
  EXPECT_GT(e.event_id, 0);
  EXPECT_EQ(e.sandbox_id, "sb-1");
  EXPECT_EQ(e.event_type, "state_change");
  EXPECT_EQ(e.old_state, "ready");
  EXPECT_EQ(e.new_state, "leased");
  EXPECT_EQ(e.reason, "acquired by s1");
  EXPECT_EQ(e.request_id, "req-1");
  EXPECT_EQ(e.timestamp, 2000);
  EXPECT_EQ(e.metadata, R"({"by":"test"})");
  auto sb = store_->GetSandbox("sb-1");
  EXPECT_EQ(sb->state, "leased");
  EXPECT_EQ(sb->state_reason, "acquired by s1");
  EXPECT_EQ(sb->version, 2);

  // Stale version: nothing changes, no event.
  auto stale = store_->TransitionSandbox("sb-1", 1, "idle", "late", ev);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kConflict);
  EXPECT_EQ(store_->ListEvents("sb-1", 100, 0)->size(), 1u);
  EXPECT_EQ(store_->GetSandbox("sb-1")->state, "leased");

  // The event insert fails (malformed JSON): the state update must roll back with it.
  EventRecord broken = ev;
  broken.metadata = "{oops";
  auto failed = store_->TransitionSandbox("sb-1", 2, "idle", "x", broken);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  sb = store_->GetSandbox("sb-1");
  EXPECT_EQ(sb->state, "leased");
  EXPECT_EQ(sb->version, 2);
  EXPECT_EQ(store_->ListEvents("sb-1", 100, 0)->size(), 1u);

  EXPECT_EQ(store_->TransitionSandbox("sb-x", 1, "idle", "x", ev).status().code(),
            StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, RunInTransactionCommitsEverythingOrNothing) {
  Insert(Sandbox("sb-1"));
  EventRecord ev;
  ev.event_type = "state_change";
  ev.timestamp = 2000;
  // Two transitions and a lease in one transaction: all visible afterwards, also to another
  // connection (it is committed, not just in this connection's view).
  Status ok = store_->RunInTransaction([&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(store_->TransitionSandbox("sb-1", 1, "locking", "a", ev).status());
    PADDOCK_RETURN_IF_ERROR(store_->AcquireLease("sb-1", "o", 60000, 3000).status());
    return store_->TransitionSandbox("sb-1", 3, "leased", "b", ev).status();
  });
  ASSERT_TRUE(ok.ok()) << ok.ToString();
  EXPECT_EQ(RawQueryText("SELECT state FROM sandbox_instance WHERE sandbox_id = 'sb-1'"), "leased");
  EXPECT_EQ(store_->ListEvents("sb-1", 100, 0)->size(), 2u);

  // The body fails after two writes: both are undone, the error comes back unchanged.
  Status failed = store_->RunInTransaction([&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(store_->ReleaseLease("sb-1", 1, 4000));
    PADDOCK_RETURN_IF_ERROR(store_->TransitionSandbox("sb-1", 4, "ready", "c", ev).status());
    return Status(StatusCode::kConflict, "changed my mind");
  });
  EXPECT_EQ(failed.code(), StatusCode::kConflict);
  EXPECT_EQ(failed.message(), "changed my mind");
  EXPECT_TRUE(store_->CheckLease("sb-1", 1, 4000).ok());
  EXPECT_EQ(store_->GetSandbox("sb-1")->state, "leased");
  EXPECT_EQ(store_->ListEvents("sb-1", 100, 0)->size(), 2u);
}

TEST_F(SqliteStoreTest, FailedCallInsideTransactionUndoesOnlyItself) {
  Insert(Sandbox("sb-1"));
  EventRecord ev;
  ev.timestamp = 2000;
  ev.event_type = "state_change";
  EventRecord broken = ev;
  broken.metadata = "{oops";
  // The inner transition's event insert fails after its state update: that update is rolled
  // back to its savepoint while the outer transaction's other write survives.
  Status st = store_->RunInTransaction([&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(store_->TransitionSandbox("sb-1", 1, "locking", "a", ev).status());
    EXPECT_EQ(store_->TransitionSandbox("sb-1", 2, "failed", "x", broken).status().code(),
              StatusCode::kInvalidArgument);
    return Status::Ok();
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto sb = store_->GetSandbox("sb-1");
  EXPECT_EQ(sb->state, "locking");
  EXPECT_EQ(sb->version, 2);
  EXPECT_EQ(store_->ListEvents("sb-1", 100, 0)->size(), 1u);
}

TEST_F(SqliteStoreTest, OtherThreadsWaitForATransaction) {
  Insert(Sandbox("sb-1"));
  std::atomic<bool> inside{false}, other_done{false};
  std::thread other;
  Status st = store_->RunInTransaction([&]() -> Status {
    inside = true;
    other = std::thread([&] {
      // Blocks until the transaction ends, then sees its committed result.
      auto sb = store_->GetSandbox("sb-1");
      EXPECT_EQ(sb->state, "paused");
      other_done = true;
    });
    SandboxRecord r = *store_->GetSandbox("sb-1");
    r.state = "paused";
    PADDOCK_RETURN_IF_ERROR(store_->UpdateSandbox(r).status());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(other_done.load());
    return Status::Ok();
  });
  other.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(other_done.load());
}

TEST_F(SqliteStoreTest, TenantsAndKeysAreFsyncedLifecycleWritesOnlyWhenConfigured) {
  constexpr int kNormal = 1, kFull = 2;
  ASSERT_TRUE(store_->CreateTenant({"t1", "one", 1}).ok());
  EXPECT_EQ(*store_->SynchronousLevel(), kFull);
  Insert(Sandbox("sb-1"));
  EXPECT_EQ(*store_->SynchronousLevel(), kNormal);
  ASSERT_TRUE(store_->AcquireLease("sb-1", "o", 1000, 5).ok());
  EXPECT_EQ(*store_->SynchronousLevel(), kNormal);
  ApiKeyRecord key{"k1", "t1", "hash1", "pdk_1234", "tenant", 1, 0};
  ASSERT_TRUE(store_->CreateApiKey(key).ok());
  EXPECT_EQ(*store_->SynchronousLevel(), kFull);

  // A durable write cannot join a lifecycle transaction (SQLite fixes the level per
  // transaction): it fails loudly instead of silently going unsynced, and nothing commits.
  Status st = store_->RunInTransaction([&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(store_->InsertSandbox(Sandbox("sb-2")));
    return store_->CreateTenant({"t2", "two", 1});
  });
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_EQ(store_->GetTenant("t2").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetSandbox("sb-2").status().code(), StatusCode::kNotFound);

  store_.reset();
  auto fsync_all = SqliteStore::Open(path_, SqliteStoreOptions{.fsync_lifecycle = true});
  ASSERT_TRUE(fsync_all.ok());
  ASSERT_TRUE((*fsync_all)->ReleaseLease("sb-1", 1, 6).ok());
  EXPECT_EQ(*(*fsync_all)->SynchronousLevel(), kFull);
}

TEST_F(SqliteStoreTest, EventsAppendAndPageInOrder) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) {
    EventRecord e;
    e.sandbox_id = i % 2 ? "sb-odd" : "sb-even";
    e.event_type = "note";
    e.reason = std::to_string(i);
    e.timestamp = 100 + i;
    auto id = store_->AppendEvent(e);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    if (!ids.empty()) {
      EXPECT_GT(*id, ids.back());
    }
    ids.push_back(*id);
  }
  auto first = store_->ListEvents("sb-even", 2, 0);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].reason, "0");
  EXPECT_EQ((*first)[1].reason, "2");
  EXPECT_EQ((*first)[0].metadata, "{}");
  auto rest = store_->ListEvents("sb-even", 10, (*first)[1].event_id);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 1u);
  EXPECT_EQ((*rest)[0].reason, "4");
  EXPECT_EQ(store_->ListEvents("sb-none", 10, 0)->size(), 0u);
}

// --- leases ------------------------------------------------------------------------------------

TEST_F(SqliteStoreTest, LeaseAcquireRenewReleaseCheck) {
  Insert(Sandbox("sb-1"));
  auto l1 = store_->AcquireLease("sb-1", "session-a", 500, 1000);
  ASSERT_TRUE(l1.ok()) << l1.status().ToString();
  EXPECT_EQ(l1->lease_version, 1);
  EXPECT_EQ(l1->expires_at, 1500);
  EXPECT_EQ(l1->acquired_at, 1000);
  EXPECT_EQ(l1->released_at, 0);
  EXPECT_EQ(l1->lease_owner, "session-a");
  EXPECT_EQ(l1->lease_id.size(), 32u);
  auto sb = store_->GetSandbox("sb-1");
  EXPECT_EQ(sb->lease_counter, 1);
  EXPECT_EQ(sb->version, 2);  // acquiring bumps the sandbox version
  auto stored = store_->GetLease("sb-1");
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, *l1);

  // Held: a second acquirer loses, even a moment before expiry.
  auto l_busy = store_->AcquireLease("sb-1", "session-b", 500, 1499);
  ASSERT_FALSE(l_busy.ok());
  EXPECT_EQ(l_busy.status().code(), StatusCode::kConflict);

  EXPECT_TRUE(store_->CheckLease("sb-1", 1, 1200).ok());
  auto renewed = store_->RenewLease("sb-1", 1, 500, 1400);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_EQ(*renewed, 1900);
  EXPECT_EQ(store_->GetLease("sb-1")->heartbeat_at, 1400);
  EXPECT_TRUE(store_->CheckLease("sb-1", 1, 1600).ok());  // past the original expiry

  // Expiry is by time: at expires_at the lease is gone.
  Status expired = store_->CheckLease("sb-1", 1, 1900);
  EXPECT_EQ(expired.code(), StatusCode::kConflict);
  EXPECT_NE(expired.message().find("expired"), std::string::npos) << expired.message();
  EXPECT_EQ(store_->RenewLease("sb-1", 1, 500, 1900).status().code(), StatusCode::kConflict);
  EXPECT_EQ(store_->ReleaseLease("sb-1", 1, 1900).code(), StatusCode::kConflict);

  // An expired lease frees the sandbox.
  auto l2 = store_->AcquireLease("sb-1", "session-b", 500, 1900);
  ASSERT_TRUE(l2.ok()) << l2.status().ToString();
  EXPECT_EQ(l2->lease_version, 2);
  EXPECT_NE(l2->lease_id, l1->lease_id);
  ASSERT_TRUE(store_->ReleaseLease("sb-1", 2, 2000).ok());
  EXPECT_EQ(store_->GetLease("sb-1")->released_at, 2000);
  Status released = store_->CheckLease("sb-1", 2, 2001);
  EXPECT_EQ(released.code(), StatusCode::kConflict);
  EXPECT_NE(released.message().find("released"), std::string::npos) << released.message();
  EXPECT_EQ(store_->ReleaseLease("sb-1", 2, 2001).code(), StatusCode::kConflict);
  EXPECT_EQ(store_->RenewLease("sb-1", 2, 500, 2001).status().code(), StatusCode::kConflict);

  auto l3 = store_->AcquireLease("sb-1", "session-c", 500, 2001);
  ASSERT_TRUE(l3.ok());
  EXPECT_EQ(l3->lease_version, 3);

  // Unknown sandboxes and bad arguments.
  EXPECT_EQ(store_->AcquireLease("sb-x", "o", 500, 1000).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->CheckLease("sb-x", 1, 1000).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetLease("sb-x").status().code(), StatusCode::kNotFound);
  Insert(Sandbox("sb-2"));
  EXPECT_EQ(store_->GetLease("sb-2").status().code(), StatusCode::kNotFound);
  Status none = store_->CheckLease("sb-2", 1, 1000);
  EXPECT_EQ(none.code(), StatusCode::kConflict);
  EXPECT_NE(none.message().find("no lease"), std::string::npos) << none.message();
  EXPECT_EQ(store_->AcquireLease("sb-2", "o", 0, 1000).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->AcquireLease("sb-2", "o", 100, 0).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(SqliteStoreTest, FencingRejectsStaleVersionAfterNewerAcquire) {
  Insert(Sandbox("sb-1"));
  auto old_lease = store_->AcquireLease("sb-1", "worker-a", 100, 1000);
  ASSERT_TRUE(old_lease.ok());
  // worker-a stalls past its expiry; worker-b takes over.
  auto new_lease = store_->AcquireLease("sb-1", "worker-b", 10000, 2000);
  ASSERT_TRUE(new_lease.ok()) << new_lease.status().ToString();
  ASSERT_GT(new_lease->lease_version, old_lease->lease_version);

  // worker-a comes back: every use of its token is rejected, and none disturbs worker-b.
  Status stale = store_->CheckLease("sb-1", old_lease->lease_version, 2100);
  EXPECT_EQ(stale.code(), StatusCode::kConflict);
  EXPECT_NE(stale.message().find("stale"), std::string::npos) << stale.message();
  EXPECT_EQ(store_->RenewLease("sb-1", old_lease->lease_version, 100000, 2100).status().code(),
            StatusCode::kConflict);
  EXPECT_EQ(store_->ReleaseLease("sb-1", old_lease->lease_version, 2100).code(),
            StatusCode::kConflict);
  EXPECT_TRUE(store_->CheckLease("sb-1", new_lease->lease_version, 2200).ok());
  EXPECT_EQ(store_->GetLease("sb-1")->lease_owner, "worker-b");
  EXPECT_EQ(store_->GetLease("sb-1")->expires_at, 12000);
  // A token that was never issued is rejected too.
  EXPECT_EQ(store_->CheckLease("sb-1", new_lease->lease_version + 1, 2200).code(),
            StatusCode::kConflict);
}

TEST_F(SqliteStoreTest, FiftyConcurrentAcquirersExactlyOneWins) {
  Insert(Sandbox("sb-race"));
  constexpr int kThreads = 50;
  std::latch start(kThreads);
  std::atomic<int> wins{0}, conflicts{0}, others{0};
  std::atomic<int64_t> won_version{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      auto r = store_->AcquireLease("sb-race", "owner-" + std::to_string(i), 60000, 1000);
      if (r.ok()) {
        ++wins;
        won_version = r->lease_version;
      } else if (r.status().code() == StatusCode::kConflict) {
        ++conflicts;
      } else {
        ++others;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(conflicts.load(), kThreads - 1);
  EXPECT_EQ(others.load(), 0);
  EXPECT_EQ(won_version.load(), 1);
  EXPECT_EQ(store_->GetSandbox("sb-race")->lease_counter, 1);
}

// Two stores on one file are two connections: what keeps them apart is BEGIN IMMEDIATE and the
// busy timeout, not the in-process mutex (the situation of two daemons on one database).
TEST_F(SqliteStoreTest, ConcurrentAcquirersAcrossConnectionsExactlyOneWins) {
  auto other = OpenStore();
  ASSERT_NE(other, nullptr);
  for (int round = 0; round < 3; ++round) {
    const std::string id = "sb-race-" + std::to_string(round);
    Insert(Sandbox(id));
    constexpr int kThreads = 50;
    std::latch start(kThreads);
    std::atomic<int> wins{0}, conflicts{0};
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        Store* s = i % 2 ? other.get() : store_.get();
        start.arrive_and_wait();
        auto r = s->AcquireLease(id, "owner-" + std::to_string(i), 60000, 1000);
        if (r.ok()) {
          ++wins;
        } else if (r.status().code() == StatusCode::kConflict) {
          ++conflicts;
        } else {
          errors[i] = r.status().ToString();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& e : errors) EXPECT_TRUE(e.empty()) << e;
    EXPECT_EQ(wins.load(), 1) << "round " << round;
    EXPECT_EQ(conflicts.load(), kThreads - 1) << "round " << round;
    EXPECT_EQ(other->GetSandbox(id)->lease_counter, 1);
  }
}

TEST_F(SqliteStoreTest, LeaseVersionsIncreaseAcrossCyclesAndRestarts) {
  Insert(Sandbox("sb-1"));
  int64_t now = 1000;
  int64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto l = store_->AcquireLease("sb-1", "o", 100, now);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_GT(l->lease_version, last);
    last = l->lease_version;
    if (i % 2 == 0) {
      ASSERT_TRUE(store_->ReleaseLease("sb-1", l->lease_version, now + 10).ok());
      now += 20;
    } else {
      now += 200;  // let it expire instead
    }
  }
  EXPECT_EQ(last, 5);

  store_.reset();
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->GetLease("sb-1")->lease_version, 5);
  for (int i = 0; i < 2; ++i) {
    auto l = store_->AcquireLease("sb-1", "o", 100, now);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ(l->lease_version, last + 1);  // continues from the stored counter
    last = l->lease_version;
    ASSERT_TRUE(store_->ReleaseLease("sb-1", l->lease_version, now + 1).ok());
    now += 10;
  }
  // An old token from before the restart stays dead.
  EXPECT_EQ(store_->CheckLease("sb-1", 3, now).code(), StatusCode::kConflict);
}

TEST_F(SqliteStoreTest, ExpireLeasesReturnsExactlyTheExpired) {
  for (const char* id : {"a", "b", "c", "d", "e"}) Insert(Sandbox(id));
  ASSERT_TRUE(store_->AcquireLease("a", "o", 500, 1000).ok());   // expires 1500
  ASSERT_TRUE(store_->AcquireLease("b", "o", 4000, 1000).ok());  // expires 5000
  ASSERT_TRUE(store_->AcquireLease("c", "o", 500, 1000).ok());   // released before expiry
  ASSERT_TRUE(store_->ReleaseLease("c", 1, 1200).ok());
  ASSERT_TRUE(store_->AcquireLease("d", "o", 1000, 1000).ok());  // expires exactly at 2000
  // "e" was never leased.

  auto expired = store_->ExpireLeases(2000);
  ASSERT_TRUE(expired.ok()) << expired.status().ToString();
  EXPECT_EQ(*expired, (std::vector<std::string>{"a", "d"}));
  EXPECT_EQ(store_->GetLease("a")->released_at, 1500);
  EXPECT_EQ(store_->GetLease("d")->released_at, 2000);
  EXPECT_EQ(store_->GetLease("c")->released_at, 1200);  // untouched
  EXPECT_EQ(store_->GetLease("b")->released_at, 0);
  EXPECT_TRUE(store_->CheckLease("b", 1, 2000).ok());

  EXPECT_TRUE(store_->ExpireLeases(2000)->empty());  // already marked
  EXPECT_EQ(*store_->ExpireLeases(6000), (std::vector<std::string>{"b"}));

  // The expired sandbox can be leased again, with a newer token.
  auto again = store_->AcquireLease("a", "o2", 500, 2500);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->lease_version, 2);
}

// --- environment and allocation ----------------------------------------------------------------

TEST_F(SqliteStoreTest, EnvironmentUpsertAndGet) {
  EnvironmentRecord e{"sb-1", "sha256:base", "deps-1", "ws-1", "", 1, 0};
  ASSERT_TRUE(store_->UpsertEnvironment(e).ok());
  EXPECT_EQ(*store_->GetEnvironment("sb-1"), e);
  e.dependency_hash = "deps-2";
  e.environment_version = 2;
  e.dirty_level = 3;
  e.snapshot_id = "snap-9";
  ASSERT_TRUE(store_->UpsertEnvironment(e).ok());
  EXPECT_EQ(*store_->GetEnvironment("sb-1"), e);
  EXPECT_EQ(store_->GetEnvironment("sb-2").status().code(), StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, AllocationsListNewestFirstPerTenant) {
  std::vector<AllocationRecord> t1;
  for (int i = 0; i < 3; ++i) {
    AllocationRecord a;
    a.sandbox_id = "sb-" + std::to_string(i);
    a.tenant_id = "t1";
    a.task_id = "task-" + std::to_string(i);
    a.planner_input_hash = "h" + std::to_string(i);
    a.recommended_class = "python-small";
    a.actual_class = i == 2 ? "python-medium" : "python-small";
    a.reason = "rule";
    a.confidence = 0.75;
    a.cpu = 1;
    a.memory_mb = 2048;
    a.duration_ms = 1234 + i;
    a.peak_cpu = 0.5;
    a.cpu_seconds = 2.25 + i;
    a.peak_memory_mb = 900;
    a.oom = i == 1;
    a.timed_out = i == 2;
    a.created_at = 5000 + i;
    auto id = store_->InsertAllocation(a);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    a.id = *id;
    t1.push_back(a);
  }
  AllocationRecord other;
  other.sandbox_id = "sb-x";
  other.tenant_id = "t2";
  other.created_at = 6000;
  ASSERT_TRUE(store_->InsertAllocation(other).ok());

  auto list = store_->ListAllocations("t1", 10);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<AllocationRecord> want(t1.rbegin(), t1.rend());
  EXPECT_EQ(*list, want);
  EXPECT_EQ(store_->ListAllocations("t1", 2)->size(), 2u);
  EXPECT_EQ(store_->ListAllocations("", 10)->size(), 4u);
  EXPECT_EQ(store_->ListAllocations("x' OR '1'='1", 10)->size(), 0u);
}

TEST_F(SqliteStoreTest, AllocationsBySignatureNewestFirst) {
  auto add = [&](const std::string& tenant, const std::string& signature, int64_t peak) {
    AllocationRecord a;
    a.sandbox_id = "sb-" + std::to_string(peak);
    a.tenant_id = tenant;
    a.workload_signature = signature;
    a.peak_memory_mb = peak;
    a.created_at = 7000 + peak;
    auto id = store_->InsertAllocation(a);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    a.id = id.ok() ? *id : 0;
    return a;
  };
  AllocationRecord a1 = add("t1", "ws-a", 1);
  add("t1", "ws-b", 2);
  AllocationRecord a3 = add("t1", "ws-a", 3);
  AllocationRecord a4 = add("t2", "ws-a", 4);
  AllocationRecord a5 = add("t1", "ws-a", 5);

  auto list = store_->ListAllocationsBySignature("t1", SignatureKind::kWorkload, "ws-a", 10);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(*list, (std::vector<AllocationRecord>{a5, a3, a1}));  // the signature round-trips
  EXPECT_EQ(store_->ListAllocationsBySignature("t1", SignatureKind::kWorkload, "ws-a", 2)->size(),
            2u);
  EXPECT_EQ(*store_->ListAllocationsBySignature("", SignatureKind::kWorkload, "ws-a", 10),
            (std::vector<AllocationRecord>{a5, a4, a3, a1}));
  EXPECT_TRUE(
      store_->ListAllocationsBySignature("t1", SignatureKind::kWorkload, "ws-zzz", 10)->empty());
  EXPECT_TRUE(
      store_->ListAllocationsBySignature("t1", SignatureKind::kWorkload, "ws-a' OR '1'='1", 10)
          ->empty());
  EXPECT_EQ(
      store_->ListAllocationsBySignature("t1", SignatureKind::kWorkload, "ws-a", 0).status().code(),
      StatusCode::kInvalidArgument);
  // The per-tenant lookup is served by the new index.
  sqlite3* db = RawDb();
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "EXPLAIN QUERY PLAN SELECT id FROM sandbox_allocation WHERE "
                               "tenant_id = 't1' AND workload_signature = 'ws-a' ORDER BY id DESC",
                               -1, &st, nullptr),
            SQLITE_OK);
  std::string plan;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const unsigned char* detail = sqlite3_column_text(st, 3);
    if (detail) plan += reinterpret_cast<const char*>(detail);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  EXPECT_NE(plan.find("sandbox_allocation_by_signature"), std::string::npos) << plan;
}

// The exact-commands history: matched on its own column, never on the workload signature's.
TEST_F(SqliteStoreTest, AllocationsByCommandSignature) {
  auto add = [&](const std::string& tenant, const std::string& workload, const std::string& command,
                 int64_t peak) {
    AllocationRecord a;
    a.sandbox_id = "sb-" + std::to_string(peak);
    a.tenant_id = tenant;
    a.workload_signature = workload;
    a.command_signature = command;
    a.peak_memory_mb = peak;
    a.created_at = 8000 + peak;
    auto id = store_->InsertAllocation(a);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    a.id = id.ok() ? *id : 0;
    return a;
  };
  AllocationRecord a1 = add("t1", "ws-a", "wc-1", 1);
  AllocationRecord a2 = add("t1", "ws-a", "wc-2", 2);
  AllocationRecord a3 = add("t2", "ws-a", "wc-1", 3);
  AllocationRecord a4 = add("t1", "ws-b", "wc-1", 4);

  constexpr SignatureKind kCommand = SignatureKind::kCommand;
  auto list = store_->ListAllocationsBySignature("t1", kCommand, "wc-1", 10);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(*list, (std::vector<AllocationRecord>{a4, a1}));  // the signature round-trips
  EXPECT_EQ(*store_->ListAllocationsBySignature("", kCommand, "wc-1", 10),
            (std::vector<AllocationRecord>{a4, a3, a1}));
  EXPECT_EQ(*store_->ListAllocationsBySignature("t1", kCommand, "wc-2", 10),
            (std::vector<AllocationRecord>{a2}));
  // A workload signature is not a command signature, and the reverse.
  EXPECT_TRUE(store_->ListAllocationsBySignature("t1", kCommand, "ws-a", 10)->empty());
  EXPECT_TRUE(
      store_->ListAllocationsBySignature("t1", SignatureKind::kWorkload, "wc-1", 10)->empty());
}

// Migration 2 upgrades a version-1 file in place: existing allocations keep their data and get
// an empty signature.
TEST_F(SqliteStoreTest, MigrationTwoUpgradesAVersionOneDatabase) {
  AllocationRecord old;
  old.sandbox_id = "sb-old";
  old.tenant_id = "t1";
  old.peak_memory_mb = 77;
  old.created_at = 1;
  ASSERT_TRUE(store_->InsertAllocation(old).ok());
  store_.reset();
  // Turn the file back into a version-1 database.
  sqlite3* db = RawDb();
  const char* downgrade =
      "DROP INDEX sandbox_allocation_by_signature;"
      "DROP INDEX sandbox_allocation_by_signature_all;"
      "ALTER TABLE sandbox_allocation DROP COLUMN workload_signature;"
      "ALTER TABLE sandbox_instance DROP COLUMN plan;"
      "ALTER TABLE sandbox_allocation DROP COLUMN cpu_seconds;"
      "DROP INDEX sandbox_allocation_by_command;"
      "DROP INDEX sandbox_allocation_by_command_all;"
      "ALTER TABLE sandbox_allocation DROP COLUMN command_signature;"
      "DROP TABLE session_run; DROP TABLE session; DROP TABLE checkpoint;"
      "ALTER TABLE sandbox_environment DROP COLUMN manifest;"
      "ALTER TABLE sandbox_instance DROP COLUMN storage;"
      "DELETE FROM schema_migrations WHERE version >= 2;";
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, downgrade, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);

  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->SchemaVersion(), SqliteStore::LatestSchemaVersion());
  auto list = store_->ListAllocations("t1", 10);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].peak_memory_mb, 77);
  EXPECT_EQ((*list)[0].workload_signature, "");
  EXPECT_EQ((*list)[0].command_signature, "");
  EXPECT_EQ(store_->ListAllocationsBySignature("t1", SignatureKind::kWorkload, "", 10)->size(), 1u);
}

}  // namespace
}  // namespace paddock::registry

namespace paddock::registry {
namespace {

TEST_F(SqliteStoreTest, ExclusiveStoreKeepsOtherProcessesOut) {
  store_.reset();
  auto first = SqliteStore::Open(path_, SqliteStoreOptions{.exclusive = true});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE((*first)->CreateTenant({"t1", "one", 1}).ok());
  // A second daemon on the same data dir is refused (after the 5 s busy timeout) instead of
  // running a second reconciler over the first one's sandboxes.
  auto second = SqliteStore::Open(path_, SqliteStoreOptions{.exclusive = true});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();
  // The holder works on; once it is gone, the file opens again with everything in it.
  ASSERT_TRUE((*first)->CreateTenant({"t2", "two", 1}).ok());
  first->reset();
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(store_->ListTenants()->size(), 2u);
}

// POOL-3: a warm sandbox has no tenant until it is claimed, oldest first, exactly once.
TEST_F(SqliteStoreTest, ClaimWarmSandboxBindsTheOldestReadyMemberOnce) {
  for (int i = 0; i < 3; ++i) {
    SandboxRecord r = Sandbox("warm-" + std::to_string(i), "", 1000 + i);
    r.pool = "small";
    if (i == 0) r.state = "provisioning";  // not ready yet: never handed out
    Insert(r);
  }
  auto first = store_->ClaimWarmSandbox("small", "tenant-a", "s1", 9999, 600);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, "warm-1");
  auto rec = store_->GetSandbox("warm-1");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->tenant_id, "tenant-a");
  EXPECT_EQ(rec->session_id, "s1");
  EXPECT_EQ(rec->pool, "");
  EXPECT_EQ(rec->expires_at, 9999);
  EXPECT_EQ(rec->idle_timeout_ms, 600);
  EXPECT_EQ(rec->version, 2);
  EXPECT_EQ(*store_->ClaimWarmSandbox("small", "tenant-b", "", 0, 0), "warm-2");
  EXPECT_EQ(store_->ClaimWarmSandbox("small", "tenant-b", "", 0, 0).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store_->ClaimWarmSandbox("other", "tenant-b", "", 0, 0).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store_->ClaimWarmSandbox("small", "", "", 0, 0).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace paddock::registry
