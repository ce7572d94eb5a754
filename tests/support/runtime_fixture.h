// Shared fixture for tests that need real sandboxes: one LinuxRuntime per test process (templates
// cached under <build dir>/test-data so the host template's digest is computed once), and
// helpers that create sandboxes destroyed automatically at the end of each test.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/linux/linux_runtime.h"

namespace paddock::testing {

// The process-wide runtime (created on first use; destroyed at exit).
runtime::linux::LinuxRuntime& SharedRuntime();
// <dir of the test binary>/test-data
std::string TestDataDir();

struct CommandOutput {
  runtime::ExecResult result;
  std::string out, err;
};

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;  // destroys every sandbox the test created

  runtime::linux::LinuxRuntime& rt() { return *rt_; }
  // Creates a sandbox (small defaults: 1 CPU, 256 MiB, 128 pids, 64 MiB disk) or fails the test.
  std::string NewSandbox(runtime::SandboxSpec spec = DefaultSpec());
  static runtime::SandboxSpec DefaultSpec();
  // Runs `req`, collecting stdout/stderr; fails the test if the runtime returns an error.
  CommandOutput Run(const std::string& id, const runtime::ExecRequest& req);
  // Runs `sh -c script` (as the sandbox user unless `user` says "root"); fails the test if the
  // runtime returns an error.
  CommandOutput Sh(const std::string& id, const std::string& script,
                   std::chrono::milliseconds timeout = std::chrono::seconds(30),
                   const std::string& user = "sandbox");

  runtime::linux::LinuxRuntime* rt_ = nullptr;
  std::vector<std::string> created_;
};

}  // namespace paddock::testing
