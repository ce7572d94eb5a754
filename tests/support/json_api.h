// A JSON client of paddockd's REST API for integration tests and benchmarks: one keep-alive
// connection, the tenant's key on every call, the lease-version header when given.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/http_client.h"

namespace paddock::testing {

struct ApiReply {
  int status = 0;       // 0: the request did not complete (connection refused, reset, timeout)
  nlohmann::json body;  // discarded (is_discarded()) when the body is not JSON
  std::string raw;
};

class JsonApi {
 public:
  explicit JsonApi(uint16_t port, std::string key = "");

  // Sends `body` (null: no body) with `Authorization: Bearer <key>` (when the key is set) and
  // `Paddock-Lease-Version` (when lease_version > 0). Not thread-safe: one JsonApi per thread.
  ApiReply Call(std::string_view method, std::string_view target,
                const nlohmann::json& body = nullptr, int64_t lease_version = 0);

  const std::string& key() const { return key_; }

 private:
  api::HttpClient client_;
  std::string key_;
};

class DaemonProcess;
// Creates a tenant through the daemon's admin key; on 201 the body holds "tenant" and "api_key".
ApiReply CreateTenant(const DaemonProcess& daemon, const std::string& name);

// A paddockd config with one resource class "small" (1 CPU, `memory`, 32 MiB disk, 64 pids,
// 16 MiB /tmp) and no pools (naming classes drops the default pools), followed by `extra`
// YAML (top-level keys, e.g. "pools: [...]").
std::string SmallClassConfig(std::string_view memory = "128MiB", std::string_view extra = "");

// Sessions tests: planner rules that send browser work to class "browser" (everything else to
// "small"), history off for a single run.
inline constexpr const char* kSessionPlannerYaml = R"(
default_class: small
rules:
  - name: browser
    when:
      any_of: [cap:browser]
    class: browser
history:
  min_samples: 3
)";
// paddock.yaml with classes "small" and "browser" (1 CPU, 512 MiB, 32 MiB disk each) and the
// planner config at `planner_path`.
std::string SessionClassesConfig(const std::string& planner_path);

// Polls `pred` every 100 ms until it holds or `limit` passes; returns its last answer.
bool Eventually(const std::function<bool()>& pred,
                std::chrono::milliseconds limit = std::chrono::seconds(15));

}  // namespace paddock::testing
