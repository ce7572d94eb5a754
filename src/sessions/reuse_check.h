// The reuse check (REUSE-3/4): before a session's next run reuses its sandbox, the control plane
// must PROVE the sandbox is compatible — never "the sandbox id still exists", never "reuse and
// see". A deterministic, pure function from what the registry and the runtime know about the
// session's sandbox (and its checkpoints) to one of four actions:
//
//   reuse                the sandbox passes every check and its dependencies satisfy the run
//                        (missing ones are installed incrementally);
//   reuse_separate_venv  it passes every check but a few installed packages violate the run's
//                        specs: they go into a separate venv (node: a separate node_modules
//                        prefix), the existing environment is never downgraded in place;
//   fork_checkpoint      a clean earlier checkpoint of the same session fits (seed 5.6: branch
//                        from a clean commit instead of repairing a polluted environment);
//   new_sandbox          nothing can be proven compatible.
//
// The REUSE-4 boundaries are absolute: a sandbox of another tenant, user or session, a tainted
// one or one with policy violations is never reused whatever its score. Checkpoints of another
// tenant, user or session are never forked whatever they contain.
//
// Checks on the current sandbox, in order (the first failing one decides; `reason` is its code):
//   tenant_mismatch, user_mismatch, session_mismatch, tainted, policy_violation, unhealthy,
//   busy (state not "Ready"), unknown_environment (no manifest, a truncated one, or one whose
//   fingerprint differs from the one the registry recorded), security_context_mismatch
//   (network profile or secret scope: a boundary, so before any compatibility question),
//   runtime_capability_mismatch (first of the compatibility checks: a browser run meeting a
//   Python sandbox also changes class and template, but the missing capability is the cause —
//   seed 7.7 turn 3), runtime_changed, template_changed (name or digest),
//   resource_class_mismatch, workspace_mismatch, then the dependencies (dependency_conflict,
//   or low_compatibility_score when the score is below min_reuse_score).
// A failure of the sandbox ITSELF that says nothing about the session's checkpoints (session,
// health, busy, unknown environment, runtime/template/class/workspace/capability change,
// dependencies) falls back to the best compatible checkpoint of this session. A security failure
// (tenant, user, taint, violation, security context) never does: a checkpoint may have been
// taken after the pollution began (taint is flagged when detected, not when it happened), and a
// checkpoint's files may hold artefacts of another secret scope.
//
// Compatibility score (0..1) of a sandbox or checkpoint environment for the run:
//   score = 1
//         - 0.3 * missing / max(1, requirements)       // most already there: high (seed 5.4)
//         - dirty penalty                              // 0 for <= 10 dirty paths, 0.05 for
//                                                      // <= 100, 0.10 for <= 1000, else 0.15
//         - 0.1 * conflicts                            // only for reuse_separate_venv
//   clamped to [0, 1]; an action that reuses or forks needs score >= min_reuse_score.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sessions/environment_manifest.h"

