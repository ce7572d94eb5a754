// The `paddock` CLI against a real paddockd: create (by class and from a task), exec streaming
// with the command's exit status, cp both ways, plan, events, rm; key and URL from the
// environment.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/child_process.h"
#include "support/daemon_process.h"
#include "support/json_api.h"
#include "support/runtime_fixture.h"

namespace paddock::testing {
namespace {

std::string PaddockCliPath() {
  return (std::filesystem::path(PaddockdPath()).parent_path() / "paddock").string();
}

class CliClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
    std::string err;
    ASSERT_TRUE(daemon_.Start(&err)) << err;
    ApiReply t = CreateTenant(daemon_, "cli");
    ASSERT_EQ(t.status, 201) << t.raw;
    env_ = {"PADDOCK_URL=http://127.0.0.1:" + std::to_string(daemon_.port()),
            "PADDOCK_API_KEY=" + t.body["api_key"].get<std::string>()};
  }
  CliResult Paddock(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), PaddockCliPath());
    return RunChild(args, input, {}, env_);
  }
  static std::string Trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  DaemonProcess daemon_{SmallClassConfig()};
  std::vector<std::string> env_;
};

TEST_F(CliClientTest, CreateExecCopyEventsRemove) {
  CliResult created = Paddock({"create", "--class", "small", "-e", "WHO=cli"});
  ASSERT_EQ(created.status, 0) << created.err;
  const std::string id = Trim(created.out);
  ASSERT_EQ(id.rfind("sb-", 0), 0u) << created.out;

  // exec streams the command's output and exits with its status.
  CliResult ran =
      Paddock({"exec", id, "--", "sh", "-c", "echo \"hi $WHO\"; echo oops >&2; exit 3"});
  EXPECT_EQ(ran.status, 3) << ran.err;
  EXPECT_EQ(ran.out, "hi cli\n");
  EXPECT_NE(ran.err.find("oops"), std::string::npos) << ran.err;

  // cp up and back down, byte for byte.
  const std::string dir = TestDataDir() + "/cli-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::string payload(100000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
  std::ofstream(dir + "/up.bin", std::ios::binary) << payload;
  ASSERT_EQ(Paddock({"cp", dir + "/up.bin", id + ":/tmp/up.bin"}).status, 0);
  ASSERT_EQ(Paddock({"cp", id + ":/tmp/up.bin", dir + "/down.bin"}).status, 0);
  std::stringstream down;
  down << std::ifstream(dir + "/down.bin", std::ios::binary).rdbuf();
  EXPECT_TRUE(down.str() == payload);
  std::filesystem::remove_all(dir);

  CliResult events = Paddock({"events", id});
  EXPECT_EQ(events.status, 0);
  EXPECT_NE(events.out.find("provisioned"), std::string::npos) << events.out;
  CliResult listed = Paddock({"list"});
  EXPECT_NE(listed.out.find(id), std::string::npos) << listed.out;
  EXPECT_EQ(Paddock({"rm", id}).status, 0);
  // Errors reach the user with a non-zero status and the server's message.
  CliResult gone = Paddock({"exec", id, "--", "true"});
  EXPECT_NE(gone.status, 0);
  EXPECT_FALSE(gone.err.empty());
}

TEST_F(CliClientTest, PlanAndCreateFromATask) {
  CliResult plan = Paddock({"plan", "print hello world", "--command", "python3 -c 'print(1)'"});
  ASSERT_EQ(plan.status, 0) << plan.err;
  // The daemon runs the minimal planner here (its classes are not the shipped ones).
  EXPECT_NE(plan.out.find("small"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("policy:"), std::string::npos) << plan.out;
  CliResult created = Paddock({"create", "--task", "print hello world"});
  ASSERT_EQ(created.status, 0) << created.err;
  const std::string id = Trim(created.out);
  CliResult got = Paddock({"get", id});
  EXPECT_NE(got.out.find("\"decision\""), std::string::npos) << got.out;
  EXPECT_NE(Paddock({"create", "--task", "x", "--class", "small"}).status, 0);
  EXPECT_EQ(Paddock({"rm", id}).status, 0);
}

}  // namespace
}  // namespace paddock::testing
