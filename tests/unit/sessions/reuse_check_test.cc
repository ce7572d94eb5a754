#include "sessions/reuse_check.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace paddock::sessions {
namespace {

// ---------------------------------------------------------------------------------------------
// Fixtures: the seed's session (§7.7): tenant t1, user u1, session s1, sandbox sb-1028.

EnvironmentManifest Manifest(std::map<std::string, std::string> python,
                             std::vector<std::string> caps = {"python"},
                             std::string fingerprint = "env-a912") {
  EnvironmentManifest m;
  m.base_digest = "sha256:base";
  m.runtimes = {{"python3", "3.12"}};
  m.python_packages = std::move(python);
  m.workspace_id = "ws-392";
  m.dirty_paths = {"/opt/venv", "/workspace"};
  m.capabilities = std::move(caps);
  m.fingerprint = std::move(fingerprint);
  return m;
}

// Turn 1 installed pandas and openpyxl.
EnvironmentManifest Turn1() { return Manifest({{"pandas", "2.2.2"}, {"openpyxl", "3.1.2"}}); }

SandboxFacts Sandbox(EnvironmentManifest m = Turn1()) {
  SandboxFacts s;
  s.sandbox_id = "sb-1028";
  s.tenant_id = "t1";
  s.user_id = "u1";
  s.session_id = "s1";
  s.state = "Ready";
  s.resource_class = "python-small";
  s.runtime = "gvisor";
  s.template_name = "python-ds";
  s.template_digest = "sha256:aaa";
  s.network_profile = "none";
  s.secret_scope = "session:s1";
  s.manifest = std::move(m);
  return s;
}

RunNeeds Needs(std::vector<Requirement> reqs = {}) {
  RunNeeds n;
  n.tenant_id = "t1";
  n.user_id = "u1";
  n.session_id = "s1";
  n.resource_class = "python-small";
  n.runtime = "gvisor";
  n.template_name = "python-ds";
  n.template_digest = "sha256:aaa";
  n.network_profile = "none";
  n.secret_scope = "session:s1";
  n.capabilities = {"python"};
  n.requirements = std::move(reqs);
  n.now_ms = 1'000'000;
  return n;
}

Requirement Py(std::string name, std::string spec = "") {
  return Requirement{"python", std::move(name), std::move(spec)};
}
Requirement Node(std::string name, std::string spec = "") {
  return Requirement{"node", std::move(name), std::move(spec)};
}

CheckpointFacts Checkpoint(std::string id, EnvironmentManifest m, int64_t created_at_ms) {
  CheckpointFacts c;
  c.checkpoint_id = std::move(id);
  c.tenant_id = "t1";
  c.user_id = "u1";
  c.session_id = "s1";
  c.runtime = "gvisor";
  c.template_name = "python-ds";
  c.template_digest = "sha256:aaa";
  c.resource_class = "python-small";
  c.network_profile = "none";
  c.secret_scope = "session:s1";
  c.manifest = std::move(m);
  c.created_at_ms = created_at_ms;
  return c;
}

std::string Dump(const ReuseDecision& d) { return ReuseDecisionToJson(d).dump(2); }

bool HasReason(const ReuseDecision& d, const std::string& part) {
  for (const std::string& r : d.reasons) {
    if (r.find(part) != std::string::npos) return true;
  }
  return false;
}

ReuseDecision Check(const RunNeeds& needs, const std::optional<SandboxFacts>& current,
                    const std::vector<CheckpointFacts>& checkpoints = {},
                    const ReuseConfig& config = {}) {
  ReuseDecision d = CheckReuse(needs, current, checkpoints, config);
  // Every decision carries a machine code and the reasons of the checks that decided it.
  EXPECT_FALSE(d.reason.empty()) << Dump(d);
  EXPECT_FALSE(d.reasons.empty()) << Dump(d);
  EXPECT_GE(d.score, 0.0);
  EXPECT_LE(d.score, 1.0);
  if (d.action == ReuseAction::kNewSandbox) {
    EXPECT_EQ(d.score, 0.0) << Dump(d);
    EXPECT_TRUE(d.sandbox_id.empty() && d.checkpoint_id.empty()) << Dump(d);
  }
  return d;
}

// A checkpoint that would fit any run of this session: the reference "perfect" one.
CheckpointFacts Perfect(std::string id = "ck-clean") {
  return Checkpoint(std::move(id), Turn1(), 500);
}

// ---------------------------------------------------------------------------------------------
// The seed's turns (§7.7, §5.6).

TEST(ReuseCheckSeed, Turn2PandasMatplotlibReusesAndInstallsMatplotlib) {
  ReuseDecision d = Check(Needs({Py("pandas"), Py("matplotlib")}), Sandbox());
  EXPECT_EQ(d.action, ReuseAction::kReuse) << Dump(d);
  EXPECT_EQ(d.reason, "compatible");
  EXPECT_EQ(d.sandbox_id, "sb-1028");
  EXPECT_GE(d.score, 0.8);
  EXPECT_EQ(d.to_install, std::vector<Requirement>{Py("matplotlib")});
  EXPECT_TRUE(d.conflicts.empty());
  EXPECT_FALSE(d.destroy_current);
  EXPECT_TRUE(HasReason(d, "identity")) << Dump(d);
  EXPECT_TRUE(HasReason(d, "dependencies")) << Dump(d);
}

TEST(ReuseCheckSeed, Turn3BrowserRunNeverReusesPythonSandbox) {
  // The planner moved to browser-medium with a browser template; the cause is the capability.
  RunNeeds needs = Needs({Node("playwright")});
  needs.capabilities = {"browser", "node"};
  needs.resource_class = "browser-medium";
  needs.template_name = "browser";
  needs.template_digest = "sha256:bbb";
  ReuseDecision d = Check(needs, Sandbox(), {Perfect()});
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "runtime_capability_mismatch");
  EXPECT_TRUE(HasReason(d, "browser")) << Dump(d);
}

