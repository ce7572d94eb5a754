#include "runtime/linux/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <set>
#include <thread>
#include <utility>

namespace paddock::runtime::linux {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr auto kFreezeTimeout = std::chrono::seconds(2);
constexpr auto kKillTimeout = std::chrono::seconds(5);
constexpr auto kRemoveBusyTimeout = std::chrono::seconds(2);
// After one kill round, how long to wait for the victims to exit before another round.
constexpr auto kKillRoundWait = std::chrono::milliseconds(100);
constexpr auto kPollStep = std::chrono::milliseconds(1);
constexpr int64_t kCpuPeriodUs = 100000;

// The v1 controllers Paddock needs, in creation order. The freezer comes last: it is the exec
// parent and the only directory that gets delegated.
constexpr std::array<std::string_view, 5> kV1Controllers = {"cpu", "cpuacct", "memory", "pids",
                                                            "freezer"};
constexpr std::string_view kUnifiedKey = "unified";

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (out.empty() || out.back() != '/') out += '/';
  out += name;
  return out;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t next = s.find(sep, pos);
    if (next == std::string_view::npos) next = s.size();
    if (next > pos) out.push_back(s.substr(pos, next - pos));
    pos = next + 1;
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// The kernel escapes space, tab, newline and backslash in mountinfo paths as \ooo (octal), so
// a mount point containing a space is "\040" in the text.
std::string UnescapeMountField(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    auto is_octal = [](char c) { return c >= '0' && c <= '7'; };
    if (s[i] == '\\' && i + 3 < s.size() && is_octal(s[i + 1]) && is_octal(s[i + 2]) &&
        is_octal(s[i + 3])) {
      out +=
          static_cast<char>(((s[i + 1] - '0') << 6) | ((s[i + 2] - '0') << 3) | (s[i + 3] - '0'));
      i += 3;
      continue;
    }
    out += s[i];
  }
  return out;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

bool ParseUint64(std::string_view text, uint64_t* out) {
  text = Trim(text);
  if (text.empty()) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// A sandbox id becomes one path component under every hierarchy root, so it must not be able to
// name anything else ("..", "a/b") or exceed NAME_MAX once prefixed.
Status ValidateSandboxId(const std::string& id) {
  if (id.empty() || id == "." || id == ".." || id.find('/') != std::string::npos ||
      id.find('\0') != std::string::npos || id.size() + kCgroupPrefix.size() > NAME_MAX) {
    return InvalidArgument("invalid sandbox id for a cgroup name: '" + id + "'");
  }
  return Status::Ok();
}

Result<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open " + path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Result<uint64_t> ReadUint64File(const std::string& path) {
  PADDOCK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  uint64_t v = 0;
  if (!ParseUint64(text, &v)) return Internal("unexpected content in " + path + ": " + text);
  return v;
}

// Finds "key value" in flat-keyed files (memory.events, cpu.stat, memory.oom_control).
bool FindKeyedValue(std::string_view text, std::string_view key, uint64_t* out) {
  for (std::string_view line : Split(text, '\n')) {
    auto fields = Split(Trim(line), ' ');
    if (fields.size() == 2 && fields[0] == key) return ParseUint64(fields[1], out);
  }
  return false;
}

// cgroupfs parses every write() as one complete value (a split write would be two values), so the
// value goes out in a single call. Real cgroupfs files cannot be created, only opened; the fake
// tree in tests needs them created.
Status WriteCgroupFile(const std::string& path, std::string_view value, bool fake) {
  int flags = O_WRONLY | O_CLOEXEC;
  if (fake) flags |= O_CREAT | O_TRUNC | O_NOFOLLOW;
  UniqueFd fd(::open(path.c_str(), flags, 0644));
  if (!fd) return ErrnoStatus("open " + path);
  ssize_t n;
  do {
    n = ::write(fd.get(), value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoStatus("write '" + std::string(value) + "' to " + path);
  if (static_cast<size_t>(n) != value.size()) return Internal("short write to " + path);
  return Status::Ok();
}

// For interface files that only exist with some kernel configurations (swap accounting:
// memory.memsw.*, memory.swap.max). Absence means the feature is off, which is what we want.
Status WriteOptionalCgroupFile(const std::string& path, std::string_view value, bool fake) {
  Status st = WriteCgroupFile(path, value, fake);
  if (!st.ok() && st.err() == ENOENT) return Status::Ok();
  return st;
}

Status ChownDelegated(const std::string& path, uid_t uid, gid_t gid, bool fake) {
  if (fake) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
      UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
      if (!fd) return ErrnoStatus("create " + path);
    }
  }
  // No symlinks exist on cgroupfs; AT_SYMLINK_NOFOLLOW keeps it that way for any other tree.
  if (::fchownat(AT_FDCWD, path.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoStatus("chown " + path);
  }
  return Status::Ok();
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// Names of the sub-directories of `path` (sub-cgroups on cgroupfs). Symlinks are never followed.
Result<std::vector<std::string>> ListSubdirs(const std::string& path,
                                             std::vector<std::string>* files = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoStatus("open " + path);
  std::unique_ptr<DIR, DirCloser> dir(::fdopendir(fd));
  if (!dir) {
    Status st = ErrnoStatus("fdopendir " + path);
    ::close(fd);
    return st;
  }
  std::vector<std::string> out;
  for (;;) {
    errno = 0;  // readdir signals errors only through errno
    struct dirent* e = ::readdir(dir.get());
    if (e == nullptr) break;
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = ::fstatat(::dirfd(dir.get()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISDIR(st.st_mode);
    }
    if (is_dir) {
      out.emplace_back(name);
    } else if (files != nullptr) {
      files->emplace_back(name);
    }
  }
  if (errno != 0) return ErrnoStatus("readdir " + path);
  return out;
}

// Removes a cgroup directory and its sub-cgroups depth-first. On cgroupfs rmdir succeeds on a
// directory full of interface files but fails with EBUSY while the cgroup still has live tasks
// or child cgroups; exiting tasks leave asynchronously, so EBUSY is retried until `deadline`
// (re-listing children in case the sandbox made one in the meantime).
Status RemoveCgroupTree(const std::string& path, bool fake, SteadyClock::time_point deadline) {
  for (;;) {
    std::vector<std::string> files;
    auto subdirs = ListSubdirs(path, &files);
    if (!subdirs.ok()) {
      if (subdirs.status().err() == ENOENT) return Status::Ok();
      return subdirs.status();
    }
    Status first_error;
    for (const auto& sub : *subdirs) {
      Status st = RemoveCgroupTree(JoinPath(path, sub), fake, deadline);
      if (!st.ok() && first_error.ok()) first_error = st;
    }
    if (fake) {
      for (const auto& f : files) ::unlink(JoinPath(path, f).c_str());
    }
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return Status::Ok();
    int err = errno;
    if ((err == EBUSY || err == ENOTEMPTY) && SteadyClock::now() < deadline) {
      std::this_thread::sleep_for(kPollStep * 5);
      continue;
    }
    if (!first_error.ok()) return first_error;
    return ErrnoStatus("rmdir " + path, err);
  }
}

// Reads the pids in `dir`'s cgroup.procs and in every descendant cgroup.
Status CollectPids(const std::string& dir, bool top, std::vector<pid_t>* out) {
  auto procs = ReadFile(JoinPath(dir, "cgroup.procs"));
  if (!procs.ok()) {
    // A sub-cgroup can vanish between readdir and open (ENOENT, or ENODEV while kernfs
    // deactivates it); that is not an error for the walk.
    int err = procs.status().err();
    if (top || (err != ENOENT && err != ENODEV)) return procs.status();
    return Status::Ok();
  }
  for (std::string_view line : Split(*procs, '\n')) {
    uint64_t pid = 0;
    if (ParseUint64(line, &pid) && pid > 0) out->push_back(static_cast<pid_t>(pid));
  }
  auto subdirs = ListSubdirs(dir);
  if (!subdirs.ok()) {
    int err = subdirs.status().err();
    if (top || (err != ENOENT && err != ENODEV)) return subdirs.status();
    return Status::Ok();
  }
  for (const auto& sub : *subdirs) {
    PADDOCK_RETURN_IF_ERROR(CollectPids(JoinPath(dir, sub), false, out));
  }
  return Status::Ok();
}

// Validates `cpus` and turns it into a CFS quota in microseconds per kCpuPeriodUs; -1 means
// unlimited.
Result<int64_t> CpuQuotaUs(double cpus) {
  if (std::isnan(cpus) || cpus <= 0) return int64_t{-1};
  // The kernel caps quota far below this; anything larger is a caller bug, not a policy.
  if (!std::isfinite(cpus) || cpus > 1e6) {
    return InvalidArgument("cpu limit out of range: " + std::to_string(cpus));
  }
  return static_cast<int64_t>(std::llround(cpus * static_cast<double>(kCpuPeriodUs)));
}

// Enables cpu, memory and pids for children of the v2 root. Returns whether cpu is enabled: with
// CONFIG_RT_GROUP_SCHED the kernel refuses cpu while realtime tasks sit in non-root cgroups, and
// a missing cpu limit is tolerable, while memory and pids limits are the safety net.
Result<bool> EnableV2Controllers(const std::string& root, bool fake) {
  const std::string path = JoinPath(root, "cgroup.subtree_control");
  PADDOCK_ASSIGN_OR_RETURN(std::string current, ReadFile(path));
  std::set<std::string> enabled;
  for (std::string_view line : Split(current, '\n')) {
    for (std::string_view tok : Split(line, ' ')) enabled.emplace(Trim(tok));
  }
  std::vector<std::string> missing;
  for (const char* c : {"cpu", "memory", "pids"}) {
    if (!enabled.count(c)) missing.push_back(c);
  }
  if (missing.empty()) return true;

  std::string all;
  for (const auto& c : missing) all += (all.empty() ? "+" : " +") + c;
  if (WriteCgroupFile(path, all, fake).ok()) return true;

  // The kernel applies "+a +b" all-or-nothing, so retry one by one to learn which one fails.
  bool cpu_enabled = true;
  for (const auto& c : missing) {
    Status st = WriteCgroupFile(path, "+" + c, fake);
    if (st.ok()) continue;
    if (c == "cpu") {
      cpu_enabled = false;
      continue;
    }
    return Status(st.code(), "enabling the " + c + " controller: " + st.message(), st.err());
  }
  return cpu_enabled;
}

}  // namespace

Result<CgroupLayout> ParseCgroupLayout(std::string_view mountinfo) {
  std::map<std::string, std::string> v1;
  std::vector<std::string> v2_mounts;
  for (std::string_view line : Split(mountinfo, '\n')) {
    // id parent major:minor root mount_point mount_opts [optional fields...] - fstype source
    // super_opts. The optional fields vary in number, so the " - " separator is searched for.
    auto fields = Split(line, ' ');
    size_t sep = 6;
    while (sep < fields.size() && fields[sep] != "-") ++sep;
    if (sep + 3 >= fields.size()) continue;  // not a mountinfo line
    std::string_view fstype = fields[sep + 1];
    std::string mount_point = UnescapeMountField(fields[4]);
    if (fstype == "cgroup2") {
      v2_mounts.push_back(mount_point);
    } else if (fstype == "cgroup") {
      for (std::string_view opt : Split(fields[sep + 3], ',')) {
        for (std::string_view ctrl : kV1Controllers) {
          // The first mount wins; later ones are usually bind mounts of the same hierarchy.
          if (opt == ctrl) v1.emplace(std::string(ctrl), mount_point);
        }
      }
    }
  }

  CgroupLayout layout;
  std::vector<std::string> missing;
  for (std::string_view ctrl : kV1Controllers) {
    if (!v1.count(std::string(ctrl))) missing.emplace_back(ctrl);
  }
  // Hybrid hosts mount a cgroup2 tree without controllers beside the v1 hierarchies; the limits
  // live in v1 there, so any v1 memory/pids mount decides for v1.
  if (v1.count("memory") || v1.count("pids")) {
    if (!missing.empty()) {
      return Unimplemented("cgroup v1 controllers not mounted: " + JoinNames(missing));
    }
    layout.version = CgroupVersion::kV1;
    layout.v1_mounts = std::move(v1);
    return layout;
  }
  if (v2_mounts.empty()) {
    return Unimplemented("no cgroup2 mount and cgroup v1 controllers not mounted: " +
                         JoinNames(missing));
  }
  layout.version = CgroupVersion::kV2;
  layout.v2_root = v2_mounts.front();
  for (const auto& m : v2_mounts) {
    if (m == "/sys/fs/cgroup") layout.v2_root = m;
  }
  return layout;
}

Result<CgroupLayout> DetectCgroupLayout() {
  PADDOCK_ASSIGN_OR_RETURN(std::string mountinfo, ReadFile("/proc/self/mountinfo"));
  PADDOCK_ASSIGN_OR_RETURN(CgroupLayout layout, ParseCgroupLayout(mountinfo));
  if (layout.version == CgroupVersion::kV2) {
    // mountinfo cannot say which controllers a cgroup2 tree offers; cgroup.controllers can.
    const std::string path = JoinPath(layout.v2_root, "cgroup.controllers");
    PADDOCK_ASSIGN_OR_RETURN(std::string controllers, ReadFile(path));
    std::set<std::string_view> available;
    for (std::string_view tok : Split(Trim(controllers), ' ')) available.insert(Trim(tok));
    std::vector<std::string> missing;
    for (const char* c : {"memory", "pids"}) {
      if (!available.count(c)) missing.push_back(c);
    }
    if (!missing.empty()) {
      return Unimplemented("cgroup v2 controllers not available in " + path + ": " +
                           JoinNames(missing));
    }
  }
  return layout;
}

SandboxCgroup SandboxCgroup::Attach(const CgroupLayout& layout, const std::string& sandbox_id) {
  SandboxCgroup cg;
  cg.id_ = sandbox_id;
  cg.version_ = layout.version;
  cg.fake_ = layout.fake_for_tests;
  const std::string name = std::string(kCgroupPrefix) + sandbox_id;
  if (layout.version == CgroupVersion::kV2) {
    std::string dir = JoinPath(layout.v2_root, name);
    cg.dirs_.push_back(dir);
    cg.controller_dirs_[std::string(kUnifiedKey)] = dir;
    cg.exec_parent_dir_ = dir;
    return cg;
  }
  for (std::string_view ctrl : kV1Controllers) {
    auto it = layout.v1_mounts.find(std::string(ctrl));
    if (it == layout.v1_mounts.end()) continue;
    std::string dir = JoinPath(it->second, name);
    cg.controller_dirs_[std::string(ctrl)] = dir;
    // cpu and cpuacct are often co-mounted ("cpu,cpuacct"): one directory serves both.
    bool seen = false;
    for (const auto& d : cg.dirs_) seen = seen || d == dir;
    if (!seen) cg.dirs_.push_back(dir);
  }
  auto freezer = cg.controller_dirs_.find("freezer");
  if (freezer != cg.controller_dirs_.end()) cg.exec_parent_dir_ = freezer->second;
  return cg;
}

const std::string& SandboxCgroup::ControllerDir(const std::string& controller) const {
  static const std::string kEmpty;
  auto it =
      controller_dirs_.find(version_ == CgroupVersion::kV2 ? std::string(kUnifiedKey) : controller);
  return it == controller_dirs_.end() ? kEmpty : it->second;
}

Result<SandboxCgroup> SandboxCgroup::Create(const CgroupLayout& layout,
                                            const std::string& sandbox_id,
                                            const CgroupLimits& limits, uid_t delegate_uid,
                                            gid_t delegate_gid) {
  PADDOCK_RETURN_IF_ERROR(ValidateSandboxId(sandbox_id));
  SandboxCgroup cg = Attach(layout, sandbox_id);
  std::vector<std::string> created;
  Status st = layout.version == CgroupVersion::kV1
                  ? cg.CreateV1(layout, limits, delegate_uid, delegate_gid, &created)
                  : cg.CreateV2(layout, limits, delegate_uid, delegate_gid, &created);
  if (!st.ok()) {
    // Roll back only what this call made: a pre-existing directory (EEXIST) may belong to a
    // live sandbox with the same id.
    auto deadline = SteadyClock::now() + kRemoveBusyTimeout;
    for (auto it = created.rbegin(); it != created.rend(); ++it) {
      (void)RemoveCgroupTree(*it, cg.fake_, deadline);
    }
    return st;
  }
  return cg;
}

Status SandboxCgroup::CreateV1(const CgroupLayout& layout, const CgroupLimits& limits,
                               uid_t delegate_uid, gid_t delegate_gid,
                               std::vector<std::string>* created) const {
  std::vector<std::string> missing;
  for (std::string_view ctrl : kV1Controllers) {
    if (!layout.v1_mounts.count(std::string(ctrl))) missing.emplace_back(ctrl);
  }
  if (!missing.empty()) {
    return Unimplemented("cgroup v1 controllers not mounted: " + JoinNames(missing));
  }
  PADDOCK_ASSIGN_OR_RETURN(int64_t quota_us, CpuQuotaUs(limits.cpus));

  // Directory and limits per controller in order, so a failure part-way leaves a prefix of
  // kV1Controllers to roll back.
  std::set<std::string> made;
  for (std::string_view ctrl_view : kV1Controllers) {
    const std::string ctrl(ctrl_view);
    const std::string& dir = ControllerDir(ctrl);
    if (!made.count(dir)) {
      if (::mkdir(dir.c_str(), 0755) != 0) return ErrnoStatus("mkdir " + dir);
      made.insert(dir);
      created->push_back(dir);
    }
    if (ctrl == "cpu") {
      // Period before quota: the kernel validates quota against the current period.
      PADDOCK_RETURN_IF_ERROR(
          WriteCgroupFile(JoinPath(dir, "cpu.cfs_period_us"), std::to_string(kCpuPeriodUs), fake_));
      PADDOCK_RETURN_IF_ERROR(
          WriteCgroupFile(JoinPath(dir, "cpu.cfs_quota_us"), std::to_string(quota_us), fake_));
    } else if (ctrl == "memory") {
      if (limits.memory_bytes > 0) {
        const std::string bytes = std::to_string(limits.memory_bytes);
        PADDOCK_RETURN_IF_ERROR(
            WriteCgroupFile(JoinPath(dir, "memory.limit_in_bytes"), bytes, fake_));
        // memsw is memory+swap, and must be >= limit_in_bytes at every moment (the kernel
        // rejects the write otherwise), hence after it. Equal values mean zero swap.
        PADDOCK_RETURN_IF_ERROR(
            WriteOptionalCgroupFile(JoinPath(dir, "memory.memsw.limit_in_bytes"), bytes, fake_));
      }
      // Without swap accounting memsw does not exist; swappiness 0 still keeps reclaim from
      // pushing sandbox pages to swap.
      PADDOCK_RETURN_IF_ERROR(WriteCgroupFile(JoinPath(dir, "memory.swappiness"), "0", fake_));
    } else if (ctrl == "pids") {
      PADDOCK_RETURN_IF_ERROR(WriteCgroupFile(
          JoinPath(dir, "pids.max"), limits.pids > 0 ? std::to_string(limits.pids) : "max", fake_));
    } else if (ctrl == "freezer") {
      // Delegation: the sandbox init may create sub-cgroups here and move its children into
      // them (cgroup.procs for processes, tasks for threads). freezer.state stays root-owned so
      // a sandbox cannot thaw itself while the host holds it frozen.
      for (const char* name : {"", "cgroup.procs", "tasks"}) {
        PADDOCK_RETURN_IF_ERROR(
            ChownDelegated(*name ? JoinPath(dir, name) : dir, delegate_uid, delegate_gid, fake_));
      }
    }
  }
  return Status::Ok();
}

Status SandboxCgroup::CreateV2(const CgroupLayout& layout, const CgroupLimits& limits,
                               uid_t delegate_uid, gid_t delegate_gid,
                               std::vector<std::string>* created) const {
  PADDOCK_ASSIGN_OR_RETURN(int64_t quota_us, CpuQuotaUs(limits.cpus));
  // A child has a controller's interface files (cpu.max, memory.max, ...) only while its parent
  // enables that controller in cgroup.subtree_control.
  PADDOCK_ASSIGN_OR_RETURN(bool cpu_enabled, EnableV2Controllers(layout.v2_root, fake_));

  const std::string& dir = exec_parent_dir_;
  if (::mkdir(dir.c_str(), 0755) != 0) return ErrnoStatus("mkdir " + dir);
  created->push_back(dir);

  if (cpu_enabled) {
    std::string cpu_max = quota_us < 0 ? std::string("max") : std::to_string(quota_us);
    cpu_max += " " + std::to_string(kCpuPeriodUs);
    PADDOCK_RETURN_IF_ERROR(WriteCgroupFile(JoinPath(dir, "cpu.max"), cpu_max, fake_));
  }
  PADDOCK_RETURN_IF_ERROR(WriteCgroupFile(
      JoinPath(dir, "memory.max"),
      limits.memory_bytes > 0 ? std::to_string(limits.memory_bytes) : "max", fake_));
  // memory.swap.max exists only with swap accounting; without it there is nothing to disable.
  PADDOCK_RETURN_IF_ERROR(WriteOptionalCgroupFile(JoinPath(dir, "memory.swap.max"), "0", fake_));
  PADDOCK_RETURN_IF_ERROR(WriteCgroupFile(
      JoinPath(dir, "pids.max"), limits.pids > 0 ? std::to_string(limits.pids) : "max", fake_));

  // Delegation per the kernel's cgroup-v2 rules: owning the directory lets the sandbox create
  // sub-cgroups; owning cgroup.procs/cgroup.threads lets it move its processes/threads between
  // them. cgroup.subtree_control stays root-owned: per-exec sub-cgroups only group processes for
  // kill/freeze/accounting, and the sandbox has no business enabling controllers.
  for (const char* name : {"", "cgroup.procs", "cgroup.threads"}) {
    PADDOCK_RETURN_IF_ERROR(
        ChownDelegated(*name ? JoinPath(dir, name) : dir, delegate_uid, delegate_gid, fake_));
  }
  return Status::Ok();
}

std::vector<std::string> SandboxCgroup::ListSandboxIds(const CgroupLayout& layout) {
  std::set<std::string> roots;
  if (layout.version == CgroupVersion::kV2) {
    roots.insert(layout.v2_root);
  } else {
    for (const auto& [ctrl, mount] : layout.v1_mounts) roots.insert(mount);
  }
  std::set<std::string> ids;
  for (const auto& root : roots) {
    auto subdirs = ListSubdirs(root);
    if (!subdirs.ok()) continue;  // a missing hierarchy holds no sandboxes
    for (const auto& name : *subdirs) {
      if (name.size() > kCgroupPrefix.size() && name.starts_with(kCgroupPrefix)) {
        ids.insert(name.substr(kCgroupPrefix.size()));
      }
    }
  }
  return {ids.begin(), ids.end()};
}

Status SandboxCgroup::AddProcess(pid_t pid) const {
  // cgroup.procs (not tasks) moves the whole thread group; each v1 hierarchy is independent,
  // so the move is repeated in every one.
  for (const auto& dir : dirs_) {
    PADDOCK_RETURN_IF_ERROR(
        WriteCgroupFile(JoinPath(dir, "cgroup.procs"), std::to_string(pid), fake_));
  }
  return Status::Ok();
}

Result<UniqueFd> SandboxCgroup::OpenExecParentDir() const {
  UniqueFd fd(::open(exec_parent_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open " + exec_parent_dir_);
  return fd;
}

Result<UniqueFd> SandboxCgroup::OpenV2DirForClone() const {
  if (version_ != CgroupVersion::kV2) {
    return Unimplemented("CLONE_INTO_CGROUP needs cgroup v2; this host uses v1");
  }
  // clone3() accepts an O_PATH fd for CLONE_INTO_CGROUP.
  UniqueFd fd(::open(exec_parent_dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open " + exec_parent_dir_);
  return fd;
}

bool SandboxCgroup::IsFrozen() const {
  if (version_ == CgroupVersion::kV2) {
    auto events = ReadFile(JoinPath(exec_parent_dir_, "cgroup.events"));
    uint64_t frozen = 0;
    return events.ok() && FindKeyedValue(*events, "frozen", &frozen) && frozen == 1;
  }
  auto state = ReadFile(JoinPath(ControllerDir("freezer"), "freezer.state"));
  return state.ok() && Trim(*state) == "FROZEN";
}

Status SandboxCgroup::Freeze() const {
  const auto deadline = SteadyClock::now() + kFreezeTimeout;
  if (version_ == CgroupVersion::kV2) {
    // cgroup.freeze is hierarchical; cgroup.events reports "frozen 1" only once every task in
    // the subtree has stopped.
    PADDOCK_RETURN_IF_ERROR(
        WriteCgroupFile(JoinPath(exec_parent_dir_, "cgroup.freeze"), "1", fake_));
    while (!IsFrozen()) {
      if (SteadyClock::now() >= deadline) {
        (void)Thaw();
        return Status(StatusCode::kDeadlineExceeded,
                      "cgroup " + exec_parent_dir_ + " did not report frozen within 2s");
      }
      std::this_thread::sleep_for(kPollStep);
    }
    return Status::Ok();
  }
  const std::string state = JoinPath(ControllerDir("freezer"), "freezer.state");
  for (;;) {
    // The v1 freezer can stay FREEZING: a task forked or woken from an uninterruptible sleep
    // after the first request may not have been asked to freeze, and the state is only
    // re-evaluated on read. Writing FROZEN again re-sends the request to every task.
    PADDOCK_RETURN_IF_ERROR(WriteCgroupFile(state, "FROZEN", fake_));
    if (IsFrozen()) return Status::Ok();
    if (SteadyClock::now() >= deadline) {
      (void)Thaw();
      return Status(StatusCode::kDeadlineExceeded, state + " stayed FREEZING for 2s");
    }
    std::this_thread::sleep_for(kPollStep);
  }
}

Status SandboxCgroup::Thaw() const {
  if (version_ == CgroupVersion::kV2) {
    return WriteCgroupFile(JoinPath(exec_parent_dir_, "cgroup.freeze"), "0", fake_);
  }
  return WriteCgroupFile(JoinPath(ControllerDir("freezer"), "freezer.state"), "THAWED", fake_);
}

Result<uint64_t> SandboxCgroup::OomKillCount() const {
  const std::string path = version_ == CgroupVersion::kV2
                               ? JoinPath(ControllerDir("memory"), "memory.events")
                               : JoinPath(ControllerDir("memory"), "memory.oom_control");
  PADDOCK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  uint64_t kills = 0;
  // Kernels before 4.13 have no "oom_kill" line; no count means none observed.
  if (!FindKeyedValue(text, "oom_kill", &kills)) return uint64_t{0};
  return kills;
}

Result<CgroupUsage> SandboxCgroup::ReadUsage() const {
  CgroupUsage usage;
  const std::string& mem = ControllerDir("memory");
  if (version_ == CgroupVersion::kV2) {
    PADDOCK_ASSIGN_OR_RETURN(usage.memory_bytes, ReadUint64File(JoinPath(mem, "memory.current")));
    // memory.peak arrived in 5.19.
    auto peak = ReadUint64File(JoinPath(mem, "memory.peak"));
    if (peak.ok()) usage.memory_peak_bytes = *peak;
    const std::string cpu_stat = JoinPath(ControllerDir("cpu"), "cpu.stat");
    PADDOCK_ASSIGN_OR_RETURN(std::string stat, ReadFile(cpu_stat));
    uint64_t usec = 0;
    if (!FindKeyedValue(stat, "usage_usec", &usec)) {
      return Internal("no usage_usec in " + cpu_stat);
    }
    usage.cpu_usage_ns = usec * 1000;
  } else {
    PADDOCK_ASSIGN_OR_RETURN(usage.memory_bytes,
                             ReadUint64File(JoinPath(mem, "memory.usage_in_bytes")));
    auto peak = ReadUint64File(JoinPath(mem, "memory.max_usage_in_bytes"));
    if (peak.ok()) usage.memory_peak_bytes = *peak;
    PADDOCK_ASSIGN_OR_RETURN(usage.cpu_usage_ns,
                             ReadUint64File(JoinPath(ControllerDir("cpuacct"), "cpuacct.usage")));
  }
  PADDOCK_ASSIGN_OR_RETURN(usage.pids,
                           ReadUint64File(JoinPath(ControllerDir("pids"), "pids.current")));
  PADDOCK_ASSIGN_OR_RETURN(usage.oom_kills, OomKillCount());
  return usage;
}

Result<std::vector<pid_t>> SandboxCgroup::Pids() const {
  // Every hierarchy, not only the exec parent: an orphan left by a crash between creating one
  // controller's directory and the next can hold tasks in any of them.
  std::vector<pid_t> pids;
  bool any_dir = false;
  for (const auto& dir : dirs_) {
    Status st = CollectPids(dir, true, &pids);
    if (st.ok()) {
      any_dir = true;
    } else if (st.err() != ENOENT) {
      return st;
    }
  }
  if (!any_dir) return Status(StatusCode::kNotFound, "cgroup paddock-" + id_ + " is gone", ENOENT);
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

Status SandboxCgroup::KillAll() const {
  const auto deadline = SteadyClock::now() + kKillTimeout;
  // Empty means done; a cgroup that no longer exists has nothing left to kill.
  auto remaining = [this]() -> Result<size_t> {
    auto pids = Pids();
    if (!pids.ok()) {
      if (pids.status().err() == ENOENT) return size_t{0};
      return pids.status();
    }
    return pids->size();
  };
  // Usually the pid namespace is already gone and the cgroup empty: then there is nothing to
  // do, and on v1 a FROZEN/THAWED round trip would cost milliseconds even on an empty cgroup.
  {
    PADDOCK_ASSIGN_OR_RETURN(size_t n, remaining());
    if (n == 0) return Status::Ok();
  }
  auto timeout = [this](size_t n) {
    return Status(StatusCode::kDeadlineExceeded,
                  std::to_string(n) + " task(s) still alive in " + exec_parent_dir_ + " after 5s");
  };

  const std::string kill_file = JoinPath(exec_parent_dir_, "cgroup.kill");
  if (version_ == CgroupVersion::kV2 && ::access(kill_file.c_str(), F_OK) == 0) {
    // cgroup.kill (5.14+) kills the whole subtree atomically, new forks included.
    PADDOCK_RETURN_IF_ERROR(WriteCgroupFile(kill_file, "1", fake_));
    for (;;) {
      PADDOCK_ASSIGN_OR_RETURN(size_t n, remaining());
      if (n == 0) return Status::Ok();
      if (SteadyClock::now() >= deadline) return timeout(n);
      std::this_thread::sleep_for(kPollStep);
    }
  }

  // An orphan may lack its freezer directory (crash part-way through Create); then there is
  // nothing to freeze or thaw, and repeated SIGKILL rounds still empty it.
  auto thaw = [this]() -> Status {
    Status st = Thaw();
    return st.err() == ENOENT ? Status::Ok() : st;
  };
  for (;;) {
    // Freezing first means no task can fork between listing and killing, and a listed frozen
    // task cannot exit, so its pid cannot be reused before kill() reaches it. A failed freeze
    // still leaves SIGKILL effective, so it is not fatal.
    (void)Freeze();
    auto pids = Pids();
    if (!pids.ok()) {
      (void)Thaw();
      if (pids.status().err() == ENOENT) return Status::Ok();
      return pids.status();
    }
    if (pids->empty()) return thaw();
    if (SteadyClock::now() >= deadline) {
      (void)Thaw();
      return timeout(pids->size());
    }
    for (pid_t pid : *pids) (void)::kill(pid, SIGKILL);
    // Frozen tasks keep a pending SIGKILL until thawed; only then do they run to exit.
    PADDOCK_RETURN_IF_ERROR(thaw());
    const auto round_end = std::min(deadline, SteadyClock::now() + kKillRoundWait);
    for (;;) {
      PADDOCK_ASSIGN_OR_RETURN(size_t n, remaining());
      if (n == 0) return Status::Ok();
      if (SteadyClock::now() >= round_end) break;
      std::this_thread::sleep_for(kPollStep);
    }
  }
}

Status SandboxCgroup::Remove() const {
  const auto deadline = SteadyClock::now() + kRemoveBusyTimeout;
  Status first_error;
  for (const auto& dir : dirs_) {
    Status st = RemoveCgroupTree(dir, fake_, deadline);
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  return first_error;
}

}  // namespace paddock::runtime::linux
