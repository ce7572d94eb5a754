// Where a session's durable state lives on the host (REUSE-6, STATE-1): the persistent
// workspace, the per-tenant dependency cache and checkpoint layers, all under the data dir and
// apart from any sandbox's compute layer.
//
//   <data>/sessions/                        0700 root: nothing below is reachable by host users
//     workspaces/<session_id>/              mounted at /workspace in whichever sandbox serves
//     caches/<tenant_id>/{pip,npm}/         mounted at /cache, shared by a tenant's sessions
//     checkpoints/<checkpoint_id>/layer/    a frozen writable layer (read-only lower layer)
//
// Files below store in-sandbox ids (the sandbox user is uid 1000 on disk); sandboxes see them
// through idmapped mounts, so any sandbox's private uid range maps onto them.
#pragma once

#include <string>

#include "common/status.h"

namespace paddock::sessions {

inline constexpr unsigned kSandboxUserId = 1000;  // the "sandbox" user inside every sandbox

class StorageLayout {
 public:
  explicit StorageLayout(std::string data_dir) : root_(std::move(data_dir) + "/sessions") {}

  // Creates the top directories (0700, root-owned). Idempotent.
  Status Ensure() const;

  std::string root() const { return root_; }
  // The ids are validated ([a-z0-9][a-z0-9-]{0,63}) so a path can never leave the root.
  Result<std::string> WorkspaceDir(const std::string& session_id) const;
  Result<std::string> CacheDir(const std::string& tenant_id) const;
  Result<std::string> CheckpointDir(const std::string& checkpoint_id) const;

  // Creates a directory owned by the in-sandbox user (kSandboxUserId on disk), mode 0755,
  // and its parents (root-owned) if missing. Idempotent.
  static Status EnsureSandboxOwnedDir(const std::string& path);
  // Removes a tree (never following symlinks). Missing is fine.
  static Status RemoveTree(const std::string& path);

 private:
  std::string root_;
};

// [a-z0-9][a-z0-9-]{0,63}: session, tenant and checkpoint ids as path components.
Status ValidatePathId(const std::string& id, const char* field);

}  // namespace paddock::sessions
