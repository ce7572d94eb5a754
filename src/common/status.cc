#include "common/status.h"

#include <cstring>

namespace paddock {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kConflict:
      return "CONFLICT";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s = StatusCodeName(code_);
  s += ": ";
  s += message_;
  return s;
}

StatusCode CodeForErrno(int err) {
  switch (err) {
    case ENOENT:
    case ESRCH:
      return StatusCode::kNotFound;
    case EEXIST:
    case ENOTEMPTY:
      return StatusCode::kAlreadyExists;
    case EACCES:
    case EPERM:
    case EROFS:
    case ELOOP:
    case EXDEV:
      return StatusCode::kPermissionDenied;
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case EFBIG:
    case EAGAIN:
      return StatusCode::kResourceExhausted;
    case EINVAL:
    case ENAMETOOLONG:
    case ENOTDIR:
    case EISDIR:
      return StatusCode::kInvalidArgument;
    case EBUSY:
      return StatusCode::kFailedPrecondition;
    case ETIMEDOUT:
      return StatusCode::kDeadlineExceeded;
    case ENOSYS:
    case EOPNOTSUPP:
      return StatusCode::kUnimplemented;
    default:
      return StatusCode::kInternal;
  }
}

Status ErrnoStatus(const std::string& what, int err) {
  return Status(CodeForErrno(err), what + ": " + std::strerror(err), err);
}

}  // namespace paddock
