#include "sessions/reuse_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <tuple>

namespace paddock::sessions {

namespace {

// ---------------------------------------------------------------------------------------------
// Small text helpers. Everything here is ASCII-only on purpose: names and versions that need
// anything else are not names or versions.

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v'; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::vector<std::string_view> Split(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    size_t next = s.find(sep, pos);
    if (next == std::string_view::npos) {
      out.push_back(s.substr(pos));
      return out;
    }
    out.push_back(s.substr(pos, next - pos));
    pos = next + sep.size();
  }
}

// Up to 15 digits at s[*i] (no overflow possible, and no real version needs more).
bool ParseNumber(std::string_view s, size_t* i, int64_t* out) {
  size_t start = *i;
  int64_t v = 0;
  while (*i < s.size() && IsDigit(s[*i])) {
    if (*i - start >= 15) return false;
    v = v * 10 + (s[*i] - '0');
    ++*i;
  }
  if (*i == start) return false;
  *out = v;
  return true;
}

// Longest versions and specs considered: anything longer is not one.
constexpr size_t kMaxVersionLen = 128;
constexpr size_t kMaxSpecLen = 512;
constexpr size_t kMaxNameLen = 214;  // npm's limit; PyPI names are far shorter in practice

// ---------------------------------------------------------------------------------------------
// PEP 440 (subset).

struct PyVersion {
  int64_t epoch = 0;
  std::vector<int64_t> release;
  int pre_phase = -1;  // -1 none, 0 a, 1 b, 2 rc
  int64_t pre_n = 0;
  bool has_post = false;
  int64_t post_n = 0;
  bool has_dev = false;
  int64_t dev_n = 0;
  std::string local;

  bool is_pre() const { return pre_phase >= 0 || has_dev; }
};

// Consumes an optional separator [-_.] followed by one of `words` (longest listed first);
// restores the position when none matches. Returns the index of the word matched or -1.
int MatchWord(std::string_view s, size_t* i, std::initializer_list<std::string_view> words) {
  size_t j = *i;
  if (j < s.size() && (s[j] == '-' || s[j] == '_' || s[j] == '.')) ++j;
  int idx = 0;
  for (std::string_view w : words) {
    if (s.substr(j, w.size()) == w) {
      *i = j + w.size();
      return idx;
    }
    ++idx;
  }
  return -1;
}

// An optional separator and number after a pre/post/dev word ("rc1", "rc.1", "post-2", "dev").
int64_t OptionalNumber(std::string_view s, size_t* i) {
  size_t j = *i;
  if (j < s.size() && (s[j] == '-' || s[j] == '_' || s[j] == '.')) ++j;
  int64_t n = 0;
  if (j < s.size() && IsDigit(s[j]) && ParseNumber(s, &j, &n)) {
    *i = j;
    return n;
  }
  return 0;
}

std::optional<PyVersion> ParsePyVersion(std::string_view text) {
  text = Trim(text);
  if (text.empty() || text.size() > kMaxVersionLen) return std::nullopt;
  const std::string lowered = Lower(text);
  std::string_view s = lowered;
  if (s.front() == 'v') s.remove_prefix(1);
  PyVersion v;
  size_t i = 0;
  int64_t n = 0;
  if (!ParseNumber(s, &i, &n)) return std::nullopt;
  if (i < s.size() && s[i] == '!') {
    v.epoch = n;
    ++i;
    if (!ParseNumber(s, &i, &n)) return std::nullopt;
  }
  v.release.push_back(n);
  while (i + 1 < s.size() && s[i] == '.' && IsDigit(s[i + 1])) {
    ++i;
    if (!ParseNumber(s, &i, &n) || v.release.size() >= 32) return std::nullopt;
    v.release.push_back(n);
  }
  // Pre-release: a, alpha, b, beta, c, rc, pre, preview.
  int w = MatchWord(s, &i, {"alpha", "beta", "preview", "pre", "rc", "a", "b", "c"});
  if (w >= 0) {
    static constexpr int kPhase[] = {0, 1, 2, 2, 2, 0, 1, 2};
    v.pre_phase = kPhase[w];
    v.pre_n = OptionalNumber(s, &i);
  }
  // Post-release: "-N" (implicit) or post, rev, r.
  if (i + 1 < s.size() && s[i] == '-' && IsDigit(s[i + 1])) {
    ++i;
    if (!ParseNumber(s, &i, &v.post_n)) return std::nullopt;
    v.has_post = true;
  } else if (MatchWord(s, &i, {"post", "rev", "r"}) >= 0) {
    v.has_post = true;
    v.post_n = OptionalNumber(s, &i);
  }
  if (MatchWord(s, &i, {"dev"}) >= 0) {
    v.has_dev = true;
    v.dev_n = OptionalNumber(s, &i);
  }
  if (i < s.size() && s[i] == '+') {
    ++i;
    std::string_view local = s.substr(i);
    if (local.empty() || !IsAlnum(local.front()) || !IsAlnum(local.back())) return std::nullopt;
    for (char c : local) {
      if (!IsAlnum(c) && c != '.' && c != '-' && c != '_') return std::nullopt;
    }
    v.local = std::string(local);
    i = s.size();
  }
  if (i != s.size()) return std::nullopt;
  return v;
}

