// Smoke test: the basic create -> exec -> destroy path on a real sandbox.
#include <gtest/gtest.h>

#include "support/runtime_fixture.h"

namespace paddock::testing {
namespace {

using RuntimeSmokeTest = SandboxTest;

TEST_F(RuntimeSmokeTest, CreateExecDestroy) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  CommandOutput o = Sh(id, "echo hello; echo oops >&2; exit 7");
  EXPECT_EQ(o.out, "hello\n");
  EXPECT_EQ(o.err, "oops\n");
  EXPECT_EQ(o.result.exit_code, 7);
  EXPECT_EQ(o.result.signal, 0);
  EXPECT_FALSE(o.result.timed_out);
}

}  // namespace
}  // namespace paddock::testing

namespace paddock::testing {
namespace {

// Debian points many /usr/bin commands (awk, pager, ...) at /etc/alternatives; the host
// template copies just those symlinks so the commands work, and nothing else of host /etc.
TEST_F(RuntimeSmokeTest, AlternativesResolveButHostEtcStaysOut) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  CommandOutput o = Sh(id, "echo 'a b' | awk '{print $2}'");
  EXPECT_EQ(o.result.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, "b\n");
  o = Sh(id, "ls /etc | sort | tr '\\n' ' '");
  EXPECT_EQ(o.out, "alternatives group hostname hosts nsswitch.conf passwd resolv.conf ");
  o = Sh(id, "find /etc/alternatives -not -type l -not -path /etc/alternatives | wc -l");
  EXPECT_EQ(o.out, "0\n");
}

}  // namespace
}  // namespace paddock::testing
