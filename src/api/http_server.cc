#include "api/http_server.h"

#include <netdb.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "api/metrics.h"
#include "api/socket_stream.h"
#include "common/random.h"

namespace paddock::api {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using Clock = std::chrono::steady_clock;
using internal::FromBoost;
using internal::SocketStream;
using internal::ToBoost;
using namespace std::chrono_literals;

// Rejected (over-cap) sockets are kept half-closed for a moment and drained, so that closing
// them does not turn into a RST that destroys the 503 before the client has read it.
constexpr size_t kMaxLingering = 64;
constexpr auto kLingerTime = 2s;
constexpr size_t kMaxAcceptsPerWakeup = 64;

// Bounded label values: a hostile caller must not be able to mint new metric series.
std::string MethodLabel(std::string_view method) {
  static constexpr std::string_view kKnown[] = {"GET",   "HEAD",   "POST",   "PUT",
                                                "PATCH", "DELETE", "OPTIONS"};
  for (std::string_view m : kKnown) {
    if (m == method) return std::string(m);
  }
  return "other";
}

// Framing and identity headers belong to the server: a handler's copy could desynchronise the
// connection (request smuggling) or spoof the request id.
bool IsReservedHeader(std::string_view name) {
  static constexpr std::string_view kReserved[] = {
      "content-length", "transfer-encoding", "connection",  "keep-alive", "upgrade", "te",
      "trailer",        "x-request-id",      "content-type"};
  for (std::string_view r : kReserved) {
    if (EqualsIgnoreCase(r, name)) return true;
  }
  return false;
}

// True for Beast's HTTP parser errors (the caller sent something that is not HTTP/1.x), as
// opposed to socket errors and timeouts.
bool IsHttpParseError(const beast::error_code& ec) {
  static const boost::system::error_category& category =
      beast::error_code(http::error::bad_target).category();
  return ec.category() == category && ec != http::error::end_of_stream &&
         ec != http::error::partial_message;
}

struct Connection {
  uint64_t id = 0;
  UniqueFd fd;
  std::string remote;
  std::mutex mu;  // guards fd's lifetime (Stop may shutdown() it) and `idle`
  bool idle = true;
  std::atomic<bool> force_closed{false};
  // A request was refused before its body was read (e.g. 413): close lingering, see Serve().
  bool linger = false;
  std::thread thread;
};

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(HttpServerOptions options) : options_(std::move(options)) {}
  ~Impl() { Stop(0ms); }

  Status Route(std::string_view method, std::string_view pattern, Handler handler,
               RouteOptions options) {
    return router_.Add(method, pattern, std::move(handler), options);
  }
  Status Start();
  void Stop(std::chrono::milliseconds deadline);
  uint16_t port() const { return port_.load(); }
  size_t active_connections() const {
    std::lock_guard lock(mu_);
    return conns_.size();
  }
  bool stopping() const { return stopping_.load(); }
  const HttpServerOptions& options() const { return options_; }

 private:
  enum class State { kNew, kRunning, kStopped };

  void AcceptLoop();
  void HandleAccepted(UniqueFd fd, std::deque<std::pair<UniqueFd, Clock::time_point>>& lingering);
  void Reject(UniqueFd fd, std::deque<std::pair<UniqueFd, Clock::time_point>>& lingering);
  void ReapFinished();
  void Wake();
  void Serve(std::shared_ptr<Connection> conn);
  void ServeLoop(Connection& conn);
  // Serves one request; false when the connection must close.
  bool ServeOne(Connection& conn, SocketStream& stream, beast::flat_buffer& buffer);
  // Marks the connection idle (waiting for a request) or busy; false when stopping.
  bool SetIdle(Connection& conn, bool idle);
  void ShutdownConnections(bool idle_only);
  void Record(std::string_view method, std::string_view route, int status, Clock::time_point t0);

  HttpServerOptions options_;
  Router router_;
  UniqueFd listen_fd_;
  UniqueFd wake_fd_;
  std::atomic<uint16_t> port_{0};
  std::thread acceptor_;

  std::mutex stop_mu_;  // serialises Start/Stop
  State state_ = State::kNew;
  std::atomic<bool> stopping_{false};