int CompareRelease(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t n = std::max(a.size(), b.size());
  for (size_t k = 0; k < n; ++k) {
    int64_t x = k < a.size() ? a[k] : 0;
    int64_t y = k < b.size() ? b[k] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

// PEP 440 ordering without local labels: a dev-only release sorts before the pre-releases of
// its version, no pre-release after them; no post before any post; no dev after any dev.
int ComparePy(const PyVersion& a, const PyVersion& b) {
  if (a.epoch != b.epoch) return a.epoch < b.epoch ? -1 : 1;
  if (int c = CompareRelease(a.release, b.release); c != 0) return c;
  constexpr int64_t kLow = -1, kHigh = INT64_MAX;
  auto key = [&](const PyVersion& v) {
    int64_t pre_phase = v.pre_phase >= 0             ? v.pre_phase
                        : (!v.has_post && v.has_dev) ? -2  // 1.0.dev1 < 1.0a1
                                                     : 3;  // final after pre
    return std::make_tuple(pre_phase, v.pre_phase >= 0 ? v.pre_n : 0, v.has_post ? v.post_n : kLow,
                           v.has_dev ? v.dev_n : kHigh);
  };
  auto ka = key(a), kb = key(b);
  if (ka == kb) return 0;
  return ka < kb ? -1 : 1;
}

bool SameBaseRelease(const PyVersion& a, const PyVersion& b) {
  return a.epoch == b.epoch && CompareRelease(a.release, b.release) == 0;
}

bool PrefixMatch(const PyVersion& v, int64_t epoch, const std::vector<int64_t>& prefix) {
  if (v.epoch != epoch) return false;
  for (size_t k = 0; k < prefix.size(); ++k) {
    int64_t x = k < v.release.size() ? v.release[k] : 0;
    if (x != prefix[k]) return false;
  }
  return true;
}

// One clause of a python specifier list. `version` is nullopt when checking syntax only.
std::optional<bool> PyClause(std::string_view clause, const std::optional<PyVersion>& version,
                             std::string_view raw_version) {
  clause = Trim(clause);
  static constexpr std::string_view kOps[] = {"===", "~=", "==", "!=", "<=", ">=", "<", ">"};
  std::string_view op;
  for (std::string_view o : kOps) {
    if (StartsWith(clause, o)) {
      op = o;
      break;
    }
  }
  if (op.empty()) return std::nullopt;
  std::string_view rhs = Trim(clause.substr(op.size()));
  if (rhs.empty()) return std::nullopt;
  if (op == "===") {
    for (char c : rhs) {
      if (IsSpace(c) || c == ',') return std::nullopt;
    }
    return Lower(Trim(raw_version)) == Lower(rhs);
  }
  bool wildcard = false;
  if (EndsWith(rhs, ".*")) {
    if (op != "==" && op != "!=") return std::nullopt;
    wildcard = true;
    rhs.remove_suffix(2);
  }
  std::optional<PyVersion> spec = ParsePyVersion(rhs);
  if (!spec) return std::nullopt;
  if (wildcard && (spec->pre_phase >= 0 || spec->has_post || spec->has_dev || !spec->local.empty()))
    return std::nullopt;
  if (!spec->local.empty() && op != "==" && op != "!=") return std::nullopt;
  if (op == "~=" && spec->release.size() < 2) return std::nullopt;
  if (!version) return true;  // syntax check only
  const PyVersion& v = *version;
  auto equal = [&] {
    if (wildcard) return PrefixMatch(v, spec->epoch, spec->release);
    if (!spec->local.empty() && Lower(spec->local) != Lower(v.local)) return false;
    return ComparePy(v, *spec) == 0;
  };
  int c = ComparePy(v, *spec);
  if (op == "==") return equal();
  if (op == "!=") return !equal();
  if (op == "<=") return c <= 0;
  if (op == ">=") return c >= 0;
  if (op == "<") return c < 0 && (spec->is_pre() || !v.is_pre() || !SameBaseRelease(v, *spec));
  if (op == ">") {
    return c > 0 && (spec->has_post || !v.has_post || !SameBaseRelease(v, *spec));
  }
  // ~=V: >= V and == V's release without its last segment, .*
  std::vector<int64_t> prefix(spec->release.begin(), spec->release.end() - 1);
  return c >= 0 && PrefixMatch(v, spec->epoch, prefix);
}

// A whole python specifier list; nullopt when malformed. `version` nullopt: syntax only.
std::optional<bool> PySpec(std::string_view spec, const std::optional<PyVersion>& version,
                           std::string_view raw_version) {
  bool all = true;
  for (std::string_view clause : Split(spec, ",")) {
    std::optional<bool> r = PyClause(clause, version, raw_version);
    if (!r) return std::nullopt;
    all = all && *r;
  }
  return all;
}

// ---------------------------------------------------------------------------------------------
// Semver (subset of node-semver).

struct SemVer {
  int64_t major = 0, minor = 0, patch = 0;
  std::vector<std::string> pre;
};

bool ValidIdentifiers(std::string_view s, std::vector<std::string>* out) {
  if (s.empty()) return false;
  for (std::string_view id : Split(s, ".")) {
    if (id.empty()) return false;
    for (char c : id) {
      if (!IsAlnum(c) && c != '-') return false;
    }
    if (out) out->emplace_back(id);
  }
  return true;
}

int CompareIdentifier(const std::string& a, const std::string& b) {
  bool an = std::all_of(a.begin(), a.end(), IsDigit);
  bool bn = std::all_of(b.begin(), b.end(), IsDigit);
  if (an && bn) {
    // Numerically without overflow: strip leading zeros, then longer is bigger.
    std::string_view x = a, y = b;
    while (x.size() > 1 && x.front() == '0') x.remove_prefix(1);
    while (y.size() > 1 && y.front() == '0') y.remove_prefix(1);
    if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
    return x == y ? 0 : (x < y ? -1 : 1);
  }
  if (an != bn) return an ? -1 : 1;  // numeric identifiers sort before alphanumeric ones
  return a == b ? 0 : (a < b ? -1 : 1);
}

int CompareSemVer(const SemVer& a, const SemVer& b) {
  if (std::tie(a.major, a.minor, a.patch) != std::tie(b.major, b.minor, b.patch))
    return std::tie(a.major, a.minor, a.patch) < std::tie(b.major, b.minor, b.patch) ? -1 : 1;
  if (a.pre.empty() != b.pre.empty()) return a.pre.empty() ? 1 : -1;  // 1.0.0-x < 1.0.0
  for (size_t k = 0; k < std::min(a.pre.size(), b.pre.size()); ++k) {
    if (int c = CompareIdentifier(a.pre[k], b.pre[k]); c != 0) return c;
  }
  if (a.pre.size() == b.pre.size()) return 0;
  return a.pre.size() < b.pre.size() ? -1 : 1;
}

// A possibly partial version: "1", "1.2", "1.2.3-rc.1+b", "1.x", "*", "". `parts` is how many
// leading numeric components were given before the first wildcard or the end.
struct Partial {
  int parts = 0;
  int64_t v[3] = {0, 0, 0};
  std::vector<std::string> pre;
};

std::optional<Partial> ParsePartial(std::string_view s) {
  if (s.size() > kMaxVersionLen) return std::nullopt;
  if (!s.empty() && (s.front() == 'v' || s.front() == '=')) s.remove_prefix(1);
  Partial p;
  if (s.empty()) return p;
  size_t plus = s.find('+');
  if (plus != std::string_view::npos) {
    if (!ValidIdentifiers(s.substr(plus + 1), nullptr)) return std::nullopt;
    s = s.substr(0, plus);
  }
  std::string_view core = s;
  size_t dash = s.find('-');
  if (dash != std::string_view::npos) {
    core = s.substr(0, dash);
    if (!ValidIdentifiers(s.substr(dash + 1), &p.pre)) return std::nullopt;
  }
  std::vector<std::string_view> comps = Split(core, ".");
  if (comps.size() > 3) return std::nullopt;
  bool wild = false;
  for (size_t k = 0; k < comps.size(); ++k) {
    std::string_view c = comps[k];
    if (c == "x" || c == "X" || c == "*") {
      wild = true;
      continue;
    }
    if (wild) return std::nullopt;  // "1.x.3"
    size_t i = 0;
    if (!ParseNumber(c, &i, &p.v[k]) || i != c.size()) return std::nullopt;
    p.parts = static_cast<int>(k) + 1;
  }
  if (!p.pre.empty() && p.parts != 3) return std::nullopt;
  return p;
}

std::optional<SemVer> ParseSemVer(std::string_view s) {
  s = Trim(s);
  std::optional<Partial> p = ParsePartial(s);
  if (!p || p->parts != 3) return std::nullopt;
  return SemVer{p->v[0], p->v[1], p->v[2], p->pre};
}

enum class Op { kLt, kLe, kGt, kGe, kEq };
struct Comparator {
  Op op;
  SemVer v;
};

SemVer Sv(int64_t a, int64_t b, int64_t c, std::vector<std::string> pre = {}) {
  return SemVer{a, b, c, std::move(pre)};
}
const std::vector<std::string> kZeroPre = {"0"};  // "<2.0.0-0": below every 2.0.0 pre-release

// Desugars one comparator ("^1.2", ">=1", "1.x", "~1.2.3") into primitive ones; `none` when
// it matches nothing (">*").
bool Desugar(std::string_view text, std::vector<Comparator>* out, bool* none) {
  static constexpr std::string_view kOps[] = {">=", "<=", "~>", ">", "<", "=", "^", "~"};
  std::string_view op;
  for (std::string_view o : kOps) {
    if (StartsWith(text, o)) {
      op = o;
      break;
    }
  }
  std::optional<Partial> p = ParsePartial(Trim(text.substr(op.size())));
  if (!p) return false;
  const int64_t M = p->v[0], m = p->v[1], pt = p->v[2];
  const int n = p->parts;
  auto lower = [&] { out->push_back({Op::kGe, Sv(M, m, pt, p->pre)}); };
  if (op.empty() || op == "=") {
    if (n == 3) {
      out->push_back({Op::kEq, Sv(M, m, pt, p->pre)});
    } else if (n == 2) {
      out->push_back({Op::kGe, Sv(M, m, 0)});
      out->push_back({Op::kLt, Sv(M, m + 1, 0, kZeroPre)});
    } else if (n == 1) {
      out->push_back({Op::kGe, Sv(M, 0, 0)});
      out->push_back({Op::kLt, Sv(M + 1, 0, 0, kZeroPre)});
    }  // n == 0: any
    return true;
  }
  if (op == "^") {
    if (n == 0) return true;
    lower();
    if (M > 0 || n == 1) {
      out->push_back({Op::kLt, Sv(M + 1, 0, 0, kZeroPre)});
    } else if (m > 0 || n == 2) {
      out->push_back({Op::kLt, Sv(0, m + 1, 0, kZeroPre)});
    } else {
      out->push_back({Op::kLt, Sv(0, 0, pt + 1, kZeroPre)});
    }
    return true;
  }
  if (op == "~" || op == "~>") {
    if (n == 0) return true;
    lower();
    if (n == 1) {
      out->push_back({Op::kLt, Sv(M + 1, 0, 0, kZeroPre)});
    } else {
      out->push_back({Op::kLt, Sv(M, m + 1, 0, kZeroPre)});
    }
    return true;
  }
  if (op == ">=") {
    if (n > 0) lower();
    return true;
  }
  if (op == ">") {
    if (n == 0) {
      *none = true;
    } else if (n == 1) {
      out->push_back({Op::kGe, Sv(M + 1, 0, 0)});
    } else if (n == 2) {
      out->push_back({Op::kGe, Sv(M, m + 1, 0)});
    } else {
      out->push_back({Op::kGt, Sv(M, m, pt, p->pre)});
    }
    return true;
  }
  if (op == "<") {
    if (n == 0) {
      *none = true;
    } else if (n == 3) {
      out->push_back({Op::kLt, Sv(M, m, pt, p->pre)});
    } else {
      out->push_back({Op::kLt, Sv(M, n == 2 ? m : 0, 0, kZeroPre)});
    }
    return true;
  }
  // "<="
  if (n == 3) {
    out->push_back({Op::kLe, Sv(M, m, pt, p->pre)});
  } else if (n == 2) {
    out->push_back({Op::kLt, Sv(M, m + 1, 0, kZeroPre)});
  } else if (n == 1) {
    out->push_back({Op::kLt, Sv(M + 1, 0, 0, kZeroPre)});
  }
  return true;
}

bool Test(const Comparator& c, const SemVer& v) {
  int r = CompareSemVer(v, c.v);
  switch (c.op) {
    case Op::kLt:
      return r < 0;
    case Op::kLe:
      return r <= 0;
    case Op::kGt:
      return r > 0;
    case Op::kGe:
      return r >= 0;
    case Op::kEq:
      return r == 0;
  }
  return false;
}

// One alternative of a range (between "||"). nullopt when malformed.
std::optional<bool> SemAlternative(std::string_view alt, const std::optional<SemVer>& version) {
  alt = Trim(alt);
  std::vector<Comparator> set;
  bool none = false;
  size_t hyphen = alt.find(" - ");
  if (hyphen != std::string_view::npos) {
    std::optional<Partial> a = ParsePartial(Trim(alt.substr(0, hyphen)));
    std::optional<Partial> b = ParsePartial(Trim(alt.substr(hyphen + 3)));
    if (!a || !b) return std::nullopt;
    if (a->parts > 0) set.push_back({Op::kGe, Sv(a->v[0], a->v[1], a->v[2], a->pre)});
    if (b->parts == 3) {
      set.push_back({Op::kLe, Sv(b->v[0], b->v[1], b->v[2], b->pre)});
    } else if (b->parts == 2) {
      set.push_back({Op::kLt, Sv(b->v[0], b->v[1] + 1, 0, kZeroPre)});
    } else if (b->parts == 1) {
      set.push_back({Op::kLt, Sv(b->v[0] + 1, 0, 0, kZeroPre)});
    }
  } else {
    // Whitespace-separated comparators; an operator alone (">= 1.2") joins the next word.
    std::vector<std::string> words;
    std::string pending;
    size_t i = 0;
    while (i < alt.size()) {
      while (i < alt.size() && IsSpace(alt[i])) ++i;
      size_t start = i;
      while (i < alt.size() && !IsSpace(alt[i])) ++i;
      if (start == i) break;
      std::string_view w = alt.substr(start, i - start);
      if (w.find_first_not_of("<>=~^") == std::string_view::npos) {
        pending += w;
        continue;
      }
      words.push_back(pending + std::string(w));
      pending.clear();
    }
    if (!pending.empty()) return std::nullopt;
    for (const std::string& w : words) {
      if (!Desugar(w, &set, &none)) return std::nullopt;
    }
  }
  if (!version) return true;
  if (none) return false;
  for (const Comparator& c : set) {
    if (!Test(c, *version)) return false;
  }
  if (version->pre.empty()) return true;
  // A pre-release is in range only when some comparator names a pre-release of the same
  // X.Y.Z: "^1.2.3-beta.1" admits 1.2.3-beta.2 but not 1.3.0-beta.1.
  for (const Comparator& c : set) {
    if (!c.v.pre.empty() && c.v.major == version->major && c.v.minor == version->minor &&
        c.v.patch == version->patch)
      return true;
  }
  return false;
}

std::optional<bool> SemRange(std::string_view range, const std::optional<SemVer>& version) {
  bool any = false;
  for (std::string_view alt : Split(range, "||")) {
    std::optional<bool> r = SemAlternative(alt, version);
    if (!r) return std::nullopt;
    any = any || *r;
  }
  return any;
}

bool ValidSpec(std::string_view ecosystem, std::string_view spec) {
  if (spec.empty()) return true;
  if (spec.size() > kMaxSpecLen) return false;
  if (ecosystem == "python") return PySpec(spec, std::nullopt, "").has_value();
  return SemRange(spec, std::nullopt).has_value();
}

// ---------------------------------------------------------------------------------------------
// Requirement tokens.

bool ValidPythonName(std::string_view n) {
  if (n.empty() || n.size() > kMaxNameLen || !IsAlnum(n.front()) || !IsAlnum(n.back()))
    return false;
  return std::all_of(n.begin(), n.end(),
                     [](char c) { return IsAlnum(c) || c == '.' || c == '_' || c == '-'; });
}

bool ValidNodeName(std::string_view n) {
  if (n.empty() || n.size() > kMaxNameLen) return false;
  auto part_ok = [](std::string_view p) {
    return !p.empty() && p.front() != '.' && p.front() != '_' &&
           std::all_of(p.begin(), p.end(), [](char c) {
             return IsAlnum(c) || c == '.' || c == '_' || c == '-' || c == '~';
           });
  };
  if (n.front() == '@') {
    size_t slash = n.find('/');
    if (slash == std::string_view::npos) return false;
    return part_ok(n.substr(1, slash - 1)) && part_ok(n.substr(slash + 1));
  }
  return part_ok(n);
}

bool LooksLikePathOrUrl(std::string_view t) {
  return t.front() == '.' || t.front() == '/' || t.front() == '~' ||
         t.find("://") != std::string_view::npos || t.find('\\') != std::string_view::npos ||
         StartsWith(t, "git+") || StartsWith(t, "file:");
}

std::optional<Requirement> ParsePython(std::string_view t) {
  const std::string lowered = Lower(t);
  if (EndsWith(lowered, ".whl")) {
    // name-version(-build)?-python-abi-platform.whl, possibly with a path in front.
    std::string_view file =
        t.substr(t.find_last_of('/') == std::string_view::npos ? 0 : t.find_last_of('/') + 1);
    file.remove_suffix(4);
    std::vector<std::string_view> parts = Split(file, "-");
    if (parts.size() < 5 || parts.size() > 6 || !ValidPythonName(parts[0]) ||
        !ParsePyVersion(parts[1]))
      return std::nullopt;
    return Requirement{"python", NormalizePythonName(parts[0]), "==" + std::string(parts[1])};
  }
  size_t i = 0;
  while (i < t.size() && (IsAlnum(t[i]) || t[i] == '.' || t[i] == '_' || t[i] == '-')) ++i;
  std::string_view name = t.substr(0, i);
  std::string_view rest = t.substr(i);
  if (!ValidPythonName(name)) return std::nullopt;
  rest = Trim(rest);
  if (!rest.empty() && rest.front() == '[') {  // extras: not a version constraint
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    rest = Trim(rest.substr(close + 1));
  }
  if (!rest.empty() && rest.front() == '@') {  // "name @ URL": the name, any version
    return Requirement{"python", NormalizePythonName(name), ""};
  }
  if (LooksLikePathOrUrl(t)) return std::nullopt;
  // Local archives and files: "foo.tar.gz" would otherwise read as a package "foo-tar-gz".
  for (std::string_view ext : {".tar.gz", ".tgz", ".zip", ".tar.bz2", ".tar.xz", ".egg", ".txt",
                               ".py", ".toml", ".cfg", ".in"}) {
    if (EndsWith(lowered, ext)) return std::nullopt;
  }
  rest = Trim(rest.substr(0, rest.find(';')));  // environment markers: not evaluated here
  if (rest.size() >= 2 && rest.front() == '(' && rest.back() == ')') {
    rest = Trim(rest.substr(1, rest.size() - 2));
  }
  std::string spec;
  for (char c : rest) {
    if (!IsSpace(c)) spec += c;
  }
  if (!ValidSpec("python", spec)) return std::nullopt;
  return Requirement{"python", NormalizePythonName(name), std::move(spec)};
}

std::optional<Requirement> ParseNode(std::string_view t) {
  if (LooksLikePathOrUrl(t) || EndsWith(Lower(t), ".tgz") || EndsWith(Lower(t), ".tar.gz"))
    return std::nullopt;
  size_t at = t.find('@', t.front() == '@' ? 1 : 0);
  std::string_view name = t.substr(0, at);
  std::string_view spec = at == std::string_view::npos ? "" : t.substr(at + 1);
  // "user/repo" (a GitHub shorthand), "alias@npm:x", "github:..." are not registry packages.
  if (name.front() != '@' && name.find('/') != std::string_view::npos) return std::nullopt;
  if (name.find(':') != std::string_view::npos || spec.find(':') != std::string_view::npos)
    return std::nullopt;
  if (!ValidNodeName(name)) return std::nullopt;
  spec = Trim(spec);
  if (spec == "latest" || spec == "*") spec = "";
  if (spec.size() > kMaxSpecLen) return std::nullopt;
  // A dist-tag ("next") is kept: it satisfies no installed version, so it is never "proven".
  if (!ValidSpec("node", spec)) {
    if (spec.empty() || !std::all_of(spec.begin(), spec.end(), [](char c) {
          return IsAlnum(c) || c == '-' || c == '.' || c == '_';
        }))
      return std::nullopt;
  }
  return Requirement{"node", Lower(name), std::string(spec)};
}

// ---------------------------------------------------------------------------------------------
// Shell-ish tokenizing: words and simple-command boundaries (; | & && || newline parentheses).
// Quotes and backslashes as sh does; `$...` words are left to the caller (it skips them).

struct Word {
  std::string text;
  bool quoted = false;         // any part was quoted: never an operator or redirection
  bool has_expansion = false;  // unquoted/double-quoted $ or backtick: value unknown here
  bool overlong = false;
};
using SimpleCommand = std::vector<Word>;

constexpr size_t kMaxWordBytes = 1024;

std::vector<SimpleCommand> SplitCommands(std::string_view s) {
  std::vector<SimpleCommand> out(1);
  Word w;
  bool in_word = false;
  auto flush = [&] {
    if (in_word) out.back().push_back(std::move(w));
    w = Word{};
    in_word = false;
  };
  auto add = [&](char c) {
    in_word = true;
    if (w.text.size() >= kMaxWordBytes) {
      w.overlong = true;
      return;
    }
    w.text += c;
  };
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '\'') {
      in_word = true;
      w.quoted = true;
      size_t end = s.find('\'', i + 1);
      if (end == std::string_view::npos) end = s.size();
      for (size_t k = i + 1; k < end; ++k) add(s[k]);
      i = end + 1;
      continue;
    }
    if (c == '"') {
      in_word = true;
      w.quoted = true;
      ++i;
      while (i < s.size() && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < s.size() &&
            (s[i + 1] == '"' || s[i + 1] == '\\' || s[i + 1] == '$' || s[i + 1] == '`')) {
          add(s[i + 1]);
          i += 2;
          continue;
        }
        if (s[i] == '$' || s[i] == '`') w.has_expansion = true;
        add(s[i]);
        ++i;
      }
      ++i;
      continue;
    }
    if (c == '\\') {
      if (i + 1 < s.size() && s[i + 1] != '\n') add(s[i + 1]);
      i += 2;
      continue;
    }
    if (IsSpace(c) && c != '\n') {
      flush();
      ++i;
      continue;
    }
    // "2>&1", ">&2": the & belongs to the redirection, not a command separator.
    bool redirect_amp =
        c == '&' && in_word && !w.text.empty() && (w.text.back() == '>' || w.text.back() == '<');
    if (!redirect_amp && (c == ';' || c == '|' || c == '&' || c == '\n' || c == '(' || c == ')')) {
      flush();
      if (!out.back().empty()) out.emplace_back();
      ++i;
      continue;
    }
    if (c == '$' || c == '`') w.has_expansion = true;
    add(c);
    ++i;
  }
  flush();
  if (out.back().empty()) out.pop_back();
  return out;
}