TEST(ReuseCheckSeed, Turn3SameClassStillCapabilityMismatch) {
  RunNeeds needs = Needs();
  needs.capabilities = {"python", "browser"};
  ReuseDecision d = Check(needs, Sandbox());
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "runtime_capability_mismatch");
}

// Turn 4 wants sheetkit==1.0 where 2.0 is installed; checkpoint A predates the install.
struct Turn4 {
  RunNeeds needs = Needs(RequirementsFromCommands(
      {"python -m pip install --no-index --find-links /w/pkgs sheetkit==1.0"}));
  SandboxFacts current = Sandbox(Manifest(
      {{"pandas", "2.2.2"}, {"openpyxl", "3.1.2"}, {"sheetkit", "2.0"}}, {"python"}, "env-b001"));
  CheckpointFacts before = Checkpoint("ck-a", Turn1(), 100);
  CheckpointFacts after = Checkpoint(
      "ck-b", Manifest({{"pandas", "2.2.2"}, {"openpyxl", "3.1.2"}, {"sheetkit", "2.0"}}), 200);
};

TEST(ReuseCheckSeed, Turn4ConflictForksCheckpointFromBeforeTheInstall) {
  Turn4 t;
  ASSERT_EQ(t.needs.requirements, std::vector<Requirement>{Py("sheetkit", "==1.0")});
  ReuseDecision d = Check(t.needs, t.current, {t.after, t.before});
  EXPECT_EQ(d.action, ReuseAction::kForkCheckpoint) << Dump(d);
  EXPECT_EQ(d.reason, "dependency_conflict");
  EXPECT_EQ(d.checkpoint_id, "ck-a");  // ck-b, though newer, has the same conflict
  EXPECT_TRUE(d.sandbox_id.empty());
  EXPECT_EQ(d.to_install, std::vector<Requirement>{Py("sheetkit", "==1.0")});
  EXPECT_EQ(d.conflicts, std::vector<Requirement>{Py("sheetkit", "==1.0")});
  EXPECT_GE(d.score, 0.5);
  EXPECT_TRUE(HasReason(d, "installed 2.0")) << Dump(d);
  EXPECT_TRUE(HasReason(d, "checkpoint ck-b: conflicts")) << Dump(d);
}

TEST(ReuseCheckSeed, Turn4WithoutUsableCheckpointUsesSeparateVenv) {
  Turn4 t;
  CheckpointFacts expired = t.before;
  expired.expires_at_ms = t.needs.now_ms;  // expired exactly now
  ReuseDecision d = Check(t.needs, t.current, {t.after, expired});
  EXPECT_EQ(d.action, ReuseAction::kReuseSeparateVenv) << Dump(d);
  EXPECT_EQ(d.reason, "dependency_conflict");
  EXPECT_EQ(d.sandbox_id, "sb-1028");
  EXPECT_EQ(d.venv, "");  // a fresh one
  EXPECT_EQ(d.conflicts, std::vector<Requirement>{Py("sheetkit", "==1.0")});
  EXPECT_TRUE(d.to_install.empty());
  EXPECT_LT(d.score, 1.0);  // a venv is not free
  EXPECT_GE(d.score, 0.5);
  EXPECT_TRUE(HasReason(d, "checkpoint ck-a: expired")) << Dump(d);
}

TEST(ReuseCheckSeed, Turn4ExistingVenvThatSatisfiesTheConflictIsReused) {
  Turn4 t;
  t.current.manifest->venvs = {{"/workspace/.venv-a", {{"numpy", "1.26.0"}}},
                               {"/workspace/.venv-b", {{"SheetKit", "1.0.0"}}}};
  ReuseDecision d = Check(t.needs, t.current);
  EXPECT_EQ(d.action, ReuseAction::kReuseSeparateVenv) << Dump(d);
  EXPECT_EQ(d.venv, "/workspace/.venv-b");
}

TEST(ReuseCheckSeed, Turn4TooManyConflictsNewSandbox) {
  Turn4 t;
  t.needs.requirements = {Py("sheetkit", "==1.0"), Py("pandas", "==1.5"), Py("openpyxl", "<3")};
  ReuseDecision d = Check(t.needs, t.current, {t.after});
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "dependency_conflict");
  EXPECT_EQ(d.conflicts.size(), 3u);
  EXPECT_TRUE(HasReason(d, "max_venv_conflicts")) << Dump(d);
}

TEST(ReuseCheckSeed, OldProjectPandas15Numpy124) {
  // Seed §5.1: `pip install pandas==1.5 numpy<1.24` over pandas 2.x must not downgrade in place.
  SandboxFacts s = Sandbox(Manifest({{"pandas", "2.2.2"}, {"numpy", "1.26.4"}}));
  RunNeeds needs = Needs(RequirementsFromCommands({"pip install 'pandas==1.5' numpy<1.24"}));
  ReuseDecision d = Check(needs, s);
  EXPECT_EQ(d.action, ReuseAction::kReuseSeparateVenv) << Dump(d);
  EXPECT_EQ(d.conflicts.size(), 2u);
  ReuseConfig strict;
  strict.max_venv_conflicts = 1;
  d = Check(needs, s, {}, strict);
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "dependency_conflict");
}

// ---------------------------------------------------------------------------------------------
// REUSE-4 boundaries, one row each.