  mutable std::mutex mu_;
  std::condition_variable cv_;  // signalled when a connection ends
  std::map<uint64_t, std::shared_ptr<Connection>> conns_;
  std::vector<std::thread> finished_;  // ended connection threads, to be joined
  uint64_t next_id_ = 1;
};

namespace {

// The ResponseWriter handed to handlers: writes straight to the connection's socket.
class ConnectionWriter final : public ResponseWriter {
 public:
  ConnectionWriter(const std::atomic<bool>& server_stopping, Connection& conn, SocketStream& stream,
                   unsigned version, bool keep_alive, bool head, std::string request_id)
      : server_stopping_(server_stopping),
        conn_(conn),
        stream_(stream),
        version_(version),
        keep_alive_(keep_alive),
        head_(head),
        request_id_(std::move(request_id)) {}

  bool Send(Response response) override;
  bool StartStream(int status, std::string_view content_type, Headers headers) override;
  bool WriteChunk(std::string_view data) override;
  bool EndStream() override;
  bool Started() const override { return state_ != State::kNone; }
  bool Cancelled() const override {
    return failed_ || conn_.force_closed.load() || stream_.PeerClosed();
  }

  // The connection cannot carry another request (write failed, stream aborted, close sent).
  bool MustClose() const { return failed_ || !keep_alive_sent_ || state_ == State::kStreaming; }
  bool streaming() const { return state_ == State::kStreaming; }
  int status() const { return status_; }
  // Gives up on an open stream without the terminal chunk: the client sees a truncated body.
  void Abort() { failed_ = true; }
  void ForceClose() { keep_alive_ = false; }

 private:
  enum class State { kNone, kSent, kStreaming, kEnded };

  template <class Message>
  void SetCommonHeaders(Message& msg, int status, std::string_view content_type,
                        const Headers& headers) {
    msg.version(version_);
    msg.result(static_cast<unsigned>(status));
    for (const auto& [name, value] : headers.fields()) {
      if (IsReservedHeader(name)) continue;
      if (!IsValidHeaderField(name, value)) {
        spdlog::warn("http: dropping invalid response header '{}' (request {})", name, request_id_);
        continue;
      }
      msg.insert(ToBoost(name), ToBoost(value));
    }
    if (!content_type.empty() && IsValidHeaderField("Content-Type", content_type)) {
      msg.set(http::field::content_type, ToBoost(content_type));
    }
    msg.set("X-Request-Id", ToBoost(request_id_));
    msg.set("X-Content-Type-Options", "nosniff");
    keep_alive_sent_ = keep_alive_ && !server_stopping_.load();
    msg.keep_alive(keep_alive_sent_);
  }

  bool Fail() {
    failed_ = true;
    return false;
  }

