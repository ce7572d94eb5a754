// HTTP message types shared by the server, the router and the client, plus the JSON error
// helpers every API handler uses. Generic: nothing here knows about sandboxes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace paddock::api {

// An ordered list of header fields with case-insensitive lookup. Not thread-safe.
class Headers {
 public:
  Headers() = default;
  Headers(std::initializer_list<std::pair<std::string, std::string>> fields);

  // Appends a field (repeated names are kept, in order).
  void Add(std::string name, std::string value);
  // Replaces every field called `name` with one field.
  void Set(std::string name, std::string value);
  void Remove(std::string_view name);
  // The first value of `name`, or nullopt.
  std::optional<std::string> Find(std::string_view name) const;
  // The first value of `name`, or `fallback`.
  std::string Get(std::string_view name, std::string_view fallback = "") const;
  bool Has(std::string_view name) const;
  std::vector<std::string> GetAll(std::string_view name) const;

  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }
  size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// True when `a` and `b` are equal ignoring ASCII case.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// True when name is an RFC 9110 token and value holds no CR, LF or NUL: the only fields the
// server and client agree to put on the wire (a CR/LF in a value would split the message).
bool IsValidHeaderField(std::string_view name, std::string_view value);

// A request as handed to a handler. All strings are untrusted caller input.
struct Request {
  std::string method;                         // as sent, e.g. "GET" (methods are case-sensitive)
  std::string target;                         // the raw request-target, e.g. "/v1/x?y=1"
  std::string path;                           // target up to '?', still percent-encoded
  std::map<std::string, std::string> query;   // percent-decoded ('+' = space); first key wins
  std::map<std::string, std::string> params;  // route parameters, percent-decoded
  Headers headers;
  std::string body;
  std::string request_id;      // validated X-Request-Id or a generated one
  std::string remote_address;  // "ip:port" of the peer

  // The route parameter `name`, or "" when the route has none by that name.
  std::string Param(std::string_view name) const;
  // The query parameter `name`, or nullopt.
  std::optional<std::string> Query(std::string_view name) const;
};

// A complete (non-streamed) response. The server sets Content-Length, Connection and
// X-Request-Id itself; handlers' values for framing headers are ignored.
struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;  // extra headers
};

// How a handler answers. Exactly one of Send() or StartStream()..EndStream() per request.
// Used only from the handler's thread.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;

  // Writes the whole response. False when a response was already started or the write failed
  // (the client went away); the handler should then just return.
  virtual bool Send(Response response) = 0;

  // Starts a chunked response (HTTP/1.0 clients get a close-delimited body instead).
  // False when a response was already started or the write failed.
  virtual bool StartStream(int status, std::string_view content_type, Headers headers = {}) = 0;
  // Sends one chunk as soon as possible (empty data is a no-op). False when the stream is not
  // open or the client went away / stopped reading; the handler should stop producing.
  virtual bool WriteChunk(std::string_view data) = 0;
  // Terminates the chunked body. Handlers that return without it get it added for them.
  virtual bool EndStream() = 0;

  // True once Send() or StartStream() was called.
  virtual bool Started() const = 0;
  // True when the client disconnected or the server is force-closing connections; long-running
  // handlers should poll it and give up.
  virtual bool Cancelled() const = 0;
};

using Handler = std::function<void(const Request&, ResponseWriter&)>;

struct RouteOptions {
  // Largest accepted request body; nullopt = the server's default (1 MiB unless configured).
  std::optional<uint64_t> max_body_bytes;
  // Time allowed for reading headers + body; nullopt = the server's read timeout. Raise it
  // with max_body_bytes for uploads.
  std::optional<std::chrono::milliseconds> read_timeout;
};

// JSON body with content-type application/json.
Response JsonResponse(int http_status, const nlohmann::json& body);

// {"error":{"code":code,"message":message,"details":details}}; null details become {}.
Response ErrorResponse(int http_status, std::string code, std::string message,
                       nlohmann::json details = nlohmann::json::object());

// The HTTP status for a Status code. kResourceExhausted maps to `resource_exhausted_http`
// (429 for quotas/slots; pass 413 when the limit was a size). kOk maps to 200.
int StatusToHttp(const Status& status, int resource_exhausted_http = 429);

// "invalid_argument", "not_found", ...: the lowercase StatusCodeName.
std::string StatusCodeSlug(StatusCode code);

// An ErrorResponse from a non-OK status: code = StatusCodeSlug, message = status.message().
// The message reaches the caller verbatim: keep host details out of it. An OK status (a bug)
// becomes a 500.
Response ErrorFromStatus(const Status& status, nlohmann::json details = nlohmann::json::object(),
                         int resource_exhausted_http = 429);

// Decodes %XX escapes (and '+' as space when `plus_is_space`). Malformed escapes and decoded
// NUL bytes are InvalidArgument.
Result<std::string> PercentDecode(std::string_view text, bool plus_is_space = false);

// Encodes everything but RFC 3986 unreserved characters (and '/' when `keep_slash`).
std::string PercentEncode(std::string_view text, bool keep_slash = false);

// Parses "a=1&b=x%20y" (no leading '?'). Keys without '=' get "". First occurrence wins.
Result<std::map<std::string, std::string>> ParseQuery(std::string_view query);

// [A-Za-z0-9._-]{1,64}: the X-Request-Id values the server echoes instead of replacing.
bool IsValidRequestId(std::string_view id);

}  // namespace paddock::api