TEST(ReuseCheckBoundary, SameToolChainReuses) {
  ReuseDecision d = Check(Needs({Py("pandas", ">=2")}), Sandbox());
  EXPECT_EQ(d.action, ReuseAction::kReuse) << Dump(d);
  EXPECT_EQ(d.score, 1.0);
  EXPECT_TRUE(d.to_install.empty());
}

TEST(ReuseCheckBoundary, OtherTenantNeverEvenWithPerfectCheckpoint) {
  SandboxFacts s = Sandbox();
  s.tenant_id = "t2";
  ReuseDecision d = Check(Needs(), s, {Perfect()});
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "tenant_mismatch");
  EXPECT_FALSE(d.destroy_current);  // not this run's sandbox to destroy
  EXPECT_FALSE(HasReason(d, "t2")) << "another tenant's id leaks: " << Dump(d);
}

TEST(ReuseCheckBoundary, OtherUserNever) {
  SandboxFacts s = Sandbox();
  s.user_id = "u2";
  ReuseDecision d = Check(Needs(), s, {Perfect()});
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "user_mismatch");
  EXPECT_FALSE(d.destroy_current);
}

TEST(ReuseCheckBoundary, EmptyIdsProveNothing) {
  SandboxFacts s = Sandbox();
  RunNeeds needs = Needs();
  s.tenant_id = needs.tenant_id = "";
  EXPECT_EQ(Check(needs, s).reason, "tenant_mismatch");
  needs = Needs();
  s = Sandbox();
  s.user_id = needs.user_id = "";
  EXPECT_EQ(Check(needs, s).reason, "user_mismatch");
  needs = Needs();
  s = Sandbox();
  s.session_id = needs.session_id = "";
  EXPECT_EQ(Check(needs, s).action, ReuseAction::kNewSandbox);
  EXPECT_EQ(Check(needs, s).reason, "session_mismatch");
}

TEST(ReuseCheckBoundary, SameUserNewSessionNeverReusesRuntime) {
  RunNeeds needs = Needs();
  needs.session_id = "s2";
  ReuseDecision d = Check(needs, Sandbox(), {Perfect()});  // Perfect() is s1's: not s2's
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "session_mismatch");
  EXPECT_FALSE(d.destroy_current);  // s1 may still use it
}

TEST(ReuseCheckBoundary, NewSessionMayForkItsOwnCheckpoint) {
  RunNeeds needs = Needs();
  needs.session_id = "s2";
  CheckpointFacts own = Perfect("ck-s2");
  own.session_id = "s2";
  ReuseDecision d = Check(needs, Sandbox(), {Perfect(), own});
  EXPECT_EQ(d.action, ReuseAction::kForkCheckpoint) << Dump(d);
  EXPECT_EQ(d.checkpoint_id, "ck-s2");
  EXPECT_EQ(d.reason, "session_mismatch");
}

TEST(ReuseCheckBoundary, SameProjectReenteredRestoresCleanSnapshot) {
  ReuseDecision d = Check(Needs({Py("pandas")}), std::nullopt, {Perfect()});
  EXPECT_EQ(d.action, ReuseAction::kForkCheckpoint) << Dump(d);
  EXPECT_EQ(d.reason, "no_session_sandbox");
  EXPECT_EQ(d.checkpoint_id, "ck-clean");
  EXPECT_EQ(d.score, 1.0);
}

TEST(ReuseCheckBoundary, NoSandboxNoCheckpointNewSandbox) {
  ReuseDecision d = Check(Needs({Py("pandas")}), std::nullopt);
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "no_session_sandbox");
}

TEST(ReuseCheckBoundary, TaintedNeverAndHardDestroyed) {
  SandboxFacts s = Sandbox();
  s.tainted = true;
  s.taint_reason = "seccomp kill";
  ReuseDecision d = Check(Needs(), s, {Perfect()});
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "tainted");
  EXPECT_TRUE(d.destroy_current);
  EXPECT_TRUE(HasReason(d, "seccomp kill"));
}

TEST(ReuseCheckBoundary, PolicyViolationNeverAndHardDestroyed) {
  SandboxFacts s = Sandbox();
  s.policy_violations = 1;
  ReuseDecision d = Check(Needs(), s, {Perfect()});
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "policy_violation");
  EXPECT_TRUE(d.destroy_current);
}

TEST(ReuseCheckBoundary, TaintOutranksEverythingElse) {
  SandboxFacts s = Sandbox();
  s.tainted = true;
  s.healthy = false;
  s.state = "Leased";
  s.manifest.reset();
  EXPECT_EQ(Check(Needs(), s).reason, "tainted");
}

TEST(ReuseCheckBoundary, UnhealthyNotReusedButCheckpointMayBeForked) {
  SandboxFacts s = Sandbox();
  s.healthy = false;
  ReuseDecision d = Check(Needs(), s);
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "unhealthy");
  EXPECT_TRUE(d.destroy_current);
  d = Check(Needs(), s, {Perfect()});
  EXPECT_EQ(d.action, ReuseAction::kForkCheckpoint) << Dump(d);
  EXPECT_EQ(d.reason, "unhealthy");
  EXPECT_TRUE(d.destroy_current);
}

TEST(ReuseCheckBoundary, NotReadyIsBusy) {
  for (const char* state : {"Leased", "Running", "Recycling", "Hibernating", ""}) {
    SandboxFacts s = Sandbox();
    s.state = state;
    ReuseDecision d = Check(Needs(), s);
    EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << state;
    EXPECT_EQ(d.reason, "busy") << state;
    EXPECT_FALSE(d.destroy_current) << state;
  }
}