std::string Basename(std::string_view s) {
  size_t slash = s.find_last_of('/');
  return std::string(slash == std::string_view::npos ? s : s.substr(slash + 1));
}

bool IsPipName(std::string_view b) {  // pip, pip3, pip3.12
  if (!StartsWith(b, "pip")) return false;
  return std::all_of(b.begin() + 3, b.end(), [](char c) { return IsDigit(c) || c == '.'; });
}
bool IsPythonName(std::string_view b) {  // python, python3, python3.12
  if (!StartsWith(b, "python")) return false;
  return std::all_of(b.begin() + 6, b.end(), [](char c) { return IsDigit(c) || c == '.'; });
}

// Options (of pip and of its install command) that take a value in the next word.
bool PipFlagTakesValue(std::string_view f) {
  static const std::set<std::string_view> kFlags = {"-r",
                                                    "--requirement",
                                                    "-c",
                                                    "--constraint",
                                                    "-e",
                                                    "--editable",
                                                    "-i",
                                                    "--index-url",
                                                    "--extra-index-url",
                                                    "-f",
                                                    "--find-links",
                                                    "-t",
                                                    "--target",
                                                    "--prefix",
                                                    "--root",
                                                    "--src",
                                                    "--upgrade-strategy",
                                                    "--platform",
                                                    "--python-version",
                                                    "--implementation",
                                                    "--abi",
                                                    "--no-binary",
                                                    "--only-binary",
                                                    "--progress-bar",
                                                    "--trusted-host",
                                                    "--cache-dir",
                                                    "--log",
                                                    "--log-file",
                                                    "--proxy",
                                                    "--timeout",
                                                    "--retries",
                                                    "--exists-action",
                                                    "--cert",
                                                    "--client-cert",
                                                    "--config-settings",
                                                    "-C",
                                                    "--global-option",
                                                    "--install-option",
                                                    "--report",
                                                    "--python",
                                                    "--keyring-provider",
                                                    "--use-feature",
                                                    "--use-deprecated",
                                                    "--root-user-action",
                                                    "--config-setting",
                                                    "-p",
                                                    "--resolution",
                                                    "--index-strategy",
                                                    "--extra-index",
                                                    "--index",
                                                    "--default-index"};
  return kFlags.count(f) > 0;
}
bool NpmFlagTakesValue(std::string_view f) {
  static const std::set<std::string_view> kFlags = {"--registry",
                                                    "--prefix",
                                                    "--tag",
                                                    "--cache",
                                                    "--userconfig",
                                                    "--globalconfig",
                                                    "--workspace",
                                                    "-w",
                                                    "--omit",
                                                    "--include",
                                                    "--loglevel",
                                                    "--install-strategy",
                                                    "--save-prefix",
                                                    "--filter",
                                                    "--dir",
                                                    "-C",
                                                    "--cwd",
                                                    "--modules-folder",
                                                    "--network-timeout",
                                                    "--mutex",
                                                    "--script-shell",
                                                    "--before",
                                                    "--install-links",
                                                    "--cpu",
                                                    "--os",
                                                    "--libc"};
  return kFlags.count(f) > 0;
}

