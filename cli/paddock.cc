// paddock: the command-line client of paddockd's REST API (docs/api/openapi.yaml).
//
// Server URL and API key come from --url/--key or PADDOCK_URL/PADDOCK_API_KEY.
//
//   paddock create [--class C | --task TEXT [--command CMD]...] [--template T] [--ttl S]
//                  [--idle-timeout S] [-e K=V]...
//       with --task the planner sizes the sandbox and the policy guard decides (PLAN-1..2)
//   paddock plan TEXT [--command CMD]... [--step STEP]... [--json]
//       dry run: what the planner recommends and what the policy guard allows, with reasons
//   paddock list | get ID | rm ID | events ID | pools
//   paddock exec [--lease-version N] [--timeout S] [--user U] [--cwd D] [-e K=V]... ID -- CMD...
//       streams output, exits with the command's status; without --lease-version it leases the
//       sandbox for the duration of the command and releases it afterwards.
//   paddock cp LOCAL ID:PATH | paddock cp ID:PATH LOCAL
//   paddock pause ID | paddock resume ID

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/http_client.h"
#include "common/units.h"

namespace {

using nlohmann::json;
using paddock::api::HttpClient;

constexpr const char* kLeaseHeader = "Paddock-Lease-Version";

struct Cli {
  std::string url = "http://127.0.0.1:8780";
  std::string key;
  std::unique_ptr<HttpClient> client;

  paddock::api::Headers Headers(std::optional<int64_t> lease = std::nullopt) const {
    paddock::api::Headers h;
    if (!key.empty()) h.Set("Authorization", "Bearer " + key);
    if (lease) h.Set(kLeaseHeader, std::to_string(*lease));
    return h;
  }
};

[[noreturn]] void Die(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "paddock: %s\n", msg.c_str());
  std::exit(code);
}

// Sends a JSON request; on a non-2xx answer prints the server's error and exits.
json Call(Cli& cli, const std::string& method, const std::string& target, const json& body = {},
          std::optional<int64_t> lease = std::nullopt) {
  auto headers = cli.Headers(lease);
  std::string payload;
  if (!body.is_null()) {
    payload = body.dump();
    headers.Set("Content-Type", "application/json");
  }
  auto r = cli.client->Request(method, target, payload, headers);
  if (!r.ok()) Die(r.status().ToString());
  if (r->status < 200 || r->status >= 300) {
    std::string msg = "HTTP " + std::to_string(r->status);
    auto j = json::parse(r->body, nullptr, false);
    if (!j.is_discarded() && j.contains("error")) {
      msg += ": " + j["error"].value("code", "") + ": " + j["error"].value("message", "");
    }
    Die(msg);
  }
  if (r->body.empty()) return json();
  auto j = json::parse(r->body, nullptr, false);
  if (j.is_discarded()) Die("server sent invalid JSON");
  return j;
}

int64_t Seconds(const std::string& text, const char* field) {
  auto d = paddock::ParseDuration(text, field);
  if (!d.ok()) Die(d.status().message());
  return d->count() / 1000;
}

json EnvObject(const std::vector<std::string>& env) {
  json out = json::object();
  for (const auto& e : env) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) Die("--env: expected KEY=VALUE, got '" + e + "'");
    out[e.substr(0, eq)] = e.substr(eq + 1);
  }
  return out;
}

void PrintSandboxRow(const json& s) {
  std::printf("%-20s %-14s %-16s %s\n", s.value("id", "").c_str(), s.value("state", "").c_str(),
              s.value("resource_class", "").c_str(), s.value("template", "").c_str());
}