TEST(ReuseCheckBoundary, UnknownPollutionNever) {
  SandboxFacts never_measured = Sandbox();
  never_measured.manifest.reset();
  SandboxFacts truncated = Sandbox();
  truncated.manifest->truncated = true;
  SandboxFacts changed_behind_our_back = Sandbox();
  changed_behind_our_back.recorded_fingerprint = "env-0000";
  for (const SandboxFacts& s : {never_measured, truncated, changed_behind_our_back}) {
    ReuseDecision d = Check(Needs(), s);
    EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
    EXPECT_EQ(d.reason, "unknown_environment");
    EXPECT_TRUE(d.destroy_current);
  }
  SandboxFacts recorded = Sandbox();
  recorded.recorded_fingerprint = "env-a912";  // the same: proven
  EXPECT_EQ(Check(Needs(), recorded).action, ReuseAction::kReuse);
}

TEST(ReuseCheckBoundary, RuntimeChangedNever) {
  RunNeeds needs = Needs();
  needs.runtime = "firecracker";
  ReuseDecision d = Check(needs, Sandbox());
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "runtime_changed");
}

TEST(ReuseCheckBoundary, TemplateNameOrDigestChangedNever) {
  RunNeeds needs = Needs();
  needs.template_name = "python-ml";
  EXPECT_EQ(Check(needs, Sandbox()).reason, "template_changed");
  needs = Needs();
  needs.template_digest = "sha256:ccc";                    // the same name, rebuilt
  ReuseDecision d = Check(needs, Sandbox(), {Perfect()});  // Perfect() has the old digest
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "template_changed");
}

// The sandbox is never reused under another security context, and a checkpoint taken under
// another context than the run's is never forked; one taken under the run's own context is.
TEST(ReuseCheckBoundary, SecurityContextMismatchNeverReusedOnlySameContextCheckpoint) {
  RunNeeds needs = Needs();
  needs.network_profile = "egress-open";
  ReuseDecision d = Check(needs, Sandbox(), {Perfect()});  // Perfect(): network "none"
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "security_context_mismatch");
  needs = Needs();
  needs.secret_scope = "tenant:t1";
  d = Check(needs, Sandbox(), {Perfect()});
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "security_context_mismatch");

  CheckpointFacts same_context = Perfect("ck-same-context");
  same_context.network_profile = "egress-open";
  needs = Needs();
  needs.network_profile = "egress-open";
  d = Check(needs, Sandbox(), {Perfect(), same_context});
  EXPECT_EQ(d.action, ReuseAction::kForkCheckpoint) << Dump(d);
  EXPECT_EQ(d.checkpoint_id, same_context.checkpoint_id);
  EXPECT_EQ(d.reason, "security_context_mismatch");
}

TEST(ReuseCheckBoundary, ResourceClassMismatch) {
  RunNeeds needs = Needs();
  needs.resource_class = "python-large";
  ReuseDecision d = Check(needs, Sandbox(), {Perfect()});  // Perfect() is python-small
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "resource_class_mismatch");
  CheckpointFacts large = Perfect("ck-large");
  large.resource_class = "python-large";
  d = Check(needs, Sandbox(), {Perfect(), large});
  EXPECT_EQ(d.action, ReuseAction::kForkCheckpoint) << Dump(d);
  EXPECT_EQ(d.checkpoint_id, "ck-large");
}

TEST(ReuseCheckBoundary, WorkspaceMismatch) {
  RunNeeds needs = Needs();
  needs.workspace_id = "ws-other";
  EXPECT_EQ(Check(needs, Sandbox()).reason, "workspace_mismatch");
  needs.workspace_id = "ws-392";
  EXPECT_EQ(Check(needs, Sandbox()).action, ReuseAction::kReuse);
}

TEST(ReuseCheckBoundary, CapabilitiesComparedCaseInsensitively) {
  RunNeeds needs = Needs();
  needs.capabilities = {"Python"};
  EXPECT_EQ(Check(needs, Sandbox()).action, ReuseAction::kReuse);
}

// ---------------------------------------------------------------------------------------------
// Checkpoints.

TEST(ReuseCheckCheckpoint, ForeignCheckpointsAreNeverChosen) {
  CheckpointFacts other_tenant = Perfect("ck-foreign-tenant");
  other_tenant.tenant_id = "t2";
  CheckpointFacts other_user = Perfect("ck-foreign-user");
  other_user.user_id = "u2";
  CheckpointFacts other_session = Perfect("ck-foreign-session");
  other_session.session_id = "s9";
  CheckpointFacts anonymous = Perfect("ck-anonymous");
  anonymous.tenant_id = anonymous.user_id = anonymous.session_id = "";
  std::vector<CheckpointFacts> foreign = {other_tenant, other_user, other_session, anonymous};
  ReuseDecision d = Check(Needs({Py("pandas")}), std::nullopt, foreign);
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "no_session_sandbox");
  EXPECT_FALSE(HasReason(d, "ck-foreign")) << "foreign ids leak: " << Dump(d);
  EXPECT_TRUE(HasReason(d, "4 checkpoint(s) of another tenant")) << Dump(d);
  // And as the escape route from a conflict.
  Turn4 t;
  d = Check(t.needs, t.current, foreign, ReuseConfig{.max_venv_conflicts = 0});
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
}

