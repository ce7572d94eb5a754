// A small HTTP/1.1 server for the Paddock API (Boost.Beast parsing, blocking I/O).
//
// Threading model: one acceptor thread plus one thread per connection. Handlers run on their
// connection's thread and may block for minutes (a streaming exec), so reads and writes are
// synchronous; every socket operation has a deadline so a silent or slow peer cannot pin a
// thread. The number of connections is capped; over the cap a caller gets a 503 and is closed.
//
// Defences for a hostile network: 16 KiB header limit (431), per-route body limit (413),
// absolute read deadline for headers+body (slowloris), idle keep-alive timeout, write timeout,
// validated request ids, dot-segment/NUL-free paths, no exception escapes a handler (500).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "api/http_message.h"
#include "api/router.h"
#include "common/status.h"

namespace paddock::api {

class MetricsRegistry;

struct HttpServerOptions {
  std::string address = "127.0.0.1";  // IPv4/IPv6 literal or host name
  uint16_t port = 0;                  // 0 = ephemeral; see HttpServer::port()
  size_t max_connections = 256;       // open connections beyond this get 503 + close
  size_t max_header_bytes = 16 * 1024;
  uint64_t default_max_body_bytes = 1024 * 1024;
  // From a request's first byte until its body is fully read (slow clients are dropped).
  std::chrono::milliseconds read_timeout{10'000};
  // A keep-alive connection with no new request for this long is closed.
  std::chrono::milliseconds idle_timeout{60'000};
  // A write that makes no progress for this long fails (the client stopped reading).
  std::chrono::milliseconds write_timeout{30'000};
  // When set, the server records <prefix>http_requests_total, <prefix>http_request_duration_
  // seconds and <prefix>http_connections_active. Must outlive the server.
  MetricsRegistry* metrics = nullptr;
  std::string metrics_prefix = "paddock_";
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options = {});
  // Stops with a zero deadline if still running.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers a handler; see Router for the pattern syntax. InvalidArgument for a bad pattern,
  // AlreadyExists for a duplicate. Thread-safe, also after Start().
  Status Route(std::string_view method, std::string_view pattern, Handler handler,
               RouteOptions options = {});

  // Binds, listens and starts the acceptor thread. Errors: bind/listen failures (the errno's
  // code, e.g. EADDRINUSE -> Unavailable/Internal), FailedPrecondition if started before.
  Status Start();

  // The bound port (the ephemeral one when options.port was 0); 0 before Start().
  uint16_t port() const;

  // Graceful stop: closes the listener (new connections are refused), closes idle keep-alive
  // connections, lets in-flight requests finish until `deadline`, then shuts every socket down
  // (streams see WriteChunk() == false and Cancelled() == true) and joins every thread. A
  // handler that ignores both keeps Stop() waiting. Idempotent; never call it from a handler.
  void Stop(std::chrono::milliseconds deadline);

  // Connections currently open (each has a thread). Thread-safe.
  size_t active_connections() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace paddock::api