  const std::atomic<bool>& server_stopping_;
  Connection& conn_;
  SocketStream& stream_;
  unsigned version_;
  bool keep_alive_;
  bool head_;
  std::string request_id_;
  State state_ = State::kNone;
  bool chunked_ = false;
  bool failed_ = false;
  bool keep_alive_sent_ = false;
  int status_ = 0;
};

bool ConnectionWriter::Send(Response response) {
  if (state_ != State::kNone) {
    spdlog::warn("http: handler responded twice (request {})", request_id_);
    return false;
  }
  state_ = State::kSent;
  if (response.status < 200 || response.status > 599) {
    spdlog::error("http: handler produced invalid status {} (request {})", response.status,
                  request_id_);
    response = ErrorResponse(500, "internal", "internal error");
  }
  status_ = response.status;
  http::response<http::string_body> res;
  SetCommonHeaders(res, response.status, response.content_type, response.headers);
  if (response.status == 204 || response.status == 304) {
    res.erase(http::field::content_type);  // no body, so no content type either
  } else {
    res.body() = std::move(response.body);
    res.prepare_payload();
  }
  beast::error_code ec;
  if (head_) {
    http::response_serializer<http::string_body> sr{res};
    http::write_header(stream_, sr, ec);
  } else {
    http::write(stream_, res, ec);
  }
  if (ec) return Fail();
  return true;
}

bool ConnectionWriter::StartStream(int status, std::string_view content_type, Headers headers) {
  if (state_ != State::kNone) {
    spdlog::warn("http: handler responded twice (request {})", request_id_);
    return false;
  }
  if (status < 200 || status > 599 || status == 204 || status == 304) {
    spdlog::error("http: invalid stream status {} (request {})", status, request_id_);
    Send(ErrorResponse(500, "internal", "internal error"));
    return false;
  }
  state_ = State::kStreaming;
  status_ = status;
  http::response<http::empty_body> res;
  // HTTP/1.0 has no chunked coding: the body ends when the connection closes.
  chunked_ = version_ >= 11;
  if (!chunked_) keep_alive_ = false;
  SetCommonHeaders(res, status, content_type, headers);
  if (chunked_) res.chunked(true);
  res.set(http::field::cache_control, "no-store");
  http::response_serializer<http::empty_body> sr{res};
  beast::error_code ec;
  http::write_header(stream_, sr, ec);
  if (ec) return Fail();
  return true;
}

bool ConnectionWriter::WriteChunk(std::string_view data) {
  if (state_ != State::kStreaming || failed_) return false;
  if (conn_.force_closed.load()) return Fail();
  if (data.empty() || head_) return true;
  // Notice a vanished client now rather than one write later (the first write after a close
  // usually still "succeeds" into the socket buffer).
  if (stream_.PeerClosed()) return Fail();
  beast::error_code ec;
  if (chunked_) {
    net::write(stream_, http::make_chunk(net::const_buffer(data.data(), data.size())), ec);
  } else {
    net::write(stream_, net::const_buffer(data.data(), data.size()), ec);
  }
  if (ec) return Fail();
  return true;
}

bool ConnectionWriter::EndStream() {
  if (state_ != State::kStreaming || failed_) return false;
  state_ = State::kEnded;
  if (!chunked_ || head_) return true;
  beast::error_code ec;
  net::write(stream_, http::make_chunk_last(), ec);
  if (ec) return Fail();
  return true;
}

}  // namespace

// --- server -------------------------------------------------------------------------------

Status HttpServer::Impl::Start() {
  std::lock_guard stop_lock(stop_mu_);
  if (state_ != State::kNew) return FailedPrecondition("HTTP server was already started");
  if (options_.max_connections == 0) return InvalidArgument("max_connections must be > 0");

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string service = std::to_string(options_.port);
  int gai = ::getaddrinfo(options_.address.empty() ? nullptr : options_.address.c_str(),
                          service.c_str(), &hints, &res);
  if (gai != 0) {
    return InvalidArgument("listen address '" + options_.address +
                           "': " + std::string(::gai_strerror(gai)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> res_owner(res, ::freeaddrinfo);
  UniqueFd fd(
      ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, res->ai_protocol));
  if (!fd) return ErrnoStatus("socket");
  int one = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return ErrnoStatus("setsockopt(SO_REUSEADDR)");
  }
  std::string where = options_.address + ":" + service;
  if (::bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0) return ErrnoStatus("bind " + where);
  if (::listen(fd.get(), SOMAXCONN) != 0) return ErrnoStatus("listen " + where);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return ErrnoStatus("getsockname");
  }
  uint16_t port = bound.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return ErrnoStatus("eventfd");

  listen_fd_ = std::move(fd);
  wake_fd_ = std::move(wake);
  port_ = port;
  if (options_.metrics != nullptr) {
    options_.metrics->GetGauge(options_.metrics_prefix + "http_connections_active",
                               "Open HTTP connections");
  }
  try {
    acceptor_ = std::thread(&Impl::AcceptLoop, this);
  } catch (const std::system_error& e) {
    listen_fd_.reset();
    return Internal(std::string("starting the acceptor thread: ") + e.what());
  }
  state_ = State::kRunning;
  spdlog::info("http: listening on {}:{}", options_.address, port);
  return Status::Ok();
}

void HttpServer::Impl::Wake() {
  if (!wake_fd_) return;
  uint64_t one = 1;
  // Best effort: the counter saturating only means a wake-up is already pending.
  (void)!::write(wake_fd_.get(), &one, sizeof(one));
}

void HttpServer::Impl::ReapFinished() {
  std::vector<std::thread> done;
  {
    std::lock_guard lock(mu_);
    done.swap(finished_);
  }
  for (std::thread& t : done) {
    if (t.joinable()) t.join();
  }
}