TEST(ReuseCheckCheckpoint, UnprovenCheckpointsAreSkipped) {
  CheckpointFacts no_manifest = Perfect("ck-none");
  no_manifest.manifest.reset();
  CheckpointFacts truncated = Perfect("ck-trunc");
  truncated.manifest->truncated = true;
  CheckpointFacts other_runtime = Perfect("ck-rt");
  other_runtime.runtime = "runc";
  CheckpointFacts other_digest = Perfect("ck-digest");
  other_digest.template_digest = "sha256:old";
  CheckpointFacts expired = Perfect("ck-exp");
  expired.expires_at_ms = 999;
  CheckpointFacts no_caps = Perfect("ck-caps");
  no_caps.manifest->capabilities.clear();
  ReuseDecision d = Check(Needs(), std::nullopt,
                          {no_manifest, truncated, other_runtime, other_digest, expired, no_caps});
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  for (const char* id : {"ck-none", "ck-trunc", "ck-rt", "ck-digest", "ck-exp", "ck-caps"}) {
    EXPECT_TRUE(HasReason(d, std::string("checkpoint ") + id)) << id << Dump(d);
  }
  CheckpointFacts forever = Perfect("ck-forever");
  forever.expires_at_ms = 0;  // never expires
  EXPECT_EQ(Check(Needs(), std::nullopt, {forever}).checkpoint_id, "ck-forever");
}

TEST(ReuseCheckCheckpoint, PrefersFewestMissingThenNewestWhateverTheOrder) {
  RunNeeds needs = Needs({Py("pandas"), Py("matplotlib")});
  CheckpointFacts a = Checkpoint("ck-a", Manifest({{"pandas", "2.2.2"}}), 100);
  CheckpointFacts b =
      Checkpoint("ck-b", Manifest({{"pandas", "2.2.2"}, {"matplotlib", "3.8.0"}}), 200);
  CheckpointFacts c =
      Checkpoint("ck-c", Manifest({{"pandas", "2.2.2"}, {"matplotlib", "3.8.0"}}), 300);
  for (const auto& order :
       std::vector<std::vector<CheckpointFacts>>{{a, b, c}, {c, b, a}, {b, a, c}}) {
    ReuseDecision d = Check(needs, std::nullopt, order);
    EXPECT_EQ(d.checkpoint_id, "ck-c") << Dump(d);
    EXPECT_TRUE(d.to_install.empty());
  }
  ReuseDecision d = Check(needs, std::nullopt, {a});
  EXPECT_EQ(d.checkpoint_id, "ck-a");
  EXPECT_EQ(d.to_install, std::vector<Requirement>{Py("matplotlib")});
}

TEST(ReuseCheckCheckpoint, ReasonsStayBoundedWithManyCheckpoints) {
  std::vector<CheckpointFacts> many;
  for (int i = 0; i < 500; ++i) {
    CheckpointFacts c = Perfect("ck-" + std::to_string(i));
    c.expires_at_ms = 1;
    many.push_back(c);
  }
  ReuseDecision d = Check(Needs(), std::nullopt, many);
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox);
  EXPECT_LT(d.reasons.size(), 25u);
  EXPECT_TRUE(HasReason(d, "484 more")) << Dump(d);
}

// ---------------------------------------------------------------------------------------------
// Dependencies and score.

TEST(ReuseCheckDeps, NamesAreNormalisedOnBothSides) {
  SandboxFacts s = Sandbox(Manifest({{"Scikit_Learn", "1.4.0"}}));
  s.manifest->node_packages = {{"Lodash", "4.17.21"}};
  ReuseDecision d = Check(Needs({Py("scikit.learn", ">=1.3"), Node("LODASH", "^4")}), s);
  EXPECT_EQ(d.action, ReuseAction::kReuse) << Dump(d);
  EXPECT_TRUE(d.to_install.empty()) << Dump(d);
}

TEST(ReuseCheckDeps, NodeConflictGetsSeparateModules) {
  SandboxFacts s = Sandbox();
  s.manifest->node_packages = {{"lodash", "4.17.21"}, {"@scope/pkg", "2.1.0"}};
  RunNeeds needs = Needs(RequirementsFromCommands({"npm install lodash@4 @scope/pkg@^2"}));
  EXPECT_EQ(Check(needs, s).action, ReuseAction::kReuse);
  needs.requirements = {Node("lodash", "^3")};
  ReuseDecision d = Check(needs, s);
  EXPECT_EQ(d.action, ReuseAction::kReuseSeparateVenv) << Dump(d);
  EXPECT_EQ(d.venv, "");  // venvs are python's; node gets a fresh prefix
}

TEST(ReuseCheckDeps, UnknownEcosystemIsNeverProven) {
  ReuseDecision d = Check(Needs({Requirement{"cargo", "serde", "1"}}), Sandbox());
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "dependency_conflict");
}

TEST(ReuseCheckDeps, ScoreFormula) {
  // 1 - 0.3 * missing / requirements - dirty penalty - 0.1 * conflicts (venv only).
  ReuseDecision d = Check(Needs({Py("pandas"), Py("a"), Py("b"), Py("c")}), Sandbox());
  EXPECT_DOUBLE_EQ(d.score, 1.0 - 0.3 * 3 / 4);
  SandboxFacts dirty = Sandbox();
  dirty.manifest->dirty_paths.clear();
  for (int i = 0; i < 500; ++i) dirty.manifest->dirty_paths.push_back("/p" + std::to_string(i));
  EXPECT_DOUBLE_EQ(Check(Needs(), dirty).score, 0.9);
  Turn4 t;
  EXPECT_DOUBLE_EQ(Check(t.needs, t.current).score, 0.9);  // one conflict in a venv
}

