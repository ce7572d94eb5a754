// Templates (ISO-6): the read-only base of a sandbox's root filesystem, with a manifest that
// carries a content digest. Two kinds:
//  - "host": a generated skeleton (merged-usr symlinks, mount points) with the host's /usr
//    bind-mounted read-only on top; /etc is generated per sandbox by the init.
//  - "directory": any root filesystem folder (debootstrap output, an unpacked OCI image),
//    used in place as the overlay's lower layer.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace paddock::runtime::linux {

struct TemplateBind {
  std::string source;  // host path
  std::string target;  // absolute path inside the sandbox
};

struct TemplateManifest {
  std::string name;
  std::string kind;                          // "host" | "directory"
  std::string rootfs;                        // absolute host path of the overlay lower layer
  std::vector<TemplateBind> readonly_binds;  // mounted read-only over the rootfs
  // "sha256:<hex>" over a canonical walk of the rootfs (see DigestTree). For "host" the bound
  // /usr is covered by metadata only (path, type, mode, owner, size, mtime, link target):
  // hashing gigabytes of /usr content at every start would be too slow.
  std::string digest;
  uint64_t file_count = 0;
  uint64_t total_bytes = 0;
  int64_t created_at_unix = 0;
  std::map<std::string, std::string> runtimes;  // e.g. "python3" -> "3.11", found statically
  std::vector<std::string> capabilities;        // e.g. "python", "node", "gcc", "java"
  std::string source_stamp;  // what the digest was computed from, to detect staleness
};

// Canonical digest of a directory tree: entries sorted by path; for each, the path, type,
// permission bits, size and link target, and for regular files the SHA-256 of the content
// (content_for_files = true) or the mtime (false). Never follows symlinks. "sha256:<hex>".
Result<std::string> DigestTree(const std::string& root, bool content_for_files,
                               uint64_t* file_count = nullptr, uint64_t* total_bytes = nullptr);

// Detects language runtimes in a root filesystem without executing anything in it
// (usr/lib/pythonX.Y, usr/lib/jvm/*, usr/lib/gcc/<triplet>/<ver>, node headers/binaries).
void DetectRuntimes(const std::string& rootfs, TemplateManifest* manifest);

// Stores templates under `dir` (e.g. <data>/templates): <dir>/<name>/manifest.json and, for
// the host template, <dir>/host/rootfs. Thread-safe: mutations are serialized by a mutex,
// manifests are replaced by rename so readers never see a partial file.
class TemplateStore {
 public:
  explicit TemplateStore(std::string dir);

  // Creates or refreshes the "host" template. The manifest is cached and recomputed only when
  // its source stamp (host /usr and /var/lib/dpkg/status mtimes) changed.
  Result<TemplateManifest> EnsureHostTemplate();
  // Registers `source_dir` (must be an absolute directory containing usr/ or bin/) as template
  // `name` ([a-z0-9][a-z0-9._-]{0,62}); used in place, digest over full content.
  Result<TemplateManifest> ImportDirectory(const std::string& name, const std::string& source_dir);
  // Loads a template's manifest ("host" is ensured on demand). kNotFound for unknown names.
  Result<TemplateManifest> Get(const std::string& name);
  std::vector<TemplateManifest> List();
  Status Remove(const std::string& name);

 private:
  Result<TemplateManifest> EnsureHostTemplateLocked();

  std::string dir_;  // absolute
  std::mutex mu_;
  // The host manifest as last verified by this instance, with what proves it still holds.
  struct HostVerified {
    TemplateManifest manifest;
    std::vector<std::string> dirs;  // skeleton directories ("" = rootfs itself)
    std::string dirs_stamp;
  };
  std::optional<HostVerified> host_verified_;
};

}  // namespace paddock::runtime::linux