bool IsRedirection(const Word& w) {
  if (w.quoted) return false;
  size_t i = 0;
  while (i < w.text.size() && IsDigit(w.text[i])) ++i;
  return i < w.text.size() && (w.text[i] == '<' || w.text[i] == '>');
}
// A redirection word that names its target in the next word (">", "2>>", "<") rather than
// in itself (">/dev/null", "2>&1").
bool RedirectionNeedsTarget(const Word& w) {
  return w.text.find_first_not_of("0123456789<>&") == std::string::npos &&
         (w.text.back() == '>' || w.text.back() == '<');
}

struct Collector {
  std::vector<Requirement> reqs;
  std::map<std::pair<std::string, std::string>, size_t> index;

  bool full() const { return reqs.size() >= kMaxRequirements; }
  void Add(Requirement r) {
    auto key = std::make_pair(r.ecosystem, r.name);
    auto it = index.find(key);
    if (it == index.end()) {
      if (full()) return;
      index.emplace(key, reqs.size());
      reqs.push_back(std::move(r));
      return;
    }
    Requirement& old = reqs[it->second];
    if (r.ecosystem == "node" || old.spec.empty()) {
      old.spec = std::move(r.spec);  // node: the last one wins; python: "" adds nothing
    } else if (!r.spec.empty() && old.spec.find(r.spec) == std::string::npos &&
               old.spec.size() + r.spec.size() < kMaxSpecLen) {
      old.spec += "," + r.spec;  // python: both must hold (pip intersects them)
    }
  }
};

