#include "lifecycle/sandbox_manager.h"

#include <spdlog/spdlog.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "common/random.h"

namespace paddock::lifecycle {

namespace {

using registry::SandboxRecord;

SandboxState StateOf(const SandboxRecord& rec) {
  auto s = ParseState(rec.state);
  // A row written by this code always parses; treat garbage as Lost so the reconciler acts.
  return s.ok() ? *s : SandboxState::kLost;
}

bool IsLeasedState(SandboxState s) {
  return s == SandboxState::kLeased || s == SandboxState::kIdle || s == SandboxState::kRunning;
}

// States in which the sandbox has (or should have) a runtime object.
bool HasRuntimeObject(SandboxState s) {
  switch (s) {
    case SandboxState::kProvisioning:
    case SandboxState::kLocking:
    case SandboxState::kReady:
    case SandboxState::kLeased:
    case SandboxState::kRunning:
    case SandboxState::kIdle:
    case SandboxState::kReuseChecking:
    case SandboxState::kRecycling:
    case SandboxState::kSanitizing:
    case SandboxState::kHibernating:
      return true;
    default:
      return false;
  }
}

}  // namespace

Result<RecycleMode> ParseRecycleMode(std::string_view name) {
  if (name == "keep") return RecycleMode::kKeep;
  if (name == "soft") return RecycleMode::kSoft;
  if (name == "destroy") return RecycleMode::kDestroy;
  return InvalidArgument("recycle: must be one of keep, soft, destroy");
}

SandboxManager::SandboxManager(registry::Store& store, runtime::Runtime& runtime,
                               PaddockConfig config, const Clock& clock)
    : store_(store), runtime_(runtime), config_(std::move(config)), clock_(clock) {}

SandboxManager::~SandboxManager() { StopBackground(); }

std::mutex& SandboxManager::LockFor(const std::string& id) {
  return locks_[std::hash<std::string>{}(id) % locks_.size()];
}

Result<SandboxRecord> SandboxManager::Load(const Principal& who, const std::string& id) {
  auto rec = store_.GetSandbox(id);
  if (!rec.ok()) {
    if (rec.status().code() == StatusCode::kNotFound)
      return NotFound("sandbox " + id + " not found");
    return rec.status();
  }
  // Another tenant's sandbox is indistinguishable from a missing one.
  if (!who.admin && rec->tenant_id != who.tenant_id)
    return NotFound("sandbox " + id + " not found");
  return rec;
}

Status SandboxManager::Transition(SandboxRecord& rec, SandboxState to, const std::string& reason,
                                  const std::string& request_id) {
  const SandboxState from = StateOf(rec);
  PADDOCK_RETURN_IF_ERROR(CheckTransition(from, to));
  registry::EventRecord ev;
  ev.event_type = TransitionTrigger(from, to);
  ev.reason = reason;
  ev.request_id = request_id;
  ev.timestamp = clock_.NowMs();
  PADDOCK_ASSIGN_OR_RETURN(int64_t version, store_.TransitionSandbox(rec.sandbox_id, rec.version,
                                                                     StateName(to), reason, ev));
  rec.version = version;
  rec.state = StateName(to);
  rec.state_reason = reason;
  return Status::Ok();
}

runtime::SandboxSpec SandboxManager::SpecFor(const SandboxRecord& rec) const {
  runtime::SandboxSpec spec;
  spec.id = rec.sandbox_id;
  spec.template_name = rec.template_id;
  spec.limits.cpus = rec.cpus;
  spec.limits.memory_bytes = static_cast<uint64_t>(rec.memory_mb) << 20;
  spec.limits.disk_bytes = static_cast<uint64_t>(rec.disk_mb) << 20;
  spec.limits.pids = static_cast<uint64_t>(rec.pids);
  if (const ResourceClass* cls = config_.FindClass(rec.resource_class)) {
    spec.limits.tmp_bytes = std::min<uint64_t>(cls->tmp_bytes, spec.limits.memory_bytes);
  }
  // The sandbox's env is not baked into the runtime object: it is merged into each exec (see
  // Exec), so a warm sandbox created before its tenant was known can carry the tenant's env.
  // Storage was validated when the record was written; a row that no longer parses gets no
  // mounts and the runtime create fails on the missing workspace rather than guessing.
  (void)ParseSandboxStorage(rec.storage, &spec.layers, &spec.binds);
  return spec;
}

std::string SandboxStorageJson(const std::vector<std::string>& layers,
                               const std::vector<runtime::BindMount>& binds) {
  nlohmann::json j = nlohmann::json::object();
  if (!layers.empty()) j["layers"] = layers;
  if (!binds.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const runtime::BindMount& b : binds) {
      list.push_back(
          {{"host_path", b.host_path}, {"target", b.target}, {"read_only", b.read_only}});
    }
    j["binds"] = std::move(list);
  }
  return j.dump();
}

