#include "api/http_client.h"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <optional>

#include "api/socket_stream.h"

namespace paddock::api {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using internal::FromBoost;
using internal::SocketStream;
using internal::ToBoost;

constexpr size_t kStreamBufferBytes = 16 * 1024;

bool IsToken(std::string_view s) { return IsValidHeaderField(s, ""); }

Status IoError(std::string_view what, const beast::error_code& ec) {
  if (ec == net::error::timed_out) {
    return Status(StatusCode::kDeadlineExceeded, std::string(what) + ": timed out");
  }
  if (ec == http::error::body_limit) {
    return ResourceExhausted(std::string(what) + ": response body too large");
  }
  return Status(StatusCode::kUnavailable, std::string(what) + ": " + ec.message());
}

template <class Body>
void CopyHeaders(const http::response<Body>& res, ClientResponse* out) {
  out->status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    out->headers.Add(FromBoost(field.name_string()), FromBoost(field.value()));
  }
}

}  // namespace

struct HttpClient::Impl {
  std::string host;
  uint16_t port = 0;
  std::string prefix;
  ClientOptions options;
  UniqueFd fd;
  beast::flat_buffer buffer;

  void Close() {
    fd.reset();
    buffer.clear();
  }

  Result<ClientResponse> Do(std::string_view method, std::string_view target, std::string_view body,
                            const Headers& headers, const ChunkCallback* on_chunk);
  // Reads one response into `out`. `progress` tells whether any response byte arrived.
  Status ReadResponse(SocketStream& stream, bool head, const ChunkCallback* on_chunk,
                      ClientResponse* out, bool* keep_alive);
};

