// Status and Result<T>: the error currency of Paddock. No exceptions cross module
// boundaries; library exceptions are caught at the edge and turned into a Status.
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace paddock {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // caller's input is malformed or out of range
  kNotFound,            // the named object does not exist
  kAlreadyExists,       // creating something that exists
  kPermissionDenied,    // the operation is forbidden by policy or the kernel
  kResourceExhausted,   // a limit (size cap, quota, slots) was hit
  kFailedPrecondition,  // object is in the wrong state (e.g. paused)
  kConflict,            // concurrent modification / stale fencing token
  kDeadlineExceeded,    // a timeout expired
  kUnavailable,         // transient: try again
  kUnimplemented,       // not supported on this host or backend
  kInternal,            // a bug or an unexpected kernel/library failure
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, int err = 0)
      : code_(code), message_(std::move(message)), errno_(err) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The errno that caused this status, or 0 when it did not come from a syscall.
  int err() const { return errno_; }
  // "CODE: message (strerror)" for logs and CLI output.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  int errno_ = 0;
};

// Builds a Status from the current errno: "what: strerror(errno)". The code is chosen
// from the errno (ENOENT -> kNotFound, EACCES/EPERM -> kPermissionDenied, ...).
Status ErrnoStatus(const std::string& what, int err = errno);
StatusCode CodeForErrno(int err);

inline Status InvalidArgument(std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}
inline Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
inline Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }
inline Status FailedPrecondition(std::string msg) {
  return Status(StatusCode::kFailedPrecondition, std::move(msg));
}
inline Status ResourceExhausted(std::string msg) {
  return Status(StatusCode::kResourceExhausted, std::move(msg));
}
inline Status PermissionDenied(std::string msg) {
  return Status(StatusCode::kPermissionDenied, std::move(msg));
}
inline Status Unimplemented(std::string msg) {
  return Status(StatusCode::kUnimplemented, std::move(msg));
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from OK");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace paddock

#define PADDOCK_CONCAT_INNER(a, b) a##b
#define PADDOCK_CONCAT(a, b) PADDOCK_CONCAT_INNER(a, b)

#define PADDOCK_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::paddock::Status _paddock_st = (expr);    \
    if (!_paddock_st.ok()) return _paddock_st; \
  } while (0)

#define PADDOCK_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#define PADDOCK_ASSIGN_OR_RETURN(lhs, expr) \
  PADDOCK_ASSIGN_OR_RETURN_IMPL(PADDOCK_CONCAT(_paddock_r_, __LINE__), lhs, expr)