TEST(ReuseCheckDeps, BelowMinScoreNotReused) {
  ReuseConfig picky;
  picky.min_reuse_score = 0.9;
  ReuseDecision d = Check(Needs({Py("pandas"), Py("matplotlib")}), Sandbox(), {}, picky);
  EXPECT_EQ(d.action, ReuseAction::kNewSandbox) << Dump(d);
  EXPECT_EQ(d.reason, "low_compatibility_score");
  // A checkpoint that already has both scores 1.0 and is forked instead.
  CheckpointFacts full =
      Checkpoint("ck-full", Manifest({{"pandas", "2.2.2"}, {"matplotlib", "3.8.0"}}), 100);
  d = Check(Needs({Py("pandas"), Py("matplotlib")}), Sandbox(), {full}, picky);
  EXPECT_EQ(d.action, ReuseAction::kForkCheckpoint) << Dump(d);
  EXPECT_EQ(d.checkpoint_id, "ck-full");
}

TEST(ReuseCheckDeps, Deterministic) {
  Turn4 t;
  nlohmann::json first =
      ReuseDecisionToJson(CheckReuse(t.needs, t.current, {t.after, t.before}, {}));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(ReuseDecisionToJson(CheckReuse(t.needs, t.current, {t.after, t.before}, {})), first);
  }
}

TEST(ReuseCheckJson, Shape) {
  Turn4 t;
  nlohmann::json j = ReuseDecisionToJson(Check(t.needs, t.current, {t.before}));
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"action", "score", "reason", "reasons", "sandbox_id",
                                         "checkpoint_id", "venv", "destroy_current", "to_install",
                                         "conflicts"}));
  EXPECT_EQ(j["action"], "fork_checkpoint");
  EXPECT_EQ(j["reason"], "dependency_conflict");
  EXPECT_EQ(j["checkpoint_id"], "ck-a");
  EXPECT_TRUE(j["score"].is_number());
  EXPECT_TRUE(j["reasons"].is_array());
  EXPECT_EQ(j["destroy_current"], false);
  EXPECT_EQ(j["to_install"],
            nlohmann::json::parse(R"([{"ecosystem":"python","name":"sheetkit","spec":"==1.0"}])"));
  EXPECT_EQ(j["conflicts"], j["to_install"]);
  EXPECT_TRUE(ReuseDecisionToJson(ReuseDecision{})["to_install"].is_array());
}

TEST(ReuseCheckJson, ActionNames) {
  EXPECT_STREQ(ReuseActionName(ReuseAction::kReuse), "reuse");
  EXPECT_STREQ(ReuseActionName(ReuseAction::kReuseSeparateVenv), "reuse_separate_venv");
  EXPECT_STREQ(ReuseActionName(ReuseAction::kForkCheckpoint), "fork_checkpoint");
  EXPECT_STREQ(ReuseActionName(ReuseAction::kNewSandbox), "new_sandbox");
  EXPECT_EQ(RequirementString(Py("pandas", "==1.5")), "pandas==1.5");
  EXPECT_EQ(RequirementString(Node("@scope/pkg", "^2")), "@scope/pkg@^2");
  EXPECT_EQ(RequirementString(Node("x")), "x");
}

// ---------------------------------------------------------------------------------------------
// RequirementsFromCommands.

using Reqs = std::vector<Requirement>;

TEST(RequirementsFromCommands, Pip) {
  EXPECT_EQ(RequirementsFromCommands({"pip install 'pandas==1.5' numpy<1.24"}),
            (Reqs{Py("pandas", "==1.5"), Py("numpy", "<1.24")}));
  EXPECT_EQ(RequirementsFromCommands({"pip3 install -U x"}), (Reqs{Py("x")}));
  EXPECT_EQ(RequirementsFromCommands({"/usr/bin/pip3.12 install --user --upgrade Foo_Bar"}),
            (Reqs{Py("foo-bar")}));
  EXPECT_EQ(RequirementsFromCommands(
                {"python -m pip install --no-index --find-links /w/pkgs sheetkit==1.0"}),
            (Reqs{Py("sheetkit", "==1.0")}));
  EXPECT_EQ(RequirementsFromCommands({"python3.12 -u -m pip -q install 'a >= 2, < 3'"}),
            (Reqs{Py("a", ">=2,<3")}));
  EXPECT_EQ(RequirementsFromCommands({"uv pip install ruff~=0.4"}), (Reqs{Py("ruff", "~=0.4")}));
  EXPECT_EQ(
      RequirementsFromCommands(
          {R"(pip install "requests[socks]>=2.0; python_version>'3'" 'x @ https://h/x.zip')"}),
      (Reqs{Py("requests", ">=2.0"), Py("x")}));
}

TEST(RequirementsFromCommands, Npm) {
  EXPECT_EQ(RequirementsFromCommands({"npm install lodash@4 @scope/pkg@^2"}),
            (Reqs{Node("lodash", "4"), Node("@scope/pkg", "^2")}));
  EXPECT_EQ(RequirementsFromCommands({"npm i x"}), (Reqs{Node("x")}));
  EXPECT_EQ(
      RequirementsFromCommands({"npm install -D --registry https://r.example Typescript@latest"}),
      (Reqs{Node("typescript")}));
  EXPECT_EQ(RequirementsFromCommands({"pnpm add react@'>=18 <19'", "yarn add vue@next"}),
            (Reqs{Node("react", ">=18 <19"), Node("vue", "next")}));
}

TEST(RequirementsFromCommands, IgnoresWhatCannotBeKnown) {
  EXPECT_EQ(RequirementsFromCommands(
                {"pip install -r requirements.txt -c constraints.txt -e . ./local_pkg /abs/pkg "
                 "../up git+https://github.com/a/b.git https://h/p-1.0.tar.gz foo.tar.gz "
                 "--index-url=https://evil/simple --extra-index-url https://evil2 ok"}),
            (Reqs{Py("ok")}));
  EXPECT_EQ(RequirementsFromCommands(
                {"npm install ./dir ../x /abs file:../y user/repo github:u/r git+ssh://g/r.git "
                 "pkg.tgz alias@npm:real@1 --prefix /p ok"}),
            (Reqs{Node("ok")}));
  EXPECT_TRUE(RequirementsFromCommands({"pip uninstall x", "pip download y", "echo hi", "npm ci",
                                        "npm run build", "pip install", "pip list",
                                        "pip install $PKG \"${OTHER}\" `cat f` $(cat g)"})
                  .empty());
}