namespace paddock::sessions {

struct Requirement {      // one dependency a run needs
  std::string ecosystem;  // "python" | "node"
  std::string name;       // normalised (python: PEP 503; node: as is, lower-case)
  // "" (any) or a specifier list: python "==1.5", ">=2,<3", "~=1.4", "!=1.2", "==1.5.*";
  // node a semver range "1.2.3", "^1.2", "~1.2", ">=1", "1.x", "1 - 2", "^1 || ^2".
  std::string spec;
  bool operator==(const Requirement&) const = default;
};

// "pandas==1.5", "numpy<1.24", "lodash@^4", "left-pad" — how the requirement is written on an
// install command line (unquoted).
std::string RequirementString(const Requirement& r);
// {"ecosystem", "name", "spec"}.
nlohmann::json RequirementToJson(const Requirement& r);

// One requirement as written for `ecosystem` ("pandas[excel]>=1.5; python_version>'3'",
// "@scope/pkg@^2", "sheetkit-1.0-py3-none-any.whl"), or nullopt for what is not one: a flag, a
// local path, a URL, a tarball, a shell variable, a malformed spec. Wheels keep their name with
// an exact "==version"; "name @ URL" keeps the name with any version; node "latest" or "*" is
// any version, another dist-tag is kept verbatim (it satisfies no installed version, so it is
// never taken as proven).
std::optional<Requirement> ParseRequirement(std::string_view ecosystem, std::string_view text);

// Parses requirements out of shell commands: `pip install 'pandas==1.5' numpy<1.24`,
// `pip3 install -U x`, `python -m pip install --no-index --find-links /w/pkgs sheetkit==1.0`,
// `uv pip install x`, `npm install lodash@4 @scope/pkg@^2`, `npm i x`, `pnpm add x`,
// `yarn add x`; several per command (`cd /w && pip install x; npm i y`). Flags and their values,
// local paths, URLs, `-r file` (cannot be read here), `-e path` and redirections are ignored.
// The same package twice: python specs are intersected ("x>=1" + "x<2" -> "x>=1,<2"), node's
// last one wins. Bounded (kMaxCommandBytes per command, kMaxTotalBytes overall, at most
// kMaxRequirements results; a cut command drops its partial last word) and never fails.
inline constexpr size_t kMaxCommandBytes = 64 << 10;
inline constexpr size_t kMaxTotalBytes = 1 << 20;
inline constexpr size_t kMaxRequirements = 256;
std::vector<Requirement> RequirementsFromCommands(const std::vector<std::string>& commands);

// True when `version` satisfies `spec` ("" is any version, even an unparseable one).
//  python: PEP 440 subset — epochs, release segments compared numerically with zero padding
//    (1.5 == 1.5.0), pre/post/dev releases ordered (1.0.dev1 < 1.0a1 < 1.0 < 1.0.post1), local
//    labels ignored unless the specifier has one; operators == != <= >= < > ~= === and ==/!=
//    with ".*"; `<V` excludes V's pre-releases and `>V` V's post-releases, as PEP 440 says.
//  node: semver subset — X.Y.Z[-pre][+build]; ranges with ||, hyphen ranges, x-ranges, partial
//    versions, ^ ~ >= <= > < =; a pre-release matches only a comparator with a pre-release on
//    the same X.Y.Z, as node-semver does.
// An unknown ecosystem, an unparseable spec or (for a non-empty spec) version → false.
bool VersionSatisfies(const std::string& ecosystem, const std::string& version,
                      const std::string& spec);

struct SandboxFacts {  // the session's current sandbox, as the registry and runtime know it
  std::string sandbox_id, tenant_id, user_id, session_id;
  std::string state;  // registry state: only "Ready" (idle, no lease) is reusable
  std::string resource_class, runtime, template_name, template_digest, network_profile,
      secret_scope;
  bool healthy = true;   // runtime says alive and not OOM-looping
  bool tainted = false;  // seccomp kill, policy violation, unknown pollution
  std::string taint_reason;
  int64_t policy_violations = 0;
  std::optional<EnvironmentManifest> manifest;  // none = never measured = unknown pollution
  // The fingerprint the registry recorded after the last run; "" = none recorded. A live
  // manifest with another fingerprint was changed behind the control plane's back.
  std::string recorded_fingerprint;
};

struct CheckpointFacts {  // a checkpoint of this session that could be forked
  std::string checkpoint_id, tenant_id, user_id, session_id;
  std::string runtime, template_name, template_digest, resource_class;
  // The security context the checkpoint was taken under: only a run with the same one may
  // fork it (files fetched with broader network or other secrets stay out of its reach).
  std::string network_profile, secret_scope;
  std::optional<EnvironmentManifest> manifest;   // none: never forked (nothing proven)
  int64_t created_at_ms = 0, expires_at_ms = 0;  // 0 = never expires
};

struct RunNeeds {  // what the next run needs (from the planner and the request)
  std::string tenant_id, user_id, session_id;
  std::string resource_class, runtime, template_name, template_digest, network_profile,
      secret_scope;
  std::vector<std::string> capabilities;  // e.g. "python", "browser", "node", "compile"
  std::vector<Requirement> requirements;  // names are normalised again here
  std::string workspace_id;               // "" = not checked
  int64_t now_ms = 0;
};

enum class ReuseAction { kReuse, kReuseSeparateVenv, kForkCheckpoint, kNewSandbox };
// "reuse", "reuse_separate_venv", "fork_checkpoint", "new_sandbox".
const char* ReuseActionName(ReuseAction action);

struct ReuseDecision {
  ReuseAction action = ReuseAction::kNewSandbox;
  double score = 0;  // compatibility 0..1 of the chosen target (0 for new_sandbox)
  // Machine code: "compatible" for reuse; otherwise why the current sandbox was not reused as
  // is ("no_session_sandbox", "dependency_conflict", "tainted", ... — see the list above).
  std::string reason;
  std::vector<std::string> reasons;  // human-readable, one per check that mattered
  std::string sandbox_id;            // reuse / reuse_separate_venv
  std::string checkpoint_id;         // fork_checkpoint
  // reuse_separate_venv: an existing venv (a key of manifest.venvs) that already satisfies
  // every conflict; "" = create a fresh one.
  std::string venv;
  // The current sandbox must be hard-destroyed (LC-3): tainted, policy violations, unknown
  // pollution or a runtime fault. Never set for a sandbox of another tenant/user/session (not
  // this run's to destroy) nor for a busy one.
  bool destroy_current = false;
  // Requirements the chosen environment lacks: install incrementally (reuse, fork), or into
  // the separate venv together with `conflicts` (reuse_separate_venv).
  std::vector<Requirement> to_install;
  std::vector<Requirement> conflicts;  // requirements the current sandbox's environment violates
};

struct ReuseConfig {
  int max_venv_conflicts = 2;    // conflicts a separate venv may absorb when no checkpoint fits
  double min_reuse_score = 0.5;  // below: do not reuse
};

// Pure and deterministic: the same inputs always give the same decision. Thread-safe.
ReuseDecision CheckReuse(const RunNeeds& needs, const std::optional<SandboxFacts>& current,
                         const std::vector<CheckpointFacts>& checkpoints,
                         const ReuseConfig& config);

// {"action", "score", "reason", "reasons", "sandbox_id", "checkpoint_id", "venv",
//  "destroy_current", "to_install": [requirement], "conflicts": [requirement]}.
nlohmann::json ReuseDecisionToJson(const ReuseDecision& decision);

}  // namespace paddock::sessions