void HttpServer::Impl::AcceptLoop() {
  std::deque<std::pair<UniqueFd, Clock::time_point>> lingering;
  auto last_accept_error_log = Clock::time_point();
  while (!stopping_.load()) {
    ReapFinished();
    std::vector<pollfd> pfds;
    pfds.push_back({listen_fd_.get(), POLLIN, 0});
    pfds.push_back({wake_fd_.get(), POLLIN, 0});
    for (auto& [lfd, until] : lingering) pfds.push_back({lfd.get(), POLLIN, 0});
    int timeout_ms = -1;
    if (!lingering.empty()) {
      auto first = lingering.front().second;  // deque is ordered by deadline
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::ceil<std::chrono::milliseconds>(first - Clock::now()).count()));
    }
    int rc = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      spdlog::error("http: acceptor poll failed: {}", std::strerror(errno));
      std::this_thread::sleep_for(100ms);
      continue;
    }
    if (pfds[1].revents & POLLIN) {
      uint64_t v;
      (void)!::read(wake_fd_.get(), &v, sizeof(v));
    }
    if (stopping_.load()) break;

    // Drain rejected sockets; close them at EOF, on error or when their time is up.
    auto now = Clock::now();
    std::deque<std::pair<UniqueFd, Clock::time_point>> keep;
    for (size_t i = 0; i < lingering.size(); ++i) {
      bool done = lingering[i].second <= now;
      if (!done && pfds[2 + i].revents != 0) {
        char sink[4096];
        while (true) {
          ssize_t n = ::recv(lingering[i].first.get(), sink, sizeof(sink), MSG_DONTWAIT);
          if (n > 0) continue;
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          if (n < 0 && errno == EINTR) continue;
          done = true;  // EOF or error
          break;
        }
      }
      if (!done) keep.push_back(std::move(lingering[i]));
    }
    lingering.swap(keep);

    if (!(pfds[0].revents & POLLIN)) continue;
    for (size_t i = 0; i < kMaxAcceptsPerWakeup; ++i) {
      UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (fd) {
        HandleAccepted(std::move(fd), lingering);
        continue;
      }
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) break;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      // EMFILE/ENFILE/ENOBUFS/ENOMEM: the pending connection stays queued and the listener
      // stays readable; back off instead of spinning.
      if (Clock::now() - last_accept_error_log > 10s) {
        spdlog::error("http: accept failed: {}", std::strerror(err));
        last_accept_error_log = Clock::now();
      }
      std::this_thread::sleep_for(50ms);
      break;
    }
  }
  listen_fd_.reset();  // refuse new connections as early as possible
}

void HttpServer::Impl::Reject(UniqueFd fd,
                              std::deque<std::pair<UniqueFd, Clock::time_point>>& lingering) {
  Response r = ErrorResponse(503, "unavailable", "too many open connections; retry later");
  std::string wire =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(r.body.size()) + "\r\nConnection: close\r\nRetry-After: 1\r\n\r\n" + r.body;
  // Never block the acceptor: a fresh socket's send buffer takes this small write whole.
  (void)!::send(fd.get(), wire.data(), wire.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd.get(), SHUT_WR);
  if (lingering.size() >= kMaxLingering) lingering.pop_front();
  lingering.emplace_back(std::move(fd), Clock::now() + kLingerTime);
}

void HttpServer::Impl::HandleAccepted(
    UniqueFd fd, std::deque<std::pair<UniqueFd, Clock::time_point>>& lingering) {
  Status st = internal::PrepareSocket(fd.get());
  if (!st.ok()) {
    spdlog::warn("http: preparing accepted socket: {}", st.ToString());
    return;
  }
  std::unique_lock lock(mu_);
  if (conns_.size() >= options_.max_connections) {
    lock.unlock();
    spdlog::warn("http: connection cap ({}) reached; rejecting {}", options_.max_connections,
                 internal::PeerAddress(fd.get()));
    Reject(std::move(fd), lingering);
    return;
  }
  auto conn = std::make_shared<Connection>();
  conn->id = next_id_++;
  conn->remote = internal::PeerAddress(fd.get());
  conn->fd = std::move(fd);
  conns_.emplace(conn->id, conn);
  try {
    // The new thread takes mu_ before it exits, so the assignment below happens first.
    conn->thread = std::thread(&Impl::Serve, this, conn);
  } catch (const std::system_error& e) {
    conns_.erase(conn->id);
    lock.unlock();
    spdlog::error("http: cannot start a connection thread: {}", e.what());
    Reject(std::move(conn->fd), lingering);
    return;
  }
  lock.unlock();
  if (options_.metrics != nullptr) {
    options_.metrics
        ->GetGauge(options_.metrics_prefix + "http_connections_active", "Open HTTP connections")
        .Inc();
  }
}