// Arguments of an install command from words[start]: requirements, skipping options (and the
// values of those that take one), redirections and unknowable words.
void CollectArgs(const SimpleCommand& words, size_t start, const std::string& ecosystem,
                 Collector* c) {
  bool options_done = false;
  for (size_t i = start; i < words.size() && !c->full(); ++i) {
    const Word& w = words[i];
    if (w.overlong || w.has_expansion || w.text.empty()) continue;
    if (IsRedirection(w)) {
      if (RedirectionNeedsTarget(w)) ++i;
      continue;
    }
    if (!options_done && !w.quoted && w.text == "--") {
      options_done = true;
      continue;
    }
    if (!options_done && w.text.front() == '-') {
      bool takes = ecosystem == "python" ? PipFlagTakesValue(w.text) : NpmFlagTakesValue(w.text);
      if (takes) ++i;  // "--flag=value" and "-rfile" carry their value: nothing to skip
      continue;
    }
    if (std::optional<Requirement> r = ParseRequirement(ecosystem, w.text)) c->Add(std::move(*r));
  }
}

// Skips leading options (and their values) from words[i]; returns the first other word's index.
size_t SkipOptions(const SimpleCommand& words, size_t i, bool python) {
  while (i < words.size() && !words[i].text.empty() && words[i].text.front() == '-') {
    if (python ? PipFlagTakesValue(words[i].text) : NpmFlagTakesValue(words[i].text)) ++i;
    ++i;
  }
  return i;
}

void ScanCommand(const SimpleCommand& words, Collector* c) {
  for (size_t i = 0; i < words.size() && !c->full(); ++i) {
    if (words[i].quoted || words[i].has_expansion) continue;
    std::string b = Basename(words[i].text);
    size_t next = std::string::npos;
    std::string eco;
    if (IsPipName(b)) {
      next = i + 1;
      eco = "python";
    } else if (IsPythonName(b)) {
      // python [-u -I ...] -m pip
      size_t j = i + 1;
      while (j < words.size() && words[j].text.size() > 1 && words[j].text.front() == '-' &&
             words[j].text != "-m") {
        if (words[j].text == "-X" || words[j].text == "-W") ++j;
        ++j;
      }
      if (j + 1 < words.size() && words[j].text == "-m" && IsPipName(words[j + 1].text)) {
        next = j + 2;
        eco = "python";
      } else if (j < words.size() && words[j].text == "-mpip") {
        next = j + 1;
        eco = "python";
      }
    } else if (b == "uv" && i + 1 < words.size() && words[i + 1].text == "pip") {
      next = i + 2;
      eco = "python";
    } else if (b == "npm" || b == "pnpm" || b == "yarn") {
      next = i + 1;
      eco = "node";
    }
    if (next == std::string::npos) continue;
    size_t verb = SkipOptions(words, next, eco == "python");
    if (verb >= words.size()) continue;
    const std::string& v = words[verb].text;
    bool install = eco == "python" ? v == "install"
                   : b == "yarn"   ? v == "add"
                                   : (v == "install" || v == "i" || v == "add" || v == "in");
    if (!install) continue;
    CollectArgs(words, verb + 1, eco, c);
    i = words.size();  // the rest of this simple command was the install's arguments
  }
}

