// Wire protocol between the daemon (LinuxRuntime) and a sandbox's paddock-init, over a
// SOCK_SEQPACKET socketpair: one message per packet, file descriptors travel as SCM_RIGHTS.
// Header-only and dependency-free so the static init binary can use it.
//
// Every message: u32 type, then fields appended by MessageWriter and read back in the same
// order by MessageReader, which bounds-checks everything (the init trusts only the daemon, but
// a malformed packet must still fail cleanly rather than read out of bounds).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::runtime::linux::proto {

inline constexpr size_t kMaxMessageBytes = 256 * 1024;
inline constexpr int kMaxFdsPerMessage = 4;
// The control socket is fd 3 in the init (0-2 are /dev/null).
inline constexpr int kInitControlFd = 3;

enum class MsgType : uint32_t {
  // daemon -> init
  kSetup = 1,     // fds: [exec cgroup parent dir]
  kExec = 2,      // fds: [stdin, stdout, stderr]
  kKill = 3,      // signal an exec's whole process tree
  kShutdown = 4,  // kill everything and exit
  // Follows Setup when it names layers or binds: fds are the daemon's detached, id-mapped
  // mount trees (open_tree + mount_setattr), layers first then binds, in order, up to
  // kMaxFdsPerMessage per packet; as many packets as needed.
  kSetupFds = 5,
  // init -> daemon
  kReady = 100,  // fds: [the writable layer's upper dir] (Checkpoint, ChangedPaths)
  kSetupFailed = 101,
  kStarted = 102,
  kExited = 103,
};

enum class CgroupMode : uint32_t { kV1Freezer = 1, kV2 = 2 };

struct SetupMsg {
  std::string hostname;
  std::string lower_dir;              // overlay lower layer (template rootfs)
  std::vector<std::string> ro_binds;  // pairs: source, target (inside)
  std::string staging_dir;            // empty host dir used as a mount point
  uint64_t disk_bytes = 0;
  uint64_t tmp_bytes = 0;
  uint32_t sandbox_uid = 1000, sandbox_gid = 1000;
  uint32_t cgroup_mode = 1;
  std::vector<uint8_t> seccomp_bpf;  // struct sock_filter[]
  // Mount trees arriving in kSetupFds packets: layer_count layers (top first, stacked above
  // lower_dir), then one per bind target (absolute paths inside the sandbox).
  uint32_t layer_count = 0;
  std::vector<std::string> bind_targets;
  uint32_t FdCount() const { return layer_count + static_cast<uint32_t>(bind_targets.size()); }
};

struct ExecMsg {
  uint64_t exec_id = 0;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE
  std::string cwd;
  uint32_t uid = 1000, gid = 1000;
  uint64_t timeout_ms = 0;  // 0 = none
  uint64_t nofile = 1024;
};

struct KillMsg {
  uint64_t exec_id = 0;
  int32_t signal = 9;
};

struct StartedMsg {
  uint64_t exec_id = 0;
  int32_t pid = 0;  // inside the sandbox
};

struct ExitedMsg {
  uint64_t exec_id = 0;
  int32_t exit_code = -1;
  int32_t signal = 0;
  uint32_t timed_out = 0;
  uint32_t killed = 0;
  uint64_t utime_us = 0, stime_us = 0;
  uint64_t maxrss_kib = 0;
  uint64_t wall_ns = 0;
  int32_t spawn_errno = 0;  // nonzero: the command never started
  std::string message;      // why it never started (step name)
};

struct SetupFailedMsg {
  std::string step;
  int32_t err = 0;
};