void HttpServer::Impl::Serve(std::shared_ptr<Connection> conn) {
  try {
    ServeLoop(*conn);
  } catch (const std::exception& e) {
    // Library exceptions (allocation failures, Beast invariants) end only this connection.
    spdlog::error("http: connection {} failed: {}", conn->remote, e.what());
  } catch (...) {
    spdlog::error("http: connection {} failed with an unknown exception", conn->remote);
  }
  if (conn->linger && !stopping_.load()) {
    // Lingering close, as nginx does: closing a socket with unread data makes the kernel send
    // a reset, and a client still uploading the body we refused would lose our 413 with it.
    // Stop writing, then discard what it still sends for a bounded time and amount.
    int fd = conn->fd.get();
    ::shutdown(fd, SHUT_WR);
    const auto until = Clock::now() + std::chrono::seconds(2);
    size_t drained = 0;
    char sink[16384];
    while (drained < (64u << 20) && Clock::now() < until) {
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, 100) < 0) break;
      ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
      if (n > 0) drained += static_cast<size_t>(n);
    }
  }
  {
    std::lock_guard lock(conn->mu);
    conn->fd.reset();
  }
  if (options_.metrics != nullptr) {
    options_.metrics
        ->GetGauge(options_.metrics_prefix + "http_connections_active", "Open HTTP connections")
        .Dec();
  }
  {
    std::lock_guard lock(mu_);
    finished_.push_back(std::move(conn->thread));
    conns_.erase(conn->id);
  }
  cv_.notify_all();
  Wake();
}

bool HttpServer::Impl::SetIdle(Connection& conn, bool idle) {
  std::lock_guard lock(conn.mu);
  if (stopping_.load()) return false;
  conn.idle = idle;
  return true;
}

void HttpServer::Impl::ServeLoop(Connection& conn) {
  SocketStream stream(conn.fd.get());
  stream.SetWriteTimeout(options_.write_timeout);
  beast::flat_buffer buffer;
  while (true) {
    if (buffer.size() == 0) {
      if (!SetIdle(conn, true)) return;
      bool readable = stream.WaitReadable(options_.idle_timeout);
      if (!SetIdle(conn, false) || !readable) return;
    } else if (stopping_.load()) {
      return;
    }
    if (!ServeOne(conn, stream, buffer)) return;
  }
}

void HttpServer::Impl::Record(std::string_view method, std::string_view route, int status,
                              Clock::time_point t0) {
  if (options_.metrics == nullptr) return;
  std::string m = MethodLabel(method);
  MetricsRegistry& reg = *options_.metrics;
  reg.GetCounter(options_.metrics_prefix + "http_requests_total", "HTTP requests served",
                 {{"method", m}, {"route", std::string(route)}, {"status", std::to_string(status)}})
      .Inc();
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  reg.GetHistogram(options_.metrics_prefix + "http_request_duration_seconds",
                   "Time from a request's first byte until its handler returned",
                   DefaultLatencyBuckets(), {{"method", m}, {"route", std::string(route)}})
      .Observe(seconds);
}

