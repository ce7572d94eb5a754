#include "runtime/runtime.h"

namespace paddock::runtime {

const char* SandboxStateName(SandboxState s) {
  switch (s) {
    case SandboxState::kRunning:
      return "running";
    case SandboxState::kPaused:
      return "paused";
    case SandboxState::kDead:
      return "dead";
  }
  return "unknown";
}

}  // namespace paddock::runtime
