#include "sessions/session_service.h"

#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <set>

#include "common/random.h"
#include "lifecycle/state_machine.h"

namespace paddock::sessions {

using json = nlohmann::json;
using registry::CheckpointRecord;
using registry::RunRecord;
using registry::SandboxRecord;
using registry::SessionRecord;

namespace {

constexpr const char* kWorkspaceTarget = "/workspace";
constexpr const char* kCacheTarget = "/cache";
constexpr size_t kMaxCommands = 100;

std::vector<std::string> LayersOf(const SandboxRecord& rec) {
  std::vector<std::string> layers;
  std::vector<runtime::BindMount> binds;
  if (!lifecycle::ParseSandboxStorage(rec.storage, &layers, &binds).ok()) return {};
  return layers;
}

std::vector<std::string> LayersOf(const CheckpointRecord& c) {
  std::vector<std::string> layers;
  auto j = json::parse(c.layers, nullptr, false);
  if (!j.is_array()) return layers;
  for (const auto& l : j) {
    if (l.is_string()) layers.push_back(l.get<std::string>());
  }
  return layers;
}

std::optional<EnvironmentManifest> ParseManifest(const std::string& text) {
  auto j = json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (!j.is_object() || j.empty()) return std::nullopt;
  auto m = ManifestFromJson(j);
  if (!m.ok()) return std::nullopt;
  return *m;
}

std::string NetworkProfileOf(const SandboxRecord& rec) {
  auto plan = json::parse(rec.plan.empty() ? "{}" : rec.plan, nullptr, false);
  if (!plan.is_object()) return "none";
  const json& decision = plan.value("decision", json::object());
  return decision.is_object() ? decision.value("network_profile", std::string("none")) : "none";
}

using lifecycle::SandboxState;

bool IsState(const SandboxRecord& rec, SandboxState s) {
  return rec.state == lifecycle::StateName(s);
}

bool IsLive(const SandboxRecord& rec) {
  return !IsState(rec, SandboxState::kTerminated) && !IsState(rec, SandboxState::kFailed) &&
         !IsState(rec, SandboxState::kLost);
}

}  // namespace

// --- RuntimeFileView -------------------------------------------------------------------------

Result<std::vector<runtime::FileStat>> RuntimeFileView::ListDir(const std::string& path) {
  return runtime_.ListDir(sandbox_id_, path);
}

Result<std::string> RuntimeFileView::ReadFile(const std::string& path, uint64_t max_bytes) {
  std::string out;
  PADDOCK_RETURN_IF_ERROR(
      runtime_.ReadFile(sandbox_id_, path, max_bytes, [&](std::string_view chunk) -> Status {
        out.append(chunk);
        return Status::Ok();
      }));
  return out;
}

// --- SessionService --------------------------------------------------------------------------

struct SessionService::RunContext {
  lifecycle::Principal who;
  SessionRecord session;
  const RunRequest* req = nullptr;
  const PlannedSandbox* planned = nullptr;
  std::string request_id;
  RunRecord run;
  json log = json::object();  // the decision log, part of the run result
  json commands = json::array();
  bool commands_ok = true;
};

SessionService::SessionService(registry::Store& store, lifecycle::SandboxManager& sandboxes,
                               runtime::Runtime& runtime, StorageLayout layout,
                               TemplateCatalog templates, SessionConfig config, const Clock& clock)
    : store_(store),
      sandboxes_(sandboxes),
      runtime_(runtime),
      layout_(std::move(layout)),
      templates_(std::move(templates)),
      config_(std::move(config)),
      clock_(clock) {}

Result<SessionRecord> SessionService::CreateSession(const lifecycle::Principal& who,
                                                    const CreateSessionRequest& req) {
  if (who.tenant_id.empty()) return PermissionDenied("a tenant is required to create sessions");
  PADDOCK_RETURN_IF_ERROR(layout_.Ensure());
  SessionRecord s;
  s.session_id = "ss-" + RandomHex(8);
  s.tenant_id = who.tenant_id;
  // The reuse check never treats two empty ids as the same user: a session created without a
  // user belongs to the tenant's "default" user.
  s.user_id = req.user_id.empty() ? "default" : req.user_id;
  s.workspace_id = "ws-" + s.session_id.substr(3);
  s.metadata = req.metadata_json.empty() ? "{}" : req.metadata_json;
  s.created_at = s.updated_at = clock_.NowMs();
  // The workspace and the tenant's cache exist before any sandbox mounts them.
  PADDOCK_ASSIGN_OR_RETURN(std::string workspace, layout_.WorkspaceDir(s.session_id));
  PADDOCK_ASSIGN_OR_RETURN(std::string cache, layout_.CacheDir(s.tenant_id));
  PADDOCK_RETURN_IF_ERROR(StorageLayout::EnsureSandboxOwnedDir(workspace));
  PADDOCK_RETURN_IF_ERROR(StorageLayout::EnsureSandboxOwnedDir(cache));
  if (Status st = store_.CreateSession(s); !st.ok()) {
    (void)StorageLayout::RemoveTree(workspace);
    return st;
  }
  s.version = 1;
  return s;
}

Result<SessionRecord> SessionService::LoadSession(const lifecycle::Principal& who,
                                                  const std::string& session_id) {
  auto s = store_.GetSession(session_id);
  if (!s.ok()) {
    if (s.status().code() == StatusCode::kNotFound) {
      return NotFound("session " + session_id + " not found");
    }
    return s.status();
  }
  if (!who.admin && s->tenant_id != who.tenant_id) {
    return NotFound("session " + session_id + " not found");
  }
  return s;
}

Result<SessionRecord> SessionService::GetSession(const lifecycle::Principal& who,
                                                 const std::string& session_id) {
  return LoadSession(who, session_id);
}

Result<std::vector<SessionRecord>> SessionService::ListSessions(const lifecycle::Principal& who,
                                                                int limit) {
  return store_.ListSessions(who.admin ? "" : who.tenant_id, limit);
}

std::vector<runtime::BindMount> SessionService::SessionBinds(const SessionRecord& s) const {
  std::vector<runtime::BindMount> binds;
  if (auto ws = layout_.WorkspaceDir(s.session_id); ws.ok()) {
    binds.push_back({*ws, kWorkspaceTarget, false});
  }
  // The tenant's download cache: shared by its sessions, never by other tenants.
  if (auto cache = layout_.CacheDir(s.tenant_id); cache.ok()) {
    binds.push_back({*cache, kCacheTarget, false});
  }
  return binds;
}

Status SessionService::CloseSession(const lifecycle::Principal& who, const std::string& session_id,
                                    bool purge, const std::string& request_id) {
  PADDOCK_ASSIGN_OR_RETURN(SessionRecord s, LoadSession(who, session_id));
  if (!s.active_run_id.empty()) {
    return Status(StatusCode::kConflict, "session " + session_id + " has an active run");
  }
  if (!s.current_sandbox_id.empty()) {
    Status st = sandboxes_.Destroy(who, s.current_sandbox_id, "session closed", request_id);
    if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
  }
  s.state = "closed";
  s.current_sandbox_id.clear();
  s.updated_at = clock_.NowMs();
  PADDOCK_RETURN_IF_ERROR(store_.UpdateSession(s).status());
  if (purge) {
    PADDOCK_ASSIGN_OR_RETURN(auto checkpoints, store_.ListCheckpoints(session_id, 1000));
    for (const CheckpointRecord& c : checkpoints) {
      if (auto dir = layout_.CheckpointDir(c.checkpoint_id); dir.ok()) {
        PADDOCK_RETURN_IF_ERROR(StorageLayout::RemoveTree(*dir));
      }
      PADDOCK_RETURN_IF_ERROR(store_.MarkCheckpointDeleted(c.checkpoint_id));
    }
    PADDOCK_ASSIGN_OR_RETURN(std::string workspace, layout_.WorkspaceDir(session_id));
    PADDOCK_RETURN_IF_ERROR(StorageLayout::RemoveTree(workspace));
  }
  return Status::Ok();
}

Result<RunRecord> SessionService::GetRun(const lifecycle::Principal& who,
                                         const std::string& run_id) {
  auto run = store_.GetRun(run_id);
  if (!run.ok() || (!who.admin && run->tenant_id != who.tenant_id)) {
    if (run.ok() || run.status().code() == StatusCode::kNotFound) {
      return NotFound("run " + run_id + " not found");
    }
    return run.status();
  }
  return run;
}

Result<std::vector<RunRecord>> SessionService::ListRuns(const lifecycle::Principal& who,
                                                        const std::string& session_id, int limit) {
  PADDOCK_RETURN_IF_ERROR(LoadSession(who, session_id).status());
  return store_.ListRuns(session_id, limit);
}

Result<std::vector<CheckpointRecord>> SessionService::ListCheckpoints(
    const lifecycle::Principal& who, const std::string& session_id) {
  PADDOCK_RETURN_IF_ERROR(LoadSession(who, session_id).status());
  return store_.ListCheckpoints(session_id, 1000);
}

Result<EnvironmentManifest> SessionService::MeasureEnvironment(const SandboxRecord& sandbox,
                                                               const std::string& workspace_id) {
  ManifestContext ctx;
  ctx.workspace_id = workspace_id;
  auto facts = templates_(sandbox.template_id);
  if (facts.ok()) {
    ctx.runtimes = facts->runtimes;
    ctx.template_capabilities = facts->capabilities;
    ctx.base_digest = facts->digest;
  }
  // A fork's base is its template plus the checkpoint layers it stacks on.
  for (const std::string& layer : LayersOf(sandbox)) ctx.base_digest += "+" + layer;
  bool truncated = false;
  auto changed = runtime_.ChangedPaths(sandbox.sandbox_id, 3, 200, &truncated);
  if (changed.ok()) {
    for (const runtime::ChangedPath& c : *changed) {
      ctx.dirty_paths.push_back(c.deleted ? c.path + " (deleted)" : c.path);
    }
  }
  RuntimeFileView view(runtime_, sandbox.sandbox_id);
  PADDOCK_ASSIGN_OR_RETURN(EnvironmentManifest m, ComputeManifest(view, ctx));
  // Changed paths we could not list in full are unknown pollution for the reuse check.
  if (!changed.ok() || truncated) m.truncated = true;
  if (m.truncated) m.fingerprint = ManifestFingerprint(m);
  return m;
}

Status SessionService::VerifyRestore(const SessionRecord& session, const CheckpointRecord& c) {
  // STATE-2: bindings first, then the base the layers were taken on.
  if (c.tenant_id != session.tenant_id) return NotFound("checkpoint " + c.checkpoint_id);
  if (c.restore_policy == "same_session" && c.session_id != session.session_id) {
    return PermissionDenied("checkpoint " + c.checkpoint_id + " belongs to another session");
  }
  if (c.user_id != session.user_id) {
    return PermissionDenied("checkpoint " + c.checkpoint_id + " belongs to another user");
  }
  if (c.state != "ready")
    return FailedPrecondition("checkpoint " + c.checkpoint_id + " is deleted");
  if (c.expires_at > 0 && c.expires_at <= clock_.NowMs()) {
    return FailedPrecondition("checkpoint " + c.checkpoint_id + " has expired");
  }
  PADDOCK_ASSIGN_OR_RETURN(TemplateFacts facts, templates_(c.template_id));
  if (facts.digest != c.base_image_digest) {
    return FailedPrecondition("checkpoint " + c.checkpoint_id + ": template " + c.template_id +
                              " changed since it was taken (" + c.base_image_digest + " -> " +
                              facts.digest + ")");
  }
  for (const std::string& layer : LayersOf(c)) {
    struct stat st {};
    if (::lstat(layer.c_str(), &st) < 0 || !S_ISDIR(st.st_mode)) {
      return FailedPrecondition("checkpoint " + c.checkpoint_id + ": layer missing");
    }
  }
  return Status::Ok();
}

Result<CheckpointRecord> SessionService::TakeCheckpoint(
    const lifecycle::Principal& who, const SessionRecord& session, const SandboxRecord& sandbox,
    int64_t lease_version, const EnvironmentManifest& manifest, const std::string& run_id,
    const std::string& task_id) {
  PADDOCK_RETURN_IF_ERROR(layout_.Ensure());
  CheckpointRecord c;
  c.checkpoint_id = "ck-" + RandomHex(8);
  PADDOCK_ASSIGN_OR_RETURN(std::string dir, layout_.CheckpointDir(c.checkpoint_id));
  if (::mkdir(dir.c_str(), 0700) < 0) return ErrnoStatus("mkdir " + dir);
  const std::string layer = dir + "/layer";
  runtime::LayerStats stats;
  Status st = sandboxes_.WithFence(who, sandbox.sandbox_id, lease_version,
                                   [&](runtime::Runtime& rt) -> Status {
                                     auto r = rt.Checkpoint(sandbox.sandbox_id, layer);
                                     if (!r.ok()) return r.status();
                                     stats = *r;
                                     return Status::Ok();
                                   });
  if (!st.ok()) {
    (void)StorageLayout::RemoveTree(dir);
    return st;
  }
  // The chain: this layer over the ones the sandbox was forked from.
  std::vector<std::string> chain = {layer};
  for (const std::string& l : LayersOf(sandbox)) chain.push_back(l);
  const int64_t now = clock_.NowMs();
  c.tenant_id = session.tenant_id;
  c.user_id = session.user_id;
  c.session_id = session.session_id;
  c.task_id = task_id;
  c.run_id = run_id;
  c.sandbox_id = sandbox.sandbox_id;
  if (auto env = store_.GetEnvironment(sandbox.sandbox_id); env.ok()) {
    c.parent_checkpoint_id = env->snapshot_id;
  }
  c.layers = json(chain).dump();
  c.template_id = sandbox.template_id;
  if (auto facts = templates_(sandbox.template_id); facts.ok()) c.base_image_digest = facts->digest;
  c.runtime = sandbox.runtime_provider;
  c.resource_class = sandbox.resource_class;
  c.network_profile = NetworkProfileOf(sandbox);
  c.workspace_version = session.run_count;
  c.manifest = ManifestToJson(manifest).dump();
  c.environment_fingerprint = manifest.fingerprint;
  c.files = static_cast<int64_t>(stats.files);
  c.bytes = static_cast<int64_t>(stats.bytes);
  c.created_at = now;
  c.expires_at = config_.checkpoint_ttl_ms > 0 ? now + config_.checkpoint_ttl_ms : 0;
  if (Status ins = store_.InsertCheckpoint(c); !ins.ok()) {
    (void)StorageLayout::RemoveTree(dir);
    return ins;
  }
  return c;
}

int SessionService::ExpireCheckpointsOnce() {
  auto expired = store_.ListExpiredCheckpoints(clock_.NowMs(), 100);
  if (!expired.ok()) return 0;
  int deleted = 0;
  for (const CheckpointRecord& c : *expired) {
    auto dir = layout_.CheckpointDir(c.checkpoint_id);
    if (!dir.ok()) continue;
    const std::string layer = *dir + "/layer";
    // A layer stays while a ready checkpoint's chain or a live sandbox stacks on it.
    bool in_use = false;
    if (auto others = store_.ListCheckpoints(c.session_id, 1000); others.ok()) {
      for (const CheckpointRecord& o : *others) {
        if (o.checkpoint_id == c.checkpoint_id) continue;
        if (o.expires_at > 0 && o.expires_at <= clock_.NowMs()) continue;
        for (const std::string& l : LayersOf(o)) in_use |= l == layer;
      }
    }
    registry::SandboxFilter filter;
    filter.session_id = c.session_id;
    if (auto page = store_.ListSandboxes(filter, 1000, ""); page.ok()) {
      for (const SandboxRecord& s : page->records) {
        if (!IsLive(s)) continue;
        for (const std::string& l : LayersOf(s)) in_use |= l == layer;
      }
    }
    if (in_use) continue;
    if (!StorageLayout::RemoveTree(*dir).ok()) continue;
    if (store_.MarkCheckpointDeleted(c.checkpoint_id).ok()) ++deleted;
  }
  return deleted;
}

Result<SandboxRecord> SessionService::Fork(const lifecycle::Principal& who,
                                           const std::string& session_id,
                                           const std::string& checkpoint_id,
                                           const std::string& request_id) {
  PADDOCK_ASSIGN_OR_RETURN(SessionRecord session, LoadSession(who, session_id));
  if (session.state != "active") return FailedPrecondition("session " + session_id + " is closed");
  if (!session.active_run_id.empty()) {
    return Status(StatusCode::kConflict, "session " + session_id + " has an active run");
  }
  auto c = store_.GetCheckpoint(checkpoint_id);
  if (!c.ok()) return NotFound("checkpoint " + checkpoint_id + " not found");
  if (c->tenant_id != session.tenant_id)
    return NotFound("checkpoint " + checkpoint_id + " not found");
  PADDOCK_RETURN_IF_ERROR(VerifyRestore(session, *c));
  lifecycle::CreateSandboxRequest create;
  create.resource_class = c->resource_class;
  create.template_name = c->template_id;
  create.session_id = session.session_id;
  create.user_id = session.user_id;
  create.layers = LayersOf(*c);
  create.binds = SessionBinds(session);
  PADDOCK_ASSIGN_OR_RETURN(SandboxRecord sandbox, sandboxes_.Create(who, create, request_id));
  // Its environment as its files say (the fork's base is the template plus the layers, so its
  // fingerprint is not the checkpoint's); the next run compares against this.
  registry::EnvironmentRecord env;
  env.sandbox_id = sandbox.sandbox_id;
  env.base_image_digest = c->base_image_digest;
  env.workspace_id = session.workspace_id;
  env.snapshot_id = c->checkpoint_id;
  if (auto m = MeasureEnvironment(sandbox, session.workspace_id); m.ok()) {
    env.manifest = ManifestToJson(*m).dump();
  }
  (void)store_.UpsertEnvironment(env);
  const std::string old = session.current_sandbox_id;
  session.current_sandbox_id = sandbox.sandbox_id;
  session.updated_at = clock_.NowMs();
  PADDOCK_RETURN_IF_ERROR(store_.UpdateSession(session).status());
  if (!old.empty()) (void)sandboxes_.Destroy(who, old, "replaced by a fork", request_id);
  return sandbox;
}

Result<RunRecord> SessionService::Run(const lifecycle::Principal& who,
                                      const std::string& session_id, const RunRequest& req,
                                      const PlannedSandbox& planned,
                                      const std::string& request_id) {
  if (req.commands.empty()) return InvalidArgument("commands: at least one command is required");
  if (req.commands.size() > kMaxCommands) {
    return InvalidArgument("commands: at most " + std::to_string(kMaxCommands));
  }
  PADDOCK_ASSIGN_OR_RETURN(SessionRecord session, LoadSession(who, session_id));
  RunRecord run;
  run.run_id = "run-" + RandomHex(8);
  run.session_id = session_id;
  run.tenant_id = session.tenant_id;
  run.request = json{{"task", req.task},
                     {"plan", req.plan},
                     {"commands", req.commands},
                     {"capabilities", req.capabilities}}
                    .dump();
  run.created_at = clock_.NowMs();
  PADDOCK_ASSIGN_OR_RETURN(run, store_.BeginRun(run));  // one active run per session

  RunContext ctx;
  ctx.who = who;
  ctx.req = &req;
  ctx.planned = &planned;
  ctx.request_id = request_id;
  ctx.run = run;
  Status st = [&]() -> Status {
    PADDOCK_ASSIGN_OR_RETURN(ctx.session, store_.GetSession(session_id));
    return ExecuteRun(ctx);
  }();
  ctx.run.state = st.ok() && ctx.commands_ok ? "succeeded" : "failed";
  ctx.run.finished_at = clock_.NowMs();
  json result = ctx.log;
  result["commands"] = ctx.commands;
  if (!st.ok()) result["error"] = st.ToString();
  ctx.run.result = result.dump();
  PADDOCK_RETURN_IF_ERROR(store_.FinishRun(ctx.run));
  if (!st.ok()) return st;
  return ctx.run;
}

Status SessionService::ExecuteRun(RunContext& ctx) {
  const RunRequest& req = *ctx.req;
  const PlannedSandbox& planned = *ctx.planned;
  SessionRecord& session = ctx.session;
  json& log = ctx.log;
  const int64_t now = clock_.NowMs();
  log["run_id"] = ctx.run.run_id;
  log["seq"] = ctx.run.seq;
  log["plan"] = planned.plan;
  if (planned.plan.is_object() && planned.plan.contains("intent")) {
    log["resource_class"] = planned.plan["decision"].value("resource_class", "");
    log["confidence"] = planned.plan["intent"].value("confidence", 0.0);
  } else {
    log["resource_class"] = planned.create.resource_class;
  }

  // 1. What the run needs.
  RunNeeds needs;
  needs.tenant_id = session.tenant_id;
  needs.user_id = session.user_id;
  needs.session_id = session.session_id;
  needs.resource_class = planned.create.resource_class;
  needs.runtime = planned.runtime;
  needs.template_name = planned.create.template_name;
  needs.network_profile = planned.network_profile;
  needs.capabilities = req.capabilities;
  needs.workspace_id = session.workspace_id;
  needs.now_ms = now;
  needs.requirements = RequirementsFromCommands(req.commands);
  for (const std::string& r : req.requires_python) {
    if (auto p = ParseRequirement("python", r)) needs.requirements.push_back(*p);
  }
  for (const std::string& r : req.requires_node) {
    if (auto p = ParseRequirement("node", r)) needs.requirements.push_back(*p);
  }
  PADDOCK_ASSIGN_OR_RETURN(TemplateFacts template_now, templates_(needs.template_name));
  needs.template_digest = template_now.digest;

  // 2. What the session has: its sandbox, measured now from its files, and its checkpoints.
  std::optional<SandboxFacts> current;
  if (!session.current_sandbox_id.empty()) {
    auto rec = sandboxes_.Get(ctx.who, session.current_sandbox_id);
    if (rec.ok() && IsLive(*rec)) {
      SandboxFacts f;
      f.sandbox_id = rec->sandbox_id;
      f.tenant_id = rec->tenant_id;
      f.user_id = rec->user_id;
      f.session_id = rec->session_id;
      // The reuse check's vocabulary: "Ready" is idle with no lease; anything else is busy.
      f.state = IsState(*rec, SandboxState::kReady) ? "Ready" : rec->state;
      f.resource_class = rec->resource_class;
      f.runtime = rec->runtime_provider;
      f.template_name = rec->template_id;
      f.network_profile = NetworkProfileOf(*rec);
      f.tainted = rec->tainted;
      f.taint_reason = rec->tainted ? rec->state_reason : "";
      auto info = runtime_.Get(rec->sandbox_id);
      f.healthy = info.ok() && info->state != runtime::SandboxState::kDead;
      if (info.ok()) f.template_digest = info->template_digest;
      if (auto env = store_.GetEnvironment(rec->sandbox_id); env.ok()) {
        if (auto recorded = ParseManifest(env->manifest)) {
          f.recorded_fingerprint = recorded->fingerprint;
        }
      }
      if (f.healthy && f.state == "Ready") {
        if (auto live = MeasureEnvironment(*rec, session.workspace_id); live.ok()) {
          f.manifest = *live;
        }
      }
      current = f;
    }
  }
  std::vector<CheckpointFacts> checkpoints;
  PADDOCK_ASSIGN_OR_RETURN(auto records, store_.ListCheckpoints(session.session_id, 100));
  std::map<std::string, CheckpointRecord> by_id;
  for (const CheckpointRecord& c : records) {
    CheckpointFacts f;
    f.checkpoint_id = c.checkpoint_id;
    f.tenant_id = c.tenant_id;
    f.user_id = c.user_id;
    f.session_id = c.session_id;
    f.runtime = c.runtime;
    f.template_name = c.template_id;
    f.template_digest = c.base_image_digest;
    f.resource_class = c.resource_class;
    f.network_profile = c.network_profile;
    f.secret_scope = c.secret_scope;
    f.manifest = ParseManifest(c.manifest);
    f.created_at_ms = c.created_at;
    f.expires_at_ms = c.expires_at;
    checkpoints.push_back(std::move(f));
    by_id[c.checkpoint_id] = c;
  }

  // 3. The reuse check: a proof of compatibility, or another sandbox.
  ReuseDecision decision = CheckReuse(needs, current, checkpoints, config_.reuse);
  log["reuse"] = ReuseDecisionToJson(decision);

  std::string sandbox_id;
  const std::string previous = current ? current->sandbox_id : "";
  if (decision.destroy_current && !previous.empty()) {
    (void)sandboxes_.Destroy(ctx.who, previous, "reuse check: " + decision.reason, ctx.request_id);
  }
  bool fresh = false;
  std::string base_checkpoint;
  switch (decision.action) {
    case ReuseAction::kReuse:
    case ReuseAction::kReuseSeparateVenv:
      sandbox_id = decision.sandbox_id;
      break;
    case ReuseAction::kForkCheckpoint:
    case ReuseAction::kNewSandbox: {
      lifecycle::CreateSandboxRequest create = planned.create;
      create.session_id = session.session_id;
      create.user_id = session.user_id;
      create.binds = SessionBinds(session);
      if (decision.action == ReuseAction::kForkCheckpoint) {
        auto it = by_id.find(decision.checkpoint_id);
        if (it == by_id.end()) return Internal("reuse check chose an unknown checkpoint");
        PADDOCK_RETURN_IF_ERROR(VerifyRestore(session, it->second));
        create.layers = LayersOf(it->second);
        base_checkpoint = it->second.checkpoint_id;
      }
      PADDOCK_ASSIGN_OR_RETURN(SandboxRecord created,
                               sandboxes_.Create(ctx.who, create, ctx.request_id));
      sandbox_id = created.sandbox_id;
      fresh = true;
      if (!previous.empty() && !decision.destroy_current) {
        // The session moves to the new sandbox; the old one is not left polluting a pool.
        (void)sandboxes_.Destroy(ctx.who, previous, "replaced: " + decision.reason, ctx.request_id);
      }
      session.current_sandbox_id = sandbox_id;
      session.updated_at = clock_.NowMs();
      PADDOCK_ASSIGN_OR_RETURN(session.version, store_.UpdateSession(session));
      break;
    }
  }
  log["sandbox_id"] = sandbox_id;

  // 4. Lease it: every command below is fenced by this version.
  PADDOCK_ASSIGN_OR_RETURN(
      registry::LeaseRecord lease,
      sandboxes_.AcquireLease(ctx.who, sandbox_id, "session:" + session.session_id, 0,
                              ctx.request_id));
  log["lease_version"] = lease.lease_version;
  bool released = false;
  auto release = [&](lifecycle::RecycleMode mode) {
    if (released) return;
    released = true;
    (void)sandboxes_.ReleaseLease(ctx.who, sandbox_id, lease.lease_version, mode, ctx.request_id);
  };
  Status result = [&]() -> Status {
    PADDOCK_ASSIGN_OR_RETURN(SandboxRecord sandbox, sandboxes_.Get(ctx.who, sandbox_id));
    // A new sandbox gets a clean checkpoint before anything runs: the "clean base" a later
    // run with conflicting dependencies forks from instead of downgrading in place (REUSE-5).
    // What the environment was before the commands: the recorded one of a kept sandbox, the
    // measured one of a new sandbox or fork (so an unchanged run takes no second checkpoint).
    const bool want_checkpoint = req.checkpoint.value_or(config_.checkpoint_after_run);
    std::string fingerprint_before;
    if (auto env = store_.GetEnvironment(sandbox_id); env.ok()) {
      if (auto m = ParseManifest(env->manifest)) fingerprint_before = m->fingerprint;
    }
    if (fresh) {
      auto clean = MeasureEnvironment(sandbox, session.workspace_id);
      if (clean.ok()) {
        fingerprint_before = clean->fingerprint;
        if (base_checkpoint.empty() && want_checkpoint) {
          auto base = TakeCheckpoint(ctx.who, session, sandbox, lease.lease_version, *clean,
                                     ctx.run.run_id, "clean-base");
          if (base.ok()) {
            log["base_checkpoint_id"] = base->checkpoint_id;
            base_checkpoint = base->checkpoint_id;
          }
        }
      }
    }

    // 5. The commands, in /workspace, with the tenant's download cache.
    std::map<std::string, std::string> env = {{"PIP_CACHE_DIR", "/cache/pip"},
                                              {"npm_config_cache", "/cache/npm"},
                                              {"PADDOCK_SESSION_ID", session.session_id},
                                              {"PADDOCK_RUN_ID", ctx.run.run_id}};
    std::vector<std::string> commands;
    if (decision.action == ReuseAction::kReuseSeparateVenv) {
      // The conflicting versions go into a venv of their own; the environment the earlier
      // runs built stays as it was.
      const std::string venv = decision.venv.empty()
                                   ? "/home/sandbox/venvs/run-" + std::to_string(ctx.run.seq)
                                   : decision.venv;
      if (decision.venv.empty()) {
        commands.push_back("python3 -m venv --system-site-packages " + venv);
      }
      env["VIRTUAL_ENV"] = venv;
      env["PATH"] = venv + "/bin:/usr/local/bin:/usr/bin:/bin";
      log["venv"] = venv;
    }
    for (const std::string& c : req.commands) commands.push_back(c);
    for (const std::string& command : commands) {
      runtime::ExecRequest exec;
      exec.shell = command;
      exec.env = env;
      exec.cwd = kWorkspaceTarget;
      exec.timeout = std::chrono::milliseconds(config_.command_timeout_ms);
      exec.output_cap_bytes = config_.output_cap_bytes;
      std::string out, err;
      runtime::ExecCallbacks cb;
      cb.on_stdout = [&](std::string_view s) { out.append(s); };
      cb.on_stderr = [&](std::string_view s) { err.append(s); };
      PADDOCK_ASSIGN_OR_RETURN(
          runtime::ExecResult r,
          sandboxes_.Exec(ctx.who, sandbox_id, lease.lease_version, std::move(exec), cb));
      json entry = {{"command", command},
                    {"exit_code", r.ShellStatus()},
                    {"stdout", std::move(out)},
                    {"stderr", std::move(err)},
                    {"timed_out", r.timed_out},
                    {"oom_killed", r.oom_killed},
                    {"wall_seconds", r.wall_seconds}};
      // The runtime already capped each stream at output_cap_bytes.
      if (r.stdout_truncated || r.stderr_truncated) entry["truncated"] = true;
      ctx.commands.push_back(std::move(entry));
      // A seccomp kill — of the command, or of a child the shell reports as 128 + SIGSYS
      // (a sandbox faking that status only gets its own sandbox destroyed). The sandbox tried
      // what policy forbids: tainted → hard destroy (LC-3), never reused.
      if (r.signal == SIGSYS || r.ShellStatus() == 128 + SIGSYS) {
        log["tainted"] = "seccomp kill (SIGSYS) in: " + command.substr(0, 200);
        ctx.commands_ok = false;
        release(lifecycle::RecycleMode::kDestroy);
        SessionRecord s = *store_.GetSession(session.session_id);
        s.current_sandbox_id.clear();
        s.updated_at = clock_.NowMs();
        (void)store_.UpdateSession(s);
        return Status::Ok();
      }
      if (r.ShellStatus() != 0) {
        ctx.commands_ok = false;
        break;
      }
    }

    // 6. The environment as the files say, then a checkpoint when it changed.
    PADDOCK_ASSIGN_OR_RETURN(EnvironmentManifest manifest,
                             MeasureEnvironment(sandbox, session.workspace_id));
    log["environment_fingerprint"] = manifest.fingerprint;
    log["installed"] = manifest.python_packages;
    std::string snapshot = base_checkpoint;
    if (want_checkpoint && ctx.commands_ok && manifest.fingerprint != fingerprint_before &&
        !manifest.truncated) {
      auto ck = TakeCheckpoint(ctx.who, session, sandbox, lease.lease_version, manifest,
                               ctx.run.run_id, req.task_id);
      if (ck.ok()) {
        log["checkpoint_id"] = ck->checkpoint_id;
        snapshot = ck->checkpoint_id;
      } else {
        log["checkpoint_error"] = ck.status().ToString();
      }
    }
    registry::EnvironmentRecord rec;
    if (auto old = store_.GetEnvironment(sandbox_id); old.ok()) rec = *old;
    rec.sandbox_id = sandbox_id;
    rec.base_image_digest = manifest.base_digest;
    rec.dependency_hash = manifest.python_lock_hash + "|" + manifest.node_lock_hash;
    rec.workspace_id = session.workspace_id;
    if (!snapshot.empty()) rec.snapshot_id = snapshot;
    rec.environment_version += 1;
    rec.dirty_level = static_cast<int64_t>(manifest.dirty_paths.size());
    rec.manifest = ManifestToJson(manifest).dump();
    PADDOCK_RETURN_IF_ERROR(store_.UpsertEnvironment(rec));
    return Status::Ok();
  }();
  // 7. Release: the sandbox stays the session's, as it is, for the next turn.
  release(result.ok() ? lifecycle::RecycleMode::kKeep : lifecycle::RecycleMode::kDestroy);
  if (!result.ok()) {
    SessionRecord s = *store_.GetSession(session.session_id);
    if (s.current_sandbox_id == sandbox_id) {
      s.current_sandbox_id.clear();
      s.updated_at = clock_.NowMs();
      (void)store_.UpdateSession(s);
    }
  }
  return result;
}

}  // namespace paddock::sessions
