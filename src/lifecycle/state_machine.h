// The sandbox lifecycle state machine (SPEC LC-1): the states a sandbox row can be in and the
// only transitions between them. The lifecycle manager, recycler and reconciler move a sandbox
// exclusively through CheckTransition, so every change of state is one of the edges below and
// can be recorded as an event (old state, new state, trigger, reason, request id, time).
//
// Main paths (trigger names on the arrows):
//
//   Requested --plan--> Planning --allocate--> Allocating --provision--+
//       |                                                              v
//       +------------------- provision (nothing to plan) ------->  Provisioning
//                                                                      |
//                                                                      | provisioned
//                                                                      v
//       +------------------------ sanitized ---------------------->  Ready  <----------+
//       |                                                              |               |
//       |                                                              | lease         |
//       |                                                              v               |
//   Sanitizing                                                      Locking -----------+
//       ^                                                              |      lock_aborted
//       | soft_reset (same tenant)                                     | locked
//       |                                                              v
//   Recycling <------------------ release ------------------------  Leased --exec_start--> Running
//     ^   |                                                         |  ^  ^ <--exec_done--
//     |   | destroy (hard destroy)                      reuse_check |  |  |
//     |   v                                                         v  |  | idle / activity
//     |  Terminated                                    ReuseChecking --+  |
//     |                                                      |   reuse_ok   v
//     +----------------- reuse_rejected ---------------------+          Idle
//
//   Leased, Idle --pause--> Hibernating --resume--> Leased, Idle   (also TTL expiry when the
//                                                                   expiry action is "pause")
//   Idle --exec_start--> Running;   Idle --reuse_check--> ReuseChecking;
//   Idle, Hibernating --release--> Recycling
//
// Endings, from every state where they make sense:
//   any non-terminal state except Lost      --destroy-->  Terminated  (API destroy, TTL expiry
//                                                                      with expiry_action destroy,
//                                                                      cancelling a queued create)
//   any non-terminal state                  --fail----->  Failed
//   any state with a runtime object         --lost----->  Lost        (reconciler: the runtime
//     (Provisioning .. Hibernating)                                    object vanished)
//   Lost                                    --cleanup-->  Terminated  (lease released, tokens
//                                                                      revoked, leftovers removed)
//
// Decisions worth knowing:
// - Terminated and Failed are terminal: nothing leaves them. Lost is not: the reconciler still
//   owes cleanup, after which the row becomes Terminated.
// - A sandbox only runs commands under a lease: Ready never goes to Running, and a lease is only
//   granted through Locking, where identity, credentials, network policy and mounts are bound
//   (POOL-3). Locking -> Ready is only for a lock that was not granted (nothing bound yet).
// - Running is "an exec in flight". It cannot pause or be released directly; the in-flight exec
//   finishes or is cancelled first (Running -> Leased), so the recycler never races a command.
//   Destroy, fail and lost still apply: they kill it.
// - Recycled sandboxes return to Ready only through Sanitizing (soft reset). Anything the
//   recycler cannot prove clean (cross-tenant, violation, unknown pollution, runtime fault) is
//   hard-destroyed: Recycling/Sanitizing -> Terminated (LC-3).
// - Self-transitions are not edges: a second concurrent exec keeps the sandbox Running.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace paddock::lifecycle {

enum class SandboxState {
  kRequested,
  kPlanning,
  kAllocating,
  kProvisioning,
  kLocking,
  kReady,
  kLeased,
  kRunning,
  kIdle,
  kReuseChecking,
  kRecycling,
  kSanitizing,
  kHibernating,
  kTerminated,
  kFailed,
  kLost,
};

inline constexpr size_t kSandboxStateCount = static_cast<size_t>(SandboxState::kLost) + 1;

// One edge of the state machine. `trigger` names the operation or event that causes it
// ("lease", "release", "destroy", ...); it is a static string.
struct Transition {
  SandboxState from;
  SandboxState to;
  const char* trigger;
};

// Every state, in declaration order.
std::span<const SandboxState> AllStates();

// The whole transition table (each (from, to) pair appears once).
std::span<const Transition> AllTransitions();

// snake_case name ("reuse_checking"); stable, used in the registry and the API.
const char* StateName(SandboxState state);

// Inverse of StateName (exact match). kInvalidArgument for anything else.
Result<SandboxState> ParseState(std::string_view name);

// Terminated and Failed: no transition leaves them.
bool IsTerminal(SandboxState state);

// States that only last while an operation is in progress, so a daemon crash can leave a row
// stuck in them; the reconciler resolves such rows at start-up.
bool IsTransitional(SandboxState state);

// OK when from -> to is in the table; kFailedPrecondition "invalid transition <from> -> <to>"
// otherwise. Thread-safe (pure).
Status CheckTransition(SandboxState from, SandboxState to);

// The trigger name of from -> to, or nullptr when that transition is not allowed.
const char* TransitionTrigger(SandboxState from, SandboxState to);

// The states reachable from `from` in one step, in table order.
std::vector<SandboxState> AllowedFrom(SandboxState from);

}  // namespace paddock::lifecycle