// ---------------------------------------------------------------------------------------------
// The check.

bool SameId(const std::string& a, const std::string& b) { return !a.empty() && a == b; }

std::string Show(const std::string& s) { return s.empty() ? "(none)" : "'" + s + "'"; }

struct DepEval {
  std::vector<Requirement> satisfied, missing, conflicts;
  std::vector<std::string> notes;  // "sheetkit==1.0: installed 2.0"
};

// A package map keyed as requirements are (PEP 503 / lower-case), whoever wrote the manifest.
std::map<std::string, std::string> Normalized(const std::map<std::string, std::string>& packages,
                                              const std::string& ecosystem) {
  std::map<std::string, std::string> out;
  for (const auto& [name, version] : packages) {
    out.emplace(ecosystem == "python" ? NormalizePythonName(name) : Lower(name), version);
  }
  return out;
}

const std::string* Installed(const std::map<std::string, std::string>& normalized,
                             const Requirement& r) {
  auto it = normalized.find(r.name);
  return it == normalized.end() ? nullptr : &it->second;
}

DepEval EvaluateDeps(const std::vector<Requirement>& reqs, const EnvironmentManifest& m) {
  DepEval e;
  const std::map<std::string, std::string> python = Normalized(m.python_packages, "python");
  const std::map<std::string, std::string> node = Normalized(m.node_packages, "node");
  for (const Requirement& r : reqs) {
    const std::map<std::string, std::string>* packages = r.ecosystem == "python" ? &python
                                                         : r.ecosystem == "node" ? &node
                                                                                 : nullptr;
    if (!packages) {  // nothing can be proven about it, and nothing installs it
      e.conflicts.push_back(r);
      e.notes.push_back(fmt::format("{} {}: unknown ecosystem", r.ecosystem, r.name));
      continue;
    }
    const std::string* installed = Installed(*packages, r);
    if (!installed) {
      e.missing.push_back(r);
    } else if (VersionSatisfies(r.ecosystem, *installed, r.spec)) {
      e.satisfied.push_back(r);
    } else {
      e.conflicts.push_back(r);
      e.notes.push_back(fmt::format("{}: installed {}", RequirementString(r), *installed));
    }
  }
  return e;
}

double DirtyPenalty(size_t dirty) {
  if (dirty <= 10) return 0;
  if (dirty <= 100) return 0.05;
  if (dirty <= 1000) return 0.10;
  return 0.15;
}

double Score(const DepEval& e, size_t requirements, const EnvironmentManifest& m,
             size_t conflicts_penalised) {
  double s = 1.0 -
             0.3 * static_cast<double>(e.missing.size()) /
                 static_cast<double>(std::max<size_t>(1, requirements)) -
             DirtyPenalty(m.dirty_paths.size()) - 0.1 * static_cast<double>(conflicts_penalised);
  return std::clamp(s, 0.0, 1.0);
}

