#include "api/sandbox_api.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <nlohmann/json.hpp>

#include "api/auth.h"
#include "api/planning.h"
#include "common/random.h"

namespace paddock::api {

namespace {

using json = nlohmann::json;
using lifecycle::Principal;
using lifecycle::SandboxManager;

// A request-level failure that maps straight to an HTTP error.
struct ApiError {
  Response response;
};

Response Unauthenticated(const std::string& msg) {
  return ErrorResponse(401, "unauthenticated", msg);
}

// Parses a JSON object body; an empty body is {}.
Result<json> ParseBody(const Request& req) {
  if (req.body.empty()) return json::object();
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) return InvalidArgument("body: malformed JSON");
  if (!j.is_object()) return InvalidArgument("body: must be a JSON object");
  return j;
}

// Typed field access that names the field in its error.
Result<std::optional<std::string>> OptString(const json& j, const char* field, size_t max = 4096) {
  if (!j.contains(field) || j[field].is_null()) return std::optional<std::string>();
  if (!j[field].is_string()) return InvalidArgument(std::string(field) + ": must be a string");
  std::string s = j[field].get<std::string>();
  if (s.size() > max) return InvalidArgument(std::string(field) + ": too long");
  return std::optional<std::string>(s);
}

Result<std::optional<int64_t>> OptInt(const json& j, const char* field, int64_t lo, int64_t hi) {
  if (!j.contains(field) || j[field].is_null()) return std::optional<int64_t>();
  if (!j[field].is_number_integer())
    return InvalidArgument(std::string(field) + ": must be an integer");
  int64_t v = j[field].get<int64_t>();
  if (v < lo || v > hi)
    return InvalidArgument(std::string(field) + ": must be between " + std::to_string(lo) +
                           " and " + std::to_string(hi));
  return std::optional<int64_t>(v);
}

Result<std::optional<double>> OptNumber(const json& j, const char* field, double lo, double hi) {
  if (!j.contains(field) || j[field].is_null()) return std::optional<double>();
  if (!j[field].is_number()) return InvalidArgument(std::string(field) + ": must be a number");
  double v = j[field].get<double>();
  if (!(v >= lo && v <= hi))
    return InvalidArgument(std::string(field) + ": must be between " + std::to_string(lo) +
                           " and " + std::to_string(hi));
  return std::optional<double>(v);
}

// An integer query parameter in [lo, hi]; `fallback` when absent. "12abc" is not an integer.
Result<int64_t> QueryInt(const Request& req, const char* name, int64_t fallback, int64_t lo,
                         int64_t hi) {
  auto text = req.Query(name);
  if (!text) return fallback;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (text->empty() || ec != std::errc() || end != text->data() + text->size() || v < lo || v > hi)
    return InvalidArgument(std::string(name) + ": must be an integer between " +
                           std::to_string(lo) + " and " + std::to_string(hi));
  return v;
}

Result<std::map<std::string, std::string>> StringMap(const json& j, const char* field) {
  std::map<std::string, std::string> out;
  if (!j.contains(field) || j[field].is_null()) return out;
  if (!j[field].is_object()) return InvalidArgument(std::string(field) + ": must be an object");
  for (auto& [k, v] : j[field].items()) {
    if (!v.is_string()) return InvalidArgument(std::string(field) + "." + k + ": must be a string");
    out[k] = v.get<std::string>();
  }
  return out;
}

json SandboxJson(const registry::SandboxRecord& r) {
  json metadata = json::parse(r.metadata, nullptr, false);
  json plan = json::parse(r.plan, nullptr, false);
  return {
      {"id", r.sandbox_id},
      {"tenant_id", r.tenant_id},
      {"session_id", r.session_id},
      {"state", r.state},
      {"state_reason", r.state_reason},
      {"resource_class", r.resource_class},
      {"template", r.template_id},
      {"resources",
       {{"cpus", r.cpus}, {"memory_mb", r.memory_mb}, {"disk_mb", r.disk_mb}, {"pids", r.pids}}},
      {"created_at_ms", r.created_at},
      {"expires_at_ms", r.expires_at},
      {"idle_timeout_seconds", r.idle_timeout_ms / 1000},
      {"expiry_action", r.expiry_action},
      {"last_lease_version", r.lease_counter},
      {"tainted", r.tainted},
      {"metadata", metadata.is_discarded() ? json::object() : metadata},
      {"plan",
       json::parse(r.plan, nullptr, false).is_object() ? json::parse(r.plan) : json::object()}};
}

json LeaseJson(const registry::LeaseRecord& l) {
  return {{"sandbox_id", l.sandbox_id},      {"lease_id", l.lease_id},
          {"owner", l.lease_owner},          {"lease_version", l.lease_version},
          {"acquired_at_ms", l.acquired_at}, {"expires_at_ms", l.expires_at}};
}

json ExecResultJson(const runtime::ExecResult& r) {
  return {{"exit_code", r.exit_code},
          {"signal", r.signal},
          {"timed_out", r.timed_out},
          {"oom_killed", r.oom_killed},
          {"killed", r.killed},
          {"stdout_truncated", r.stdout_truncated},
          {"stderr_truncated", r.stderr_truncated},
          {"cpu_seconds", r.cpu_seconds},
          {"peak_memory_bytes", r.peak_memory_bytes},
          {"wall_seconds", r.wall_seconds}};
}

json FileStatJson(const runtime::FileStat& s) {
  static const char* kTypes[] = {"file", "dir", "symlink", "other"};
  json j = {{"name", s.name},       {"type", kTypes[static_cast<int>(s.type)]},
            {"size", s.size},       {"mode", s.mode},
            {"uid", s.uid},         {"gid", s.gid},
            {"mtime", s.mtime_unix}};
  if (s.type == runtime::FileStat::Type::kSymlink) j["link_target"] = s.link_target;
  return j;
}

// The sandbox path of a /files/{path*} route (the route parameter has no leading slash).
std::string FilePathParam(const Request& req) {
  std::string path = "/";
  path += req.Param("path");
  return path;
}

Result<runtime::ExecRequest> ParseExec(const json& body) {
  runtime::ExecRequest req;
  if (body.contains("argv")) {
    if (!body["argv"].is_array() || body["argv"].empty())
      return InvalidArgument("argv: must be a non-empty array of strings");
    for (const auto& a : body["argv"]) {
      if (!a.is_string()) return InvalidArgument("argv: must be a non-empty array of strings");
      req.argv.push_back(a.get<std::string>());
    }
  }
  PADDOCK_ASSIGN_OR_RETURN(auto shell, OptString(body, "shell", 1 << 20));
  if (shell) req.shell = *shell;
  if (req.argv.empty() == req.shell.empty())
    return InvalidArgument("argv/shell: give exactly one of them");
  PADDOCK_ASSIGN_OR_RETURN(req.env, StringMap(body, "env"));
  PADDOCK_ASSIGN_OR_RETURN(auto cwd, OptString(body, "cwd"));
  if (cwd) req.cwd = *cwd;
  PADDOCK_ASSIGN_OR_RETURN(auto user, OptString(body, "user", 64));
  if (user) req.user = *user;
  PADDOCK_ASSIGN_OR_RETURN(auto stdin_data, OptString(body, "stdin", 1 << 20));
  if (stdin_data) req.stdin_data = *stdin_data;
  PADDOCK_ASSIGN_OR_RETURN(auto timeout, OptNumber(body, "timeout_seconds", 0, 86400));
  if (timeout) req.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout * 1000));
  return req;
}