Status ParseSandboxStorage(const std::string& json, std::vector<std::string>* layers,
                           std::vector<runtime::BindMount>* binds) {
  layers->clear();
  binds->clear();
  auto j = nlohmann::json::parse(json.empty() ? "{}" : json, nullptr, false);
  if (!j.is_object()) return InvalidArgument("sandbox storage: not a JSON object");
  if (auto it = j.find("layers"); it != j.end()) {
    if (!it->is_array()) return InvalidArgument("sandbox storage: layers must be an array");
    for (const auto& l : *it) {
      if (!l.is_string()) return InvalidArgument("sandbox storage: a layer is not a string");
      layers->push_back(l.get<std::string>());
    }
  }
  if (auto it = j.find("binds"); it != j.end()) {
    if (!it->is_array()) return InvalidArgument("sandbox storage: binds must be an array");
    for (const auto& b : *it) {
      if (!b.is_object() || !b.value("host_path", nlohmann::json()).is_string() ||
          !b.value("target", nlohmann::json()).is_string()) {
        return InvalidArgument("sandbox storage: a bind needs host_path and target strings");
      }
      binds->push_back({b["host_path"].get<std::string>(), b["target"].get<std::string>(),
                        b.value("read_only", false)});
    }
  }
  return Status::Ok();
}

Result<SandboxRecord> SandboxManager::Create(const Principal& who, const CreateSandboxRequest& req,
                                             const std::string& request_id) {
  return CreateImpl(who, req, request_id, nullptr);
}

Result<SandboxRecord> SandboxManager::CreateImpl(const Principal& who,
                                                 const CreateSandboxRequest& req,
                                                 const std::string& request_id, bool* from_pool) {
  ForegroundScope busy(foreground_);
  if (who.tenant_id.empty()) return PermissionDenied("a tenant is required to create sandboxes");
  if (config_.resource_classes.empty()) return FailedPrecondition("no resource classes configured");
  const ResourceClass* cls = req.resource_class.empty() ? &config_.resource_classes.front()
                                                        : config_.FindClass(req.resource_class);
  if (!cls) return InvalidArgument("class: unknown resource class '" + req.resource_class + "'");
  // Explicit resources may ask for less than the class, never more: the class is what the
  // policy allows.
  const double cpus = req.cpus.value_or(cls->cpus);
  const uint64_t memory = req.memory_bytes.value_or(cls->memory_bytes);
  const uint64_t disk = req.disk_bytes.value_or(cls->disk_bytes);
  const uint32_t pids = req.pids.value_or(cls->pids);
  if (!(cpus > 0) || cpus > cls->cpus)
    return InvalidArgument("resources.cpus: must be in (0, " + std::to_string(cls->cpus) +
                           "] for class " + cls->name);
  if (memory < (64ull << 20) || memory > cls->memory_bytes)
    return InvalidArgument("resources.memory: must be between 64 MiB and the class limit (" +
                           std::to_string(cls->memory_bytes >> 20) + " MiB)");
  if (disk < (16ull << 20) || disk > cls->disk_bytes)
    return InvalidArgument("resources.disk: must be between 16 MiB and the class limit (" +
                           std::to_string(cls->disk_bytes >> 20) + " MiB)");
  if (pids < 16 || pids > cls->pids)
    return InvalidArgument("resources.pids: must be between 16 and " + std::to_string(cls->pids));
  const int64_t ttl = req.ttl_ms.value_or(config_.lifecycle.default_ttl.count());
  const int64_t idle = req.idle_timeout_ms.value_or(config_.lifecycle.default_idle_timeout.count());
  if (ttl < 0) return InvalidArgument("ttl_seconds: must be >= 0");
  if (idle < 0) return InvalidArgument("idle_timeout_seconds: must be >= 0");

  const int64_t now = clock_.NowMs();
  SandboxRecord rec;
  rec.sandbox_id = "sb-" + RandomHex(8);
  rec.tenant_id = who.tenant_id;
  rec.user_id = req.user_id;
  rec.session_id = req.session_id;
  rec.runtime_provider = cls->runtime;
  rec.runtime_instance_id = rec.sandbox_id;
  rec.resource_class = cls->name;
  rec.template_id = req.template_name.empty() ? cls->template_name : req.template_name;
  rec.cpus = cpus;
  rec.memory_mb = static_cast<int64_t>(memory >> 20);
  rec.disk_mb = static_cast<int64_t>(disk >> 20);
  rec.pids = pids;
  rec.state = StateName(SandboxState::kRequested);
  rec.created_at = rec.last_active_at = now;
  rec.expires_at = ttl > 0 ? now + ttl : 0;
  rec.idle_timeout_ms = idle;
  rec.expiry_action = ExpiryActionName(config_.lifecycle.expiry_action);
  rec.metadata = req.metadata_json.empty() ? "{}" : req.metadata_json;
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : req.env) env[k] = v;
  rec.env = env.dump();
  rec.plan = req.plan_json.empty() ? "{}" : req.plan_json;
  rec.storage = SandboxStorageJson(req.layers, req.binds);
  // A warm sandbox is the runtime object this request would get anyway when the request asks
  // for the class as it is (POOL-2); its tenant, session, env and lifetime are bound now.
  const bool pool_can_serve = !req.cpus && !req.memory_bytes && !req.disk_bytes && !req.pids &&
                              rec.template_id == cls->template_name && req.layers.empty() &&
                              req.binds.empty();
  if (pool_can_serve) {
    auto claimed = ClaimFromPool(who, *cls, rec, req.plan_summary, request_id);
    if (claimed.ok()) {
      if (from_pool) *from_pool = true;
      return claimed;
    }
    if (claimed.status().code() != StatusCode::kNotFound) return claimed.status();
  }
  return Provision(std::move(rec), request_id, req.plan_summary);
}

