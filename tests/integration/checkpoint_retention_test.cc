// Checkpoint retention (STATE-2 "expire"): an expired checkpoint's record and layer are deleted
// once nothing stacks on its layer any more — neither a ready checkpoint's chain nor a live
// sandbox forked from it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/clock.h"
#include "common/config.h"
#include "lifecycle/sandbox_manager.h"
#include "registry/sqlite/sqlite_store.h"
#include "sessions/session_service.h"
#include "support/runtime_fixture.h"

namespace paddock::testing {
namespace {

using registry::CheckpointRecord;
using registry::SandboxRecord;

class CheckpointRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (the layout is root-owned)";
    dir_ = TestDataDir() + "/retention-" + std::to_string(getpid());
    auto s = registry::SqliteStore::Open(":memory:");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    manager_ = std::make_unique<lifecycle::SandboxManager>(*store_, SharedRuntime(),
                                                           PaddockConfig{}, clock_);
    sessions::StorageLayout layout(dir_);
    ASSERT_TRUE(layout.Ensure().ok());
    service_ = std::make_unique<sessions::SessionService>(
        *store_, *manager_, SharedRuntime(), layout,
        [](const std::string&) -> Result<sessions::TemplateFacts> {
          return NotFound("no templates in this test");
        },
        sessions::SessionConfig{}, clock_);
  }
  void TearDown() override {
    service_.reset();
    manager_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string Layer(const std::string& id) {
    return dir_ + "/sessions/checkpoints/" + id + "/layer";
  }

  // A checkpoint of session s1 with a layer on disk; `chain` are the layers below its own.
  void AddCheckpoint(const std::string& id, int64_t expires_at,
                     const std::vector<std::string>& below = {}) {
    std::filesystem::create_directories(Layer(id));
    std::ofstream(Layer(id) + "/file") << id;
    nlohmann::json chain = nlohmann::json::array({Layer(id)});
    for (const std::string& b : below) chain.push_back(Layer(b));
    CheckpointRecord c;
    c.checkpoint_id = id;
    c.tenant_id = "t1";
    c.user_id = "u1";
    c.session_id = "s1";
    c.layers = chain.dump();
    c.created_at = clock_.NowMs();
    c.expires_at = expires_at;
    ASSERT_TRUE(store_->InsertCheckpoint(c).ok());
  }

  bool Deleted(const std::string& id) {
    auto c = store_->GetCheckpoint(id);
    return c.ok() && c->state == "deleted" &&
           !std::filesystem::exists(dir_ + "/sessions/checkpoints/" + id);
  }

  std::string dir_;
  FakeClock clock_;
  std::unique_ptr<registry::SqliteStore> store_;
  std::unique_ptr<lifecycle::SandboxManager> manager_;
  std::unique_ptr<sessions::SessionService> service_;
};

TEST_F(CheckpointRetentionTest, ExpiredLayersGoOnceNothingStacksOnThem) {
  const int64_t now = clock_.NowMs();
  AddCheckpoint("ck-a", now + 1000);            // expires, nothing uses it
  AddCheckpoint("ck-b", now + 1000);            // expires, but ck-c stacks on it
  AddCheckpoint("ck-c", now + 5000, {"ck-b"});  // expires later
  AddCheckpoint("ck-d", now + 1000);            // expires, a live fork stacks on it
  AddCheckpoint("ck-keep", 0);                  // never expires
  SandboxRecord fork;
  fork.sandbox_id = "sb-fork";
  fork.tenant_id = "t1";
  fork.session_id = "s1";
  fork.state = "ready";
  fork.created_at = now;
  fork.storage = lifecycle::SandboxStorageJson({Layer("ck-d")}, {});
  ASSERT_TRUE(store_->InsertSandbox(fork).ok());

  EXPECT_EQ(service_->ExpireCheckpointsOnce(), 0);  // nothing has expired yet
  clock_.Advance(std::chrono::seconds(2));
  EXPECT_EQ(service_->ExpireCheckpointsOnce(), 1);
  EXPECT_TRUE(Deleted("ck-a"));
  EXPECT_FALSE(Deleted("ck-b"));  // ck-c's chain needs its layer
  EXPECT_FALSE(Deleted("ck-d"));  // the fork needs its layer
  EXPECT_TRUE(std::filesystem::exists(Layer("ck-b") + "/file"));

  // The fork ends; then ck-c expires, and with it nothing needs ck-b any more.
  fork = *store_->GetSandbox("sb-fork");
  fork.state = "terminated";
  ASSERT_TRUE(store_->UpdateSandbox(fork).ok());
  clock_.Advance(std::chrono::seconds(5));
  EXPECT_EQ(service_->ExpireCheckpointsOnce(), 3);
  EXPECT_TRUE(Deleted("ck-b"));
  EXPECT_TRUE(Deleted("ck-c"));
  EXPECT_TRUE(Deleted("ck-d"));
  EXPECT_FALSE(Deleted("ck-keep"));
  EXPECT_TRUE(std::filesystem::exists(Layer("ck-keep") + "/file"));
}

}  // namespace
}  // namespace paddock::testing
