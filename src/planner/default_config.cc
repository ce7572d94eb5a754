#include "planner/default_config.h"

namespace paddock::planner {

Result<PlannerConfig> LoadDaemonPlannerConfig(const std::string& path,
                                              const std::vector<ResourceClass>& classes,
                                              std::vector<std::string>* notes) {
  if (!path.empty()) return LoadPlannerConfigFile(path, classes);
  auto shipped = ParsePlannerConfig(ShippedPlannerYaml(), classes);
  if (shipped.ok()) return shipped;
  notes->push_back("planner: the shipped rules do not fit the configured classes (" +
                   shipped.status().message() +
                   "); using the minimal planner (smallest class, every class allowed). Set "
                   "planner_config to a planner.yaml written for these classes.");
  return MinimalPlannerConfig(classes);
}

}  // namespace paddock::planner