class MessageWriter {
 public:
  explicit MessageWriter(MsgType t) { U32(static_cast<uint32_t>(t)); }
  MessageWriter& U32(uint32_t v) { return Raw(&v, sizeof v); }
  MessageWriter& I32(int32_t v) { return Raw(&v, sizeof v); }
  MessageWriter& U64(uint64_t v) { return Raw(&v, sizeof v); }
  MessageWriter& Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    return Raw(s.data(), s.size());
  }
  MessageWriter& Strs(const std::vector<std::string>& v) {
    U32(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) Str(s);
    return *this;
  }
  MessageWriter& Bytes(const std::vector<uint8_t>& b) {
    U32(static_cast<uint32_t>(b.size()));
    return Raw(b.data(), b.size());
  }
  const std::vector<uint8_t>& data() const { return buf_; }

 private:
  MessageWriter& Raw(const void* p, size_t n) {
    // resize + memcpy rather than insert(): GCC 12 reports a false stringop-overflow on it.
    if (n == 0) return *this;
    const size_t off = buf_.size();
    buf_.resize(off + n);
    std::memcpy(buf_.data() + off, p, n);
    return *this;
  }
  std::vector<uint8_t> buf_;
};

class MessageReader {
 public:
  MessageReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool ok() const { return ok_; }
  MsgType Type() { return static_cast<MsgType>(U32()); }
  uint32_t U32() {
    uint32_t v = 0;
    Raw(&v, sizeof v);
    return v;
  }
  int32_t I32() {
    int32_t v = 0;
    Raw(&v, sizeof v);
    return v;
  }
  uint64_t U64() {
    uint64_t v = 0;
    Raw(&v, sizeof v);
    return v;
  }
  std::string Str() {
    uint32_t len = U32();
    if (!ok_ || len > n_ - off_) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(p_ + off_), len);
    off_ += len;
    return s;
  }
  std::vector<std::string> Strs() {
    uint32_t count = U32();
    std::vector<std::string> v;
    if (!ok_ || count > n_ - off_) {
      ok_ = false;
      return v;
    }  // each string needs >= 4 bytes
    v.reserve(count);
    for (uint32_t i = 0; i < count && ok_; ++i) v.push_back(Str());
    return v;
  }
  std::vector<uint8_t> Bytes() {
    uint32_t len = U32();
    if (!ok_ || len > n_ - off_) {
      ok_ = false;
      return {};
    }
    std::vector<uint8_t> v(p_ + off_, p_ + off_ + len);
    off_ += len;
    return v;
  }

 private:
  void Raw(void* out, size_t n) {
    if (!ok_ || n > n_ - off_) {
      ok_ = false;
      return;
    }
    std::memcpy(out, p_ + off_, n);
    off_ += n;
  }
  const uint8_t* p_;
  size_t n_;
  size_t off_ = 0;
  bool ok_ = true;
};

inline std::vector<uint8_t> Encode(const SetupMsg& m) {
  MessageWriter w(MsgType::kSetup);
  w.Str(m.hostname).Str(m.lower_dir).Strs(m.ro_binds).Str(m.staging_dir);
  w.U64(m.disk_bytes).U64(m.tmp_bytes).U32(m.sandbox_uid).U32(m.sandbox_gid).U32(m.cgroup_mode);
  w.Bytes(m.seccomp_bpf);
  w.U32(m.layer_count).Strs(m.bind_targets);
  return w.data();
}
inline bool Decode(MessageReader& r, SetupMsg* m) {
  m->hostname = r.Str();
  m->lower_dir = r.Str();
  m->ro_binds = r.Strs();
  m->staging_dir = r.Str();
  m->disk_bytes = r.U64();
  m->tmp_bytes = r.U64();
  m->sandbox_uid = r.U32();
  m->sandbox_gid = r.U32();
  m->cgroup_mode = r.U32();
  m->seccomp_bpf = r.Bytes();
  m->layer_count = r.U32();
  m->bind_targets = r.Strs();
  return r.ok();
}

inline std::vector<uint8_t> Encode(const ExecMsg& m) {
  MessageWriter w(MsgType::kExec);
  w.U64(m.exec_id).Strs(m.argv).Strs(m.env).Str(m.cwd).U32(m.uid).U32(m.gid);
  w.U64(m.timeout_ms).U64(m.nofile);
  return w.data();
}
inline bool Decode(MessageReader& r, ExecMsg* m) {
  m->exec_id = r.U64();
  m->argv = r.Strs();
  m->env = r.Strs();
  m->cwd = r.Str();
  m->uid = r.U32();
  m->gid = r.U32();
  m->timeout_ms = r.U64();
  m->nofile = r.U64();
  return r.ok();
}

