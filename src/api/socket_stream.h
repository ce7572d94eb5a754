// Internal to src/api: a non-blocking TCP socket presented to Boost.Beast as a synchronous
// stream whose every read and write gives up at a deadline. Asio's own synchronous socket
// operations cannot time out (SO_RCVTIMEO makes them poll forever), and a control plane that
// faces hostile callers must never let a silent peer pin a thread. Include only from .cc files.
#pragma once

#include <sys/uio.h>

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>
#include <boost/utility/string_view.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/unique_fd.h"

namespace paddock::api::internal {

// Beast 1.74 speaks boost::string_view; the rest of Paddock speaks std::string_view.
inline boost::string_view ToBoost(std::string_view s) { return {s.data(), s.size()}; }
inline std::string FromBoost(boost::string_view s) { return std::string(s.data(), s.size()); }

class SocketStream {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::time_point kNoDeadline = Clock::time_point::max();

  // Does not own `fd`, which must be non-blocking.
  explicit SocketStream(int fd) : fd_(fd) {}

  int fd() const { return fd_; }

  // Reads fail with asio::error::timed_out at `deadline` (absolute) or after `idle` without
  // progress, whichever is first. A zero or negative idle timeout means none.
  void SetReadLimits(Clock::time_point deadline, std::chrono::milliseconds idle) {
    read_deadline_ = deadline;
    read_idle_ = idle;
  }
  // Each write fails with timed_out after `idle` without progress (zero = none).
  void SetWriteTimeout(std::chrono::milliseconds idle) { write_idle_ = idle; }

  // Waits for readable data (or EOF/error, which the next read reports). False on timeout.
  bool WaitReadable(std::chrono::milliseconds timeout);
  // True when the peer has closed or reset the connection (checked without blocking).
  bool PeerClosed() const;

  uint64_t bytes_read() const { return bytes_read_; }

  // --- Beast SyncReadStream / SyncWriteStream ------------------------------------------------
  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers, boost::system::error_code& ec) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      boost::asio::mutable_buffer b = *it;
      if (b.size() > 0) return ReadSome(b.data(), b.size(), ec);
    }
    ec = {};
    return 0;
  }
  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers) {
    boost::system::error_code ec;
    size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  template <class ConstBufferSequence>
  size_t write_some(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
    constexpr int kMaxIov = 64;
    iovec iov[kMaxIov];
    int count = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers) && count < kMaxIov; ++it) {
      boost::asio::const_buffer b = *it;
      if (b.size() == 0) continue;
      iov[count].iov_base = const_cast<void*>(b.data());
      iov[count].iov_len = b.size();
      ++count;
    }
    if (count == 0) {
      ec = {};
      return 0;
    }
    return WriteSome(iov, count, ec);
  }
  template <class ConstBufferSequence>
  size_t write_some(const ConstBufferSequence& buffers) {
    boost::system::error_code ec;
    size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  size_t ReadSome(void* data, size_t size, boost::system::error_code& ec);
  size_t WriteSome(const iovec* iov, int count, boost::system::error_code& ec);
  // Waits for `events` until `deadline`; false (with ec set) on timeout or poll failure.
  bool Poll(short events, Clock::time_point deadline, boost::system::error_code& ec) const;

  int fd_;
  Clock::time_point read_deadline_ = kNoDeadline;
  std::chrono::milliseconds read_idle_{0};
  std::chrono::milliseconds write_idle_{0};
  uint64_t bytes_read_ = 0;
};

// Sets O_NONBLOCK; TCP_NODELAY because responses and stream chunks are written whole and must
// not wait for an ACK.
Status PrepareSocket(int fd);

// "ip:port" of the peer, or "unknown".
std::string PeerAddress(int fd);

// Connects to host:port (name or address literal), trying each resolved address, each within
// `timeout`. Returns a non-blocking socket. Unavailable / DeadlineExceeded on failure.
Result<UniqueFd> ConnectTcp(const std::string& host, uint16_t port,
                            std::chrono::milliseconds timeout);

}  // namespace paddock::api::internal
