#include "support/runtime_fixture.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace paddock::testing {

std::string TestDataDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path() / "test-data").string();
}

runtime::linux::LinuxRuntime& SharedRuntime() {
  static std::unique_ptr<runtime::linux::LinuxRuntime> rt = [] {
    runtime::linux::LinuxRuntimeOptions opts;
    opts.template_dir = TestDataDir() + "/templates";
    opts.state_dir = "/run/paddock";
    auto r = runtime::linux::LinuxRuntime::Open(opts);
    if (!r.ok()) {
      fprintf(stderr, "cannot open runtime: %s\n", r.status().ToString().c_str());
      std::abort();
    }
    return std::move(r).value();
  }();
  return *rt;
}

runtime::SandboxSpec SandboxTest::DefaultSpec() {
  runtime::SandboxSpec spec;
  spec.limits.cpus = 1;
  spec.limits.memory_bytes = 256ull << 20;
  spec.limits.pids = 128;
  spec.limits.disk_bytes = 64ull << 20;
  spec.limits.tmp_bytes = 32ull << 20;
  return spec;
}

void SandboxTest::SetUp() {
  if (geteuid() != 0) GTEST_SKIP() << "sandboxes need root";
  rt_ = &SharedRuntime();
}

void SandboxTest::TearDown() {
  for (const auto& id : created_) {
    Status st = rt_->Destroy(id);
    EXPECT_TRUE(st.ok()) << "destroy " << id << ": " << st.ToString();
  }
  created_.clear();
}

std::string SandboxTest::NewSandbox(runtime::SandboxSpec spec) {
  auto info = rt_->Create(spec);
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (!info.ok()) return "";
  created_.push_back(info->id);
  return info->id;
}

CommandOutput SandboxTest::Run(const std::string& id, const runtime::ExecRequest& req) {
  CommandOutput o;
  runtime::ExecCallbacks cb;
  cb.on_stdout = [&](std::string_view s) { o.out.append(s); };
  cb.on_stderr = [&](std::string_view s) { o.err.append(s); };
  auto r = rt_->Exec(id, req, cb);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) o.result = *r;
  return o;
}

CommandOutput SandboxTest::Sh(const std::string& id, const std::string& script,
                              std::chrono::milliseconds timeout, const std::string& user) {
  runtime::ExecRequest req;
  req.shell = script;
  req.timeout = timeout;
  req.user = user;
  return Run(id, req);
}

}  // namespace paddock::testing