bool HttpServer::Impl::ServeOne(Connection& conn, SocketStream& stream,
                                beast::flat_buffer& buffer) {
  const Clock::time_point t0 = Clock::now();
  stream.SetReadLimits(t0 + options_.read_timeout, 0ms);
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
  // The per-route limit is applied once the route is known. Not boost::none: Beast 1.74
  // compares a Content-Length against an empty optional as "over the limit".
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());

  beast::error_code ec;
  http::read_header(stream, buffer, parser, ec);
  if (ec) {
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == http::error::partial_message || ec == net::error::timed_out) {
      if (ec == net::error::timed_out) {
        spdlog::debug("http: {} timed out sending a request", conn.remote);
      }
      return false;
    }
    if (!IsHttpParseError(ec)) return false;  // socket error: nobody to answer
    // A parse error: answer once, then close (the stream position is unknown). The client
    // may still be sending (an oversized header), so linger for it to read the answer.
    conn.linger = true;
    ConnectionWriter writer(stopping_, conn, stream, 11, false, false, RandomHex(16));
    if (ec == http::error::header_limit) {
      writer.Send(ErrorResponse(
          431, "header_too_large",
          "request headers exceed " + std::to_string(options_.max_header_bytes) + " bytes"));
      Record("", "none", 431, t0);
    } else {
      writer.Send(ErrorResponse(400, "bad_request", "malformed HTTP request: " + ec.message()));
      Record("", "none", 400, t0);
    }
    return false;
  }

  auto& msg = parser.get();
  Request req;
  req.method = FromBoost(msg.method_string());
  req.target = FromBoost(msg.target());
  req.remote_address = conn.remote;
  for (const auto& field : msg) {
    req.headers.Add(FromBoost(field.name_string()), FromBoost(field.value()));
  }
  std::string offered_id = req.headers.Get("X-Request-Id");
  req.request_id = IsValidRequestId(offered_id) ? offered_id : RandomHex(16);
  const bool head = msg.method() == http::verb::head;
  const bool has_body = parser.chunked() || parser.content_length().value_or(0) > 0;
  const unsigned version = msg.version() >= 11 ? 11 : 10;
  ConnectionWriter writer(stopping_, conn, stream, version, msg.keep_alive(), head, req.request_id);

  // Errors before the body is read close the connection when a body is pending: the bytes
  // left on the wire are not a request.
  auto reject = [&](Response response, std::string_view route) {
    if (has_body) {
      writer.ForceClose();
      conn.linger = true;
    }
    writer.Send(std::move(response));
    Record(req.method, route, writer.status(), t0);
    return !writer.MustClose();
  };

  if (msg.version() >= 11 && msg.find(http::field::host) == msg.end()) {
    return reject(ErrorResponse(400, "bad_request", "HTTP/1.1 request without a Host header"),
                  "none");
  }
  std::string_view target = req.target;
  if (target.empty() || target[0] != '/' || target.find('#') != std::string_view::npos) {
    return reject(ErrorResponse(400, "bad_request", "request target must be an absolute path"),
                  "none");
  }
  size_t qpos = target.find('?');
  req.path = std::string(target.substr(0, qpos));
  if (qpos != std::string_view::npos) {
    auto query = ParseQuery(target.substr(qpos + 1));
    if (!query.ok()) {
      return reject(ErrorResponse(400, "bad_request", "invalid query: " + query.status().message()),
                    "none");
    }
    req.query = std::move(query).value();
  }

  Router::Match match = router_.Find(req.method, req.path);
  switch (match.outcome) {
    case Router::Outcome::kMatched:
      break;
    case Router::Outcome::kBadPath:
      return reject(ErrorResponse(400, "bad_request", match.error), "none");
    case Router::Outcome::kNotFound:
      return reject(ErrorResponse(404, "not_found", "no route for " + req.path), "unmatched");
    case Router::Outcome::kMethodNotAllowed: {
      std::string allow;
      for (const std::string& m : match.allowed_methods) {
        if (!allow.empty()) allow += ", ";
        allow += m;
      }
      Response r = ErrorResponse(405, "method_not_allowed",
                                 "method " + req.method + " is not allowed for " + req.path,
                                 {{"allowed_methods", match.allowed_methods}});
      r.headers.Set("Allow", allow);
      return reject(std::move(r), "unmatched");
    }
  }
  const Router::Route& route = *match.route;
  req.params = std::move(match.params);

  const uint64_t limit = route.options.max_body_bytes.value_or(options_.default_max_body_bytes);
  if (parser.content_length().value_or(0) > limit) {
    return reject(ErrorResponse(413, "payload_too_large",
                                "request body exceeds " + std::to_string(limit) + " bytes",
                                {{"max_body_bytes", limit}}),
                  route.pattern);
  }
  if (!parser.is_done()) {
    parser.body_limit(limit);
    if (route.options.read_timeout) stream.SetReadLimits(t0 + *route.options.read_timeout, 0ms);
    auto expect = msg.find(http::field::expect);
    if (version >= 11 && expect != msg.end() &&
        EqualsIgnoreCase(FromBoost(expect->value()), "100-continue")) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::write(stream, net::const_buffer(kContinue.data(), kContinue.size()), ec);
      if (ec) return false;
    }
    http::read(stream, buffer, parser, ec);
    if (ec == http::error::body_limit) {
      return reject(ErrorResponse(413, "payload_too_large",
                                  "request body exceeds " + std::to_string(limit) + " bytes",
                                  {{"max_body_bytes", limit}}),
                    route.pattern);
    }
    if (ec) {
      if (IsHttpParseError(ec)) {
        return reject(ErrorResponse(400, "bad_request", "malformed request body: " + ec.message()),
                      route.pattern);
      }
      return false;  // timeout or the client went away
    }
  }
  req.body = std::move(msg.body());

  bool threw = false;
  try {
    route.handler(req, writer);
  } catch (const std::exception& e) {
    threw = true;
    spdlog::error("http: handler for {} {} threw (request {}): {}", req.method, route.pattern,
                  req.request_id, e.what());
  } catch (...) {
    threw = true;
    spdlog::error("http: handler for {} {} threw (request {})", req.method, route.pattern,
                  req.request_id);
  }
  if (!writer.Started()) {
    if (!threw) {
      spdlog::error("http: handler for {} {} did not respond (request {})", req.method,
                    route.pattern, req.request_id);
    }
    writer.Send(ErrorResponse(500, "internal", "internal error"));
  } else if (writer.streaming()) {
    if (threw) {
      writer.Abort();
    } else {
      writer.EndStream();
    }
  }
  Record(req.method, route.pattern, writer.status(), t0);
  spdlog::debug("http: {} {} -> {} ({} ms, request {})", req.method, req.path, writer.status(),
                std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(),
                req.request_id);
  return !writer.MustClose();
}