std::string Names(const std::vector<Requirement>& reqs) {
  std::string out;
  for (const Requirement& r : reqs) {
    if (!out.empty()) out += ", ";
    out += RequirementString(r);
  }
  return out.empty() ? "none" : out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

// Needed capabilities the manifest lacks (compared lower-case).
std::vector<std::string> MissingCapabilities(const std::vector<std::string>& needed,
                                             const EnvironmentManifest& m) {
  std::set<std::string> have;
  for (const std::string& c : m.capabilities) have.insert(Lower(c));
  std::vector<std::string> missing;
  for (const std::string& c : needed) {
    if (!c.empty() && !have.count(Lower(c))) missing.push_back(c);
  }
  return missing;
}

struct CheckpointChoice {
  const CheckpointFacts* checkpoint = nullptr;
  DepEval eval;
  double score = 0;
};

CheckpointChoice BestCheckpoint(const RunNeeds& needs, const std::vector<Requirement>& reqs,
                                const std::vector<CheckpointFacts>& checkpoints,
                                const ReuseConfig& config, std::vector<std::string>* reasons) {
  CheckpointChoice best;
  size_t foreign = 0, listed = 0;
  constexpr size_t kMaxListed = 16;  // reasons stay readable with hundreds of checkpoints
  auto reject = [&](const CheckpointFacts& c, const std::string& why) {
    if (listed++ < kMaxListed)
      reasons->push_back(fmt::format("checkpoint {}: {}", c.checkpoint_id, why));
  };
  for (const CheckpointFacts& c : checkpoints) {
    // Another tenant's, user's or session's checkpoint is never a candidate, and its id is not
    // repeated in reasons the run's owner may read.
    if (!SameId(c.tenant_id, needs.tenant_id) || !SameId(c.user_id, needs.user_id) ||
        !SameId(c.session_id, needs.session_id)) {
      ++foreign;
      continue;
    }
    if (c.expires_at_ms != 0 && c.expires_at_ms <= needs.now_ms) {
      reject(c, "expired");
      continue;
    }
    if (c.runtime != needs.runtime || c.template_name != needs.template_name ||
        c.template_digest != needs.template_digest) {
      reject(c, "another runtime or template");
      continue;
    }
    if (c.resource_class != needs.resource_class) {
      reject(c, "another resource class");
      continue;
    }
    if (c.network_profile != needs.network_profile || c.secret_scope != needs.secret_scope) {
      reject(c, "taken under another security context");
      continue;
    }
    if (!c.manifest || c.manifest->truncated) {
      reject(c, "environment unknown (no complete manifest)");
      continue;
    }
    if (!needs.workspace_id.empty() && c.manifest->workspace_id != needs.workspace_id) {
      reject(c, "another workspace");
      continue;
    }
    if (std::vector<std::string> caps = MissingCapabilities(needs.capabilities, *c.manifest);
        !caps.empty()) {
      reject(c, "lacks capabilities " + Join(caps));
      continue;
    }
    DepEval e = EvaluateDeps(reqs, *c.manifest);
    if (!e.conflicts.empty()) {
      reject(c, "conflicts: " + Join(e.notes));
      continue;
    }
    double score = Score(e, reqs.size(), *c.manifest, 0);
    if (score < config.min_reuse_score) {
      reject(c, fmt::format("score {:.2f} < {:.2f}", score, config.min_reuse_score));
      continue;
    }
    // Fewest missing, then newest, then the smaller id (deterministic whatever the order).
    bool better = !best.checkpoint;
    if (!better) {
      const CheckpointFacts& b = *best.checkpoint;
      better = std::make_tuple(e.missing.size(), -c.created_at_ms, c.checkpoint_id) <
               std::make_tuple(best.eval.missing.size(), -b.created_at_ms, b.checkpoint_id);
    }
    if (better) {
      best.checkpoint = &c;
      best.eval = std::move(e);
      best.score = score;
    }
  }
  if (listed > kMaxListed)
    reasons->push_back(fmt::format("... {} more checkpoint(s) rejected", listed - kMaxListed));
  if (foreign > 0) {
    reasons->push_back(
        fmt::format("{} checkpoint(s) of another tenant, user or session ignored", foreign));
  }
  return best;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string RequirementString(const Requirement& r) {
  if (r.spec.empty()) return r.name;
  return r.ecosystem == "node" ? r.name + "@" + r.spec : r.name + r.spec;
}

nlohmann::json RequirementToJson(const Requirement& r) {
  return {{"ecosystem", r.ecosystem}, {"name", r.name}, {"spec", r.spec}};
}

std::optional<Requirement> ParseRequirement(std::string_view ecosystem, std::string_view text) {
  text = Trim(text);
  if (text.empty() || text.size() > kMaxWordBytes || text.front() == '-' ||
      text.find_first_of("$`\n") != std::string_view::npos)
    return std::nullopt;
  if (ecosystem == "python") return ParsePython(text);
  if (ecosystem == "node") return ParseNode(text);
  return std::nullopt;
}

std::vector<Requirement> RequirementsFromCommands(const std::vector<std::string>& commands) {
  Collector c;
  size_t budget = kMaxTotalBytes;
  for (const std::string& command : commands) {
    if (budget == 0 || c.full()) break;
    std::string_view s = command;
    size_t cap = std::min(kMaxCommandBytes, budget);
    if (s.size() > cap) {
      // Cut at the last blank before the cap: a cut word ("pandas==1.5" -> "panda") would be
      // a different requirement.
      s = s.substr(0, cap);
      size_t blank = s.find_last_of(" \t\n");
      s = s.substr(0, blank == std::string_view::npos ? 0 : blank);
    }
    budget -= std::min(budget, s.size());
    for (const SimpleCommand& words : SplitCommands(s)) ScanCommand(words, &c);
  }
  return std::move(c.reqs);
}

bool VersionSatisfies(const std::string& ecosystem, const std::string& version,
                      const std::string& spec) {
  std::string_view sp = Trim(spec);
  if (ecosystem != "python" && ecosystem != "node") return false;
  if (sp.empty()) return true;
  if (sp.size() > kMaxSpecLen) return false;
  if (ecosystem == "python") {
    std::optional<PyVersion> v = ParsePyVersion(version);
    std::optional<bool> r = PySpec(sp, v, version);
    return r.has_value() && v.has_value() && *r;
  }
  std::optional<SemVer> v = ParseSemVer(version);
  if (!v) return false;
  std::optional<bool> r = SemRange(sp, v);
  return r.value_or(false);
}

const char* ReuseActionName(ReuseAction action) {
  switch (action) {
    case ReuseAction::kReuse:
      return "reuse";
    case ReuseAction::kReuseSeparateVenv:
      return "reuse_separate_venv";
    case ReuseAction::kForkCheckpoint:
      return "fork_checkpoint";
    case ReuseAction::kNewSandbox:
      return "new_sandbox";
  }
  return "new_sandbox";
}

ReuseDecision CheckReuse(const RunNeeds& needs, const std::optional<SandboxFacts>& current,
                         const std::vector<CheckpointFacts>& checkpoints,
                         const ReuseConfig& config) {
  ReuseDecision d;
  // Names as the manifest spells them, whoever built the requirements.
  std::vector<Requirement> reqs;
  for (Requirement r : needs.requirements) {
    r.name = r.ecosystem == "python" ? NormalizePythonName(r.name) : Lower(r.name);
    reqs.push_back(std::move(r));
  }

  // The current sandbox cannot serve; fork a compatible checkpoint of this session if one
  // exists, else start afresh.
  auto fork_or_new = [&](const std::string& code) {
    d.reason = code;
    CheckpointChoice best = BestCheckpoint(needs, reqs, checkpoints, config, &d.reasons);
    if (best.checkpoint) {
      d.action = ReuseAction::kForkCheckpoint;
      d.checkpoint_id = best.checkpoint->checkpoint_id;
      d.score = best.score;
      d.to_install = best.eval.missing;
      d.reasons.push_back(fmt::format(
          "fork checkpoint {} (fingerprint {}): no conflicts, to install: {}; score {:.2f}",
          d.checkpoint_id, best.checkpoint->manifest->fingerprint, Names(d.to_install), d.score));
    } else {
      d.action = ReuseAction::kNewSandbox;
      d.score = 0;
      d.reasons.push_back("no compatible checkpoint of this session: new sandbox");
    }
    return d;
  };
  // A boundary that no checkpoint may paper over.
  auto never = [&](const std::string& code, const std::string& why, bool destroy) {
    d.action = ReuseAction::kNewSandbox;
    d.reason = code;
    d.score = 0;
    d.destroy_current = destroy;
    d.reasons.push_back(why);
    return d;
  };

  if (!current) {
    d.reasons.push_back("the session has no sandbox");
    return fork_or_new("no_session_sandbox");
  }
  const SandboxFacts& s = *current;
  const std::string sb = s.sandbox_id;

  if (!SameId(s.tenant_id, needs.tenant_id)) {
    return never(
        "tenant_mismatch",
        fmt::format("sandbox {} belongs to another tenant than the run's: never reused", sb),
        false);
  }
  if (!SameId(s.user_id, needs.user_id)) {
    return never("user_mismatch",
                 fmt::format("sandbox {} belongs to another user than the run's: never reused", sb),
                 false);
  }
  if (!SameId(s.session_id, needs.session_id)) {
    d.reasons.push_back(fmt::format(
        "sandbox {} belongs to session {}, the run to {}: a new session never reuses the "
        "runtime",
        sb, Show(s.session_id), Show(needs.session_id)));
    return fork_or_new("session_mismatch");
  }
  d.reasons.push_back("identity: same tenant, user and session");
  if (s.tainted) {
    return never("tainted",
                 fmt::format("sandbox {} is tainted ({}): never reused, hard destroy", sb,
                             s.taint_reason.empty() ? "no reason given" : s.taint_reason),
                 true);
  }
  if (s.policy_violations > 0) {
    return never("policy_violation",
                 fmt::format("sandbox {} has {} policy violation(s): never reused, hard destroy",
                             sb, s.policy_violations),
                 true);
  }
  if (!s.healthy) {
    d.destroy_current = true;
    d.reasons.push_back(fmt::format("sandbox {} is unhealthy: runtime fault, hard destroy", sb));
    return fork_or_new("unhealthy");
  }
  if (s.state != "Ready") {
    d.reasons.push_back(
        fmt::format("sandbox {} is {}, not Ready (idle, no lease)", sb, Show(s.state)));
    return fork_or_new("busy");
  }
  d.reasons.push_back("state: Ready, healthy, untainted, no policy violations");
  if (!s.manifest || s.manifest->truncated ||
      (!s.recorded_fingerprint.empty() && s.manifest->fingerprint != s.recorded_fingerprint)) {
    d.destroy_current = true;
    d.reasons.push_back(
        !s.manifest ? fmt::format("sandbox {} has no environment manifest: unknown pollution", sb)
        : s.manifest->truncated
            ? fmt::format("sandbox {}'s manifest is truncated: unknown pollution", sb)
            : fmt::format("sandbox {}'s environment {} is not the recorded {}: changed behind "
                          "the control plane, unknown pollution",
                          sb, s.manifest->fingerprint, s.recorded_fingerprint));
    return fork_or_new("unknown_environment");
  }
  const EnvironmentManifest& m = *s.manifest;
  // What the run needs the sandbox to BE comes first: when a browser run meets a Python
  // sandbox, the class and template differ too, but as a consequence (seed 7.7 turn 3).
  if (std::vector<std::string> caps = MissingCapabilities(needs.capabilities, m); !caps.empty()) {
    d.reasons.push_back(
        fmt::format("sandbox {} lacks capabilities {} (has {}): a different runtime is needed", sb,
                    Join(caps), m.capabilities.empty() ? "none" : Join(m.capabilities)));
    return fork_or_new("runtime_capability_mismatch");
  }
  // A trust boundary: the sandbox is never reused under another security context; only a
  // checkpoint taken under the run's own context may be forked (BestCheckpoint checks).
  if (s.network_profile != needs.network_profile || s.secret_scope != needs.secret_scope) {
    d.reasons.push_back(
        fmt::format("security context (network {}, secrets {}) -> (network {}, secrets {}): "
                    "never reused",
                    Show(s.network_profile), Show(s.secret_scope), Show(needs.network_profile),
                    Show(needs.secret_scope)));
    return fork_or_new("security_context_mismatch");
  }

  if (s.runtime != needs.runtime) {
    d.reasons.push_back(
        fmt::format("runtime {} -> {}: never reused", Show(s.runtime), Show(needs.runtime)));
    return fork_or_new("runtime_changed");
  }
  if (s.template_name != needs.template_name || s.template_digest != needs.template_digest) {
    d.reasons.push_back(fmt::format("template {}@{} -> {}@{}: never reused", Show(s.template_name),
                                    Show(s.template_digest), Show(needs.template_name),
                                    Show(needs.template_digest)));
    return fork_or_new("template_changed");
  }
  if (s.resource_class != needs.resource_class) {
    d.reasons.push_back(
        fmt::format("resource class {} -> {}", Show(s.resource_class), Show(needs.resource_class)));
    return fork_or_new("resource_class_mismatch");
  }
  if (!needs.workspace_id.empty() && m.workspace_id != needs.workspace_id) {
    d.reasons.push_back(
        fmt::format("workspace {} -> {}", Show(m.workspace_id), Show(needs.workspace_id)));
    return fork_or_new("workspace_mismatch");
  }
  d.reasons.push_back(
      fmt::format("capabilities present; runtime {}, template {}@{}, security context, class {} "
                  "unchanged (env {})",
                  s.runtime, s.template_name, s.template_digest, s.resource_class, m.fingerprint));
  DepEval e = EvaluateDeps(reqs, m);
  d.reasons.push_back(fmt::format("dependencies: {} satisfied, missing: {}, conflicting: {}",
                                  e.satisfied.size(), Names(e.missing),
                                  e.notes.empty() ? "none" : Join(e.notes)));
  if (e.conflicts.empty()) {
    double score = Score(e, reqs.size(), m, 0);
    if (score < config.min_reuse_score) {
      d.reasons.push_back(
          fmt::format("score {:.2f} < min_reuse_score {:.2f}", score, config.min_reuse_score));
      return fork_or_new("low_compatibility_score");
    }
    d.action = ReuseAction::kReuse;
    d.reason = "compatible";
    d.score = score;
    d.sandbox_id = sb;
    d.to_install = e.missing;
    d.reasons.push_back(fmt::format("reuse sandbox {}: score {:.2f}{}", sb, score,
                                    e.missing.empty() ? "" : ", incremental install"));
    return d;
  }

  // Conflicts: never downgrade in place. A clean earlier checkpoint first (seed 5.6).
  d.conflicts = e.conflicts;
  d.reasons.push_back("conflicts are never fixed in place (no downgrade over a live environment)");
  ReuseDecision with_checkpoint = fork_or_new("dependency_conflict");
  if (with_checkpoint.action == ReuseAction::kForkCheckpoint) return with_checkpoint;
  d.reasons.pop_back();  // "no compatible checkpoint" is said again below, with the outcome

  bool absorbable = std::all_of(e.conflicts.begin(), e.conflicts.end(), [](const Requirement& r) {
    return r.ecosystem == "python" || r.ecosystem == "node";
  });
  // An existing venv that already satisfies every (python) conflict is the cheapest home.
  std::string venv;
  bool all_python = std::all_of(e.conflicts.begin(), e.conflicts.end(),
                                [](const Requirement& r) { return r.ecosystem == "python"; });
  if (all_python) {
    for (const auto& [dir, raw] : m.venvs) {
      const std::map<std::string, std::string> packages = Normalized(raw, "python");
      bool fits = std::all_of(e.conflicts.begin(), e.conflicts.end(), [&](const Requirement& r) {
        const std::string* v = Installed(packages, r);
        return v && VersionSatisfies(r.ecosystem, *v, r.spec);
      });
      if (fits) {
        venv = dir;
        break;
      }
    }
  }
  const size_t n_conflicts = e.conflicts.size();
  if (absorbable && (!venv.empty() ||
                     n_conflicts <= static_cast<size_t>(std::max(0, config.max_venv_conflicts)))) {
    double score = Score(e, reqs.size(), m, venv.empty() ? n_conflicts : 0);
    if (score >= config.min_reuse_score) {
      d.action = ReuseAction::kReuseSeparateVenv;
      d.score = score;
      d.sandbox_id = sb;
      d.venv = venv;
      d.to_install = e.missing;
      d.reasons.push_back(
          venv.empty()
              ? fmt::format("no compatible checkpoint; {} conflict(s) <= max_venv_conflicts {}: "
                            "a fresh separate venv in sandbox {}; score {:.2f}",
                            n_conflicts, config.max_venv_conflicts, sb, score)
              : fmt::format("no compatible checkpoint; existing venv {} already satisfies the "
                            "conflicts; score {:.2f}",
                            venv, score));
      return d;
    }
    d.reasons.push_back(fmt::format("a separate venv would score {:.2f} < min_reuse_score {:.2f}",
                                    score, config.min_reuse_score));
  } else {
    d.reasons.push_back(
        absorbable ? fmt::format("no compatible checkpoint; {} conflict(s) > max_venv_conflicts "
                                 "{}: new sandbox",
                                 n_conflicts, config.max_venv_conflicts)
                   : "no compatible checkpoint; a conflict no venv can hold: new sandbox");
  }
  d.action = ReuseAction::kNewSandbox;
  d.score = 0;
  return d;
}

nlohmann::json ReuseDecisionToJson(const ReuseDecision& d) {
  nlohmann::json to_install = nlohmann::json::array(), conflicts = nlohmann::json::array();
  for (const Requirement& r : d.to_install) to_install.push_back(RequirementToJson(r));
  for (const Requirement& r : d.conflicts) conflicts.push_back(RequirementToJson(r));
  return {{"action", ReuseActionName(d.action)},
          {"score", d.score},
          {"reason", d.reason},
          {"reasons", d.reasons},
          {"sandbox_id", d.sandbox_id},
          {"checkpoint_id", d.checkpoint_id},
          {"venv", d.venv},
          {"destroy_current", d.destroy_current},
          {"to_install", to_install},
          {"conflicts", conflicts}};
}

}  // namespace paddock::sessions
