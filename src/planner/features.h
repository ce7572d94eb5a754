// Feature extraction: what a task *is*, read from its text, plan and commands (PLAN-1).
//
// "Python" says nothing about resources: `print(1 + 1)` and pandas over a 20 GB CSV are both
// Python. So instead of branching on a language, the extractor turns the request into a set of
// tags ("lang:python", "pkg:pandas", "cap:browser", "build:cargo", "data:huge") using tables of
// patterns (commands, libraries, keywords, python imports, data sizes). Rules (rules.h) match
// tags, and history (history.h) is keyed by the *workload signature*: a hash of the salient
// tags, so rewording a task keeps its history while a different workload gets its own.
//
// Everything here is deterministic and bounded: at most kMaxAnalysedBytes of text are read.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "planner/plan_request.h"

namespace paddock::planner {

// Text beyond this (task + steps + commands, in that order) is not analysed; declared fields
// (languages, dependencies, needs_*, sizes) always are.
inline constexpr size_t kMaxAnalysedBytes = 256 * 1024;

// Data-size tiers behind the data:* tags.
inline constexpr uint64_t kDataMediumBytes = 256ull << 20;  // data:medium from here
inline constexpr uint64_t kDataLargeBytes = 2ull << 30;     // data:large
inline constexpr uint64_t kDataHugeBytes = 8ull << 30;      // data:huge

struct WorkloadFeatures {
  std::set<std::string> tags;                   // "category:name", sorted
  std::map<std::string, std::string> evidence;  // tag -> the (quoted, bounded) text behind it
  std::vector<std::string> packages;            // installed/declared packages, normalised, sorted
  uint64_t data_bytes = 0;                      // largest data size mentioned (0 = none)
  std::string signature_key;                    // the salient tags joined by ','
  std::string signature;                        // "ws-" + 16 hex digits of sha256(signature_key)
  std::string command_signature;                // CommandSignature(request); "" without commands
  bool truncated = false;                       // the text was longer than kMaxAnalysedBytes

  bool Has(std::string_view tag) const { return tags.count(std::string(tag)) > 0; }
};

// Extracts features from a request. Never fails; pure function of its input.
WorkloadFeatures ExtractFeatures(const PlanRequest& request);

// The workload signature of a tag set: only the salient categories (lang, pkg, cap, build,
// data, repo) count, so incidental tags (which package manager, a git clone) do not split
// history. Returns {signature_key, signature}.
std::pair<std::string, std::string> WorkloadSignature(const std::set<std::string>& tags);

// The exact-commands signature: "wc-" + 16 hex digits of the sha256 of the request's commands,
// each with its whitespace runs collapsed to one space and trimmed, empty ones dropped, in
// order. Finer than the workload signature — `python -c 'print(1)'` and a script building a
// 5-million-entry dict share "lang:python" but not their commands — so the planner looks it up
// first. "" when the request has no commands (prose alone is too loose to call "the same").
std::string CommandSignature(const PlanRequest& request);

// Every tag ExtractFeatures can produce: rules naming another tag are a load error (a typo
// such as "cap:browsr" would otherwise silently never match).
const std::set<std::string>& KnownTags();

}  // namespace paddock::planner
