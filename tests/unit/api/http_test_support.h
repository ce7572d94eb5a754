// Helpers for the HTTP tests: a raw TCP client that can misbehave on purpose.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace paddock::api::testing {

class RawConn {
 public:
  explicit RawConn(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    connect_errno_ = connected_ ? 0 : errno;
  }
  ~RawConn() { Close(); }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool connected() const { return connected_; }
  int connect_errno() const { return connect_errno_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads until the peer closes (or resets) the connection or `timeout` passes.
  std::string ReadUntilClose(std::chrono::milliseconds timeout, bool* closed) {
    *closed = false;
    auto until = std::chrono::steady_clock::now() + timeout;
    std::string out = std::move(pending_);
    pending_.clear();
    while (true) {
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      until - std::chrono::steady_clock::now())
                                      .count());
      if (left <= 0) return out;
      pollfd pfd{fd_, POLLIN, 0};
      int rc = ::poll(&pfd, 1, left);
      if (rc <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      *closed = true;
      return out;
    }
  }

  // Reads one response with a Content-Length body (or none); "" on timeout or close.
  std::string ReadResponse(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (true) {
      size_t end = pending_.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t length = ContentLength(pending_.substr(0, end));
        size_t total = end + 4 + length;
        if (pending_.size() >= total) {
          std::string out = pending_.substr(0, total);
          pending_.erase(0, total);
          return out;
        }
      }
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      until - std::chrono::steady_clock::now())
                                      .count());
      if (left <= 0) return "";
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, left) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return "";
      pending_.append(buf, static_cast<size_t>(n));
    }
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  static size_t ContentLength(const std::string& head) {
    std::string lower = head;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t pos = lower.find("\r\ncontent-length:");
    if (pos == std::string::npos) return 0;
    return std::stoul(lower.substr(pos + 17));
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  int connect_errno_ = 0;
  std::string pending_;
};

// "HTTP/1.1 404 Not Found\r\n..." -> 404; 0 when unparsable.
inline int StatusOf(const std::string& raw) {
  if (raw.size() < 12 || raw.compare(0, 5, "HTTP/") != 0) return 0;
  return std::atoi(raw.c_str() + 9);
}

inline std::string BodyOf(const std::string& raw) {
  size_t end = raw.find("\r\n\r\n");
  return end == std::string::npos ? "" : raw.substr(end + 4);
}

// The value of header `name` in a raw response (case-insensitive), or "".
inline std::string HeaderOf(const std::string& raw, std::string_view name) {
  size_t end = raw.find("\r\n\r\n");
  std::string head = raw.substr(0, end);
  size_t pos = 0;
  while ((pos = head.find("\r\n", pos)) != std::string::npos) {
    pos += 2;
    size_t colon = head.find(':', pos);
    if (colon == std::string::npos) break;
    if (strncasecmp(head.c_str() + pos, std::string(name).c_str(), name.size()) == 0 &&
        colon - pos == name.size()) {
      size_t eol = head.find("\r\n", colon);
      std::string value = head.substr(colon + 1, eol == std::string::npos ? eol : eol - colon - 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      return value;
    }
  }
  return "";
}

}  // namespace paddock::api::testing