inline std::vector<uint8_t> Encode(const KillMsg& m) {
  MessageWriter w(MsgType::kKill);
  w.U64(m.exec_id).I32(m.signal);
  return w.data();
}
inline bool Decode(MessageReader& r, KillMsg* m) {
  m->exec_id = r.U64();
  m->signal = r.I32();
  return r.ok();
}

inline std::vector<uint8_t> Encode(const StartedMsg& m) {
  MessageWriter w(MsgType::kStarted);
  w.U64(m.exec_id).I32(m.pid);
  return w.data();
}
inline bool Decode(MessageReader& r, StartedMsg* m) {
  m->exec_id = r.U64();
  m->pid = r.I32();
  return r.ok();
}

inline std::vector<uint8_t> Encode(const ExitedMsg& m) {
  MessageWriter w(MsgType::kExited);
  w.U64(m.exec_id).I32(m.exit_code).I32(m.signal).U32(m.timed_out).U32(m.killed);
  w.U64(m.utime_us).U64(m.stime_us).U64(m.maxrss_kib).U64(m.wall_ns).I32(m.spawn_errno);
  w.Str(m.message);
  return w.data();
}
inline bool Decode(MessageReader& r, ExitedMsg* m) {
  m->exec_id = r.U64();
  m->exit_code = r.I32();
  m->signal = r.I32();
  m->timed_out = r.U32();
  m->killed = r.U32();
  m->utime_us = r.U64();
  m->stime_us = r.U64();
  m->maxrss_kib = r.U64();
  m->wall_ns = r.U64();
  m->spawn_errno = r.I32();
  m->message = r.Str();
  return r.ok();
}

inline std::vector<uint8_t> Encode(const SetupFailedMsg& m) {
  MessageWriter w(MsgType::kSetupFailed);
  w.Str(m.step).I32(m.err);
  return w.data();
}
inline bool Decode(MessageReader& r, SetupFailedMsg* m) {
  m->step = r.Str();
  m->err = r.I32();
  return r.ok();
}

}  // namespace paddock::runtime::linux::proto

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

namespace paddock::runtime::linux::proto {

// Sends one packet with up to kMaxFdsPerMessage fds. Returns 0 or -errno.
inline int SendPacket(int sock, const std::vector<uint8_t>& data, const int* fds = nullptr,
                      int nfds = 0) {
  iovec iov{const_cast<uint8_t*>(data.data()), data.size()};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  while (true) {
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n >= 0) return 0;
    if (errno != EINTR) return -errno;
  }
}

// Receives one packet into `buf` (resized to the packet length) and any fds (marked
// close-on-exec by MSG_CMSG_CLOEXEC). Returns bytes received, 0 on EOF, or -errno.
// Truncated packets or control data are rejected with -EMSGSIZE (the fds are closed).
inline ssize_t RecvPacket(int sock, std::vector<uint8_t>* buf, int* fds, int* nfds, int flags = 0) {
  *nfds = 0;
  // Peek at the packet's length first (MSG_TRUNC makes recv report the full length) and size
  // the buffer to it: allocating and zeroing the protocol maximum for every message cost more
  // than a millisecond per exec, and an idle init would keep that much memory.
  ssize_t len;
  do {
    len = ::recv(sock, nullptr, 0, MSG_PEEK | MSG_TRUNC | flags);
  } while (len < 0 && errno == EINTR);
  if (len < 0) return -errno;
  if (len == 0) return 0;  // EOF (the protocol never sends empty packets)
  buf->resize(std::min<size_t>(static_cast<size_t>(len), kMaxMessageBytes + 1));
  iovec iov{buf->data(), buf->size()};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  *nfds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int count = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (*nfds < kMaxFdsPerMessage) {
          fds[(*nfds)++] = fd;
        } else {
          ::close(fd);
        }
      }
    }
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || static_cast<size_t>(n) > kMaxMessageBytes) {
    for (int i = 0; i < *nfds; ++i) ::close(fds[i]);
    *nfds = 0;
    return -EMSGSIZE;
  }
  buf->resize(static_cast<size_t>(n));
  return n;
}

}  // namespace paddock::runtime::linux::proto
