#include "lifecycle/state_machine.h"

#include <array>
#include <iterator>
#include <string>

namespace paddock::lifecycle {

namespace {

using S = SandboxState;

constexpr std::array<SandboxState, kSandboxStateCount> kAllStates = {
    S::kRequested,   S::kPlanning,      S::kAllocating, S::kProvisioning,
    S::kLocking,     S::kReady,         S::kLeased,     S::kRunning,
    S::kIdle,        S::kReuseChecking, S::kRecycling,  S::kSanitizing,
    S::kHibernating, S::kTerminated,    S::kFailed,     S::kLost,
};

// The whole state machine. Anything not listed is an invalid transition. Grouped by what
// causes it; the header draws the picture.
constexpr Transition kTransitions[] = {
    // Create.
    {S::kRequested, S::kPlanning, "plan"},
    {S::kRequested, S::kProvisioning, "provision"},  // resource class given: nothing to plan
    {S::kPlanning, S::kAllocating, "allocate"},
    {S::kAllocating, S::kProvisioning, "provision"},
    {S::kProvisioning, S::kReady, "provisioned"},

    // Lease a warm sandbox. Late binding (identity, credentials, network, mounts) happens in
    // Locking; a lock that is not granted returns the untouched sandbox to the pool.
    {S::kReady, S::kLocking, "lease"},
    {S::kLocking, S::kLeased, "locked"},
    {S::kLocking, S::kReady, "lock_aborted"},

    // Use under the lease.
    {S::kLeased, S::kRunning, "exec_start"},
    {S::kIdle, S::kRunning, "exec_start"},
    {S::kRunning, S::kLeased, "exec_done"},
    {S::kLeased, S::kIdle, "idle"},
    {S::kIdle, S::kLeased, "activity"},

    // Pause / resume (also the "pause" expiry action).
    {S::kLeased, S::kHibernating, "pause"},
    {S::kIdle, S::kHibernating, "pause"},
    {S::kHibernating, S::kLeased, "resume"},
    {S::kHibernating, S::kIdle, "resume"},

    // Reuse check before a held sandbox takes a new task (REUSE-3).
    {S::kLeased, S::kReuseChecking, "reuse_check"},
    {S::kIdle, S::kReuseChecking, "reuse_check"},
    {S::kReuseChecking, S::kLeased, "reuse_ok"},
    {S::kReuseChecking, S::kRecycling, "reuse_rejected"},

    // Release and recycle: soft reset back to the pool, or hard destroy (Recycling -> Terminated
    // below). A sanitizer that cannot prove the sandbox clean also ends in Terminated.
    {S::kLeased, S::kRecycling, "release"},
    {S::kIdle, S::kRecycling, "release"},
    {S::kHibernating, S::kRecycling, "release"},
    {S::kRecycling, S::kSanitizing, "soft_reset"},
    {S::kSanitizing, S::kReady, "sanitized"},

    // Destroy: the API, TTL expiry, a cancelled create, a hard recycle. Every non-terminal state
    // except Lost (whose runtime object is already gone; it goes through cleanup).
    {S::kRequested, S::kTerminated, "destroy"},
    {S::kPlanning, S::kTerminated, "destroy"},
    {S::kAllocating, S::kTerminated, "destroy"},
    {S::kProvisioning, S::kTerminated, "destroy"},
    {S::kLocking, S::kTerminated, "destroy"},
    {S::kReady, S::kTerminated, "destroy"},
    {S::kLeased, S::kTerminated, "destroy"},
    {S::kRunning, S::kTerminated, "destroy"},
    {S::kIdle, S::kTerminated, "destroy"},
    {S::kReuseChecking, S::kTerminated, "destroy"},
    {S::kRecycling, S::kTerminated, "destroy"},
    {S::kSanitizing, S::kTerminated, "destroy"},
    {S::kHibernating, S::kTerminated, "destroy"},

    // Failure: from every non-terminal state.
    {S::kRequested, S::kFailed, "fail"},
    {S::kPlanning, S::kFailed, "fail"},
    {S::kAllocating, S::kFailed, "fail"},
    {S::kProvisioning, S::kFailed, "fail"},
    {S::kLocking, S::kFailed, "fail"},
    {S::kReady, S::kFailed, "fail"},
    {S::kLeased, S::kFailed, "fail"},
    {S::kRunning, S::kFailed, "fail"},
    {S::kIdle, S::kFailed, "fail"},
    {S::kReuseChecking, S::kFailed, "fail"},
    {S::kRecycling, S::kFailed, "fail"},
    {S::kSanitizing, S::kFailed, "fail"},
    {S::kHibernating, S::kFailed, "fail"},
    {S::kLost, S::kFailed, "fail"},

    // Reconciler (LC-4): the runtime object vanished. Only states that have one; a row still in
    // Requested/Planning/Allocating has nothing on the host to lose.
    {S::kProvisioning, S::kLost, "lost"},
    {S::kLocking, S::kLost, "lost"},
    {S::kReady, S::kLost, "lost"},
    {S::kLeased, S::kLost, "lost"},
    {S::kRunning, S::kLost, "lost"},
    {S::kIdle, S::kLost, "lost"},
    {S::kReuseChecking, S::kLost, "lost"},
    {S::kRecycling, S::kLost, "lost"},
    {S::kSanitizing, S::kLost, "lost"},
    {S::kHibernating, S::kLost, "lost"},
    {S::kLost, S::kTerminated, "cleanup"},
};

constexpr size_t Index(SandboxState s) { return static_cast<size_t>(s); }

// No pair twice, nothing out of a terminal state, no self-transitions: checked at compile time.
constexpr bool TableIsWellFormed() {
  for (size_t i = 0; i < std::size(kTransitions); ++i) {
    const Transition& t = kTransitions[i];
    if (t.from == t.to || t.from == S::kTerminated || t.from == S::kFailed) return false;
    for (size_t j = 0; j < i; ++j) {
      if (kTransitions[j].from == t.from && kTransitions[j].to == t.to) return false;
    }
  }
  return true;
}
static_assert(TableIsWellFormed(), "kTransitions: duplicate, self or out-of-terminal transition");

// kTrigger[from][to]: the trigger of the allowed transition, nullptr when it is not allowed.
using TriggerMatrix = std::array<std::array<const char*, kSandboxStateCount>, kSandboxStateCount>;

constexpr TriggerMatrix BuildTriggerMatrix() {
  TriggerMatrix m{};
  for (const Transition& t : kTransitions) m[Index(t.from)][Index(t.to)] = t.trigger;
  return m;
}

constexpr TriggerMatrix kTrigger = BuildTriggerMatrix();

constexpr const char* kNames[kSandboxStateCount] = {
    "requested",   "planning",   "allocating", "provisioning",   "locking",   "ready",
    "leased",      "running",    "idle",       "reuse_checking", "recycling", "sanitizing",
    "hibernating", "terminated", "failed",     "lost",
};

}  // namespace

std::span<const SandboxState> AllStates() { return kAllStates; }

std::span<const Transition> AllTransitions() { return kTransitions; }

const char* StateName(SandboxState state) {
  size_t i = Index(state);
  return i < kSandboxStateCount ? kNames[i] : "unknown";
}

Result<SandboxState> ParseState(std::string_view name) {
  for (SandboxState s : kAllStates) {
    if (name == kNames[Index(s)]) return s;
  }
  return InvalidArgument("unknown sandbox state '" + std::string(name) + "'");
}

bool IsTerminal(SandboxState state) { return state == S::kTerminated || state == S::kFailed; }

bool IsTransitional(SandboxState state) {
  switch (state) {
    case S::kRequested:
    case S::kPlanning:
    case S::kAllocating:
    case S::kProvisioning:
    case S::kLocking:
    case S::kReuseChecking:
    case S::kRecycling:
    case S::kSanitizing:
      return true;
    default:
      return false;
  }
}

const char* TransitionTrigger(SandboxState from, SandboxState to) {
  if (Index(from) >= kSandboxStateCount || Index(to) >= kSandboxStateCount) return nullptr;
  return kTrigger[Index(from)][Index(to)];
}

Status CheckTransition(SandboxState from, SandboxState to) {
  if (TransitionTrigger(from, to) != nullptr) return Status::Ok();
  return FailedPrecondition(std::string("invalid transition ") + StateName(from) + " -> " +
                            StateName(to));
}

std::vector<SandboxState> AllowedFrom(SandboxState from) {
  std::vector<SandboxState> out;
  for (const Transition& t : kTransitions) {
    if (t.from == from) out.push_back(t.to);
  }
  return out;
}

}  // namespace paddock::lifecycle