Status SandboxManager::AppendPlanEvent(const SandboxRecord& rec, const std::string& summary,
                                       const std::string& request_id) {
  if (summary.empty()) return Status::Ok();
  registry::EventRecord ev;
  ev.sandbox_id = rec.sandbox_id;
  ev.event_type = "plan";
  ev.old_state = ev.new_state = rec.state;
  ev.reason = summary;
  ev.request_id = request_id;
  ev.timestamp = clock_.NowMs();
  ev.metadata = rec.plan;
  return store_.AppendEvent(ev).status();
}

Result<SandboxRecord> SandboxManager::ClaimFromPool(const Principal& who, const ResourceClass& cls,
                                                    const SandboxRecord& want,
                                                    const std::string& plan_summary,
                                                    const std::string& request_id) {
  bool pooled = false;
  for (const auto& pc : config_.pools) pooled |= pc.class_name == cls.name && pc.max > 0;
  if (!pooled) return NotFound("no pool for class " + cls.name);
  SandboxRecord got;
  PADDOCK_RETURN_IF_ERROR(store_.RunInTransaction([&]() -> Status {
    PADDOCK_ASSIGN_OR_RETURN(std::string id,
                             store_.ClaimWarmSandbox(cls.name, who.tenant_id, want.session_id,
                                                     want.expires_at, want.idle_timeout_ms));
    PADDOCK_ASSIGN_OR_RETURN(got, store_.GetSandbox(id));
    got.user_id = want.user_id;
    got.env = want.env;
    got.metadata = want.metadata;
    got.plan = want.plan;
    got.last_active_at = want.last_active_at;
    PADDOCK_ASSIGN_OR_RETURN(got.version, store_.UpdateSandbox(got));
    registry::EventRecord ev;
    ev.sandbox_id = id;
    ev.event_type = "bind";
    ev.old_state = ev.new_state = got.state;
    ev.reason = "warm sandbox bound to tenant " + who.tenant_id;
    ev.request_id = request_id;
    ev.timestamp = clock_.NowMs();
    PADDOCK_RETURN_IF_ERROR(store_.AppendEvent(ev).status());
    return AppendPlanEvent(got, plan_summary, request_id);
  }));
  KickRefill();
  MarkActive(got.sandbox_id);
  return got;
}

Result<SandboxRecord> SandboxManager::Provision(SandboxRecord rec, const std::string& request_id,
                                                const std::string& plan_summary) {
  std::lock_guard lock(LockFor(rec.sandbox_id));
  // The row and its first transition are one durable write; the runtime work comes after.
  PADDOCK_RETURN_IF_ERROR(store_.RunInTransaction([&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(store_.InsertSandbox(rec));
    PADDOCK_ASSIGN_OR_RETURN(rec, store_.GetSandbox(rec.sandbox_id));
    PADDOCK_RETURN_IF_ERROR(AppendPlanEvent(rec, plan_summary, request_id));
    return Transition(rec, SandboxState::kProvisioning, "create", request_id);
  }));
  auto created = runtime_.Create(SpecFor(rec));
  if (!created.ok()) {
    (void)Transition(rec, SandboxState::kFailed, created.status().message(), request_id);
    return created.status();
  }
  PADDOCK_RETURN_IF_ERROR(Transition(rec, SandboxState::kReady, "provisioned", request_id));
  // The idle clock starts now, not when the request came in: a slow create is not idleness.
  MarkActive(rec.sandbox_id);
  return rec;
}

Result<SandboxManager::Acquired> SandboxManager::AcquireFromPool(
    const Principal& who, const std::string& resource_class, const std::string& owner,
    int64_t ttl_ms, const std::string& session_id, const std::string& request_id) {
  if (who.tenant_id.empty()) return PermissionDenied("a tenant is required to acquire sandboxes");
  if (!config_.FindClass(resource_class))
    return InvalidArgument("class: unknown resource class '" + resource_class + "'");
  Acquired out;
  CreateSandboxRequest req;
  req.resource_class = resource_class;
  req.session_id = session_id;
  PADDOCK_ASSIGN_OR_RETURN(out.sandbox, CreateImpl(who, req, request_id, &out.from_pool));
  // The lease follows under the sandbox's lock (a sandbox lock is never taken inside a registry
  // transaction: lock, then transaction, is the order everywhere).
  PADDOCK_ASSIGN_OR_RETURN(out.lease,
                           AcquireLease(who, out.sandbox.sandbox_id, owner, ttl_ms, request_id));
  PADDOCK_ASSIGN_OR_RETURN(out.sandbox, store_.GetSandbox(out.sandbox.sandbox_id));
  return out;
}

int SandboxManager::CountInState(const registry::SandboxFilter& filter,
                                 const std::function<bool(SandboxState)>& pred) {
  int n = 0;
  std::string after;
  while (true) {
    auto page = store_.ListSandboxes(filter, 500, after);
    if (!page.ok()) break;
    for (const auto& r : page->records) n += pred(StateOf(r)) ? 1 : 0;
    if (page->next_after_id.empty()) break;
    after = page->next_after_id;
  }
  return n;
}

std::vector<SandboxManager::PoolStatus> SandboxManager::Pools() {
  std::vector<PoolStatus> out;
  for (const auto& cls : config_.resource_classes) {
    PoolStatus p;
    p.resource_class = cls.name;
    for (const auto& pc : config_.pools) {
      if (pc.class_name == cls.name) {
        p.min = pc.min;
        p.max = pc.max;
        p.buffer = pc.buffer;
      }
    }
    registry::SandboxFilter warm;
    warm.pool = cls.name;
    p.warm = CountInState(warm, [](SandboxState s) { return s == SandboxState::kReady; });
    registry::SandboxFilter of_class;
    of_class.resource_class = cls.name;
    p.leased = CountInState(of_class, IsLeasedState);
    out.push_back(p);
  }
  return out;
}