Status HttpClient::Impl::ReadResponse(SocketStream& stream, bool head,
                                      const ChunkCallback* on_chunk, ClientResponse* out,
                                      bool* keep_alive) {
  beast::error_code ec;
  if (on_chunk == nullptr) {
    std::optional<http::response_parser<http::string_body>> parser;
    do {  // 1xx interim responses are skipped
      parser.emplace();
      parser->header_limit(options.max_header_bytes);
      // Beast 1.74 skips its own Content-Length check when it parses eagerly (http::read), so
      // the header is read first and the length checked here; chunked and close-delimited
      // bodies are still limited by the parser.
      parser->body_limit(options.max_response_bytes);
      if (head) parser->skip(true);
      http::read_header(stream, buffer, *parser, ec);
      if (ec) return IoError("reading response", ec);
    } while (parser->get().result_int() / 100 == 1);
    if (parser->content_length().value_or(0) > options.max_response_bytes) {
      return ResourceExhausted("reading response: body of " +
                               std::to_string(*parser->content_length()) + " bytes exceeds " +
                               std::to_string(options.max_response_bytes));
    }
    if (!parser->is_done()) {
      http::read(stream, buffer, *parser, ec);
      if (ec) return IoError("reading response", ec);
    }
    CopyHeaders(parser->get(), out);
    out->body = std::move(parser->get().body());
    *keep_alive = parser->get().keep_alive();
    return Status::Ok();
  }

  std::optional<http::response_parser<http::buffer_body>> parser;
  do {
    parser.emplace();
    parser->header_limit(options.max_header_bytes);
    parser->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (head) parser->skip(true);
    http::read_header(stream, buffer, *parser, ec);
    if (ec) return IoError("reading response", ec);
  } while (parser->get().result_int() / 100 == 1);
  CopyHeaders(parser->get(), out);
  *keep_alive = parser->get().keep_alive();
  char chunk[kStreamBufferBytes];
  while (!parser->is_done()) {
    parser->get().body().data = chunk;
    parser->get().body().size = sizeof(chunk);
    // read_some returns as soon as some body bytes are parsed, so data reaches the callback
    // when it arrives instead of when the buffer is full.
    http::read_some(stream, buffer, *parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return IoError("reading response body", ec);
    size_t n = sizeof(chunk) - parser->get().body().size;
    if (n > 0 && !(*on_chunk)(std::string_view(chunk, n))) {
      *keep_alive = false;  // the rest of the body is still on the wire
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Result<ClientResponse> HttpClient::Impl::Do(std::string_view method, std::string_view target,
                                            std::string_view body, const Headers& headers,
                                            const ChunkCallback* on_chunk) {
  if (method.empty() || !IsToken(method)) return InvalidArgument("invalid HTTP method");
  std::string full_target = prefix + std::string(target);
  if (target.empty() || target[0] != '/' ||
      full_target.find_first_of(std::string_view(" \t\r\n\0", 5)) != std::string::npos) {
    return InvalidArgument("request target must be an absolute path without whitespace");
  }
  http::request<http::string_body> req;
  req.method_string(ToBoost(method));
  req.target(ToBoost(full_target));
  req.version(11);
  bool bracket = host.find(':') != std::string::npos;
  req.set(http::field::host,
          ToBoost((bracket ? "[" + host + "]" : host) + ":" + std::to_string(port)));
  req.set(http::field::user_agent, "paddock-client/0.1");
  for (const auto& [name, value] : headers.fields()) {
    if (!IsValidHeaderField(name, value)) {
      return InvalidArgument("invalid request header '" + name + "'");
    }
    if (EqualsIgnoreCase(name, "Content-Length") || EqualsIgnoreCase(name, "Transfer-Encoding") ||
        EqualsIgnoreCase(name, "Host")) {
      continue;  // framing is ours
    }
    req.insert(ToBoost(name), ToBoost(value));
  }
  if (!body.empty() && req.find(http::field::content_type) == req.end()) {
    req.set(http::field::content_type, "application/json");
  }
  req.body() = std::string(body);
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    req.prepare_payload();
  }
  const bool head = method == "HEAD";

  for (int attempt = 0;; ++attempt) {
    bool reused = fd.valid();
    if (reused && SocketStream(fd.get()).PeerClosed()) {
      Close();  // the server closed the idle connection; don't even try it
      reused = false;
    }
    if (!fd) {
      PADDOCK_ASSIGN_OR_RETURN(fd, internal::ConnectTcp(host, port, options.connect_timeout));
      buffer.clear();
    }
    SocketStream stream(fd.get());
    stream.SetReadLimits(SocketStream::kNoDeadline, options.io_timeout);
    stream.SetWriteTimeout(options.io_timeout);
    beast::error_code write_ec;
    http::write(stream, req, write_ec);
    // Even when the write failed, the server may have answered early (a 413 before the whole
    // upload was sent) and closed: read that answer rather than reporting the broken pipe.
    ClientResponse out;
    bool keep_alive = false;
    Status st = ReadResponse(stream, head, on_chunk, &out, &keep_alive);
    if (st.ok()) {
      if (!keep_alive || write_ec) Close();
      return out;
    }
    // Retry only a reused connection that died before answering: the server closed it
    // between requests, so the request was never processed.
    bool retry =
        reused && attempt == 0 && stream.bytes_read() == 0 && st.code() == StatusCode::kUnavailable;
    Close();
    if (retry) continue;
    if (write_ec) return IoError("sending request", write_ec);
    return st;
  }
}

HttpClient::HttpClient(std::string host, uint16_t port, ClientOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->options = options;
}

HttpClient::HttpClient(const BaseUrl& url, ClientOptions options)
    : HttpClient(url.host, url.port, options) {
  impl_->prefix = url.path_prefix;
}

HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

Result<ClientResponse> HttpClient::Request(std::string_view method, std::string_view target,
                                           std::string_view body, const Headers& headers) {
  try {
    return impl_->Do(method, target, body, headers, nullptr);
  } catch (const std::exception& e) {
    impl_->Close();
    return Internal(std::string("HTTP request failed: ") + e.what());
  }
}

Result<ClientResponse> HttpClient::RequestStream(std::string_view method, std::string_view target,
                                                 std::string_view body, const Headers& headers,
                                                 const ChunkCallback& on_chunk) {
  if (!on_chunk) return InvalidArgument("RequestStream needs a chunk callback");
  try {
    return impl_->Do(method, target, body, headers, &on_chunk);
  } catch (const std::exception& e) {
    impl_->Close();
    return Internal(std::string("HTTP request failed: ") + e.what());
  }
}

void HttpClient::Close() { impl_->Close(); }

Result<BaseUrl> ParseBaseUrl(std::string_view url) {
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) return InvalidArgument("URL needs a scheme: http://...");
  std::string_view scheme = url.substr(0, sep);
  if (EqualsIgnoreCase(scheme, "https")) return Unimplemented("https URLs are not supported");
  if (!EqualsIgnoreCase(scheme, "http")) {
    return InvalidArgument("unsupported URL scheme '" + std::string(scheme) + "'");
  }
  std::string_view rest = url.substr(sep + 3);
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return InvalidArgument("URLs with user info are not supported");
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return InvalidArgument("base URL must not have a query or fragment");
  }
  BaseUrl out;
  std::string_view port_text;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument("unterminated IPv6 address");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return InvalidArgument("junk after IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return InvalidArgument("empty port");
    }
  } else {
    size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return InvalidArgument("empty port");
    }
  }
  if (out.host.empty()) return InvalidArgument("URL has no host");
  if (out.host.find_first_of(" \t\r\n/\\") != std::string::npos) {
    return InvalidArgument("invalid host in URL");
  }
  if (!port_text.empty()) {
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || value == 0 ||
        value > 65535) {
      return InvalidArgument("invalid port '" + std::string(port_text) + "'");
    }
    out.port = static_cast<uint16_t>(value);
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.find_first_of(" \t\r\n") != std::string_view::npos) {
    return InvalidArgument("invalid path in URL");
  }
  out.path_prefix = std::string(path);
  return out;
}

}  // namespace paddock::api
