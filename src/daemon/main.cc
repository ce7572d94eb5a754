// paddockd: the Paddock daemon. This file is wiring only: it parses the command line and
// hands off to the components.
//
//   paddockd sandbox run [--template T] [--cpus N] [--memory SIZE] [--pids N] [--disk SIZE]
//                        [--timeout S] -- CMD ARGS...
//       One-shot: create a sandbox, run CMD with this terminal's stdio, destroy the sandbox,
//       exit with CMD's status (128 + signal when it was killed).
//   paddockd template list | paddockd template import NAME DIR
//   paddockd serve [--config FILE] [--listen ADDR] [--port N]
//       The control plane: registry (SQLite), lifecycle manager, leases, reconciler, REST API.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/auth.h"
#include "api/http_server.h"
#include "api/metrics.h"
#include "api/sandbox_api.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/units.h"
#include "lifecycle/sandbox_manager.h"
#include "planner/default_config.h"
#include "planner/history.h"
#include "planner/planner_stack.h"
#include "registry/sqlite/sqlite_store.h"
#include "runtime/linux/linux_runtime.h"
#include "runtime/linux/template_store.h"
#include "sessions/session_service.h"

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

struct ServeFlags {
  std::string config_path;
  std::string listen;
  int port = -1;
};

// The daemon: wiring only. Shutdown on SIGTERM/SIGINT is graceful: the API stops taking new
// requests and finishes in-flight ones, then the background loop stops. Sandboxes do not
// outlive the daemon (their inits exit with it); the next start's reconciliation records them.
int Serve(const std::string& data_dir_flag, const std::string& state_dir_flag,
          const ServeFlags& f) {
  paddock::PaddockConfig cfg = paddock::DefaultConfig();
  if (!f.config_path.empty()) {
    auto loaded = paddock::LoadConfigFile(f.config_path);
    if (!loaded.ok()) return Fail(loaded.status());
    cfg = *loaded;
  }
  if (!data_dir_flag.empty()) cfg.data_dir = data_dir_flag;
  if (!state_dir_flag.empty()) cfg.state_dir = state_dir_flag;
  if (!f.listen.empty()) cfg.server.listen_address = f.listen;
  if (f.port >= 0) cfg.server.port = static_cast<uint16_t>(f.port);
  for (const auto& note : paddock::ScaleToHost(cfg, paddock::DetectHost()))
    std::fprintf(stderr, "paddockd: config: %s\n", note.c_str());

  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : {SIGINT, SIGTERM}) sigaddset(&sigs, s);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  std::error_code ec;
  std::filesystem::create_directories(cfg.data_dir, ec);
  if (ec) return Fail(paddock::Internal("create " + cfg.data_dir + ": " + ec.message()));
  // 0711: the sandbox inits (unprivileged host uids) must traverse to the templates below;
  // nothing here can be listed, and the registry itself is 0600.
  ::chmod(cfg.data_dir.c_str(), 0711);
  auto store = paddock::registry::SqliteStore::Open(
      cfg.data_dir + "/registry.db",
      paddock::registry::SqliteStoreOptions{.fsync_lifecycle = cfg.registry.fsync_lifecycle,
                                            .exclusive = true});
  if (!store.ok()) return Fail(store.status());
  paddock::SystemClock clock;
  auto admin_key = paddock::api::BootstrapAdminKey(**store, clock);
  if (!admin_key.ok()) return Fail(admin_key.status());
  if (*admin_key) {
    // Shown once: only its hash is stored.
    std::printf("paddockd: created the admin API key (shown once): %s\n", (*admin_key)->c_str());
    std::fflush(stdout);
  }

  linux::LinuxRuntimeOptions ropts;
  ropts.state_dir = cfg.state_dir;
  ropts.template_dir = cfg.data_dir + "/templates";
  auto rt = linux::LinuxRuntime::Open(ropts);
  if (!rt.ok()) return Fail(rt.status());

  std::vector<std::string> planner_notes;
  auto planner_config = paddock::planner::LoadDaemonPlannerConfig(
      cfg.planner_config, cfg.resource_classes, &planner_notes);
  if (!planner_config.ok()) return Fail(planner_config.status());
  for (const auto& note : planner_notes) std::fprintf(stderr, "paddockd: %s\n", note.c_str());
  paddock::planner::RegistryUsageHistory history(store->get(), planner_config->history.window);
  paddock::planner::PlannerStack planner =
      paddock::planner::MakePlannerStack(cfg.resource_classes, *planner_config, &history);

  paddock::lifecycle::SandboxManager manager(**store, **rt, cfg, clock);
  // LC-4 at start-up: whatever the last run left behind is reconciled before serving.
  int repaired = manager.ReconcileOnce();
  if (repaired > 0)
    std::fprintf(stderr, "paddockd: reconciled %d sandbox(es) at start-up\n", repaired);
  manager.StartBackground(cfg.lifecycle.reconcile_interval);

  // Sessions: durable workspaces, runs and checkpoints under <data>/sessions.
  if (auto failed = (*store)->FailInterruptedRuns(clock.NowMs()); failed.ok() && !failed->empty())
    std::fprintf(stderr, "paddockd: %zu run(s) interrupted by the last stop marked failed\n",
                 failed->size());
  linux::TemplateStore session_templates(cfg.data_dir + "/templates");
  paddock::sessions::TemplateCatalog catalog =
      [&session_templates](
          const std::string& name) -> paddock::Result<paddock::sessions::TemplateFacts> {
    PADDOCK_ASSIGN_OR_RETURN(linux::TemplateManifest m, session_templates.Get(name));
    paddock::sessions::TemplateFacts f;
    f.digest = m.digest;
    f.runtimes = m.runtimes;
    f.capabilities = m.capabilities;
    // A template with a browser binary serves browser work (the planner's cap:browser).
    if (std::find(f.capabilities.begin(), f.capabilities.end(), "chromium") != f.capabilities.end())
      f.capabilities.push_back("browser");
    return f;
  };
  paddock::sessions::SessionService sessions(**store, manager, **rt,
                                             paddock::sessions::StorageLayout(cfg.data_dir),
                                             catalog, paddock::sessions::SessionConfig{}, clock);
  std::atomic<bool> stopping{false};
  std::thread checkpoint_expiry([&] {
    while (!stopping.load()) {
      sessions.ExpireCheckpointsOnce();
      for (int i = 0; i < 60 && !stopping.load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });

  paddock::api::MetricsRegistry metrics;
  paddock::api::HttpServerOptions hopts;
  hopts.address = cfg.server.listen_address;
  hopts.port = cfg.server.port;
  hopts.max_connections = cfg.server.max_connections;
  hopts.default_max_body_bytes = cfg.server.max_body_bytes;
  hopts.read_timeout = cfg.server.read_timeout;
  hopts.metrics = &metrics;
  paddock::api::HttpServer server(hopts);
  paddock::api::ApiContext ctx;
  ctx.server = &server;
  ctx.manager = &manager;
  ctx.store = store->get();
  ctx.metrics = &metrics;
  ctx.clock = &clock;
  ctx.planner = &planner;
  ctx.sessions = &sessions;
  ctx.ready = [] { return true; };
  auto api = paddock::api::SandboxApi::Create(ctx);
  if (!api.ok()) return Fail(api.status());
  if (Status st = server.Start(); !st.ok()) return Fail(st);
  std::printf("paddockd: listening on http://%s:%u\n", cfg.server.listen_address.c_str(),
              server.port());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&sigs, &sig);
  std::fprintf(stderr, "paddockd: signal %d, shutting down\n", sig);
  server.Stop(std::chrono::seconds(10));
  stopping.store(true);
  checkpoint_expiry.join();
  manager.StopBackground();
  return 0;
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

  ServeFlags serve_flags;
  auto* serve = app.add_subcommand("serve", "Run the control plane (REST API on loopback)");
  serve->add_option("--config", serve_flags.config_path, "paddock.yaml (default: built-in)");
  serve->add_option("--listen", serve_flags.listen, "Listen address (default 127.0.0.1)");
  serve->add_option("--port", serve_flags.port, "Port (default 8780; 0 = any free port)");

  CLI11_PARSE(app, argc, argv);
  opts.template_dir = data_dir + "/templates";
  if (serve->parsed()) {
    // --data-dir / --state-dir override the config file only when given explicitly.
    return Serve(app.get_option("--data-dir")->count() ? data_dir : "",
                 app.get_option("--state-dir")->count() ? opts.state_dir : "", serve_flags);
  }

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