int SandboxManager::RefillPoolsOnce() {
  int created = 0;
  for (const auto& pc : config_.pools) {
    const ResourceClass* cls = config_.FindClass(pc.class_name);
    if (!cls || pc.max == 0) continue;
    registry::SandboxFilter warm_filter;
    warm_filter.pool = cls->name;
    // Members still provisioning count too, so a slow create is not started twice.
    const int warm = CountInState(warm_filter, [](SandboxState s) {
      return s == SandboxState::kReady || s == SandboxState::kProvisioning ||
             s == SandboxState::kRequested;
    });
    const int target = static_cast<int>(std::min(pc.max, std::max(pc.min, pc.buffer)));
    for (int i = warm; i < target; ++i) {
      const int64_t now = clock_.NowMs();
      SandboxRecord rec;
      rec.sandbox_id = "sb-" + RandomHex(8);
      rec.tenant_id = "";  // POOL-3: no identity until leased
      rec.pool = cls->name;
      rec.runtime_provider = cls->runtime;
      rec.runtime_instance_id = rec.sandbox_id;
      rec.resource_class = cls->name;
      rec.template_id = cls->template_name;
      rec.cpus = cls->cpus;
      rec.memory_mb = static_cast<int64_t>(cls->memory_bytes >> 20);
      rec.disk_mb = static_cast<int64_t>(cls->disk_bytes >> 20);
      rec.pids = cls->pids;
      rec.state = StateName(SandboxState::kRequested);
      rec.created_at = rec.last_active_at = now;
      rec.expires_at = 0;  // set when bound
      rec.idle_timeout_ms = 0;
      rec.expiry_action = ExpiryActionName(config_.lifecycle.expiry_action);
      // A refill is for the next burst; it must not slow down the one being served now.
      WaitForQuiet(std::chrono::seconds(2));
      auto made = Provision(rec, "pool-refill");
      if (!made.ok()) {
        spdlog::warn("pool {}: refill: {}", cls->name, made.status().ToString());
        break;
      }
      ++created;
    }
  }
  return created;
}

Result<SandboxRecord> SandboxManager::Get(const Principal& who, const std::string& id) {
  return Load(who, id);
}

Result<registry::SandboxPage> SandboxManager::List(const Principal& who,
                                                   registry::SandboxFilter filter, int limit,
                                                   const std::string& after_id) {
  if (!who.admin) filter.tenant_id = who.tenant_id;
  if (limit < 1 || limit > 1000) return InvalidArgument("limit: must be between 1 and 1000");
  if (!after_id.empty()) {
    // Paging after another tenant's id would reveal that it exists.
    auto anchor = Load(who, after_id);
    if (!anchor.ok()) return InvalidArgument("after: unknown sandbox id");
  }
  return store_.ListSandboxes(filter, limit, after_id);
}

Status SandboxManager::HardDestroy(SandboxRecord& rec, const std::string& reason,
                                   const std::string& request_id) {
  const SandboxState s = StateOf(rec);
  if (IsTerminal(s)) return Status::Ok();
  RecordLeaseEnd(rec);  // while the runtime can still report usage; no-op without an open lease
  PADDOCK_RETURN_IF_ERROR(runtime_.Destroy(rec.sandbox_id));
  // A lease dies with its sandbox: a holder coming back gets kConflict from the fence.
  if (auto lease = store_.GetLease(rec.sandbox_id); lease.ok() && lease->released_at == 0) {
    (void)store_.ReleaseLease(rec.sandbox_id, lease->lease_version, clock_.NowMs());
    PADDOCK_ASSIGN_OR_RETURN(rec, store_.GetSandbox(rec.sandbox_id));
  }
  {
    std::lock_guard lock(activity_mu_);
    activity_.erase(rec.sandbox_id);
  }
  return Transition(rec, SandboxState::kTerminated, reason, request_id);
}

Status SandboxManager::Destroy(const Principal& who, const std::string& id,
                               const std::string& reason, const std::string& request_id) {
  PADDOCK_ASSIGN_OR_RETURN(SandboxRecord rec, Load(who, id));
  std::lock_guard lock(LockFor(id));
  PADDOCK_ASSIGN_OR_RETURN(rec, store_.GetSandbox(id));
  return HardDestroy(rec, reason, request_id);
}

