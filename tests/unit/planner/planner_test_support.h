// Shared fixtures for the planner tests: the default classes, the shipped planner.yaml and a
// fake usage history.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "planner/history.h"
#include "planner/plan_request.h"
#include "planner/rules.h"

namespace paddock::planner::testing {

inline std::vector<ResourceClass> DefaultClasses() { return DefaultConfig().resource_classes; }

// config/planner.yaml from the source tree, parsed against the default classes.
inline PlannerConfig ShippedConfig() {
  auto r = LoadPlannerConfigFile(std::string(PADDOCK_SOURCE_DIR) + "/config/planner.yaml",
                                 DefaultClasses());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : PlannerConfig{};
}

inline PlanRequest Task(std::string task, std::vector<std::string> commands = {},
                        std::vector<std::string> steps = {}) {
  PlanRequest r;
  r.tenant_id = "t1";
  r.task = std::move(task);
  r.commands = std::move(commands);
  r.plan_steps = std::move(steps);
  return r;
}

// Answers Stats() from maps keyed by signature, one per kind; records the last lookups.
class FakeHistory : public UsageHistory {
 public:
  Result<SignatureStats> Stats(const std::string& tenant_id, registry::SignatureKind kind,
                               const std::string& signature) override {
    last_tenant = tenant_id;
    if (!error.ok()) return error;
    if (kind == registry::SignatureKind::kCommand) {
      last_command_signature = signature;
      auto it = commands.find(signature);
      return it != commands.end() ? it->second : SignatureStats{};
    }
    last_signature = signature;
    auto it = stats.find(signature);
    if (it != stats.end()) return it->second;
    if (any) return *any;
    return SignatureStats{};
  }

  std::map<std::string, SignatureStats> stats;     // workload signature -> stats
  std::optional<SignatureStats> any;               // answer for every workload signature
  std::map<std::string, SignatureStats> commands;  // command signature -> stats
  Status error;
  std::string last_tenant, last_signature, last_command_signature;
};

}  // namespace paddock::planner::testing
