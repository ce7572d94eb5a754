// Method + path-pattern routing. Patterns are '/'-separated segments, each a literal, "{name}"
// (exactly one non-empty segment) or, as the last segment only, "{name*}" (the rest of the path,
// zero or more segments joined by '/'; "/files/{p*}" matches "/files/" but not "/files").
// Segments are percent-decoded before matching; a segment that decodes to "." / ".." or that
// contains '/' or NUL makes the whole path invalid (400), so a parameter can never smuggle a
// path traversal past a handler. When several patterns match, the most specific wins
// (literal > {name} > {name*}, segment by segment from the left).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "api/http_message.h"
#include "common/status.h"

namespace paddock::api {

class Router {
 public:
  struct Route {
    std::string method;
    std::string pattern;
    Handler handler;
    RouteOptions options;
  };

  enum class Outcome { kMatched, kNotFound, kMethodNotAllowed, kBadPath };

  struct Match {
    Outcome outcome = Outcome::kNotFound;
    std::shared_ptr<const Route> route;         // set when kMatched
    std::map<std::string, std::string> params;  // decoded; set when kMatched
    std::vector<std::string> allowed_methods;   // sorted; set when kMethodNotAllowed
    std::string error;                          // set when kBadPath
  };

  Router();
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Registers a route; InvalidArgument for a malformed pattern or method, AlreadyExists for
  // a duplicate (method, pattern). Thread-safe; may be called while Match() runs elsewhere.
  Status Add(std::string_view method, std::string_view pattern, Handler handler,
             RouteOptions options = {});

  // Routes a still-percent-encoded path (no query). Thread-safe.
  Match Find(std::string_view method, std::string_view raw_path) const;

 private:
  struct Compiled;
  struct State;
  std::shared_ptr<const State> Snapshot() const;

  mutable std::mutex mu_;
  std::shared_ptr<const State> state_;
};

}  // namespace paddock::api