Result<registry::LeaseRecord> SandboxManager::AcquireLease(const Principal& who,
                                                           const std::string& id,
                                                           const std::string& owner, int64_t ttl_ms,
                                                           const std::string& request_id) {
  ForegroundScope busy(foreground_);
  if (owner.empty() || owner.size() > 200) return InvalidArgument("owner: 1 to 200 characters");
  if (ttl_ms == 0) ttl_ms = config_.leases.default_ttl.count();
  if (ttl_ms < 1000 || ttl_ms > config_.leases.max_ttl.count())
    return InvalidArgument("ttl_seconds: must be between 1 and " +
                           std::to_string(config_.leases.max_ttl.count() / 1000));
  PADDOCK_ASSIGN_OR_RETURN(SandboxRecord rec, Load(who, id));
  std::lock_guard lock(LockFor(id));
  PADDOCK_ASSIGN_OR_RETURN(rec, store_.GetSandbox(id));
  if (StateOf(rec) != SandboxState::kReady)
    return Status(StatusCode::kConflict, "sandbox " + id + " is " + rec.state + ", not ready");
  // Locking is where identity, credentials and policy get bound (POOL-3); the lease row is the
  // fencing token. Ready -> Locking -> Leased and the lease row are one registry transaction
  // (one durable write, every transition still recorded as an event): a refused lease leaves
  // no trace, and the registry's own check makes a second acquirer in another process fail.
  registry::LeaseRecord lease;
  PADDOCK_RETURN_IF_ERROR(store_.RunInTransaction([&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(Transition(rec, SandboxState::kLocking, "lease:" + owner, request_id));
    PADDOCK_ASSIGN_OR_RETURN(lease, store_.AcquireLease(id, owner, ttl_ms, clock_.NowMs()));
    PADDOCK_ASSIGN_OR_RETURN(rec, store_.GetSandbox(id));
    return Transition(rec, SandboxState::kLeased,
                      "lease_version=" + std::to_string(lease.lease_version), request_id);
  }));
  MarkActive(id);
  StartLeaseUsage(id);
  return lease;
}

Result<int64_t> SandboxManager::RenewLease(const Principal& who, const std::string& id,
                                           int64_t lease_version, int64_t ttl_ms) {
  if (ttl_ms == 0) ttl_ms = config_.leases.default_ttl.count();
  if (ttl_ms < 1000 || ttl_ms > config_.leases.max_ttl.count())
    return InvalidArgument("ttl_seconds: must be between 1 and " +
                           std::to_string(config_.leases.max_ttl.count() / 1000));
  PADDOCK_ASSIGN_OR_RETURN(SandboxRecord rec, Load(who, id));
  return store_.RenewLease(id, lease_version, ttl_ms, clock_.NowMs());
}

Status SandboxManager::Recycle(SandboxRecord& rec, RecycleMode mode, const std::string& reason,
                               const std::string& request_id) {
  if (StateOf(rec) == SandboxState::kHibernating) {
    PADDOCK_RETURN_IF_ERROR(runtime_.Resume(rec.sandbox_id));
  }
  PADDOCK_RETURN_IF_ERROR(Transition(rec, SandboxState::kRecycling, reason, request_id));
  if (mode == RecycleMode::kDestroy || rec.tainted) {
    return HardDestroy(rec, reason, request_id);
  }
  PADDOCK_RETURN_IF_ERROR(Transition(rec, SandboxState::kSanitizing, reason, request_id));
  if (mode == RecycleMode::kSoft) {
    // Level 1: the same sandbox identity on a fresh writable layer with no processes left. A
    // new runtime object is the only reset that provably leaves nothing of the last holder.
    Status st = runtime_.Destroy(rec.sandbox_id);
    if (st.ok()) st = runtime_.Create(SpecFor(rec)).status();
    if (!st.ok()) {
      (void)Transition(rec, SandboxState::kFailed, "soft reset: " + st.message(), request_id);
      (void)runtime_.Destroy(rec.sandbox_id);
      return st;
    }
  }
  return Transition(rec, SandboxState::kReady, mode == RecycleMode::kSoft ? "soft reset" : "kept",
                    request_id);
}

Status SandboxManager::ReleaseLease(const Principal& who, const std::string& id,
                                    int64_t lease_version, RecycleMode mode,
                                    const std::string& request_id) {
  ForegroundScope busy(foreground_);
  PADDOCK_ASSIGN_OR_RETURN(SandboxRecord rec, Load(who, id));
  std::lock_guard lock(LockFor(id));
  const std::string reason = "release lease_version=" + std::to_string(lease_version);
  bool kept = false;
  PADDOCK_RETURN_IF_ERROR(store_.RunInTransaction([&]() -> Status {
    PADDOCK_RETURN_IF_ERROR(store_.ReleaseLease(id, lease_version, clock_.NowMs()));
    PADDOCK_ASSIGN_OR_RETURN(rec, store_.GetSandbox(id));
    if (mode != RecycleMode::kKeep || rec.tainted || StateOf(rec) == SandboxState::kHibernating)
      return Status::Ok();
    // Keeping needs no runtime work, so the whole release is one durable write.
    kept = true;
    PADDOCK_RETURN_IF_ERROR(Transition(rec, SandboxState::kRecycling, reason, request_id));
    PADDOCK_RETURN_IF_ERROR(Transition(rec, SandboxState::kSanitizing, reason, request_id));
    return Transition(rec, SandboxState::kReady, "kept", request_id);
  }));
  RecordLeaseEnd(rec);
  if (kept) return Status::Ok();
  return Recycle(rec, mode, reason, request_id);
}

Status SandboxManager::Fence(const SandboxRecord& rec, int64_t lease_version) {
  if (lease_version <= 0)
    return Status(StatusCode::kConflict, "lease_version: a current lease is required");
  return store_.CheckLease(rec.sandbox_id, lease_version, clock_.NowMs());
}

