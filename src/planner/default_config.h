// Which planner configuration paddockd runs with.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "planner/rules.h"

namespace paddock::planner {

// config/planner.yaml as shipped (compiled in).
const char* ShippedPlannerYaml();

// `path` set: that file, strictly (any error is the daemon's start-up error). `path` empty: the
// shipped configuration when it fits the configured classes; when it names classes the
// operator's paddock.yaml does not have, the minimal configuration (everything gets the
// smallest class, every class allowed) with a note saying so, so a custom class list still
// starts.
Result<PlannerConfig> LoadDaemonPlannerConfig(const std::string& path,
                                              const std::vector<ResourceClass>& classes,
                                              std::vector<std::string>* notes);

}  // namespace paddock::planner