class Api {
 public:
  explicit Api(const ApiContext& ctx) : ctx_(ctx) {
    auto& m = *ctx.metrics;
    exec_latency_ = &m.GetHistogram(
        "paddock_exec_duration_seconds", "Wall time of exec calls through the API",
        {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
    for (const auto& cls : ctx.manager->config().pools) {
      m.GetGauge("paddock_pool_warm", "Warm (ready, unbound) sandboxes per pool",
                 {{"class", cls.class_name}})
          .SetCallback([store = ctx.store, name = cls.class_name] {
            registry::SandboxFilter f;
            f.pool = name;
            f.state = "ready";
            auto page = store->ListSandboxes(f, 1000, "");
            return page.ok() ? static_cast<double>(page->records.size()) : 0.0;
          });
    }
    for (const char* state : {"ready", "leased", "hibernating", "provisioning", "failed", "lost"}) {
      m.GetGauge("paddock_sandboxes", "Sandboxes by state", {{"state", state}})
          .SetCallback([store = ctx.store, s = std::string(state)] {
            registry::SandboxFilter f;
            f.state = s;
            f.include_terminated = true;
            double n = 0;
            std::string after;
            while (true) {
              auto page = store->ListSandboxes(f, 1000, after);
              if (!page.ok()) break;
              n += static_cast<double>(page->records.size());
              if (page->next_after_id.empty()) break;
              after = page->next_after_id;
            }
            return n;
          });
    }
  }

  Status Register();

 private:
  Status RegisterSessions();
  using Authed = std::function<void(const Principal&, const Request&, ResponseWriter&)>;

  // Wraps a handler with authentication and turns a thrown-away Status into a JSON error.
  Handler WithAuth(Authed h, bool admin_only = false) {
    return [this, h, admin_only](const Request& req, ResponseWriter& w) {
      auto who = Authenticate(*ctx_.store, req);
      if (!who.ok()) {
        w.Send(Unauthenticated(who.status().message()));
        return;
      }
      if (admin_only && !who->admin) {
        w.Send(ErrorResponse(403, "permission_denied", "admin key required"));
        return;
      }
      h(*who, req, w);
    };
  }

  static void SendStatus(ResponseWriter& w, const Status& st) {
    w.Send(ErrorFromStatus(st, json::object(), 413));
  }

  Result<int64_t> LeaseVersion(const Request& req) {
    auto v = req.headers.Find(kLeaseVersionHeader);
    if (!v) return Status(StatusCode::kConflict, std::string(kLeaseVersionHeader) + ": required");
    try {
      size_t used = 0;
      long long n = std::stoll(*v, &used);
      if (used != v->size() || n <= 0) throw std::invalid_argument("bad");
      return static_cast<int64_t>(n);
    } catch (...) {
      return InvalidArgument(std::string(kLeaseVersionHeader) + ": must be a positive integer");
    }
  }

  void LeaseOp(const std::string& op, const Status& st) {
    ctx_.metrics
        ->GetCounter("paddock_lease_operations_total", "Lease operations by outcome",
                     {{"op", op}, {"outcome", st.ok() ? "ok" : StatusCodeSlug(st.code())}})
        .Inc();
  }

  const ApiContext ctx_;
  Histogram* exec_latency_ = nullptr;
};

Status Api::Register() {
  HttpServer& s = *ctx_.server;
  SandboxManager& mgr = *ctx_.manager;

  PADDOCK_RETURN_IF_ERROR(s.Route("GET", "/healthz", [](const Request&, ResponseWriter& w) {
    w.Send(JsonResponse(200, {{"status", "ok"}}));
  }));
  PADDOCK_RETURN_IF_ERROR(s.Route("GET", "/readyz", [this](const Request&, ResponseWriter& w) {
    bool ready = !ctx_.ready || ctx_.ready();
    w.Send(JsonResponse(ready ? 200 : 503, {{"ready", ready}}));
  }));
  PADDOCK_RETURN_IF_ERROR(s.Route("GET", "/metrics", [this](const Request&, ResponseWriter& w) {
    Response r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = ctx_.metrics->Render();
    w.Send(std::move(r));
  }));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("POST", "/v1/tenants",
              WithAuth(
                  [this](const Principal&, const Request& req, ResponseWriter& w) {
                    auto body = ParseBody(req);
                    if (!body.ok()) return SendStatus(w, body.status());
                    auto name = OptString(*body, "name", 64);
                    if (!name.ok()) return SendStatus(w, name.status());
                    if (!*name || (*name)->empty())
                      return SendStatus(w, InvalidArgument("name: required"));
                    registry::TenantRecord t{"tenant-" + RandomHex(6), **name, ctx_.clock->NowMs()};
                    if (Status st = ctx_.store->CreateTenant(t); !st.ok()) return SendStatus(w, st);
                    auto key = MintApiKey(*ctx_.store, t.id, "tenant", *ctx_.clock);
                    if (!key.ok()) return SendStatus(w, key.status());
                    w.Send(JsonResponse(
                        201, {{"tenant", {{"id", t.id}, {"name", t.name}}}, {"api_key", *key}}));
                  },
                  /*admin_only=*/true)));

  PADDOCK_RETURN_IF_ERROR(s.Route(
      "GET", "/v1/classes", WithAuth([&mgr](const Principal&, const Request&, ResponseWriter& w) {
        json items = json::array();
        for (const auto& c : mgr.config().resource_classes) {
          items.push_back({{"name", c.name},
                           {"cpus", c.cpus},
                           {"memory_mb", c.memory_bytes >> 20},
                           {"disk_mb", c.disk_bytes >> 20},
                           {"pids", c.pids},
                           {"template", c.template_name},
                           {"runtime", c.runtime}});
        }
        w.Send(JsonResponse(200, {{"items", items}}));
      })));

  PADDOCK_RETURN_IF_ERROR(s.Route(
      "GET", "/v1/pools", WithAuth([&mgr](const Principal&, const Request&, ResponseWriter& w) {
        json items = json::array();
        for (const auto& p : mgr.Pools()) {
          items.push_back({{"class", p.resource_class},
                           {"warm", p.warm},
                           {"leased", p.leased},
                           {"min", p.min},
                           {"max", p.max},
                           {"buffer", p.buffer}});
        }
        w.Send(JsonResponse(200, {{"items", items}}));
      })));

  PADDOCK_RETURN_IF_ERROR(s.Route(
      "POST", "/v1/acquire",
      WithAuth([this, &mgr](const Principal& who, const Request& req, ResponseWriter& w) {
        auto body = ParseBody(req);
        if (!body.ok()) return SendStatus(w, body.status());
        auto cls = OptString(*body, "class", 64);
        if (!cls.ok()) return SendStatus(w, cls.status());
        if (!*cls) return SendStatus(w, InvalidArgument("class: required"));
        auto owner = OptString(*body, "owner", 200);
        if (!owner.ok()) return SendStatus(w, owner.status());
        auto ttl = OptInt(*body, "ttl_seconds", 1, 86400);
        if (!ttl.ok()) return SendStatus(w, ttl.status());
        auto session = OptString(*body, "session_id", 128);
        if (!session.ok()) return SendStatus(w, session.status());
        auto got = mgr.AcquireFromPool(who, **cls, owner->value_or("api"), ttl->value_or(0) * 1000,
                                       session->value_or(""), req.request_id);
        LeaseOp("acquire_from_pool", got.status());
        if (!got.ok()) return SendStatus(w, got.status());
        w.Send(JsonResponse(201, {{"sandbox", SandboxJson(got->sandbox)},
                                  {"lease", LeaseJson(got->lease)},
                                  {"from_pool", got->from_pool}}));
      })));

  // Sizing telemetry (PLAN-4): one record per ended lease, newest first; a tenant sees its own,
  // the admin everyone's.
  PADDOCK_RETURN_IF_ERROR(s.Route(
      "GET", "/v1/allocations",
      WithAuth([this](const Principal& who, const Request& req, ResponseWriter& w) {
        auto limit = QueryInt(req, "limit", 100, 1, 1000);
        if (!limit.ok()) return SendStatus(w, limit.status());
        auto rows =
            ctx_.store->ListAllocations(who.admin ? "" : who.tenant_id, static_cast<int>(*limit));
        if (!rows.ok()) return SendStatus(w, rows.status());
        json items = json::array();
        for (const auto& a : *rows) {
          items.push_back({{"sandbox_id", a.sandbox_id},
                           {"tenant_id", a.tenant_id},
                           {"task_id", a.task_id},
                           {"planner_input_hash", a.planner_input_hash},
                           {"workload_signature", a.workload_signature},
                           {"command_signature", a.command_signature},
                           {"recommended_class", a.recommended_class},
                           {"actual_class", a.actual_class},
                           {"reason", a.reason},
                           {"confidence", a.confidence},
                           {"cpu", a.cpu},
                           {"memory_mb", a.memory_mb},
                           {"duration_ms", a.duration_ms},
                           {"peak_cpu", a.peak_cpu},
                           {"cpu_seconds", a.cpu_seconds},
                           {"peak_memory_mb", a.peak_memory_mb},
                           {"oom", a.oom},
                           {"timed_out", a.timed_out},
                           {"created_at_ms", a.created_at}});
        }
        w.Send(JsonResponse(200, {{"items", items}}));
      })));

  // Dry run of the planner and the policy guard: what a create with this intent would get.
  PADDOCK_RETURN_IF_ERROR(
      s.Route("POST", "/v1/plan",
              WithAuth([this](const Principal& who, const Request& req, ResponseWriter& w) {
                auto body = ParseBody(req);
                if (!body.ok()) return SendStatus(w, body.status());
                if (!ctx_.planner) return SendStatus(w, Unimplemented("no planner configured"));
                auto plan = PlanForTenant(*ctx_.planner, *ctx_.store, who, *body, "");
                if (!plan.ok()) return SendStatus(w, plan.status());
                w.Send(JsonResponse(200, plan->ToJson()));
              })));

  PADDOCK_RETURN_IF_ERROR(s.Route(
      "POST", "/v1/sandboxes",
      WithAuth([this, &mgr](const Principal& who, const Request& req, ResponseWriter& w) {
        auto body = ParseBody(req);
        if (!body.ok()) return SendStatus(w, body.status());
        const json& b = *body;
        lifecycle::CreateSandboxRequest cr;
        auto fail = [&](const Status& st) { SendStatus(w, st); };
        // A task description instead of a class: the planner recommends, the policy
        // guard decides (PLAN-2); the caller cannot also pick the size.
        if (b.contains("intent")) {
          if (b.contains("class") || b.contains("resources") || b.contains("template"))
            return fail(
                InvalidArgument("intent: cannot be combined with class, resources or template"));
          if (!ctx_.planner) return fail(Unimplemented("intent: no planner configured"));
          auto plan = PlanForTenant(*ctx_.planner, *ctx_.store, who, b["intent"], "intent");
          if (!plan.ok()) return fail(plan.status());
          auto ttl = OptInt(b, "ttl_seconds", 0, 30 * 86400);
          if (!ttl.ok()) return fail(ttl.status());
          if (*ttl) cr.ttl_ms = **ttl * 1000;
          if (Status st = ApplyPlan(*plan, mgr.config(), req.request_id, &cr); !st.ok())
            return fail(st);
        }
        auto cls = OptString(b, "class", 64);
        if (!cls.ok()) return fail(cls.status());
        if (*cls) cr.resource_class = **cls;
        auto tpl = OptString(b, "template", 64);
        if (!tpl.ok()) return fail(tpl.status());
        if (*tpl) cr.template_name = **tpl;
        if (b.contains("resources")) {
          const json& r = b["resources"];
          if (!r.is_object()) return fail(InvalidArgument("resources: must be an object"));
          auto cpus = OptNumber(r, "cpus", 0.01, 1024);
          if (!cpus.ok()) return fail(InvalidArgument("resources." + cpus.status().message()));
          cr.cpus = *cpus;
          auto mem = OptInt(r, "memory_mb", 1, int64_t{1} << 30);
          if (!mem.ok()) return fail(InvalidArgument("resources." + mem.status().message()));
          if (*mem) cr.memory_bytes = static_cast<uint64_t>(**mem) << 20;
          auto disk = OptInt(r, "disk_mb", 1, int64_t{1} << 30);
          if (!disk.ok()) return fail(InvalidArgument("resources." + disk.status().message()));
          if (*disk) cr.disk_bytes = static_cast<uint64_t>(**disk) << 20;
          auto pids = OptInt(r, "pids", 1, 1 << 20);
          if (!pids.ok()) return fail(InvalidArgument("resources." + pids.status().message()));
          if (*pids) cr.pids = static_cast<uint32_t>(**pids);
        }
        auto ttl = OptInt(b, "ttl_seconds", 0, 30 * 86400);
        if (!ttl.ok()) return fail(ttl.status());
        if (*ttl && !b.contains("intent")) cr.ttl_ms = **ttl * 1000;
        auto idle = OptInt(b, "idle_timeout_seconds", 0, 30 * 86400);
        if (!idle.ok()) return fail(idle.status());
        if (*idle) cr.idle_timeout_ms = **idle * 1000;
        auto env = StringMap(b, "env");
        if (!env.ok()) return fail(env.status());
        cr.env = *env;
        auto session = OptString(b, "session_id", 128);
        if (!session.ok()) return fail(session.status());
        if (*session) cr.session_id = **session;
        if (b.contains("metadata")) {
          if (!b["metadata"].is_object())
            return fail(InvalidArgument("metadata: must be an object"));
          cr.metadata_json = b["metadata"].dump();
          if (cr.metadata_json.size() > 16384) return fail(InvalidArgument("metadata: too large"));
        }
        auto rec = mgr.Create(who, cr, req.request_id);
        if (!rec.ok()) return fail(rec.status());
        w.Send(JsonResponse(201, SandboxJson(*rec)));
      })));

  PADDOCK_RETURN_IF_ERROR(s.Route(
      "GET", "/v1/sandboxes",
      WithAuth([&mgr](const Principal& who, const Request& req, ResponseWriter& w) {
        registry::SandboxFilter f;
        if (auto st = req.Query("state")) f.state = *st;
        if (auto ss = req.Query("session_id")) f.session_id = *ss;
        if (auto c = req.Query("class")) f.resource_class = *c;
        f.include_terminated = req.Query("all").value_or("") == "true";
        auto limit = QueryInt(req, "limit", 50, 1, 1000);
        if (!limit.ok()) return SendStatus(w, limit.status());
        auto page = mgr.List(who, f, static_cast<int>(*limit), req.Query("after").value_or(""));
        if (!page.ok()) return SendStatus(w, page.status());
        json items = json::array();
        for (const auto& r : page->records) items.push_back(SandboxJson(r));
        w.Send(JsonResponse(200, {{"items", items}, {"next", page->next_after_id}}));
      })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("GET", "/v1/sandboxes/{id}",
              WithAuth([&mgr](const Principal& who, const Request& req, ResponseWriter& w) {
                auto rec = mgr.Get(who, req.Param("id"));
                if (!rec.ok()) return SendStatus(w, rec.status());
                w.Send(JsonResponse(200, SandboxJson(*rec)));
              })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("DELETE", "/v1/sandboxes/{id}",
              WithAuth([&mgr](const Principal& who, const Request& req, ResponseWriter& w) {
                Status st = mgr.Destroy(who, req.Param("id"), "api delete", req.request_id);
                if (!st.ok()) return SendStatus(w, st);
                w.Send(Response{204, "application/json", "", {}});
              })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("POST", "/v1/sandboxes/{id}/lease",
              WithAuth([this, &mgr](const Principal& who, const Request& req, ResponseWriter& w) {
                auto body = ParseBody(req);
                if (!body.ok()) return SendStatus(w, body.status());
                auto owner = OptString(*body, "owner", 200);
                if (!owner.ok()) return SendStatus(w, owner.status());
                auto ttl = OptInt(*body, "ttl_seconds", 1, 86400);
                if (!ttl.ok()) return SendStatus(w, ttl.status());
                auto lease = mgr.AcquireLease(who, req.Param("id"), owner->value_or(""),
                                              ttl->value_or(0) * 1000, req.request_id);
                LeaseOp("acquire", lease.status());
                if (!lease.ok()) return SendStatus(w, lease.status());
                w.Send(JsonResponse(201, LeaseJson(*lease)));
              })));

  PADDOCK_RETURN_IF_ERROR(s.Route(
      "POST", "/v1/sandboxes/{id}/lease/renew",
      WithAuth([this, &mgr](const Principal& who, const Request& req, ResponseWriter& w) {
        auto body = ParseBody(req);
        if (!body.ok()) return SendStatus(w, body.status());
        auto version = OptInt(*body, "lease_version", 1, INT64_MAX);
        if (!version.ok()) return SendStatus(w, version.status());
        if (!*version) return SendStatus(w, InvalidArgument("lease_version: required"));
        auto ttl = OptInt(*body, "ttl_seconds", 1, 86400);
        if (!ttl.ok()) return SendStatus(w, ttl.status());
        auto expires = mgr.RenewLease(who, req.Param("id"), **version, ttl->value_or(0) * 1000);
        LeaseOp("renew", expires.status());
        if (!expires.ok()) return SendStatus(w, expires.status());
        w.Send(JsonResponse(200, {{"lease_version", **version}, {"expires_at_ms", *expires}}));
      })));

  PADDOCK_RETURN_IF_ERROR(s.Route(
      "POST", "/v1/sandboxes/{id}/lease/release",
      WithAuth([this, &mgr](const Principal& who, const Request& req, ResponseWriter& w) {
        auto body = ParseBody(req);
        if (!body.ok()) return SendStatus(w, body.status());
        auto version = OptInt(*body, "lease_version", 1, INT64_MAX);
        if (!version.ok()) return SendStatus(w, version.status());
        if (!*version) return SendStatus(w, InvalidArgument("lease_version: required"));
        auto mode_name = OptString(*body, "recycle", 16);
        if (!mode_name.ok()) return SendStatus(w, mode_name.status());
        auto mode = lifecycle::ParseRecycleMode(mode_name->value_or("keep"));
        if (!mode.ok()) return SendStatus(w, mode.status());
        Status st = mgr.ReleaseLease(who, req.Param("id"), **version, *mode, req.request_id);
        LeaseOp("release", st);
        if (!st.ok()) return SendStatus(w, st);
        w.Send(JsonResponse(200, {{"released", true}}));
      })));

  PADDOCK_RETURN_IF_ERROR(s.Route(
      "POST", "/v1/sandboxes/{id}/exec",
      WithAuth([this, &mgr](const Principal& who, const Request& req, ResponseWriter& w) {
        auto version = LeaseVersion(req);
        if (!version.ok()) return SendStatus(w, version.status());
        auto body = ParseBody(req);
        if (!body.ok()) return SendStatus(w, body.status());
        auto er = ParseExec(*body);
        if (!er.ok()) return SendStatus(w, er.status());
        std::string out, err;
        runtime::ExecCallbacks cb;
        cb.on_stdout = [&](std::string_view d) { out.append(d); };
        cb.on_stderr = [&](std::string_view d) { err.append(d); };
        const auto t0 = std::chrono::steady_clock::now();
        auto r = mgr.Exec(who, req.Param("id"), *version, *er, cb);
        exec_latency_->Observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (!r.ok()) return SendStatus(w, r.status());
        json j = ExecResultJson(*r);
        j["stdout"] = std::move(out);
        j["stderr"] = std::move(err);
        // Output is bytes: invalid UTF-8 is replaced (U+FFFD) so the JSON stays valid.
        w.Send(Response{
            200, "application/json", j.dump(-1, ' ', false, json::error_handler_t::replace), {}});
      })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("POST", "/v1/sandboxes/{id}/exec/stream",
              WithAuth([this, &mgr](const Principal& who, const Request& req, ResponseWriter& w) {
                auto version = LeaseVersion(req);
                if (!version.ok()) return SendStatus(w, version.status());
                auto body = ParseBody(req);
                if (!body.ok()) return SendStatus(w, body.status());
                auto er = ParseExec(*body);
                if (!er.ok()) return SendStatus(w, er.status());
                // NDJSON: one event per line, ending with {"type":"exit",...} or
                // {"type":"error",...}.
                bool started = false;
                auto emit = [&](const json& ev) {
                  if (!started) started = w.StartStream(200, "application/x-ndjson");
                  w.WriteChunk(ev.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
                };
                runtime::ExecCallbacks cb;
                cb.on_stdout = [&](std::string_view d) {
                  emit({{"type", "stdout"}, {"data", std::string(d)}});
                };
                cb.on_stderr = [&](std::string_view d) {
                  emit({{"type", "stderr"}, {"data", std::string(d)}});
                };
                const auto t0 = std::chrono::steady_clock::now();
                auto r = mgr.Exec(who, req.Param("id"), *version, *er, cb);
                exec_latency_->Observe(
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                if (!r.ok()) {
                  if (!started) return SendStatus(w, r.status());
                  emit({{"type", "error"},
                        {"code", StatusCodeSlug(r.status().code())},
                        {"message", r.status().message()}});
                } else {
                  json ev = ExecResultJson(*r);
                  ev["type"] = "exit";
                  emit(ev);
                }
                w.EndStream();
              })));

  // Files: raw bytes in and out; JSON for listings and metadata operations.
  auto fenced = [this, &mgr](const Principal& who, const Request& req, ResponseWriter& w,
                             const std::function<Status(runtime::Runtime&)>& op) -> bool {
    auto version = LeaseVersion(req);
    if (!version.ok()) {
      SendStatus(w, version.status());
      return false;
    }
    Status st = mgr.WithFence(who, req.Param("id"), *version, op);
    if (!st.ok()) {
      SendStatus(w, st);
      return false;
    }
    return true;
  };
  const uint64_t max_upload = mgr.config().server.max_upload_bytes;
  PADDOCK_RETURN_IF_ERROR(s.Route(
      "PUT", "/v1/sandboxes/{id}/files/{path*}",
      WithAuth([fenced, max_upload](const Principal& who, const Request& req, ResponseWriter& w) {
        uint32_t mode = 0644;
        if (auto m = req.Query("mode")) {
          try {
            mode = static_cast<uint32_t>(std::stoul(*m, nullptr, 8)) & 0777;
          } catch (...) {
            return SendStatus(w, InvalidArgument("mode: must be octal"));
          }
        }
        const std::string path = FilePathParam(req);
        if (fenced(who, req, w, [&](runtime::Runtime& rt) {
              bool sent = false;
              return rt.WriteFile(req.Param("id"), path, mode, max_upload,
                                  [&]() -> Result<std::string> {
                                    if (sent) return std::string();
                                    sent = true;
                                    return req.body;
                                  });
            }))
          w.Send(JsonResponse(201, {{"path", path}, {"size", req.body.size()}}));
      }),
      RouteOptions{max_upload, std::chrono::milliseconds(300'000)}));

  PADDOCK_RETURN_IF_ERROR(s.Route(
      "GET", "/v1/sandboxes/{id}/files/{path*}",
      WithAuth([fenced, max_upload](const Principal& who, const Request& req, ResponseWriter& w) {
        std::string data;
        const std::string path = FilePathParam(req);
        if (fenced(who, req, w, [&](runtime::Runtime& rt) {
              return rt.ReadFile(req.Param("id"), path, max_upload, [&](std::string_view c) {
                data.append(c);
                return Status::Ok();
              });
            }))
          w.Send(Response{200, "application/octet-stream", std::move(data), {}});
      })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("DELETE", "/v1/sandboxes/{id}/files/{path*}",
              WithAuth([fenced](const Principal& who, const Request& req, ResponseWriter& w) {
                const bool recursive = req.Query("recursive").value_or("") == "true";
                if (fenced(who, req, w, [&](runtime::Runtime& rt) {
                      return rt.Remove(req.Param("id"), FilePathParam(req), recursive);
                    }))
                  w.Send(Response{204, "application/json", "", {}});
              })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("POST", "/v1/sandboxes/{id}/fs/{op}",
              WithAuth([fenced](const Principal& who, const Request& req, ResponseWriter& w) {
                auto body = ParseBody(req);
                if (!body.ok()) return SendStatus(w, body.status());
                auto path = OptString(*body, "path");
                if (!path.ok()) return SendStatus(w, path.status());
                const std::string op = req.Param("op");
                const std::string id = req.Param("id");
                json result = json::object();
                // Declared here: the operation below runs after this block, inside fenced().
                std::optional<std::string> from, to;
                uint32_t mode = 0;
                std::function<Status(runtime::Runtime&)> fn;
                if (op == "list" || op == "stat" || op == "mkdir" || op == "chmod") {
                  if (!*path) return SendStatus(w, InvalidArgument("path: required"));
                }
                if (op == "list") {
                  fn = [&](runtime::Runtime& rt) {
                    PADDOCK_ASSIGN_OR_RETURN(auto entries, rt.ListDir(id, **path));
                    result["items"] = json::array();
                    for (const auto& e : entries) result["items"].push_back(FileStatJson(e));
                    return Status::Ok();
                  };
                } else if (op == "stat") {
                  fn = [&](runtime::Runtime& rt) {
                    PADDOCK_ASSIGN_OR_RETURN(auto st, rt.Stat(id, **path));
                    result = FileStatJson(st);
                    return Status::Ok();
                  };
                } else if (op == "mkdir") {
                  fn = [&](runtime::Runtime& rt) { return rt.MakeDirs(id, **path, 0755); };
                } else if (op == "chmod") {
                  auto m = OptInt(*body, "mode", 0, 07777);
                  if (!m.ok()) return SendStatus(w, m.status());
                  if (!*m) return SendStatus(w, InvalidArgument("mode: required"));
                  mode = static_cast<uint32_t>(**m);
                  fn = [&](runtime::Runtime& rt) { return rt.Chmod(id, **path, mode); };
                } else if (op == "move") {
                  auto f = OptString(*body, "from");
                  auto t = OptString(*body, "to");
                  if (!f.ok()) return SendStatus(w, f.status());
                  if (!t.ok()) return SendStatus(w, t.status());
                  if (!*f || !*t) return SendStatus(w, InvalidArgument("from/to: required"));
                  from = **f;
                  to = **t;
                  fn = [&](runtime::Runtime& rt) { return rt.Rename(id, *from, *to); };
                } else {
                  return SendStatus(w, NotFound("fs operation '" + op + "' does not exist"));
                }
                if (fenced(who, req, w, fn)) w.Send(JsonResponse(200, result));
              })));

  for (const char* verb : {"pause", "resume"}) {
    const bool pause = std::string(verb) == "pause";
    PADDOCK_RETURN_IF_ERROR(s.Route(
        "POST", std::string("/v1/sandboxes/{id}/") + verb,
        WithAuth([this, &mgr, pause](const Principal& who, const Request& req, ResponseWriter& w) {
          auto version = LeaseVersion(req);
          if (!version.ok()) return SendStatus(w, version.status());
          Status st = pause ? mgr.Pause(who, req.Param("id"), *version, req.request_id)
                            : mgr.Resume(who, req.Param("id"), *version, req.request_id);
          if (!st.ok()) return SendStatus(w, st);
          auto rec = mgr.Get(who, req.Param("id"));
          if (!rec.ok()) return SendStatus(w, rec.status());
          w.Send(JsonResponse(200, SandboxJson(*rec)));
        })));
  }

  PADDOCK_RETURN_IF_ERROR(
      s.Route("GET", "/v1/sandboxes/{id}/events",
              WithAuth([&mgr](const Principal& who, const Request& req, ResponseWriter& w) {
                auto limit = QueryInt(req, "limit", 100, 1, 1000);
                if (!limit.ok()) return SendStatus(w, limit.status());
                auto after = QueryInt(req, "after", 0, 0, INT64_MAX);
                if (!after.ok()) return SendStatus(w, after.status());
                auto events = mgr.Events(who, req.Param("id"), static_cast<int>(*limit), *after);
                if (!events.ok()) return SendStatus(w, events.status());
                json items = json::array();
                for (const auto& e : *events) {
                  items.push_back({{"event_id", e.event_id},
                                   {"type", e.event_type},
                                   {"old_state", e.old_state},
                                   {"new_state", e.new_state},
                                   {"reason", e.reason},
                                   {"request_id", e.request_id},
                                   {"time_ms", e.timestamp}});
                }
                w.Send(JsonResponse(200, {{"items", items}}));
              })));
  return RegisterSessions();
}

json SessionJson(const registry::SessionRecord& s) {
  return {{"id", s.session_id},
          {"tenant_id", s.tenant_id},
          {"user_id", s.user_id},
          {"workspace_id", s.workspace_id},
          {"state", s.state},
          {"sandbox_id", s.current_sandbox_id},
          {"active_run_id", s.active_run_id},
          {"run_count", s.run_count},
          {"metadata", json::parse(s.metadata, nullptr, false)},
          {"created_at_ms", s.created_at},
          {"updated_at_ms", s.updated_at}};
}

json RunJson(const registry::RunRecord& r) {
  return {{"id", r.run_id},
          {"session_id", r.session_id},
          {"seq", r.seq},
          {"state", r.state},
          {"request", json::parse(r.request, nullptr, false)},
          {"result", json::parse(r.result, nullptr, false)},
          {"sandbox_id", r.sandbox_id},
          {"created_at_ms", r.created_at},
          {"finished_at_ms", r.finished_at}};
}

json CheckpointJson(const registry::CheckpointRecord& c) {
  auto manifest = json::parse(c.manifest, nullptr, false);
  return {{"id", c.checkpoint_id},
          {"session_id", c.session_id},
          {"user_id", c.user_id},
          {"task_id", c.task_id},
          {"run_id", c.run_id},
          {"sandbox_id", c.sandbox_id},
          {"parent_checkpoint_id", c.parent_checkpoint_id},
          {"template", c.template_id},
          {"base_image_digest", c.base_image_digest},
          {"runtime", c.runtime},
          {"resource_class", c.resource_class},
          {"workspace_version", c.workspace_version},
          {"environment_fingerprint", c.environment_fingerprint},
          {"layer_count", json::parse(c.layers, nullptr, false).size()},
          {"files", c.files},
          {"bytes", c.bytes},
          {"runtime_snapshot_ref", c.runtime_snapshot_ref},
          {"encryption_key_ref", c.encryption_key_ref},
          {"data_classification", c.data_classification},
          {"restore_policy", c.restore_policy},
          {"manifest", manifest},
          {"created_at_ms", c.created_at},
          {"expires_at_ms", c.expires_at}};
}

Result<std::vector<std::string>> StringList(const json& j, const char* field, size_t max_items,
                                            size_t max_bytes) {
  std::vector<std::string> out;
  if (!j.contains(field)) return out;
  const json& v = j[field];
  if (!v.is_array()) return InvalidArgument(std::string(field) + ": must be an array of strings");
  if (v.size() > max_items) {
    return InvalidArgument(std::string(field) + ": at most " + std::to_string(max_items));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string() || v[i].get_ref<const std::string&>().size() > max_bytes) {
      return InvalidArgument(std::string(field) + "[" + std::to_string(i) +
                             "]: must be a string of at most " + std::to_string(max_bytes) +
                             " bytes");
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

Status Api::RegisterSessions() {
  HttpServer& s = *ctx_.server;
  auto svc = [this](ResponseWriter& w) -> sessions::SessionService* {
    if (!ctx_.sessions) SendStatus(w, Unimplemented("sessions are not enabled"));
    return ctx_.sessions;
  };

  PADDOCK_RETURN_IF_ERROR(
      s.Route("POST", "/v1/sessions",
              WithAuth([this, svc](const Principal& who, const Request& req, ResponseWriter& w) {
                auto* sessions = svc(w);
                if (!sessions) return;
                auto body = ParseBody(req);
                if (!body.ok()) return SendStatus(w, body.status());
                const json& b = *body;
                for (const auto& [k, v] : b.items()) {
                  if (k != "user_id" && k != "metadata")
                    return SendStatus(w, InvalidArgument(k + ": unknown field"));
                }
                sessions::CreateSessionRequest cr;
                auto user = OptString(b, "user_id", 128);
                if (!user.ok()) return SendStatus(w, user.status());
                if (*user) cr.user_id = **user;
                if (b.contains("metadata")) {
                  if (!b["metadata"].is_object())
                    return SendStatus(w, InvalidArgument("metadata: must be an object"));
                  cr.metadata_json = b["metadata"].dump();
                  if (cr.metadata_json.size() > 16384)
                    return SendStatus(w, InvalidArgument("metadata: too large"));
                }
                auto session = sessions->CreateSession(who, cr);
                if (!session.ok()) return SendStatus(w, session.status());
                w.Send(JsonResponse(201, SessionJson(*session)));
              })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("GET", "/v1/sessions",
              WithAuth([svc](const Principal& who, const Request& req, ResponseWriter& w) {
                auto* sessions = svc(w);
                if (!sessions) return;
                auto limit = QueryInt(req, "limit", 100, 1, 1000);
                if (!limit.ok()) return SendStatus(w, limit.status());
                auto list = sessions->ListSessions(who, static_cast<int>(*limit));
                if (!list.ok()) return SendStatus(w, list.status());
                json items = json::array();
                for (const auto& r : *list) items.push_back(SessionJson(r));
                w.Send(JsonResponse(200, {{"items", items}}));
              })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("GET", "/v1/sessions/{id}",
              WithAuth([svc](const Principal& who, const Request& req, ResponseWriter& w) {
                auto* sessions = svc(w);
                if (!sessions) return;
                auto session = sessions->GetSession(who, req.Param("id"));
                if (!session.ok()) return SendStatus(w, session.status());
                w.Send(JsonResponse(200, SessionJson(*session)));
              })));

  PADDOCK_RETURN_IF_ERROR(s.Route(
      "DELETE", "/v1/sessions/{id}",
      WithAuth([svc](const Principal& who, const Request& req, ResponseWriter& w) {
        auto* sessions = svc(w);
        if (!sessions) return;
        auto purge = QueryInt(req, "purge", 0, 0, 1);
        if (!purge.ok()) return SendStatus(w, purge.status());
        Status st = sessions->CloseSession(who, req.Param("id"), *purge == 1, req.request_id);
        if (!st.ok()) return SendStatus(w, st);
        auto session = sessions->GetSession(who, req.Param("id"));
        if (!session.ok()) return SendStatus(w, session.status());
        w.Send(JsonResponse(200, SessionJson(*session)));
      })));

  // A run: planner → guard → reuse check → lease → commands → manifest → checkpoint.
  PADDOCK_RETURN_IF_ERROR(s.Route(
      "POST", "/v1/sessions/{id}/runs",
      WithAuth([this, svc](const Principal& who, const Request& req, ResponseWriter& w) {
        auto* sessions = svc(w);
        if (!sessions) return;
        auto body = ParseBody(req);
        if (!body.ok()) return SendStatus(w, body.status());
        const json& b = *body;
        for (const auto& [k, v] : b.items()) {
          if (k != "task" && k != "plan" && k != "commands" && k != "capabilities" &&
              k != "requires" && k != "checkpoint" && k != "class")
            return SendStatus(w, InvalidArgument(k + ": unknown field"));
        }
        sessions::RunRequest run;
        auto task = OptString(b, "task", 64 * 1024);
        if (!task.ok()) return SendStatus(w, task.status());
        run.task = task->value_or("");
        auto plan = StringList(b, "plan", 200, 8192);
        if (!plan.ok()) return SendStatus(w, plan.status());
        run.plan = *plan;
        auto commands = StringList(b, "commands", 100, 64 * 1024);
        if (!commands.ok()) return SendStatus(w, commands.status());
        run.commands = *commands;
        if (run.commands.empty())
          return SendStatus(w, InvalidArgument("commands: at least one command is required"));
        auto caps = StringList(b, "capabilities", 32, 64);
        if (!caps.ok()) return SendStatus(w, caps.status());
        run.capabilities = *caps;
        if (b.contains("requires")) {
          const json& r = b["requires"];
          if (!r.is_object()) return SendStatus(w, InvalidArgument("requires: must be an object"));
          for (const auto& [k, v] : r.items()) {
            if (k != "python" && k != "node")
              return SendStatus(w, InvalidArgument("requires." + k + ": unknown ecosystem"));
          }
          auto py = StringList(r, "python", 200, 256);
          if (!py.ok()) return SendStatus(w, InvalidArgument("requires." + py.status().message()));
          run.requires_python = *py;
          auto node = StringList(r, "node", 200, 256);
          if (!node.ok())
            return SendStatus(w, InvalidArgument("requires." + node.status().message()));
          run.requires_node = *node;
        }
        if (b.contains("checkpoint")) {
          if (!b["checkpoint"].is_boolean())
            return SendStatus(w, InvalidArgument("checkpoint: must be a boolean"));
          run.checkpoint = b["checkpoint"].get<bool>();
        }
        run.task_id = req.request_id;

        // Sizing: a class named by the caller, or the planner and the policy guard.
        sessions::PlannedSandbox planned;
        auto cls = OptString(b, "class", 64);
        if (!cls.ok()) return SendStatus(w, cls.status());
        json plan_request = {
            {"task", run.task}, {"plan_steps", run.plan}, {"commands", run.commands}};
        if (*cls) {
          planned.create.resource_class = **cls;
        } else {
          if (!ctx_.planner) return SendStatus(w, Unimplemented("no planner configured"));
          auto outcome = PlanForTenant(*ctx_.planner, *ctx_.store, who, plan_request, "");
          if (!outcome.ok()) return SendStatus(w, outcome.status());
          if (Status st =
                  ApplyPlan(*outcome, ctx_.manager->config(), req.request_id, &planned.create);
              !st.ok())
            return SendStatus(w, st);
          planned.plan = outcome->ToJson();
          planned.network_profile = outcome->decision.network_profile;
        }
        const ResourceClass* rc = ctx_.manager->config().FindClass(planned.create.resource_class);
        if (!rc) return SendStatus(w, InvalidArgument("class: unknown resource class"));
        if (planned.create.template_name.empty()) planned.create.template_name = rc->template_name;
        planned.runtime = rc->runtime;
        if (auto parsed = planner::PlanRequestFromJson(plan_request, ""); parsed.ok()) {
          for (const std::string& c : NeededCapabilities(*parsed)) {
            if (std::find(run.capabilities.begin(), run.capabilities.end(), c) ==
                run.capabilities.end())
              run.capabilities.push_back(c);
          }
        }
        auto result = sessions->Run(who, req.Param("id"), run, planned, req.request_id);
        if (!result.ok()) return SendStatus(w, result.status());
        w.Send(JsonResponse(201, RunJson(*result)));
      })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("GET", "/v1/sessions/{id}/runs",
              WithAuth([svc](const Principal& who, const Request& req, ResponseWriter& w) {
                auto* sessions = svc(w);
                if (!sessions) return;
                auto limit = QueryInt(req, "limit", 100, 1, 1000);
                if (!limit.ok()) return SendStatus(w, limit.status());
                auto runs = sessions->ListRuns(who, req.Param("id"), static_cast<int>(*limit));
                if (!runs.ok()) return SendStatus(w, runs.status());
                json items = json::array();
                for (const auto& r : *runs) items.push_back(RunJson(r));
                w.Send(JsonResponse(200, {{"items", items}}));
              })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("GET", "/v1/runs/{id}",
              WithAuth([svc](const Principal& who, const Request& req, ResponseWriter& w) {
                auto* sessions = svc(w);
                if (!sessions) return;
                auto run = sessions->GetRun(who, req.Param("id"));
                if (!run.ok()) return SendStatus(w, run.status());
                w.Send(JsonResponse(200, RunJson(*run)));
              })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("GET", "/v1/sessions/{id}/checkpoints",
              WithAuth([svc](const Principal& who, const Request& req, ResponseWriter& w) {
                auto* sessions = svc(w);
                if (!sessions) return;
                auto list = sessions->ListCheckpoints(who, req.Param("id"));
                if (!list.ok()) return SendStatus(w, list.status());
                json items = json::array();
                for (const auto& c : *list) items.push_back(CheckpointJson(c));
                w.Send(JsonResponse(200, {{"items", items}}));
              })));

  PADDOCK_RETURN_IF_ERROR(
      s.Route("POST", "/v1/sessions/{id}/fork",
              WithAuth([svc](const Principal& who, const Request& req, ResponseWriter& w) {
                auto* sessions = svc(w);
                if (!sessions) return;
                auto body = ParseBody(req);
                if (!body.ok()) return SendStatus(w, body.status());
                auto ck = OptString(*body, "checkpoint_id", 128);
                if (!ck.ok()) return SendStatus(w, ck.status());
                if (!*ck || (*ck)->empty())
                  return SendStatus(w, InvalidArgument("checkpoint_id: required"));
                auto sandbox = sessions->Fork(who, req.Param("id"), **ck, req.request_id);
                if (!sandbox.ok()) return SendStatus(w, sandbox.status());
                w.Send(JsonResponse(201, SandboxJson(*sandbox)));
              })));
  return Status::Ok();
}

}  // namespace

struct SandboxApi::Impl {
  explicit Impl(const ApiContext& ctx) : api(ctx) {}
  Api api;
};

SandboxApi::SandboxApi() = default;
SandboxApi::~SandboxApi() = default;

Result<std::unique_ptr<SandboxApi>> SandboxApi::Create(const ApiContext& ctx) {
  std::unique_ptr<SandboxApi> api(new SandboxApi());
  api->impl_ = std::make_unique<Impl>(ctx);
  PADDOCK_RETURN_IF_ERROR(api->impl_->api.Register());
  return api;
}

}  // namespace paddock::api