Result<runtime::ExecResult> SandboxManager::Exec(const Principal& who, const std::string& id,
                                                 int64_t lease_version, runtime::ExecRequest req,
                                                 const runtime::ExecCallbacks& cb) {
  ForegroundScope busy(foreground_);
  PADDOCK_ASSIGN_OR_RETURN(SandboxRecord rec, Load(who, id));
  PADDOCK_RETURN_IF_ERROR(Fence(rec, lease_version));
  if (!IsLeasedState(StateOf(rec)))
    return FailedPrecondition("sandbox " + id + " is " + rec.state + ": cannot run commands");
  if (req.timeout.count() == 0) req.timeout = config_.exec.default_timeout;
  if (req.timeout > config_.exec.max_timeout)
    return InvalidArgument("timeout_seconds: at most " +
                           std::to_string(config_.exec.max_timeout.count() / 1000));
  if (req.output_cap_bytes == 0 || req.output_cap_bytes > config_.exec.output_cap_bytes)
    req.output_cap_bytes = config_.exec.output_cap_bytes;
  // The sandbox's env under the request's own (the request wins).
  if (auto env = nlohmann::json::parse(rec.env, nullptr, false); env.is_object()) {
    for (auto& [k, v] : env.items()) {
      if (v.is_string()) req.env.try_emplace(k, v.get<std::string>());
    }
  }
  // Execs do not write Running/Leased transitions: that would put two registry writes on every
  // command's path. Activity is kept in memory for the idle timeout instead; a sandbox with a
  // command in flight is never idle, however long the command runs.
  ActivityScope active(*this, id);
  auto result = runtime_.Exec(id, req, cb);
  if (result.ok()) AddExecUsage(id, *result);
  return result;
}

Status SandboxManager::WithFence(const Principal& who, const std::string& id, int64_t lease_version,
                                 const std::function<Status(runtime::Runtime&)>& op) {
  ForegroundScope busy(foreground_);
  PADDOCK_ASSIGN_OR_RETURN(SandboxRecord rec, Load(who, id));
  PADDOCK_RETURN_IF_ERROR(Fence(rec, lease_version));
  if (!IsLeasedState(StateOf(rec))) return FailedPrecondition("sandbox " + id + " is " + rec.state);
  ActivityScope active(*this, id);
  return op(runtime_);
}

Status SandboxManager::Pause(const Principal& who, const std::string& id, int64_t lease_version,
                             const std::string& request_id) {
  PADDOCK_ASSIGN_OR_RETURN(SandboxRecord rec, Load(who, id));
  std::lock_guard lock(LockFor(id));
  PADDOCK_ASSIGN_OR_RETURN(rec, store_.GetSandbox(id));
  PADDOCK_RETURN_IF_ERROR(Fence(rec, lease_version));
  PADDOCK_RETURN_IF_ERROR(CheckTransition(StateOf(rec), SandboxState::kHibernating));
  PADDOCK_RETURN_IF_ERROR(runtime_.Pause(id));
  return Transition(rec, SandboxState::kHibernating, "pause", request_id);
}

Status SandboxManager::Resume(const Principal& who, const std::string& id, int64_t lease_version,
                              const std::string& request_id) {
  PADDOCK_ASSIGN_OR_RETURN(SandboxRecord rec, Load(who, id));
  std::lock_guard lock(LockFor(id));
  PADDOCK_ASSIGN_OR_RETURN(rec, store_.GetSandbox(id));
  PADDOCK_RETURN_IF_ERROR(Fence(rec, lease_version));
  PADDOCK_RETURN_IF_ERROR(CheckTransition(StateOf(rec), SandboxState::kLeased));
  PADDOCK_RETURN_IF_ERROR(runtime_.Resume(id));
  MarkActive(id);
  return Transition(rec, SandboxState::kLeased, "resume", request_id);
}

Result<std::vector<registry::EventRecord>> SandboxManager::Events(const Principal& who,
                                                                  const std::string& id, int limit,
                                                                  int64_t after_event_id) {
  PADDOCK_ASSIGN_OR_RETURN(SandboxRecord rec, Load(who, id));
  if (limit < 1 || limit > 1000) return InvalidArgument("limit: must be between 1 and 1000");
  return store_.ListEvents(id, limit, after_event_id);
}

void SandboxManager::MarkActive(const std::string& id) {
  std::lock_guard lock(activity_mu_);
  activity_[id].last_ms = clock_.NowMs();
}

SandboxManager::ActivityScope::ActivityScope(SandboxManager& m, std::string id)
    : m_(m), id_(std::move(id)) {
  std::lock_guard lock(m_.activity_mu_);
  Activity& a = m_.activity_[id_];
  a.last_ms = m_.clock_.NowMs();
  ++a.in_flight;
}

SandboxManager::ActivityScope::~ActivityScope() {
  std::lock_guard lock(m_.activity_mu_);
  auto it = m_.activity_.find(id_);
  if (it == m_.activity_.end()) return;  // destroyed meanwhile
  it->second.last_ms = m_.clock_.NowMs();
  --it->second.in_flight;
}

bool SandboxManager::IdleSince(const SandboxRecord& rec, int64_t now) {
  std::lock_guard lock(activity_mu_);
  auto it = activity_.find(rec.sandbox_id);
  if (it == activity_.end()) return now >= rec.last_active_at + rec.idle_timeout_ms;
  if (it->second.in_flight > 0) return false;
  return now >= std::max(it->second.last_ms, rec.last_active_at) + rec.idle_timeout_ms;
}

std::vector<SandboxRecord> SandboxManager::LiveRecords() {
  std::vector<SandboxRecord> out;
  std::string after;
  while (true) {
    auto page = store_.ListSandboxes(registry::SandboxFilter{}, 500, after);
    if (!page.ok()) {
      spdlog::warn("lifecycle: list sandboxes: {}", page.status().ToString());
      break;
    }
    for (auto& r : page->records) {
      if (!IsTerminal(StateOf(r))) out.push_back(std::move(r));
    }
    if (page->next_after_id.empty()) break;
    after = page->next_after_id;
  }
  return out;
}