TEST(RequirementsFromCommands, Wheels) {
  EXPECT_EQ(RequirementsFromCommands(
                {"pip install /w/pkgs/sheet_kit-1.0-py3-none-any.whl ./x-2.1.0-1-cp312-cp312-"
                 "manylinux_2_17_x86_64.whl bad.whl notawheel-1.0.whl"}),
            (Reqs{Py("sheet-kit", "==1.0"), Py("x", "==2.1.0")}));
}

TEST(RequirementsFromCommands, ShellStructure) {
  EXPECT_EQ(RequirementsFromCommands({"cd /w && pip install a 2>&1 | tee log; npm i b > /tmp/o "
                                      "2>/dev/null & (pip install c)\npip install d"}),
            (Reqs{Py("a"), Node("b"), Py("c"), Py("d")}));
  EXPECT_EQ(RequirementsFromCommands({"sudo -H pip install a\\ b 'c'\"d\""}),
            (Reqs{Py("cd")}));  // "a b" is not a name; 'c'"d" is one word
}

TEST(RequirementsFromCommands, DuplicatesMerge) {
  EXPECT_EQ(RequirementsFromCommands({"pip install 'x>=1' x 'x<2'", "pip install x<2"}),
            (Reqs{Py("x", ">=1,<2")}));
  EXPECT_EQ(RequirementsFromCommands({"npm i y@1", "npm i y@2"}), (Reqs{Node("y", "2")}));
}

TEST(RequirementsFromCommands, MalformedSpecsDropped) {
  EXPECT_TRUE(RequirementsFromCommands({"pip install 'x==' 'y=1' 'z>=1.*' '-' '=='"}).empty());
}

TEST(RequirementsFromCommands, HostileTenThousandArgs) {
  std::string cmd = "pip install";
  for (int i = 0; i < 10000; ++i) cmd += " pkg" + std::to_string(i) + "==1." + std::to_string(i);
  Reqs r = RequirementsFromCommands({cmd});
  ASSERT_EQ(r.size(), kMaxRequirements);
  EXPECT_EQ(r.front(), Py("pkg0", "==1.0"));
  EXPECT_EQ(r.back(), Py("pkg255", "==1.255"));
}

TEST(RequirementsFromCommands, HostileInputsAreBounded) {
  // A command far over the cap: cut at a blank, so the cut word is dropped, not misread.
  std::string huge = "pip install " + std::string(kMaxCommandBytes - 20, ' ') + "pandas==1.5.3";
  EXPECT_TRUE(RequirementsFromCommands({huge}).empty());
  // Unterminated quotes, lone operators, NULs, very long words, many commands.
  std::vector<std::string> commands = {
      "pip install 'unterminated",
      "pip install \"also",
      std::string("pip install a\0b", 15),
      "pip install " + std::string(5000, 'x'),
      "&&&;;;|||((()))",
      "pip install --timeout",  // a value flag at the end
      "npm install @",
      "npm install @scope",
      "npm install @/x",
      "pip install [extra]",
  };
  for (int i = 0; i < 2000; ++i) commands.push_back("pip install ok" + std::to_string(i % 3));
  Reqs r = RequirementsFromCommands(commands);
  EXPECT_EQ(r, (Reqs{Py("unterminated"), Py("also"), Py("ok0"), Py("ok1"), Py("ok2")}));
}

TEST(RequirementsFromCommands, ParseRequirementDirect) {
  EXPECT_EQ(ParseRequirement("python", "Django>=4.2,<5"), Py("django", ">=4.2,<5"));
  EXPECT_EQ(ParseRequirement("python", "pandas (>=1.5)"), Py("pandas", ">=1.5"));
  EXPECT_EQ(ParseRequirement("node", "@Types/Node@^20"), Node("@types/node", "^20"));
  EXPECT_FALSE(ParseRequirement("python", "--upgrade"));
  EXPECT_FALSE(ParseRequirement("python", ""));
  EXPECT_FALSE(ParseRequirement("rust", "serde"));
  EXPECT_FALSE(ParseRequirement("node", "lodash@^4 || garbage!"));
}

// ---------------------------------------------------------------------------------------------
// VersionSatisfies.

struct Row {
  const char* version;
  const char* spec;
  bool want;
};

