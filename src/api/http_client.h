// A small synchronous HTTP/1.1 client for the CLI and tests. One keep-alive connection per
// client; not thread-safe (use one client per thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "api/http_message.h"
#include "common/status.h"

namespace paddock::api {

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{5'000};
  // A read or write that makes no progress for this long fails with DeadlineExceeded (a
  // streaming response may be silent between chunks for up to this long).
  std::chrono::milliseconds io_timeout{60'000};
  uint64_t max_response_bytes = 256ull << 20;  // Request() bodies; ResourceExhausted beyond
  uint32_t max_header_bytes = 64 * 1024;
};

struct ClientResponse {
  int status = 0;
  Headers headers;
  std::string body;  // always empty for RequestStream()
};

// "http://host[:port][/prefix]" (IPv6 as "[::1]"). https is Unimplemented; user info, query
// and fragment are InvalidArgument. The port defaults to 80; the prefix has no trailing '/'.
struct BaseUrl {
  std::string host;
  uint16_t port = 80;
  std::string path_prefix;  // "" or "/something"
};
Result<BaseUrl> ParseBaseUrl(std::string_view url);

class HttpClient {
 public:
  HttpClient(std::string host, uint16_t port, ClientOptions options = {});
  // Targets passed to Request*() are prefixed with url.path_prefix.
  explicit HttpClient(const BaseUrl& url, ClientOptions options = {});
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;

  // Sends one request and reads the whole response. A non-empty body defaults to
  // Content-Type application/json. A kept-alive connection that turns out to be dead before any
  // response byte arrives is re-opened and the request sent once more. Errors: InvalidArgument
  // (bad method/target/header), Unavailable (connect/IO), DeadlineExceeded, ResourceExhausted
  // (response over max_response_bytes). Any HTTP status is a successful Result.
  Result<ClientResponse> Request(std::string_view method, std::string_view target,
                                 std::string_view body = {}, const Headers& headers = {});

  // Receives each piece of the body as it arrives; return false to stop reading (the
  // connection is then closed and the partial response returned as success).
  using ChunkCallback = std::function<bool(std::string_view data)>;
  // Like Request() but the body goes to `on_chunk` (the response's body stays empty).
  Result<ClientResponse> RequestStream(std::string_view method, std::string_view target,
                                       std::string_view body, const Headers& headers,
                                       const ChunkCallback& on_chunk);

  // Closes the connection (the next request opens a new one).
  void Close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace paddock::api