int SandboxManager::ExpireOnce() {
  int acted = 0;
  const int64_t now = clock_.NowMs();
  // LS-2: a crashed holder's lease runs out and the sandbox goes back to its owner, reset to a
  // clean state: a holder that vanished mid-work leaves unknown state behind.
  if (auto expired = store_.ExpireLeases(now); expired.ok()) {
    for (const auto& id : *expired) {
      std::lock_guard lock(LockFor(id));
      auto rec = store_.GetSandbox(id);
      if (!rec.ok() || !IsLeasedState(StateOf(*rec))) continue;
      RecordLeaseEnd(*rec);
      Status st = Recycle(*rec, RecycleMode::kSoft, "lease expired", "");
      if (!st.ok()) spdlog::warn("lifecycle: recycle {} after lease expiry: {}", id, st.ToString());
      ++acted;
    }
  }
  for (SandboxRecord& rec : LiveRecords()) {
    const SandboxState s = StateOf(rec);
    if (!HasRuntimeObject(s) || IsTransitional(s)) continue;
    const bool ttl_hit = rec.expires_at > 0 && now >= rec.expires_at;
    const bool idle_hit =
        rec.idle_timeout_ms > 0 && s != SandboxState::kHibernating && IdleSince(rec, now);
    if (!ttl_hit && !idle_hit) continue;
    std::lock_guard lock(LockFor(rec.sandbox_id));
    auto fresh = store_.GetSandbox(rec.sandbox_id);
    if (!fresh.ok()) continue;
    const std::string why = ttl_hit ? "ttl expired" : "idle timeout";
    Status st;
    // Pausing keeps memory but frees CPU; it only applies to a leased sandbox (a TTL ends
    // everything else) and only once.
    if (!ttl_hit && fresh->expiry_action == "pause" &&
        CheckTransition(StateOf(*fresh), SandboxState::kHibernating).ok()) {
      st = runtime_.Pause(fresh->sandbox_id);
      if (st.ok()) st = Transition(*fresh, SandboxState::kHibernating, why, "");
    } else {
      st = HardDestroy(*fresh, why, "");
    }
    if (!st.ok()) spdlog::warn("lifecycle: expire {}: {}", rec.sandbox_id, st.ToString());
    ++acted;
  }
  return acted;
}

int SandboxManager::ReconcileOnce() {
  int repaired = 0;
  std::set<std::string> live_in_registry;
  for (SandboxRecord& rec : LiveRecords()) {
    live_in_registry.insert(rec.sandbox_id);
    const SandboxState s = StateOf(rec);
    std::lock_guard lock(LockFor(rec.sandbox_id));
    auto fresh = store_.GetSandbox(rec.sandbox_id);
    if (!fresh.ok() || StateOf(*fresh) != s) continue;  // changed under us: next pass
    if (s == SandboxState::kRequested || s == SandboxState::kPlanning ||
        s == SandboxState::kAllocating) {
      // A create that never reached the runtime (the daemon died): nothing to clean up.
      (void)Transition(*fresh, SandboxState::kFailed, "create interrupted", "");
      ++repaired;
      continue;
    }
    if (s == SandboxState::kLost) {
      (void)runtime_.Destroy(fresh->sandbox_id);
      (void)Transition(*fresh, SandboxState::kTerminated, "cleanup after lost", "");
      ++repaired;
      continue;
    }
    // Asked per sandbox under its lock, not from a snapshot: a soft reset replaces the runtime
    // object under this lock, and a snapshot taken mid-reset would call a healthy sandbox lost.
    if (!HasRuntimeObject(s)) continue;
    if (auto info = runtime_.Get(fresh->sandbox_id);
        info.ok() && info->state != runtime::SandboxState::kDead)
      continue;
    // LC-4: the registry says it lives, the runtime says it does not: Lost, release the lease
    // so its holder is fenced off, remove leftovers, then Terminated.
    Status st = Transition(*fresh, SandboxState::kLost, "runtime object gone", "");
    if (!st.ok()) {
      spdlog::warn("reconcile {}: {}", fresh->sandbox_id, st.ToString());
      continue;
    }
    if (auto lease = store_.GetLease(fresh->sandbox_id); lease.ok() && lease->released_at == 0) {
      (void)store_.ReleaseLease(fresh->sandbox_id, lease->lease_version, clock_.NowMs());
    }
    (void)runtime_.Destroy(fresh->sandbox_id);
    if (auto again = store_.GetSandbox(fresh->sandbox_id); again.ok()) {
      (void)Transition(*again, SandboxState::kTerminated, "cleanup after lost", "");
    }
    ++repaired;
  }
  // Runtime objects nobody has a live row for. Only dead ones (no process left: a crashed
  // daemon's sandboxes, whose inits exit with it) or ones this registry knows as ended are
  // removed; a live unknown sandbox belongs to another runtime on this host (a one-shot
  // `paddockd sandbox run`) and is left alone.
  for (const auto& obj : runtime_.ListHostObjects()) {
    if (live_in_registry.count(obj.id)) continue;
    auto rec = store_.GetSandbox(obj.id);
    // Ours and live: created after the snapshot above (its cgroup may not have a task yet).
    if (rec.ok() && !IsTerminal(StateOf(*rec))) continue;
    const bool ours_and_ended = rec.ok();
    if (!obj.pids.empty() && !ours_and_ended) continue;
    Status st = runtime_.Destroy(obj.id);
    if (!st.ok()) spdlog::warn("reconcile: remove orphan {}: {}", obj.id, st.ToString());
    ++repaired;
  }
  return repaired;
}

