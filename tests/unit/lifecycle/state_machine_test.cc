#include "lifecycle/state_machine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <set>
#include <string>

namespace paddock::lifecycle {
namespace {

using S = SandboxState;

bool Allowed(S from, S to) { return CheckTransition(from, to).ok(); }

// States reachable from `start` by following the table.
std::set<S> ReachableFrom(S start) {
  std::set<S> seen = {start};
  std::deque<S> queue = {start};
  while (!queue.empty()) {
    S s = queue.front();
    queue.pop_front();
    for (S next : AllowedFrom(s)) {
      if (seen.insert(next).second) queue.push_back(next);
    }
  }
  return seen;
}

TEST(StateMachineTest, EveryTableEntryIsAccepted) {
  ASSERT_FALSE(AllTransitions().empty());
  for (const Transition& t : AllTransitions()) {
    EXPECT_TRUE(CheckTransition(t.from, t.to).ok())
        << StateName(t.from) << " -> " << StateName(t.to);
    EXPECT_STREQ(TransitionTrigger(t.from, t.to), t.trigger);
    auto next = AllowedFrom(t.from);
    EXPECT_NE(std::find(next.begin(), next.end(), t.to), next.end());
  }
}

TEST(StateMachineTest, ExactlyTheTableIsAccepted) {
  // Every pair of states: accepted iff it is in the table.
  std::set<std::pair<S, S>> table;
  for (const Transition& t : AllTransitions()) {
    EXPECT_TRUE(table.emplace(t.from, t.to).second)
        << "duplicate " << StateName(t.from) << " -> " << StateName(t.to);
  }
  for (S from : AllStates()) {
    for (S to : AllStates()) {
      EXPECT_EQ(Allowed(from, to), table.count({from, to}) == 1)
          << StateName(from) << " -> " << StateName(to);
    }
  }
}

TEST(StateMachineTest, ExpectedLifecyclePathsAreAllowed) {
  const std::vector<std::vector<S>> paths = {
      // Planned create, lease, exec, idle, release with soft reset back to the pool.
      {S::kRequested, S::kPlanning, S::kAllocating, S::kProvisioning, S::kReady, S::kLocking,
       S::kLeased, S::kRunning, S::kLeased, S::kIdle, S::kLeased, S::kRecycling, S::kSanitizing,
       S::kReady},
      // Direct create, pause on expiry, resume, hard destroy on release.
      {S::kRequested, S::kProvisioning, S::kReady, S::kLocking, S::kLeased, S::kHibernating,
       S::kIdle, S::kRunning, S::kLeased, S::kRecycling, S::kTerminated},
      // Reuse check passes, then fails and recycles.
      {S::kReady, S::kLocking, S::kLeased, S::kReuseChecking, S::kLeased, S::kIdle,
       S::kReuseChecking, S::kRecycling, S::kSanitizing, S::kTerminated},
      // Lock not granted, retried; runtime vanishes; reconciler cleans up.
      {S::kReady, S::kLocking, S::kReady, S::kLocking, S::kLeased, S::kRunning, S::kLost,
       S::kTerminated},
  };
  for (const auto& path : paths) {
    for (size_t i = 1; i < path.size(); ++i) {
      EXPECT_TRUE(Allowed(path[i - 1], path[i]))
          << StateName(path[i - 1]) << " -> " << StateName(path[i]);
    }
  }
}

TEST(StateMachineTest, InvalidTransitionsAreRejected) {
  for (S to : AllStates()) {
    EXPECT_FALSE(Allowed(S::kTerminated, to)) << StateName(to);
    EXPECT_FALSE(Allowed(S::kFailed, to)) << StateName(to);
  }
  const std::vector<std::pair<S, S>> invalid = {
      {S::kFailed, S::kReady},        {S::kReady, S::kRunning},  // no exec without a lease
      {S::kRequested, S::kLeased},    {S::kLost, S::kReady},
      {S::kReady, S::kLeased},       // a lease is only granted through Locking
      {S::kRecycling, S::kReady},    // back to the pool only through Sanitizing
      {S::kRunning, S::kRecycling},  // the in-flight exec ends first
      {S::kRunning, S::kHibernating}, {S::kRequested, S::kLost},  // nothing on the host yet
      {S::kLost, S::kLeased},         {S::kReady, S::kReady},
      {S::kHibernating, S::kRunning}, {S::kProvisioning, S::kLeased},
  };
  for (auto [from, to] : invalid) {
    Status st = CheckTransition(from, to);
    ASSERT_FALSE(st.ok()) << StateName(from) << " -> " << StateName(to);
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(st.message(),
              std::string("invalid transition ") + StateName(from) + " -> " + StateName(to));
    EXPECT_EQ(TransitionTrigger(from, to), nullptr);
  }
  EXPECT_EQ(CheckTransition(S::kTerminated, S::kReady).message(),
            "invalid transition terminated -> ready");
}

TEST(StateMachineTest, NamesRoundTrip) {
  std::set<std::string> names;
  for (S s : AllStates()) {
    std::string name = StateName(s);
    EXPECT_TRUE(names.insert(name).second) << name;
    auto parsed = ParseState(name);
    ASSERT_TRUE(parsed.ok()) << name;
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(names.size(), kSandboxStateCount);
  EXPECT_STREQ(StateName(S::kReuseChecking), "reuse_checking");
  EXPECT_STREQ(StateName(S::kRequested), "requested");
  EXPECT_STREQ(StateName(S::kHibernating), "hibernating");
}

TEST(StateMachineTest, ParseStateRejectsUnknownNames) {
  for (const char* bad : {"", "Ready", "READY", "reuse-checking", "reusechecking", " ready",
                          "ready ", "paused", "unknown"}) {
    auto r = ParseState(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("unknown sandbox state"), std::string::npos);
  }
}

TEST(StateMachineTest, TerminalAndTransitionalClassification) {
  std::set<S> terminal, transitional;
  for (S s : AllStates()) {
    if (IsTerminal(s)) terminal.insert(s);
    if (IsTransitional(s)) transitional.insert(s);
    EXPECT_FALSE(IsTerminal(s) && IsTransitional(s)) << StateName(s);
    // Terminal means exactly: nothing leaves it.
    EXPECT_EQ(IsTerminal(s), AllowedFrom(s).empty()) << StateName(s);
  }
  EXPECT_EQ(terminal, (std::set<S>{S::kTerminated, S::kFailed}));
  EXPECT_EQ(transitional,
            (std::set<S>{S::kRequested, S::kPlanning, S::kAllocating, S::kProvisioning, S::kLocking,
                         S::kReuseChecking, S::kRecycling, S::kSanitizing}));
  EXPECT_FALSE(IsTerminal(S::kLost));
}

TEST(StateMachineTest, NoStateIsUnreachableFromRequested) {
  std::set<S> reachable = ReachableFrom(S::kRequested);
  for (S s : AllStates()) EXPECT_TRUE(reachable.count(s)) << StateName(s) << " is unreachable";
}

TEST(StateMachineTest, EveryNonTerminalStateCanReachTerminated) {
  for (S s : AllStates()) {
    if (IsTerminal(s)) continue;
    EXPECT_TRUE(ReachableFrom(s).count(S::kTerminated)) << StateName(s);
    EXPECT_TRUE(Allowed(s, S::kFailed)) << StateName(s) << " cannot fail";
  }
}

TEST(StateMachineTest, CrashStuckStatesCanBeResolvedByTheReconciler) {
  // A row left in a transitional state after a crash must be resolvable in one step: destroyed
  // (or, once it has a runtime object, marked Lost) — never stuck.
  for (S s : AllStates()) {
    if (!IsTransitional(s)) continue;
    EXPECT_TRUE(Allowed(s, S::kTerminated) || Allowed(s, S::kLost)) << StateName(s);
  }
  EXPECT_TRUE(Allowed(S::kLost, S::kTerminated));
  EXPECT_FALSE(Allowed(S::kLost, S::kLost));
}

}  // namespace
}  // namespace paddock::lifecycle
