// paddockd: the Paddock daemon. This file is wiring only: it parses the command line and
// hands off to the components.
//
//   paddockd sandbox run [--template T] [--cpus N] [--memory SIZE] [--pids N] [--disk SIZE]
//                        [--timeout S] -- CMD ARGS...
//       One-shot: create a sandbox, run CMD with this terminal's stdio, destroy the sandbox,
//       exit with CMD's status (128 + signal when it was killed).
//   paddockd template list | paddockd template import NAME DIR

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/units.h"
#include "runtime/linux/linux_runtime.h"
#include "runtime/linux/template_store.h"

namespace {

using paddock::Status;
using namespace paddock::runtime;

int Fail(const Status& st) {
  std::fprintf(stderr, "paddockd: %s\n", st.ToString().c_str());
  return 125;  // like `docker run`: the runtime failed, not the command
}

struct RunFlags {
  std::string template_name = "host";
  double cpus = 1.0;
  std::string memory = "512M";
  uint64_t pids = 256;
  std::string disk = "1G";
  std::string timeout = "0";
  std::string user = "sandbox";
  std::string cwd;
  std::vector<std::string> env;
  std::vector<std::string> command;
};

int RunSandbox(const linux::LinuxRuntimeOptions& opts, const RunFlags& f) {
  SandboxSpec spec;
  spec.template_name = f.template_name;
  spec.limits.cpus = f.cpus;
  auto mem = paddock::ParseSize(f.memory, "--memory");
  if (!mem.ok()) return Fail(mem.status());
  auto disk = paddock::ParseSize(f.disk, "--disk");
  if (!disk.ok()) return Fail(disk.status());
  auto timeout = paddock::ParseDuration(f.timeout, "--timeout");
  if (!timeout.ok()) return Fail(timeout.status());
  spec.limits.memory_bytes = *mem;
  spec.limits.disk_bytes = *disk;
  spec.limits.pids = f.pids;

  ExecRequest req;
  req.argv = f.command;
  req.timeout = *timeout;
  req.user = f.user;
  req.cwd = f.cwd;
  for (const auto& e : f.env) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0)
      return Fail(paddock::InvalidArgument("--env: expected KEY=VALUE, got '" + e + "'"));
    req.env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  req.stdin_fd = STDIN_FILENO;
  req.stdout_fd = STDOUT_FILENO;
  req.stderr_fd = STDERR_FILENO;

  // Signals are handled by one thread with sigwait: block them before any thread starts.
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&sigs, s);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  auto rt = linux::LinuxRuntime::Open(opts);
  if (!rt.ok()) return Fail(rt.status());
  auto sb = (*rt)->Create(spec);
  if (!sb.ok()) return Fail(sb.status());
  auto exec = (*rt)->StartBackground(sb->id, req);
  if (!exec.ok()) {
    (void)(*rt)->Destroy(sb->id);
    return Fail(exec.status());
  }
  // Forward terminal signals to the command's whole process tree (it runs in its own
  // session inside the sandbox, so the terminal cannot reach it directly).
  std::thread forwarder([&, id = sb->id, exec_id = *exec] {
    int sig;
    while (sigwait(&sigs, &sig) == 0) {
      if (sig == 0) return;
      (void)(*rt)->Kill(id, exec_id, sig);
    }
  });
  forwarder.detach();
  auto result = (*rt)->Wait(sb->id, *exec);
  Status destroyed = (*rt)->Destroy(sb->id);
  if (!result.ok()) return Fail(result.status());
  if (!destroyed.ok())
    std::fprintf(stderr, "paddockd: destroy: %s\n", destroyed.ToString().c_str());
  if (result->timed_out) std::fprintf(stderr, "paddockd: command timed out\n");
  if (result->oom_killed) std::fprintf(stderr, "paddockd: command killed: out of memory\n");
  return result->ShellStatus();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"paddockd: the Paddock agent sandbox daemon"};
  app.require_subcommand(1);
  linux::LinuxRuntimeOptions opts;
  std::string data_dir = "/var/lib/paddock";
  app.add_option("--data-dir", data_dir, "Persistent data (templates, registry)")
      ->capture_default_str();
  app.add_option("--state-dir", opts.state_dir, "Runtime state (a tmpfs)")->capture_default_str();

  auto* sandbox = app.add_subcommand("sandbox", "Sandbox operations");
  sandbox->require_subcommand(1);
  RunFlags f;
  auto* run = sandbox->add_subcommand("run", "Run one command in a fresh sandbox");
  run->add_option("--template", f.template_name, "Template")->capture_default_str();
  run->add_option("--cpus", f.cpus, "CPU quota in cores")->capture_default_str();
  run->add_option("--memory", f.memory, "Memory limit (e.g. 512M)")->capture_default_str();
  run->add_option("--pids", f.pids, "Max processes")->capture_default_str();
  run->add_option("--disk", f.disk, "Writable layer size cap")->capture_default_str();
  run->add_option("--timeout", f.timeout, "Kill the command after this long (0 = never)")
      ->capture_default_str();
  run->add_option("--user", f.user, "sandbox | root (root inside the sandbox only)")
      ->capture_default_str();
  run->add_option("--cwd", f.cwd, "Working directory inside the sandbox");
  run->add_option("-e,--env", f.env, "KEY=VALUE environment variables");
  run->add_option("command", f.command, "Command and arguments")->required();
  run->prefix_command(false);

  auto* tpl = app.add_subcommand("template", "Template operations");
  tpl->require_subcommand(1);
  auto* tpl_list = tpl->add_subcommand("list", "List templates");
  std::string import_name, import_dir;
  auto* tpl_import = tpl->add_subcommand("import", "Register a root filesystem directory");
  tpl_import->add_option("name", import_name)->required();
  tpl_import->add_option("dir", import_dir)->required();

  CLI11_PARSE(app, argc, argv);
  opts.template_dir = data_dir + "/templates";

  if (run->parsed()) return RunSandbox(opts, f);

  linux::TemplateStore store(opts.template_dir);
  if (tpl_import->parsed()) {
    auto m = store.ImportDirectory(import_name, import_dir);
    if (!m.ok()) return Fail(m.status());
    std::printf("%s %s\n", m->name.c_str(), m->digest.c_str());
    return 0;
  }
  if (tpl_list->parsed()) {
    (void)store.EnsureHostTemplate();
    for (const auto& m : store.List())
      std::printf("%-20s %-10s %s\n", m.name.c_str(), m.kind.c_str(), m.digest.c_str());
    return 0;
  }
  return 0;
}
