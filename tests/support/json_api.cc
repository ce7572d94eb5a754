#include "support/json_api.h"

#include <thread>

#include "support/daemon_process.h"

namespace paddock::testing {

JsonApi::JsonApi(uint16_t port, std::string key)
    : client_("127.0.0.1", port), key_(std::move(key)) {}

ApiReply JsonApi::Call(std::string_view method, std::string_view target, const nlohmann::json& body,
                       int64_t lease_version) {
  api::Headers h;
  if (!key_.empty()) h.Set("Authorization", "Bearer " + key_);
  if (lease_version > 0) h.Set("Paddock-Lease-Version", std::to_string(lease_version));
  auto r = client_.Request(method, target, body.is_null() ? "" : body.dump(), h);
  ApiReply out;
  if (!r.ok()) {
    out.raw = r.status().ToString();
    return out;
  }
  out.status = r->status;
  out.raw = std::move(r->body);
  out.body = nlohmann::json::parse(out.raw, nullptr, false);
  return out;
}

ApiReply CreateTenant(const DaemonProcess& daemon, const std::string& name) {
  return JsonApi(daemon.port(), daemon.admin_key()).Call("POST", "/v1/tenants", {{"name", name}});
}

std::string SmallClassConfig(std::string_view memory, std::string_view extra) {
  std::string yaml = R"(resource_classes:
  - name: small
    cpus: 1
    memory: )";
  yaml += memory;
  yaml += R"(
    disk: 32MiB
    pids: 64
    tmp: 16MiB
)";
  yaml += extra;
  return yaml;
}

std::string SessionClassesConfig(const std::string& planner_path) {
  return SmallClassConfig("512MiB", R"(  - name: browser
    cpus: 1
    memory: 512MiB
    disk: 32MiB
    pids: 64
    tmp: 16MiB
lifecycle:
  reconcile_interval: 300ms
planner_config: )" + planner_path + "\n");
}

bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

}  // namespace paddock::testing
