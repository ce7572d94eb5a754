// Sessions and runs (SCH-1, REUSE-1..6, STATE-1/2): a session is durable state — a persistent
// workspace, its run history, its checkpoints — served by disposable sandboxes. A run goes
//
//   begin (one active run per session) → reuse check over the session's sandbox and
//   checkpoints → reuse it / fork a checkpoint / create a new one → lease → commands →
//   environment manifest from the files → checkpoint (by policy) → release (keep)
//
// and its result carries the decision log: class and confidence, the reuse decision with its
// score and reasons, the lease version and the environment fingerprint.
//
// Sizing (planner + guard) happens before, in the API layer: this service receives the guard's
// create request and the plan record. Everything the sandbox leaves behind is read from its
// files by Paddock, never taken from the agent's word.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "lifecycle/sandbox_manager.h"
#include "registry/store.h"
#include "runtime/runtime.h"
#include "sessions/environment_manifest.h"
#include "sessions/reuse_check.h"
#include "sessions/storage_layout.h"

namespace paddock::sessions {

// What a template offers, for manifests and the reuse check.
struct TemplateFacts {
  std::string digest;
  std::map<std::string, std::string> runtimes;
  std::vector<std::string> capabilities;
};
using TemplateCatalog = std::function<Result<TemplateFacts>(const std::string& template_name)>;

struct SessionConfig {
  // Checkpoint after a run that changed the environment (a new fingerprint): each turn is a
  // commit the session can fork from later (REUSE-5).
  bool checkpoint_after_run = true;
  int64_t checkpoint_ttl_ms = 7LL * 24 * 3600 * 1000;  // retention; 0 = never expire
  int64_t command_timeout_ms = 10 * 60 * 1000;
  uint64_t output_cap_bytes = 1 << 20;  // per stream and command, in the run result
  ReuseConfig reuse;
};

struct CreateSessionRequest {
  std::string user_id;  // "" = "default"
  std::string metadata_json = "{}";
};

struct RunRequest {
  std::string task;
  std::vector<std::string> plan;
  std::vector<std::string> commands;
  // Declared needs: capabilities ("python", "browser", ...) and dependencies ("pandas==1.5",
  // ecosystem "python" unless prefixed "npm:"). Commands add the ones they install.
  std::vector<std::string> capabilities;
  std::vector<std::string> requires_python;
  std::vector<std::string> requires_node;
  std::optional<bool> checkpoint;  // overrides SessionConfig::checkpoint_after_run
  std::string task_id;
};

// The sizing done before the run: the guard's create request (class, resources, template,
// plan record) and a summary for the decision log.
struct PlannedSandbox {
  lifecycle::CreateSandboxRequest create;
  nlohmann::json plan = nlohmann::json::object();  // {"intent": ..., "decision": ...} or {}
  std::string runtime;                             // the class's runtime
  std::string network_profile = "none";
};

class SessionService {
 public:
  SessionService(registry::Store& store, lifecycle::SandboxManager& sandboxes,
                 runtime::Runtime& runtime, StorageLayout layout, TemplateCatalog templates,
                 SessionConfig config, const Clock& clock);

  Result<registry::SessionRecord> CreateSession(const lifecycle::Principal& who,
                                                const CreateSessionRequest& req);
  // kNotFound for unknown ids and other tenants' sessions (no existence oracle).
  Result<registry::SessionRecord> GetSession(const lifecycle::Principal& who,
                                             const std::string& session_id);
  Result<std::vector<registry::SessionRecord>> ListSessions(const lifecycle::Principal& who,
                                                            int limit);
  // Ends the session: its sandbox is destroyed; the workspace and checkpoints stay until
  // `purge` (then they are deleted too).
  Status CloseSession(const lifecycle::Principal& who, const std::string& session_id, bool purge,
                      const std::string& request_id);

  // Runs `req` in the session (see the file comment). kConflict while another run of the
  // session is active. The returned run is finished (succeeded or failed); its result holds
  // the decision log and each command's output.
  Result<registry::RunRecord> Run(const lifecycle::Principal& who, const std::string& session_id,
                                  const RunRequest& req, const PlannedSandbox& planned,
                                  const std::string& request_id);
  Result<registry::RunRecord> GetRun(const lifecycle::Principal& who, const std::string& run_id);
  Result<std::vector<registry::RunRecord>> ListRuns(const lifecycle::Principal& who,
                                                    const std::string& session_id, int limit);

  Result<std::vector<registry::CheckpointRecord>> ListCheckpoints(const lifecycle::Principal& who,
                                                                  const std::string& session_id);
  // Forks a new sandbox of the session from one of its checkpoints (restore verifies the
  // tenant/user/session binding and the base digest first) and makes it the session's
  // sandbox. Returns the sandbox (Ready).
  Result<registry::SandboxRecord> Fork(const lifecycle::Principal& who,
                                       const std::string& session_id,
                                       const std::string& checkpoint_id,
                                       const std::string& request_id);

  // Deletes expired checkpoints (record and layer) that no live sandbox stacks on. Returns
  // how many.
  int ExpireCheckpointsOnce();

 private:
  struct RunContext;

  Result<registry::SessionRecord> LoadSession(const lifecycle::Principal& who,
                                              const std::string& session_id);
  std::vector<runtime::BindMount> SessionBinds(const registry::SessionRecord& s) const;
  Result<EnvironmentManifest> MeasureEnvironment(const registry::SandboxRecord& sandbox,
                                                 const std::string& workspace_id);
  Result<registry::CheckpointRecord> TakeCheckpoint(
      const lifecycle::Principal& who, const registry::SessionRecord& session,
      const registry::SandboxRecord& sandbox, int64_t lease_version,
      const EnvironmentManifest& manifest, const std::string& run_id, const std::string& task_id);
  Status VerifyRestore(const registry::SessionRecord& session,
                       const registry::CheckpointRecord& checkpoint);
  Status ExecuteRun(RunContext& ctx);

  registry::Store& store_;
  lifecycle::SandboxManager& sandboxes_;
  runtime::Runtime& runtime_;
  StorageLayout layout_;
  TemplateCatalog templates_;
  SessionConfig config_;
  const Clock& clock_;
};

// A FileView over a sandbox through the Runtime's file API (resolved beneath its root).
class RuntimeFileView final : public FileView {
 public:
  RuntimeFileView(runtime::Runtime& runtime, std::string sandbox_id)
      : runtime_(runtime), sandbox_id_(std::move(sandbox_id)) {}
  Result<std::vector<runtime::FileStat>> ListDir(const std::string& path) override;
  Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) override;

 private:
  runtime::Runtime& runtime_;
  std::string sandbox_id_;
};

}  // namespace paddock::sessions