void HttpServer::Impl::ShutdownConnections(bool idle_only) {
  std::vector<std::shared_ptr<Connection>> conns;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, c] : conns_) conns.push_back(c);
  }
  for (auto& c : conns) {
    std::lock_guard lock(c->mu);
    if (idle_only && !c->idle) continue;
    if (!idle_only) c->force_closed = true;
    // shutdown() (not close) wakes a thread blocked in poll/recv on this fd, and the fd number
    // cannot be reused under us because the owner closes it only while holding c->mu.
    if (c->fd) ::shutdown(c->fd.get(), SHUT_RDWR);
  }
}

void HttpServer::Impl::Stop(std::chrono::milliseconds deadline) {
  std::lock_guard stop_lock(stop_mu_);
  if (state_ != State::kRunning) return;
  const auto until = Clock::now() + deadline;
  stopping_ = true;
  Wake();
  if (acceptor_.joinable()) acceptor_.join();
  ShutdownConnections(/*idle_only=*/true);
  {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, until, [&] { return conns_.empty(); });
  }
  if (active_connections() > 0) {
    spdlog::warn("http: stop deadline reached with {} connection(s) busy; closing them",
                 active_connections());
    ShutdownConnections(/*idle_only=*/false);
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, 5s, [&] { return conns_.empty(); })) {
      spdlog::warn("http: still waiting for {} handler(s) to return", conns_.size());
    }
  }
  ReapFinished();
  state_ = State::kStopped;
  spdlog::info("http: server on port {} stopped", port_.load());
}

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
HttpServer::~HttpServer() = default;

Status HttpServer::Route(std::string_view method, std::string_view pattern, Handler handler,
                         RouteOptions options) {
  return impl_->Route(method, pattern, std::move(handler), options);
}
Status HttpServer::Start() { return impl_->Start(); }
uint16_t HttpServer::port() const { return impl_->port(); }
void HttpServer::Stop(std::chrono::milliseconds deadline) { impl_->Stop(deadline); }
size_t HttpServer::active_connections() const { return impl_->active_connections(); }

}  // namespace paddock::api
