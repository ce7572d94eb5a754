// Sessions, runs and checkpoints in the SQLite registry: one active run per session, crash
// recovery of interrupted runs, checkpoint records with their STATE-2 fields and expiry.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "registry/sqlite/sqlite_store.h"

namespace paddock::registry {
namespace {

class SessionStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = SqliteStore::Open(":memory:");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  SessionRecord NewSession(const std::string& id, const std::string& tenant = "t1") {
    SessionRecord r;
    r.session_id = id;
    r.tenant_id = tenant;
    r.user_id = "u1";
    r.workspace_id = "ws-" + id;
    r.created_at = r.updated_at = 1000;
    EXPECT_TRUE(store_->CreateSession(r).ok());
    r.version = 1;
    return r;
  }

  RunRecord NewRun(const std::string& run_id, const std::string& session_id) {
    RunRecord run;
    run.run_id = run_id;
    run.session_id = session_id;
    run.request = R"({"task":"total the sales"})";
    run.created_at = 2000;
    return run;
  }

  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SessionStoreTest, SessionsRoundTripAndUpdateWithVersions) {
  SessionRecord s = NewSession("s1");
  NewSession("s2", "t2");
  auto got = store_->GetSession("s1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, s);
  EXPECT_EQ(store_->GetSession("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->CreateSession(s).code(), StatusCode::kAlreadyExists);

  ASSERT_EQ(store_->ListSessions("t1", 10)->size(), 1u);
  ASSERT_EQ(store_->ListSessions("", 10)->size(), 2u);

  s.current_sandbox_id = "sb-1";
  s.updated_at = 3000;
  auto v = store_->UpdateSession(s);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 2);
  EXPECT_EQ(store_->GetSession("s1")->current_sandbox_id, "sb-1");
  // A stale writer loses.
  EXPECT_EQ(store_->UpdateSession(s).status().code(), StatusCode::kConflict);
  s.version = 2;
  s.state = "gone";
  EXPECT_EQ(store_->UpdateSession(s).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SessionStoreTest, OneActiveRunPerSession) {
  NewSession("s1");
  auto first = store_->BeginRun(NewRun("r1", "s1"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->seq, 1);
  EXPECT_EQ(first->tenant_id, "t1");  // the session's, whatever the caller passed
  EXPECT_EQ(first->state, "running");
  EXPECT_EQ(store_->GetSession("s1")->active_run_id, "r1");

  auto second = store_->BeginRun(NewRun("r2", "s1"));
  EXPECT_EQ(second.status().code(), StatusCode::kConflict) << second.status().ToString();
  EXPECT_EQ(store_->GetRun("r2").status().code(), StatusCode::kNotFound);  // nothing written

  RunRecord done = *first;
  done.state = "succeeded";
  done.result = R"({"exit_code":0})";
  done.sandbox_id = "sb-1";
  done.finished_at = 2500;
  ASSERT_TRUE(store_->FinishRun(done).ok());
  EXPECT_EQ(store_->FinishRun(done).code(), StatusCode::kConflict);  // not running any more
  EXPECT_EQ(store_->GetSession("s1")->active_run_id, "");
  EXPECT_EQ(*store_->GetRun("r1"), done);

  auto again = store_->BeginRun(NewRun("r2", "s1"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->seq, 2);
  auto runs = store_->ListRuns("s1", 10);
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].run_id, "r2");  // newest first

  EXPECT_EQ(store_->BeginRun(NewRun("r9", "missing")).status().code(), StatusCode::kNotFound);
}

TEST_F(SessionStoreTest, ConcurrentBeginRunAdmitsExactlyOne) {
  NewSession("s1");
  std::vector<std::thread> threads;
  std::atomic<int> ok{0}, conflict{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = store_->BeginRun(NewRun("r" + std::to_string(i), "s1"));
      if (r.ok()) ++ok;
      if (r.status().code() == StatusCode::kConflict) ++conflict;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(conflict.load(), 7);
}

TEST_F(SessionStoreTest, ClosedSessionsTakeNoRunsAndInterruptedRunsFail) {
  SessionRecord s = NewSession("s1");
  NewSession("s2");
  ASSERT_TRUE(store_->BeginRun(NewRun("r1", "s2")).ok());
  s.state = "closed";
  ASSERT_TRUE(store_->UpdateSession(s).ok());
  EXPECT_EQ(store_->BeginRun(NewRun("r2", "s1")).status().code(), StatusCode::kFailedPrecondition);

  auto failed = store_->FailInterruptedRuns(9000);
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  EXPECT_EQ(*failed, std::vector<std::string>{"r1"});
  RunRecord r1 = *store_->GetRun("r1");
  EXPECT_EQ(r1.state, "failed");
  EXPECT_EQ(r1.finished_at, 9000);
  EXPECT_NE(r1.result.find("interrupted"), std::string::npos) << r1.result;
  EXPECT_EQ(store_->GetSession("s2")->active_run_id, "");
  EXPECT_TRUE(store_->FailInterruptedRuns(9001)->empty());
}

TEST_F(SessionStoreTest, CheckpointsKeepTheirRecordAndExpire) {
  CheckpointRecord c;
  c.checkpoint_id = "ck-1";
  c.tenant_id = "t1";
  c.user_id = "u1";
  c.session_id = "s1";
  c.run_id = "r1";
  c.sandbox_id = "sb-1";
  c.layers = R"(["/var/lib/paddock/sessions/checkpoints/ck-1/layer"])";
  c.template_id = "host";
  c.base_image_digest = "sha256:abc";
  c.runtime = "native";
  c.resource_class = "small";
  c.manifest = R"({"fingerprint":"env-1"})";
  c.environment_fingerprint = "env-1";
  c.files = 12;
  c.bytes = 3456;
  c.created_at = 100;
  c.expires_at = 5000;
  ASSERT_TRUE(store_->InsertCheckpoint(c).ok());
  CheckpointRecord older = c;
  older.checkpoint_id = "ck-0";
  older.created_at = 50;
  older.expires_at = 0;  // never
  ASSERT_TRUE(store_->InsertCheckpoint(older).ok());
  EXPECT_EQ(store_->InsertCheckpoint(c).code(), StatusCode::kAlreadyExists);

  EXPECT_EQ(*store_->GetCheckpoint("ck-1"), c);
  auto list = store_->ListCheckpoints("s1", 10);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].checkpoint_id, "ck-1");  // newest first
  EXPECT_TRUE(store_->ListExpiredCheckpoints(4999, 10)->empty());
  auto expired = store_->ListExpiredCheckpoints(5000, 10);
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_EQ((*expired)[0].checkpoint_id, "ck-1");

  ASSERT_TRUE(store_->MarkCheckpointDeleted("ck-1").ok());
  EXPECT_EQ(store_->GetCheckpoint("ck-1")->state, "deleted");
  EXPECT_EQ(store_->ListCheckpoints("s1", 10)->size(), 1u);
  EXPECT_TRUE(store_->ListExpiredCheckpoints(9999, 10)->empty());
  EXPECT_EQ(store_->MarkCheckpointDeleted("nope").code(), StatusCode::kNotFound);

  // Constraints: layers must be a JSON array; restore policy from the known set.
  CheckpointRecord bad = c;
  bad.checkpoint_id = "ck-bad";
  bad.layers = R"({"not":"an array"})";
  EXPECT_EQ(store_->InsertCheckpoint(bad).code(), StatusCode::kInvalidArgument);
  bad.layers = "[]";
  bad.restore_policy = "anyone";
  EXPECT_EQ(store_->InsertCheckpoint(bad).code(), StatusCode::kInvalidArgument);
}

TEST_F(SessionStoreTest, EnvironmentCarriesTheManifest) {
  EnvironmentRecord e;
  e.sandbox_id = "sb-1";
  e.base_image_digest = "sha256:abc";
  e.manifest = R"({"fingerprint":"env-a912"})";
  ASSERT_TRUE(store_->UpsertEnvironment(e).ok());
  EXPECT_EQ(store_->GetEnvironment("sb-1")->manifest, e.manifest);
  e.manifest = "not json";
  EXPECT_EQ(store_->UpsertEnvironment(e).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace paddock::registry
