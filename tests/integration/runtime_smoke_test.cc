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
