#include "api/socket_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/error.hpp>
#include <cerrno>
#include <cstring>

namespace paddock::api::internal {
namespace {

boost::system::error_code ErrnoCode(int err) {
  return boost::system::error_code(err, boost::system::system_category());
}

SocketStream::Clock::time_point Earliest(SocketStream::Clock::time_point deadline,
                                         std::chrono::milliseconds idle) {
  if (idle.count() <= 0) return deadline;
  return std::min(deadline, SocketStream::Clock::now() + idle);
}

}  // namespace

bool SocketStream::Poll(short events, Clock::time_point deadline,
                        boost::system::error_code& ec) const {
  while (true) {
    int timeout_ms = -1;
    if (deadline != kNoDeadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        ec = boost::asio::error::timed_out;
        return false;
      }
      timeout_ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    }
    pollfd pfd{fd_, events, 0};
    int rc = ::poll(&pfd, 1, timeout_ms);
    if (rc > 0) return true;  // includes POLLHUP/POLLERR: the next syscall reports them
    if (rc < 0 && errno != EINTR) {
      ec = ErrnoCode(errno);
      return false;
    }
  }
}

size_t SocketStream::ReadSome(void* data, size_t size, boost::system::error_code& ec) {
  Clock::time_point deadline = Earliest(read_deadline_, read_idle_);
  while (true) {
    ssize_t n = ::recv(fd_, data, size, 0);
    if (n > 0) {
      bytes_read_ += static_cast<uint64_t>(n);
      ec = {};
      return static_cast<size_t>(n);
    }
    if (n == 0) {
      ec = boost::asio::error::eof;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      ec = ErrnoCode(errno);
      return 0;
    }
    if (!Poll(POLLIN, deadline, ec)) return 0;
  }
}

size_t SocketStream::WriteSome(const iovec* iov, int count, boost::system::error_code& ec) {
  Clock::time_point deadline = Earliest(kNoDeadline, write_idle_);
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(count);
  while (true) {
    // MSG_NOSIGNAL: a peer that went away must be an error code, not a process-killing SIGPIPE.
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n >= 0) {
      ec = {};
      return static_cast<size_t>(n);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      ec = ErrnoCode(errno);
      return 0;
    }
    if (!Poll(POLLOUT, deadline, ec)) return 0;
  }
}

bool SocketStream::WaitReadable(std::chrono::milliseconds timeout) {
  boost::system::error_code ec;
  return Poll(POLLIN, Earliest(kNoDeadline, timeout), ec);
}

bool SocketStream::PeerClosed() const {
  pollfd pfd{fd_, POLLIN | POLLRDHUP, 0};
  int rc = ::poll(&pfd, 1, 0);
  if (rc <= 0) return false;
  if (pfd.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
  // Readable: either pipelined bytes (still connected) or a pending EOF.
  char c;
  ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

Status PrepareSocket(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return ErrnoStatus("fcntl(O_NONBLOCK)");
  }
  int one = 1;
  // Best effort: not every socket family supports it.
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return Status::Ok();
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "unknown";
  char host[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "unknown";
}

Result<UniqueFd> ConnectTcp(const std::string& host, uint16_t port,
                            std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (gai != 0) {
    return Status(StatusCode::kUnavailable,
                  "resolve " + host + ": " + std::string(::gai_strerror(gai)));
  }
  Status last(StatusCode::kUnavailable, "no address for " + host);
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd) {
      last = ErrnoStatus("socket");
      continue;
    }
    std::string where = host + ":" + service;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = Status(StatusCode::kUnavailable, "connect " + where + ": " + std::strerror(errno),
                      errno);
        continue;
      }
      pollfd pfd{fd.get(), POLLOUT, 0};
      int rc;
      do {
        rc = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
      } while (rc < 0 && errno == EINTR);
      if (rc == 0) {
        last = Status(StatusCode::kDeadlineExceeded, "connect " + where + ": timed out");
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      if (rc < 0 || ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) {
        last =
            Status(StatusCode::kUnavailable, "connect " + where + ": " + std::strerror(err), err);
        continue;
      }
    }
    Status st = PrepareSocket(fd.get());
    if (!st.ok()) {
      last = st;
      continue;
    }
    ::freeaddrinfo(res);
    return fd;
  }
  ::freeaddrinfo(res);
  return last;
}

}  // namespace paddock::api::internal
