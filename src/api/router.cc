#include "api/router.h"

#include <algorithm>
#include <set>

namespace paddock::api {
namespace {

enum class SegmentKind { kLiteral = 0, kParam = 1, kRest = 2 };

struct Segment {
  SegmentKind kind;
  std::string text;  // the literal, or the parameter name
};

bool IsIdentifier(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool IsMethodToken(std::string_view s) {
  if (s.empty() || s.size() > 32) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
}

// "/a/b/" -> {"a", "b", ""}; "/" -> {""}. The caller checked the leading '/'.
std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> out;
  size_t pos = 1;
  while (true) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) {
      out.push_back(path.substr(pos));
      return out;
    }
    out.push_back(path.substr(pos, slash - pos));
    pos = slash + 1;
  }
}

}  // namespace

struct Router::Compiled {
  std::vector<Segment> segments;
  std::shared_ptr<const Route> route;
};

struct Router::State {
  std::vector<Compiled> routes;
};

Router::Router() : state_(std::make_shared<State>()) {}
Router::~Router() = default;

std::shared_ptr<const Router::State> Router::Snapshot() const {
  std::lock_guard lock(mu_);
  return state_;
}

Status Router::Add(std::string_view method, std::string_view pattern, Handler handler,
                   RouteOptions options) {
  if (!IsMethodToken(method))
    return InvalidArgument("invalid HTTP method '" + std::string(method) + "'");
  if (pattern.empty() || pattern[0] != '/') {
    return InvalidArgument("route pattern must start with '/': " + std::string(pattern));
  }
  if (!handler) return InvalidArgument("route handler is empty: " + std::string(pattern));
  Compiled compiled;
  std::set<std::string, std::less<>> names;
  std::vector<std::string_view> parts = SplitPath(pattern);
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string_view part = parts[i];
    Segment seg;
    if (!part.empty() && part.front() == '{') {
      if (part.back() != '}' || part.size() < 3) {
        return InvalidArgument("malformed parameter segment in " + std::string(pattern));
      }
      std::string_view name = part.substr(1, part.size() - 2);
      seg.kind = SegmentKind::kParam;
      if (name.back() == '*') {
        name.remove_suffix(1);
        seg.kind = SegmentKind::kRest;
        if (i + 1 != parts.size()) {
          return InvalidArgument("{name*} must be the last segment in " + std::string(pattern));
        }
      }
      if (!IsIdentifier(name)) {
        return InvalidArgument("invalid parameter name in " + std::string(pattern));
      }
      if (!names.emplace(name).second) {
        return InvalidArgument("duplicate parameter name in " + std::string(pattern));
      }
      seg.text = std::string(name);
    } else {
      if (part.find_first_of("{}%?#") != std::string_view::npos) {
        return InvalidArgument("invalid literal segment in " + std::string(pattern));
      }
      if (part == "." || part == "..") {
        return InvalidArgument("dot segment in " + std::string(pattern));
      }
      seg.kind = SegmentKind::kLiteral;
      seg.text = std::string(part);
    }
    compiled.segments.push_back(std::move(seg));
  }
  auto route = std::make_shared<Route>();
  route->method = std::string(method);
  route->pattern = std::string(pattern);
  route->handler = std::move(handler);
  route->options = options;
  compiled.route = std::move(route);

  std::lock_guard lock(mu_);
  for (const Compiled& existing : state_->routes) {
    if (existing.route->method == method && existing.route->pattern == pattern) {
      return Status(StatusCode::kAlreadyExists, "route already registered: " + std::string(method) +
                                                    " " + std::string(pattern));
    }
  }
  // Copy-on-write so Find() never holds the lock while matching.
  auto next = std::make_shared<State>(*state_);
  next->routes.push_back(std::move(compiled));
  state_ = std::move(next);
  return Status::Ok();
}

Router::Match Router::Find(std::string_view method, std::string_view raw_path) const {
  Match result;
  if (raw_path.empty() || raw_path[0] != '/') {
    result.outcome = Outcome::kBadPath;
    result.error = "request path must start with '/'";
    return result;
  }
  std::vector<std::string_view> raw = SplitPath(raw_path);
  std::vector<std::string> segments;
  segments.reserve(raw.size());
  for (std::string_view part : raw) {
    Result<std::string> decoded = PercentDecode(part);
    if (!decoded.ok()) {
      result.outcome = Outcome::kBadPath;
      result.error = "invalid path: " + decoded.status().message();
      return result;
    }
    if (*decoded == "." || *decoded == ".." || decoded->find('/') != std::string::npos) {
      result.outcome = Outcome::kBadPath;
      result.error = "invalid path: dot segments and encoded '/' are not allowed";
      return result;
    }
    segments.push_back(std::move(decoded).value());
  }

  std::shared_ptr<const State> state = Snapshot();
  const Compiled* best = nullptr;
  std::vector<int> best_rank;
  std::set<std::string> path_methods;
  for (const Compiled& c : state->routes) {
    // Rank: the kinds of the matched segments, compared lexicographically (lower = more
    // specific). A rest segment stops the comparison there.
    std::vector<int> rank;
    bool matched = true;
    size_t i = 0;
    for (; i < c.segments.size(); ++i) {
      const Segment& seg = c.segments[i];
      if (seg.kind == SegmentKind::kRest) {
        matched = i < segments.size();
        rank.push_back(static_cast<int>(seg.kind));
        i = segments.size();
        break;
      }
      if (i >= segments.size()) {
        matched = false;
        break;
      }
      if (seg.kind == SegmentKind::kLiteral ? segments[i] != seg.text : segments[i].empty()) {
        matched = false;
        break;
      }
      rank.push_back(static_cast<int>(seg.kind));
    }
    if (!matched || i != segments.size()) continue;
    path_methods.insert(c.route->method);
    if (c.route->method != method) continue;
    if (best == nullptr || rank < best_rank) {
      best = &c;
      best_rank = std::move(rank);
    }
  }
  if (best == nullptr) {
    if (path_methods.empty()) {
      result.outcome = Outcome::kNotFound;
    } else {
      result.outcome = Outcome::kMethodNotAllowed;
      result.allowed_methods.assign(path_methods.begin(), path_methods.end());
    }
    return result;
  }
  result.outcome = Outcome::kMatched;
  result.route = best->route;
  for (size_t i = 0; i < best->segments.size(); ++i) {
    const Segment& seg = best->segments[i];
    if (seg.kind == SegmentKind::kParam) {
      result.params[seg.text] = segments[i];
    } else if (seg.kind == SegmentKind::kRest) {
      std::string rest;
      for (size_t j = i; j < segments.size(); ++j) {
        if (j > i) rest.push_back('/');
        rest += segments[j];
      }
      result.params[seg.text] = std::move(rest);
    }
  }
  return result;
}

}  // namespace paddock::api
