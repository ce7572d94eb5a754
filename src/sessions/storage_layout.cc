#include "sessions/storage_layout.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace paddock::sessions {
namespace fs = std::filesystem;

Status ValidatePathId(const std::string& id, const char* field) {
  auto ok_char = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  bool ok = !id.empty() && id.size() <= 64 && ok_char(id[0]);
  for (char c : id) ok = ok && (ok_char(c) || c == '-');
  if (!ok) return InvalidArgument(std::string(field) + ": must match [a-z0-9][a-z0-9-]{0,63}");
  return Status::Ok();
}

namespace {

Status MakeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) < 0 && errno != EEXIST) {
    return ErrnoStatus("mkdir " + path);
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) < 0) return ErrnoStatus("stat " + path);
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition(path + ": exists and is not a directory");
  return Status::Ok();
}

}  // namespace

Status StorageLayout::Ensure() const {
  std::error_code ec;
  fs::create_directories(fs::path(root_).parent_path(), ec);
  if (ec) return Internal("create " + root_ + ": " + ec.message());
  for (const std::string& d :
       {root_, root_ + "/workspaces", root_ + "/caches", root_ + "/checkpoints"}) {
    PADDOCK_RETURN_IF_ERROR(MakeDir(d, 0700));
    if (::chown(d.c_str(), 0, 0) < 0 || ::chmod(d.c_str(), 0700) < 0) {
      return ErrnoStatus("secure " + d);
    }
  }
  return Status::Ok();
}

Result<std::string> StorageLayout::WorkspaceDir(const std::string& session_id) const {
  PADDOCK_RETURN_IF_ERROR(ValidatePathId(session_id, "session_id"));
  return root_ + "/workspaces/" + session_id;
}

Result<std::string> StorageLayout::CacheDir(const std::string& tenant_id) const {
  PADDOCK_RETURN_IF_ERROR(ValidatePathId(tenant_id, "tenant_id"));
  return root_ + "/caches/" + tenant_id;
}

Result<std::string> StorageLayout::CheckpointDir(const std::string& checkpoint_id) const {
  PADDOCK_RETURN_IF_ERROR(ValidatePathId(checkpoint_id, "checkpoint_id"));
  return root_ + "/checkpoints/" + checkpoint_id;
}

Status StorageLayout::EnsureSandboxOwnedDir(const std::string& path) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Internal("create " + path + ": " + ec.message());
  PADDOCK_RETURN_IF_ERROR(MakeDir(path, 0755));
  if (::lchown(path.c_str(), kSandboxUserId, kSandboxUserId) < 0) {
    return ErrnoStatus("chown " + path);
  }
  return Status::Ok();
}

Status StorageLayout::RemoveTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);  // does not follow symlinks
  if (ec) return Internal("remove " + path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace paddock::sessions
