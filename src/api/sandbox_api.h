// The REST API of paddockd (docs/api/openapi.yaml): authentication, validation and the
// mapping of HTTP onto the lifecycle manager. No lifecycle logic lives here.
#pragma once

#include <functional>
#include <memory>

#include "api/http_server.h"
#include "api/metrics.h"
#include "common/clock.h"
#include "lifecycle/sandbox_manager.h"
#include "planner/planner_stack.h"
#include "registry/store.h"
#include "sessions/session_service.h"

namespace paddock::api {

// Header carrying the lease version (the fencing token) on exec, file, pause and resume calls.
inline constexpr const char* kLeaseVersionHeader = "Paddock-Lease-Version";

struct ApiContext {
  HttpServer* server = nullptr;
  lifecycle::SandboxManager* manager = nullptr;
  registry::Store* store = nullptr;
  MetricsRegistry* metrics = nullptr;
  const Clock* clock = nullptr;
  // Resource planner and policy guard for creates that describe a task instead of naming a
  // class, and for POST /v1/plan. Null: those answer 501.
  const planner::PlannerStack* planner = nullptr;
  // Sessions and runs (/v1/sessions...). Null: those answer 501.
  sessions::SessionService* sessions = nullptr;
  // Readiness: true once the start-up reconciliation has finished.
  std::function<bool()> ready;
};

// The routes of the API. Create registers them on ctx.server; the object (which the routes
// refer to) and everything ctx points to must outlive the server.
class SandboxApi {
 public:
  static Result<std::unique_ptr<SandboxApi>> Create(const ApiContext& ctx);
  ~SandboxApi();

 private:
  SandboxApi();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace paddock::api