TEST(VersionSatisfies, Python) {
  const Row rows[] = {
      {"1.5.0", "==1.5", true},
      {"1.5", "==1.5.0", true},
      {"1.5.1", "==1.5", false},
      {"1.5.3", "==1.5.*", true},
      {"1.6", "==1.5.*", false},
      {"1.5", "==1.5.*", true},
      {"1.23.5", "<1.24", true},
      {"1.24.0", "<1.24", false},
      {"1.24rc1", "<1.24", false},
      {"1.23.9rc1", "<1.24", true},
      {"2.5", ">=2,<3", true},
      {"3.0", ">=2,<3", false},
      {"2.5", ">= 2 , < 3", true},
      {"1.4.5", "~=1.4", true},
      {"2.0", "~=1.4", false},
      {"1.3", "~=1.4", false},
      {"1.4.5", "~=1.4.2", true},
      {"1.5.0", "~=1.4.2", false},
      {"1.2", "!=1.2", false},
      {"1.3", "!=1.2", true},
      {"1.2.7", "!=1.2.*", false},
      {"1.3", "!=1.2.*", true},
      {"1.0.post1", ">1.0", false},
      {"1.0.post1", ">=1.0", true},
      {"1.0.post1", ">1.0.post0", true},
      {"1.1", ">1.0", true},
      {"1.0", "<1.0.post1", true},
      {"1.0.post1", "<=1.0", false},
      {"1.0a1", "<1.0", false},
      {"1.0a1", "<1.0b1", true},
      {"1.0.dev1", "<1.0a1", true},
      {"1.0", ">=1.0rc1", true},
      {"1.0rc1", ">=1.0rc1", true},
      {"1.0rc1", ">=1.0", false},
      {"2!1.0", ">=1.9", true},
      {"1.9", ">=1!0.1", false},
      {"1.0+local.7", "==1.0", true},
      {"1.0", "==1.0+local", false},
      {"1.0+local", "==1.0+local", true},
      {"1.0", "===1.0", true},
      {"1.0.0", "===1.0", false},
      {"V1.5", "==1.5", true},
      {"1.5", "", true},
      {"anything", "", true},
      {"garbage", "==1", false},
      {"1.5", "1.5", false},
      {"1.5", "==", false},
      {"1.5", "~=1", false},
      {"1.5", ">=1.*", false},
      {"1.5", "==1.5,", false},
      {"1.5", "=1.5", false},
      {"1.5", "^1.5", false},
      {"99999999999999999999", ">=1", false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(VersionSatisfies("python", r.version, r.spec), r.want)
        << r.version << " vs '" << r.spec << "'";
  }
}

TEST(VersionSatisfies, Node) {
  const Row rows[] = {
      {"1.2.3", "1.2.3", true},
      {"1.2.4", "1.2.3", false},
      {"1.2.3", "=1.2.3", true},
      {"v1.2.3", "1.2.3", true},
      {"1.5.0", "^1.2", true},
      {"2.0.0", "^1.2", false},
      {"1.1.9", "^1.2", false},
      {"0.2.5", "^0.2.3", true},
      {"0.3.0", "^0.2.3", false},
      {"0.0.3", "^0.0.3", true},
      {"0.0.4", "^0.0.3", false},
      {"0.0.9", "^0.0", true},
      {"0.1.0", "^0.0", false},
      {"0.9.9", "^0", true},
      {"1.2.9", "~1.2", true},
      {"1.3.0", "~1.2", false},
      {"1.2.3", "~1.2.3", true},
      {"1.2.2", "~1.2.3", false},
      {"1.9.0", "~1", true},
      {"5.0.0", ">=1", true},
      {"0.9.0", ">=1", false},
      {"1.2.3", ">= 1.2.0", true},
      {"4.17.21", "4", true},
      {"5.0.0", "4", false},
      {"1.2.7", "1.2.x", true},
      {"1.3.0", "1.2.x", false},
      {"3.0.0", "*", true},
      {"3.0.0", "x", true},
      {"1.5.0", "1.0.0 - 2.0.0", true},
      {"2.0.1", "1.0.0 - 2.0.0", false},
      {"2.9.9", "1 - 2", true},
      {"3.0.0", "1 - 2", false},
      {"3.1.0", "^1 || ^3", true},
      {"2.1.0", "^1 || ^3", false},
      {"1.2.0", ">1.1", true},
      {"1.1.9", ">1.1", false},
      {"1.2.4", ">1.2.3", true},
      {"1.2.3", ">1.2.3", false},
      {"1.1.0", "<1.2", true},
      {"1.2.0", "<1.2", false},
      {"1.2.9", "<=1.2", true},
      {"1.3.0", "<=1.2", false},
      {"1.2.3", "<=1.2.3", true},
      {"1.0.0", ">=1.0.0 <2.0.0", true},
      {"2.0.0", ">=1.0.0 <2.0.0", false},
      {"1.2.3-beta.2", "^1.2.3-beta.1", true},
      {"1.2.3-beta.10", ">1.2.3-beta.9", true},  // numeric identifiers compare numerically
      {"1.2.3-alpha", "<1.2.3-beta", true},
      {"1.3.0-beta.1", "^1.2.3-beta.1", false},  // pre-release of another X.Y.Z
      {"2.0.0-rc.1", "^1.0.0", false},
      {"1.2.3-alpha", "<1.2.3", false},
      {"1.2.3+build.5", "1.2.3", true},
      {"1.2.3", "", true},
      {"1.2", "^1", false},  // installed versions are full
      {"1.2.3", "latest", false},
      {"1.2.3", "not a range", false},
      {"1.2.3", ">", false},
      {"1.2.3", "1.x.3", false},
      {"1.2.3", ">*", false},
      {"1.2.3", "1.2.3.4", false},
      {"1.2.3", "^1.2.3-", false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(VersionSatisfies("node", r.version, r.spec), r.want)
        << r.version << " vs '" << r.spec << "'";
  }
}

TEST(VersionSatisfies, UnknownEcosystem) {
  EXPECT_FALSE(VersionSatisfies("cargo", "1.0.0", ""));
  EXPECT_FALSE(VersionSatisfies("", "1.0.0", "1.0.0"));
}

TEST(VersionSatisfies, HostileSpecsAreBounded) {
  std::string many(100000, '|');
  EXPECT_FALSE(VersionSatisfies("node", "1.0.0", many));
  std::string clauses;
  for (int i = 0; i < 100; ++i) clauses += ">=1,";
  clauses += ">=1";
  EXPECT_TRUE(VersionSatisfies("python", "1.0", clauses));
  EXPECT_FALSE(VersionSatisfies("python", std::string(1000, '1'), ">=1"));
}

}  // namespace
}  // namespace paddock::sessions
