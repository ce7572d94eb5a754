// The environment manifest (REUSE-2): what is installed in a sandbox, computed by the control
// plane FROM THE FILES after every run that can change the environment, so a later run can
// decide whether the sandbox is reusable. Agent output is never trusted for this: an agent may
// say "I only ran pytest" after `pip install`-ing half of PyPI.
//
// Everything read from the sandbox is hostile (huge files, bad JSON, names with newlines, symlink
// loops, directories with millions of entries). The scan looks only at a fixed set of places, at
// a fixed depth, within a budget of directory entries and bytes; hitting the budget sets
// `truncated` (the reuse check then treats the manifest as unknown), never an error. A package
// whose metadata cannot be read or parsed is left out.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "runtime/runtime.h"

namespace paddock::sessions {

// Read-only view of a sandbox's filesystem; paths are absolute inside the sandbox. The session
// service adapts runtime::Runtime (ListDir/ReadFile resolve beneath the sandbox root and never
// follow symlinks out); tests use HostDirView over a directory.
class FileView {
 public:
  virtual ~FileView() = default;
  // The entries of a directory (not "." / ".."), symlinks reported as symlinks. kNotFound if
  // the directory is missing.
  virtual Result<std::vector<runtime::FileStat>> ListDir(const std::string& path) = 0;
  // The whole file, at most max_bytes. A bigger file is an error, never a truncated read
  // (HostDirView and Runtime::ReadFile both give kResourceExhausted); ComputeManifest treats
  // every error the same way, so an adapter may pick any non-OK code.
  virtual Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) = 0;
};

// A FileView over a host directory, for tests and tools. Every lookup is openat2() from the
// root fd with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, as the runtime does for a sandbox: an
// absolute or "../" symlink resolves inside the root, so nothing outside it is ever reached.
// ReadFile refuses non-regular files (a FIFO would block) and files over max_bytes.
class HostDirView final : public FileView {
 public:
  explicit HostDirView(std::string root);
  Result<std::vector<runtime::FileStat>> ListDir(const std::string& path) override;
  Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) override;

 private:
  std::string root_path_;
  UniqueFd root_;
  int open_errno_ = 0;  // why the root could not be opened; reported by every call
};

struct ManifestContext {
  std::string base_digest;                         // template digest, or the checkpoint chain's
  std::map<std::string, std::string> runtimes;     // from the template: {"python3","3.11"}, ...
  std::vector<std::string> template_capabilities;  // from the template: {"python","node","gcc"}
  std::string workspace_id;
  std::vector<std::string> dirty_paths;  // from the runtime's changed-paths scan
};

// The scan's budget. The defaults are the spec's; tests and tools may lower them.
struct ScanLimits {
  uint64_t max_entries = 5000;           // directory entries listed, over the whole scan
  uint64_t max_read_bytes = 2ull << 20;  // package.json / METADATA bytes, over the whole scan
  uint64_t max_package_json_bytes = 256ull << 10;  // one package.json; bigger: package skipped
  uint64_t max_metadata_bytes = 256ull << 10;      // one METADATA / PKG-INFO; bigger: skipped
  // /var/lib/dpkg/status is hashed whole and has its own cap outside max_read_bytes: a Debian
  // image's status file alone is often 1-2 MiB. Bigger: truncated (it cannot be hashed).
  uint64_t max_dpkg_status_bytes = 16ull << 20;
  size_t max_dirty_paths = 10000;  // more: the first ones (sorted) are kept, truncated
};

struct EnvironmentManifest {
  std::string base_digest;
  std::map<std::string, std::string> runtimes;
  // Normalised name (PEP 503) -> version, user site + system sites. A package in several sites
  // keeps the version Python would import (user site first, then /usr/local, then /usr).
  std::map<std::string, std::string> python_packages;
  std::map<std::string, std::map<std::string, std::string>> venvs;  // venv dir -> its packages
  // Name ("@scope/name" for scoped ones) -> version, from the top level of /workspace,
  // /home/sandbox and the global node_modules (and Debian's /usr/share/nodejs). A package in
  // several places keeps the version require() from /workspace would load.
  std::map<std::string, std::string> node_packages;
  // "sha256:<hex>" over the sorted, distinct "name==version\n" lines of every python install
  // seen in the user and system sites, shadowed ones included, so a version change anywhere
  // changes it ("" if none). node_lock_hash: the same over "name@version\n" lines.
  std::string python_lock_hash;
  std::string node_lock_hash;
  std::string dpkg_status_hash;  // "sha256:<hex>" of /var/lib/dpkg/status ("" if absent)
  std::string workspace_id;
  std::vector<std::string> dirty_paths;  // sorted, distinct
  // Template capabilities + derived ones ("browser" when playwright / puppeteer / chromium is
  // installed), sorted, distinct.
  std::vector<std::string> capabilities;
  // "env-" + 12 hex digits of sha256 over everything else except dirty_paths and workspace_id.
  // `truncated` is included: a partial scan must never look like a complete one.
  std::string fingerprint;
  bool truncated = false;  // a scan limit was hit (the reuse check treats this as unknown)
  bool operator==(const EnvironmentManifest&) const = default;
};

// Scans the view. Fails only for a malformed context (a string over 4096 bytes); everything
// the sandbox controls is skipped or bounded instead.
Result<EnvironmentManifest> ComputeManifest(FileView& view, const ManifestContext& ctx,
                                            const ScanLimits& limits = {});

// The fingerprint of a manifest's contents (what ComputeManifest stores in `fingerprint`).
std::string ManifestFingerprint(const EnvironmentManifest& m);

nlohmann::json ManifestToJson(const EnvironmentManifest& m);
// Strict: every field is required, unknown fields are refused, names, versions, hashes and the
// fingerprint must be well-formed; errors name the field ("python_packages.numpy: ...").
// The fingerprint's format is checked, not recomputed, so stored manifests survive a change in
// how fingerprints are computed.
Result<EnvironmentManifest> ManifestFromJson(const nlohmann::json& j);

// PEP 503 normalisation: lower-case, runs of [-_.] -> '-'.
std::string NormalizePythonName(std::string_view name);

}  // namespace paddock::sessions