void SandboxManager::StartBackground(std::chrono::milliseconds interval) {
  std::lock_guard lock(bg_mu_);
  if (bg_thread_.joinable()) return;
  bg_stop_ = false;
  bg_thread_ = std::thread([this, interval] {
    std::unique_lock lock(bg_mu_);
    auto next_full_pass = std::chrono::steady_clock::now();
    while (!bg_stop_) {
      const bool full_pass = std::chrono::steady_clock::now() >= next_full_pass;
      refill_requested_ = false;
      lock.unlock();
      if (full_pass) {
        ReconcileOnce();
        ExpireOnce();
      }
      RefillPoolsOnce();
      lock.lock();
      if (full_pass) next_full_pass = std::chrono::steady_clock::now() + interval;
      bg_cv_.wait_until(lock, next_full_pass, [this] { return bg_stop_ || refill_requested_; });
    }
  });
}

void SandboxManager::WaitForQuiet(std::chrono::milliseconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (foreground_.load() > 0 && std::chrono::steady_clock::now() < give_up) {
    std::unique_lock lock(bg_mu_);
    if (bg_stop_) return;
    bg_cv_.wait_for(lock, std::chrono::milliseconds(5), [this] { return bg_stop_; });
  }
}

void SandboxManager::StartLeaseUsage(const std::string& id) {
  std::lock_guard lock(usage_mu_);
  lease_usage_[id] = LeaseUsage{.started_ms = clock_.NowMs()};
}

void SandboxManager::AddExecUsage(const std::string& id, const runtime::ExecResult& r) {
  std::lock_guard lock(usage_mu_);
  auto it = lease_usage_.find(id);
  if (it == lease_usage_.end()) return;
  LeaseUsage& u = it->second;
  u.peak_rss_bytes = std::max(u.peak_rss_bytes, r.peak_memory_bytes);
  u.cpu_seconds += r.cpu_seconds;
  if (r.wall_seconds > 0.05) u.peak_cpu = std::max(u.peak_cpu, r.cpu_seconds / r.wall_seconds);
  u.oom |= r.oom_killed;
  u.timed_out |= r.timed_out;
  ++u.execs;
}

void SandboxManager::RecordLeaseEnd(const SandboxRecord& rec) {
  LeaseUsage u;
  {
    std::lock_guard lock(usage_mu_);
    auto it = lease_usage_.find(rec.sandbox_id);
    if (it == lease_usage_.end()) return;
    u = it->second;
    lease_usage_.erase(it);
  }
  registry::AllocationRecord a;
  a.sandbox_id = rec.sandbox_id;
  a.tenant_id = rec.tenant_id;
  a.actual_class = rec.resource_class;
  a.cpu = rec.cpus;
  a.memory_mb = rec.memory_mb;
  const int64_t now = clock_.NowMs();
  a.duration_ms = now - u.started_ms;
  a.created_at = now;
  a.peak_cpu = u.peak_cpu;
  a.cpu_seconds = u.cpu_seconds;
  a.timed_out = u.timed_out;
  a.oom = u.oom;
  uint64_t peak = u.peak_rss_bytes;
  // The sandbox cgroup's peak also counts files on the memory-backed writable layer and every
  // process at once; it covers the sandbox's whole life, so a kept sandbox's later leases
  // inherit an earlier lease's peak (an over-estimate, never an under-estimate).
  if (auto usage = runtime_.Usage(rec.sandbox_id); usage.ok()) {
    peak = std::max(peak, usage->memory_peak_bytes);
    a.oom |= usage->oom_kills > 0;
  }
  // No command ran: nothing was measured, and the history must not read it as "used nothing".
  a.peak_memory_mb = u.execs > 0 ? static_cast<int64_t>((peak + (1 << 20) - 1) >> 20) : 0;
  if (auto plan = nlohmann::json::parse(rec.plan, nullptr, false); plan.is_object()) {
    const auto& intent = plan.value("intent", nlohmann::json::object());
    const auto& decision = plan.value("decision", nlohmann::json::object());
    a.task_id = plan.value("task_id", "");
    a.recommended_class = intent.value("resource_class", "");
    a.planner_input_hash = intent.value("input_hash", "");
    a.workload_signature = intent.value("workload_signature", "");
    a.command_signature = intent.value("command_signature", "");
    a.confidence = intent.value("confidence", 0.0);
    std::string reason;
    for (const auto& r : decision.value("reasons", nlohmann::json::array()))
      if (r.is_string()) reason += (reason.empty() ? "" : "; ") + r.get<std::string>();
    a.reason = reason.substr(0, 2048);
  }
  if (auto st = store_.InsertAllocation(a); !st.ok())
    spdlog::warn("lifecycle: allocation record for {}: {}", rec.sandbox_id, st.status().ToString());
}

void SandboxManager::KickRefill() {
  {
    std::lock_guard lock(bg_mu_);
    refill_requested_ = true;
  }
  bg_cv_.notify_all();
}

void SandboxManager::StopBackground() {
  {
    std::lock_guard lock(bg_mu_);
    bg_stop_ = true;
  }
  bg_cv_.notify_all();
  if (bg_thread_.joinable()) bg_thread_.join();
}

}  // namespace paddock::lifecycle