// Streams an exec (NDJSON events) to this terminal; returns the command's shell status.
int StreamExec(Cli& cli, const std::string& id, const json& body, int64_t lease) {
  auto headers = cli.Headers(lease);
  headers.Set("Content-Type", "application/json");
  std::string pending;
  int status = 1;
  bool got_exit = false;
  auto on_chunk = [&](std::string_view chunk) -> bool {
    pending.append(chunk);
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      auto ev = json::parse(pending.substr(0, nl), nullptr, false);
      pending.erase(0, nl + 1);
      if (ev.is_discarded()) continue;
      const std::string type = ev.value("type", "");
      if (type == "stdout" || type == "stderr") {
        const std::string data = ev.value("data", "");
        FILE* f = type == "stdout" ? stdout : stderr;
        std::fwrite(data.data(), 1, data.size(), f);
        std::fflush(f);
      } else if (type == "exit") {
        got_exit = true;
        int sig = ev.value("signal", 0);
        status = sig ? 128 + sig : ev.value("exit_code", 1);
        if (ev.value("timed_out", false)) std::fprintf(stderr, "paddock: command timed out\n");
        if (ev.value("oom_killed", false)) std::fprintf(stderr, "paddock: out of memory\n");
      } else if (type == "error") {
        std::fprintf(stderr, "paddock: %s\n", ev.value("message", "error").c_str());
      }
    }
    return true;
  };
  auto r = cli.client->RequestStream("POST", "/v1/sandboxes/" + id + "/exec/stream", body.dump(),
                                     headers, on_chunk);
  if (!r.ok()) Die(r.status().ToString());
  if (r->status < 200 || r->status >= 300) {
    auto j = json::parse(r->body, nullptr, false);
    Die("HTTP " + std::to_string(r->status) + ": " +
        (j.is_discarded() ? r->body : j["error"].value("message", "")));
  }
  if (!got_exit) Die("stream ended without an exit event");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli;
  if (const char* u = std::getenv("PADDOCK_URL")) cli.url = u;
  if (const char* k = std::getenv("PADDOCK_API_KEY")) cli.key = k;

  CLI::App app{"paddock: client for the Paddock sandbox control plane"};
  app.require_subcommand(1);
  app.add_option("--url", cli.url, "Server URL (PADDOCK_URL)");
  app.add_option("--key", cli.key, "API key (PADDOCK_API_KEY)");

  std::string cls, tpl, ttl, idle, session;
  std::vector<std::string> env;
  auto* create = app.add_subcommand("create", "Create a sandbox");
  create->add_option("--class", cls, "Resource class");
  create->add_option("--template", tpl, "Template");
  create->add_option("--ttl", ttl, "Absolute lifetime (e.g. 1h)");
  create->add_option("--idle-timeout", idle, "Idle timeout (e.g. 10m)");
  create->add_option("--session", session, "Session id");
  create->add_option("-e,--env", env, "KEY=VALUE");

  std::string task;
  std::vector<std::string> task_commands, task_steps;
  create->add_option("--task", task, "Describe the task; the planner picks the class");
  create->add_option("--command", task_commands, "A command the task will run (with --task)");
  auto* plan = app.add_subcommand("plan", "Dry run of the planner and the policy guard");
  plan->add_option("task", task, "The task, in words")->required();
  plan->add_option("--command", task_commands, "A command the task will run");
  plan->add_option("--step", task_steps, "A step of the agent's plan");
  bool plan_json = false;
  plan->add_flag("--json", plan_json, "Print the whole answer as JSON");
  auto* list = app.add_subcommand("list", "List sandboxes");
  std::string id;
  auto* get = app.add_subcommand("get", "Show a sandbox");
  get->add_option("id", id)->required();
  auto* rm = app.add_subcommand("rm", "Destroy a sandbox");
  rm->add_option("id", id)->required();
  auto* events = app.add_subcommand("events", "A sandbox's lifecycle events");
  events->add_option("id", id)->required();
  auto* pools = app.add_subcommand("pools", "Resource classes and warm pools");
  auto* pause = app.add_subcommand("pause", "Freeze a sandbox");
  pause->add_option("id", id)->required();
  auto* resume = app.add_subcommand("resume", "Thaw a sandbox");
  resume->add_option("id", id)->required();

  int64_t lease_version = -1;
  std::string timeout = "0", user, cwd;
  std::vector<std::string> command;
  auto* exec = app.add_subcommand("exec", "Run a command in a sandbox");
  exec->add_option("--lease-version", lease_version, "Use this lease instead of leasing");
  exec->add_option("--timeout", timeout, "Kill the command after this long (0 = server default)");
  exec->add_option("--user", user, "sandbox | root");
  exec->add_option("--cwd", cwd, "Working directory");
  exec->add_option("-e,--env", env, "KEY=VALUE");
  exec->add_option("id", id)->required();
  exec->add_option("command", command)->required();

  std::string src, dst;
  auto* cp = app.add_subcommand("cp", "Copy a file: LOCAL ID:PATH or ID:PATH LOCAL");
  cp->add_option("src", src)->required();
  cp->add_option("dst", dst)->required();
  for (auto* sub : {pause, resume, cp}) {
    sub->add_option("--lease-version", lease_version, "Use this lease instead of leasing");
  }

  CLI11_PARSE(app, argc, argv);
  auto base = paddock::api::ParseBaseUrl(cli.url);
  if (!base.ok()) Die("--url: " + base.status().message());
  cli.client = std::make_unique<HttpClient>(*base);

  // Commands that need a lease take one for their duration unless given --lease-version.
  auto with_lease = [&](const std::string& sandbox, auto&& fn) -> int {
    if (lease_version >= 0) return fn(lease_version);
    json lease = Call(cli, "POST", "/v1/sandboxes/" + sandbox + "/lease",
                      {{"owner", "cli:" + std::to_string(getpid())}, {"ttl_seconds", 3600}});
    int64_t v = lease.value("lease_version", int64_t{-1});
    int rc = fn(v);
    Call(cli, "POST", "/v1/sandboxes/" + sandbox + "/lease/release",
         {{"lease_version", v}, {"recycle", "keep"}});
    return rc;
  };

  auto intent = [&] {
    json i = {{"task", task}};
    if (!task_commands.empty()) i["commands"] = task_commands;
    if (!task_steps.empty()) i["plan_steps"] = task_steps;
    return i;
  };
  if (plan->parsed()) {
    json p = Call(cli, "POST", "/v1/plan", intent());
    if (plan_json) {
      std::printf("%s\n", p.dump(2).c_str());
      return 0;
    }
    const json& in = p["intent"];
    const json& d = p["decision"];
    std::printf("planner:  %s -> %s, %.1f CPU, %lld MiB (confidence %.2f, signature %s)\n",
                in.value("planner", "").c_str(), in.value("resource_class", "").c_str(),
                in.value("cpu", 0.0), static_cast<long long>(in.value("memory_mb", int64_t{0})),
                in.value("confidence", 0.0), in.value("workload_signature", "").c_str());
    for (const auto& r : in["reasons"]) std::printf("  - %s\n", r.get<std::string>().c_str());
    if (!d.value("allowed", false)) {
      std::printf("policy:   DENIED: %s\n", d.value("denial", "").c_str());
      return 1;
    }
    std::printf("policy:   %s %s, %.1f CPU, %lld MiB, ttl %llds, network %s\n",
                d.value("clamped", false) ? "adjusted to" : "approved",
                d.value("resource_class", "").c_str(), d.value("cpu", 0.0),
                static_cast<long long>(d.value("memory_mb", int64_t{0})),
                static_cast<long long>(d.value("ttl_seconds", int64_t{0})),
                d.value("network_profile", "").c_str());
    for (const auto& r : d["reasons"]) std::printf("  - %s\n", r.get<std::string>().c_str());
    return 0;
  }
  if (create->parsed()) {
    json body = json::object();
    if (!task.empty()) {
      if (!cls.empty()) Die("create: --task and --class exclude each other");
      body["intent"] = intent();
    }
    if (!cls.empty()) body["class"] = cls;
    if (!tpl.empty()) body["template"] = tpl;
    if (!ttl.empty()) body["ttl_seconds"] = Seconds(ttl, "--ttl");
    if (!idle.empty()) body["idle_timeout_seconds"] = Seconds(idle, "--idle-timeout");
    if (!session.empty()) body["session_id"] = session;
    if (!env.empty()) body["env"] = EnvObject(env);
    json s = Call(cli, "POST", "/v1/sandboxes", body);
    std::printf("%s\n", s.value("id", "").c_str());
    return 0;
  }
  if (list->parsed()) {
    std::string after;
    do {
      std::string target = "/v1/sandboxes?limit=100" + (after.empty() ? "" : "&after=" + after);
      json page = Call(cli, "GET", target);
      for (const auto& s : page["items"]) PrintSandboxRow(s);
      after = page.value("next", "");
    } while (!after.empty());
    return 0;
  }
  if (get->parsed()) {
    std::printf("%s\n", Call(cli, "GET", "/v1/sandboxes/" + id).dump(2).c_str());
    return 0;
  }
  if (rm->parsed()) {
    Call(cli, "DELETE", "/v1/sandboxes/" + id);
    return 0;
  }
  if (events->parsed()) {
    json page = Call(cli, "GET", "/v1/sandboxes/" + id + "/events?limit=1000");
    for (const auto& e : page["items"]) {
      const time_t secs = static_cast<time_t>(e.value("time_ms", int64_t{0}) / 1000);
      char when[32];
      std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&secs));
      std::printf("%-20s %-16s %-14s -> %-14s %s\n", when, e.value("type", "").c_str(),
                  e.value("old_state", "").c_str(), e.value("new_state", "").c_str(),
                  e.value("reason", "").c_str());
    }
    return 0;
  }
  if (pools->parsed()) {
    json p = Call(cli, "GET", "/v1/pools");
    std::printf("%-16s %5s %5s %6s %6s %6s\n", "CLASS", "WARM", "LEASED", "MIN", "MAX", "BUFFER");
    for (const auto& e : p["items"]) {
      std::printf("%-16s %5d %5d %6d %6d %6d\n", e.value("class", "").c_str(), e.value("warm", 0),
                  e.value("leased", 0), e.value("min", 0), e.value("max", 0), e.value("buffer", 0));
    }
    return 0;
  }
  if (pause->parsed() || resume->parsed()) {
    const std::string verb = pause->parsed() ? "pause" : "resume";
    return with_lease(id, [&](int64_t v) {
      Call(cli, "POST", "/v1/sandboxes/" + id + "/" + verb, json::object(), v);
      return 0;
    });
  }
  if (exec->parsed()) {
    json body = {{"argv", command}};
    if (timeout != "0") body["timeout_seconds"] = Seconds(timeout, "--timeout");
    if (!user.empty()) body["user"] = user;
    if (!cwd.empty()) body["cwd"] = cwd;
    if (!env.empty()) body["env"] = EnvObject(env);
    return with_lease(id, [&](int64_t v) { return StreamExec(cli, id, body, v); });
  }
  if (cp->parsed()) {
    auto split = [](const std::string& s) -> std::pair<std::string, std::string> {
      auto colon = s.find(':');
      if (colon == std::string::npos || colon == 0) return {"", s};
      return {s.substr(0, colon), s.substr(colon + 1)};
    };
    auto [src_id, src_path] = split(src);
    auto [dst_id, dst_path] = split(dst);
    if (src_id.empty() == dst_id.empty()) Die("cp: exactly one side must be ID:PATH");
    const std::string sandbox = src_id.empty() ? dst_id : src_id;
    return with_lease(sandbox, [&](int64_t v) {
      auto headers = cli.Headers(v);
      if (!dst_id.empty()) {  // upload
        std::ifstream in(src_path, std::ios::binary);
        if (!in) Die("cp: cannot read " + src_path);
        std::stringstream data;
        data << in.rdbuf();
        headers.Set("Content-Type", "application/octet-stream");
        auto r = cli.client->Request(
            "PUT",
            "/v1/sandboxes/" + sandbox + "/files" + paddock::api::PercentEncode(dst_path, true),
            data.str(), headers);
        if (!r.ok()) Die(r.status().ToString());
        if (r->status >= 300) Die("HTTP " + std::to_string(r->status) + ": " + r->body);
      } else {  // download
        auto r = cli.client->Request(
            "GET",
            "/v1/sandboxes/" + sandbox + "/files" + paddock::api::PercentEncode(src_path, true), "",
            headers);
        if (!r.ok()) Die(r.status().ToString());
        if (r->status >= 300) Die("HTTP " + std::to_string(r->status) + ": " + r->body);
        std::ofstream out(dst_path, std::ios::binary | std::ios::trunc);
        out.write(r->body.data(), static_cast<std::streamsize>(r->body.size()));
        if (!out) Die("cp: cannot write " + dst_path);
      }
      return 0;
    });
  }
  return 0;
}
