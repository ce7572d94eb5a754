#include "runtime/linux/template_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include "common/unique_fd.h"

namespace paddock::runtime::linux {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHostName = "host";
constexpr const char* kManifestFile = "manifest.json";
// Bump when the digest record format or the skeleton layout changes: a different stamp makes
// every cached host manifest stale.
constexpr const char* kStampVersion = "v1";

// ---------------------------------------------------------------------------------------------
// SHA-256 over OpenSSL's EVP interface.

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { Reset(); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  ~Sha256() { EVP_MD_CTX_free(ctx_); }

  void Reset() { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  void Update(const void* data, size_t len) { EVP_DigestUpdate(ctx_, data, len); }
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // Lowercase hex of the digest; the context is reset for reuse.
  std::string HexFinal() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, md, &len);
    static const char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(len * 2);
    for (unsigned int i = 0; i < len; ++i) {
      out.push_back(kHex[md[i] >> 4]);
      out.push_back(kHex[md[i] & 0xf]);
    }
    Reset();
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

char TypeChar(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return 'f';
    case S_IFDIR:
      return 'd';
    case S_IFLNK:
      return 'l';
    case S_IFCHR:
      return 'c';
    case S_IFBLK:
      return 'b';
    case S_IFIFO:
      return 'p';
    case S_IFSOCK:
      return 's';
    default:
      return '?';
  }
}

std::string Octal(unsigned v) {
  char buf[16];
  snprintf(buf, sizeof buf, "%o", v);
  return buf;
}

// Reads the names in an open directory (without "." and ".."), sorted bytewise. The fd stays
// open and owned by the caller: fdopendir takes a dup.
Result<std::vector<std::string>> ReadDirNames(int dir_fd, const std::string& what) {
  int dup_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return ErrnoStatus("dup " + what);
  // A dup shares the file offset; rewind so a directory read before is listed in full.
  lseek(dup_fd, 0, SEEK_SET);
  DIR* d = fdopendir(dup_fd);
  if (d == nullptr) {
    int err = errno;
    close(dup_fd);
    return ErrnoStatus("fdopendir " + what, err);
  }
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
    errno = 0;
  }
  int err = errno;
  closedir(d);
  if (err != 0) return ErrnoStatus("readdir " + what, err);
  std::sort(names.begin(), names.end());
  return names;
}

// Hashes an open regular file. Returns nullopt when a read fails.
std::optional<std::string> HashFd(int fd, Sha256& sha, std::vector<char>& buf) {
  sha.Reset();
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      sha.Reset();
      return std::nullopt;
    }
    sha.Update(buf.data(), static_cast<size_t>(n));
  }
  return sha.HexFinal();
}

std::optional<std::string> ReadLinkAt(int dir_fd, const char* name, size_t hint) {
  std::string target(std::max<size_t>(hint, 64) + 1, '\0');
  for (;;) {
    ssize_t n = readlinkat(dir_fd, name, target.data(), target.size());
    if (n < 0) return std::nullopt;
    if (static_cast<size_t>(n) < target.size()) {
      target.resize(static_cast<size_t>(n));
      return target;
    }
    if (target.size() > PATH_MAX * 4) return std::nullopt;
    target.resize(target.size() * 2);
  }
}

// ---------------------------------------------------------------------------------------------
// Names and files.

bool ValidTemplateName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name[0])) return false;
  for (char c : name) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

Status CheckName(const std::string& name) {
  if (!ValidTemplateName(name)) {
    return InvalidArgument("name: template name \"" + name +
                           "\" must match [a-z0-9][a-z0-9._-]{0,62}");
  }
  return Status::Ok();
}

Status WriteAll(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + what);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

void FsyncDir(const std::string& dir) {
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) fsync(fd.get());
}

// Writes `path` via a temp file + fsync + rename so a crash or a concurrent reader sees either
// the old or the new content, never a torn file.
Status WriteFileAtomic(const std::string& path, std::string_view content) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) return ErrnoStatus("create " + tmp);
  Status st = WriteAll(fd.get(), content, tmp);
  if (st.ok() && fsync(fd.get()) != 0) st = ErrnoStatus("fsync " + tmp);
  fd.reset();
  if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoStatus("rename to " + path);
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  FsyncDir(fs::path(path).parent_path().string());
  return Status::Ok();
}

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return ErrnoStatus("open " + path);
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read " + path);
    }
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) return ResourceExhausted(path + ": larger than expected");
  }
  return out;
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  // remove_all never follows symlinks: a link in the tree is removed, not its target.
  fs::remove_all(path, ec);
  if (ec)
    return Status(CodeForErrno(ec.value()), "remove " + path + ": " + ec.message(), ec.value());
  return Status::Ok();
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec)
    return Status(CodeForErrno(ec.value()), "mkdir " + path + ": " + ec.message(), ec.value());
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Manifest <-> JSON.

std::string ManifestToJson(const TemplateManifest& m) {
  nlohmann::json binds = nlohmann::json::array();
  for (const auto& b : m.readonly_binds)
    binds.push_back({{"source", b.source}, {"target", b.target}});
  nlohmann::json j = {
      {"format", 1},
      {"name", m.name},
      {"kind", m.kind},
      {"rootfs", m.rootfs},
      {"readonly_binds", binds},
      {"digest", m.digest},
      {"file_count", m.file_count},
      {"total_bytes", m.total_bytes},
      {"created_at_unix", m.created_at_unix},
      {"runtimes", m.runtimes},
      {"capabilities", m.capabilities},
      {"source_stamp", m.source_stamp},
  };
  return j.dump(2) + "\n";
}

Result<TemplateManifest> ManifestFromJson(const std::string& text, const std::string& what) {
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    TemplateManifest m;
    m.name = j.at("name").get<std::string>();
    m.kind = j.at("kind").get<std::string>();
    m.rootfs = j.at("rootfs").get<std::string>();
    for (const auto& b : j.at("readonly_binds")) {
      m.readonly_binds.push_back(
          {b.at("source").get<std::string>(), b.at("target").get<std::string>()});
    }
    m.digest = j.at("digest").get<std::string>();
    m.file_count = j.at("file_count").get<uint64_t>();
    m.total_bytes = j.at("total_bytes").get<uint64_t>();
    m.created_at_unix = j.at("created_at_unix").get<int64_t>();
    m.runtimes = j.at("runtimes").get<std::map<std::string, std::string>>();
    m.capabilities = j.at("capabilities").get<std::vector<std::string>>();
    m.source_stamp = j.value("source_stamp", std::string());
    return m;
  } catch (const nlohmann::json::exception& e) {
    return Internal(what + ": invalid manifest: " + e.what());
  }
}

// ---------------------------------------------------------------------------------------------
// Lookups inside a root filesystem. Paths are resolved by the kernel with the rootfs as "/"
// (openat2 RESOLVE_IN_ROOT): an imported image's absolute symlinks (usr/bin/node -> /opt/...)
// then resolve inside the image and can never make us read host files.

class RootFs {
 public:
  explicit RootFs(const std::string& path)
      : fd_(open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) {}
  bool valid() const { return fd_.valid(); }

  UniqueFd Open(const std::string& rel, uint64_t flags) const {
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = flags | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, fd_.get(), rel.c_str(), &how, sizeof how);
    if (fd < 0 && errno == ENOSYS) {
      // Kernels before 5.6: no scoped resolution. Best effort; only reads metadata and a
      // header file of at most 64 KiB.
      fd = openat(fd_.get(), rel.c_str(), static_cast<int>(flags | O_CLOEXEC));
    }
    return UniqueFd(static_cast<int>(fd));
  }
  // The entry exists (a dangling symlink counts: it names an installed alternative).
  bool Exists(const std::string& rel) const { return Open(rel, O_PATH | O_NOFOLLOW).valid(); }
  bool IsDir(const std::string& rel) const { return Open(rel, O_PATH | O_DIRECTORY).valid(); }
  std::vector<std::string> List(const std::string& rel) const {
    UniqueFd d = Open(rel, O_RDONLY | O_DIRECTORY);
    if (!d) return {};
    auto names = ReadDirNames(d.get(), rel);
    return names.ok() ? std::move(names).value() : std::vector<std::string>{};
  }
  std::string ReadSmall(const std::string& rel) const {
    UniqueFd f = Open(rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (!f) return {};
    struct stat st;
    if (fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
    std::string out;
    char buf[8192];
    while (out.size() < 64 * 1024) {
      ssize_t n = read(f.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  UniqueFd fd_;
};

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Compares dotted versions numerically component by component ("12" < "13", "3.9" < "3.11").
int CompareVersions(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    size_t ie = a.find('.', i), je = b.find('.', j);
    if (ie == std::string::npos) ie = a.size();
    if (je == std::string::npos) je = b.size();
    std::string_view pa(a.data() + std::min(i, a.size()), ie - std::min(i, ie));
    std::string_view pb(b.data() + std::min(j, b.size()), je - std::min(j, je));
    if (pa != pb) {
      if (AllDigits(pa) && AllDigits(pb)) {
        // Compare as numbers without overflow: strip leading zeros, then length, then text.
        auto strip = [](std::string_view s) {
          while (s.size() > 1 && s[0] == '0') s.remove_prefix(1);
          return s;
        };
        pa = strip(pa);
        pb = strip(pb);
        if (pa.size() != pb.size()) return pa.size() < pb.size() ? -1 : 1;
      }
      if (pa != pb) return pa < pb ? -1 : 1;
    }
    i = ie + 1;
    j = je + 1;
  }
  return 0;
}

// "java-17-openjdk-amd64" -> "17", "java-1.8.0-openjdk-amd64" -> "8", "temurin-21-jdk" -> "21".
std::string JavaVersionFromDirName(const std::string& name) {
  size_t p = name.find_first_of("0123456789");
  if (p == std::string::npos) return {};
  size_t e = name.find_first_not_of("0123456789", p);
  if (e == std::string::npos) e = name.size();
  std::string major_v = name.substr(p, e - p);
  if (major_v == "1" && e < name.size() && name[e] == '.') {
    size_t e2 = name.find_first_not_of("0123456789", e + 1);
    if (e2 == std::string::npos) e2 = name.size();
    if (e2 > e + 1) major_v = name.substr(e + 1, e2 - e - 1);
  }
  return major_v;
}

std::string DefineValue(const std::string& header, const std::string& macro) {
  std::string key = "#define " + macro;
  size_t p = 0;
  while ((p = header.find(key, p)) != std::string::npos) {
    size_t v = p + key.size();
    p = v;
    if (v >= header.size() || (header[v] != ' ' && header[v] != '\t')) continue;
    v = header.find_first_not_of(" \t", v);
    if (v == std::string::npos) return {};
    size_t e = header.find_first_not_of("0123456789", v);
    if (e == std::string::npos) e = header.size();
    return header.substr(v, e - v);
  }
  return {};
}

void AddCapability(TemplateManifest* m, const std::string& cap) {
  if (std::find(m->capabilities.begin(), m->capabilities.end(), cap) == m->capabilities.end()) {
    m->capabilities.push_back(cap);
  }
}

// ---------------------------------------------------------------------------------------------
// Host skeleton.

struct SkeletonEntry {
  std::string path;    // relative to the skeleton root
  mode_t mode = 0;     // directories
  std::string target;  // symlinks (non-empty = symlink)
};

// The layout depends on the host only through which merged-usr library directories exist.
std::vector<SkeletonEntry> SkeletonLayout() {
  std::vector<SkeletonEntry> entries = {
      {"usr", 0755, ""},      {"etc", 0755, ""},  {"dev", 0755, ""},  {"proc", 0755, ""},
      {"sys", 0755, ""},      {"tmp", 01777, ""}, {"run", 0755, ""},  {"var", 0755, ""},
      {"var/tmp", 01777, ""}, {"home", 0755, ""}, {"root", 0755, ""}, {"workspace", 0755, ""},
      {"mnt", 0755, ""},
  };
  for (const char* dir : {"bin", "sbin", "lib", "lib64", "lib32", "libx32"}) {
    std::string target = std::string("usr/") + dir;
    struct stat st;
    if (stat(("/" + target).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      entries.push_back({dir, 0, target});
    }
  }
  // Debian's alternatives: many /usr/bin commands (awk, pager, editor, java ...) are symlinks
  // into /etc/alternatives, which would dangle without it. Only those symlinks are copied, and
  // only the ones pointing into /usr: no other host /etc content enters a sandbox.
  std::vector<std::string> names;
  if (DIR* d = opendir("/etc/alternatives")) {
    while (dirent* de = readdir(d)) names.push_back(de->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  bool any = false;
  for (const auto& name : names) {
    if (name == "." || name == "..") continue;
    char buf[PATH_MAX];
    ssize_t n = readlink(("/etc/alternatives/" + name).c_str(), buf, sizeof buf);
    if (n <= 0) continue;
    std::string target(buf, static_cast<size_t>(n));
    if (target.rfind("/usr/", 0) != 0 || target.find("/../") != std::string::npos) continue;
    if (!any) entries.push_back({"etc/alternatives", 0755, ""});
    any = true;
    entries.push_back({"etc/alternatives/" + name, 0, target});
  }
  return entries;
}

std::string ParentOf(const std::string& rel) {
  size_t p = rel.rfind('/');
  return p == std::string::npos ? std::string() : rel.substr(0, p);
}

// True when `root` holds exactly the skeleton layout: nothing missing, nothing extra (so no
// host file can have crept in), modes and link targets as built.
bool SkeletonMatches(const std::string& root, const std::vector<SkeletonEntry>& layout) {
  struct stat st;
  if (lstat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || (st.st_mode & 07777) != 0755) {
    return false;
  }
  std::map<std::string, std::set<std::string>> children;  // dir rel ("" = root) -> names
  children[""];
  for (const auto& e : layout) {
    std::string parent = ParentOf(e.path);
    children[parent].insert(e.path.substr(parent.empty() ? 0 : parent.size() + 1));
    if (e.target.empty()) children[e.path];
  }
  for (const auto& [dir, expected] : children) {
    std::string abs = dir.empty() ? root : root + "/" + dir;
    UniqueFd fd(open(abs.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return false;
    auto names = ReadDirNames(fd.get(), abs);
    if (!names.ok() || std::set<std::string>(names->begin(), names->end()) != expected) {
      return false;
    }
  }
  for (const auto& e : layout) {
    std::string abs = root + "/" + e.path;
    if (lstat(abs.c_str(), &st) != 0) return false;
    if (e.target.empty()) {
      if (!S_ISDIR(st.st_mode) || (st.st_mode & 07777) != e.mode) return false;
    } else {
      char buf[PATH_MAX];
      ssize_t n = readlink(abs.c_str(), buf, sizeof buf);
      if (!S_ISLNK(st.st_mode) || n < 0 || std::string(buf, static_cast<size_t>(n)) != e.target) {
        return false;
      }
    }
  }
  return true;
}

Status BuildSkeletonAt(const std::string& root, const std::vector<SkeletonEntry>& layout) {
  if (mkdir(root.c_str(), 0700) != 0) return ErrnoStatus("mkdir " + root);
  for (const auto& e : layout) {  // parents precede children in the layout
    std::string abs = root + "/" + e.path;
    if (!e.target.empty()) {
      if (symlink(e.target.c_str(), abs.c_str()) != 0) return ErrnoStatus("symlink " + abs);
      continue;
    }
    if (mkdir(abs.c_str(), 0700) != 0) return ErrnoStatus("mkdir " + abs);
    // chmod after mkdir: the process umask must not decide the sandbox's /tmp sticky bit.
    if (chmod(abs.c_str(), e.mode) != 0) return ErrnoStatus("chmod " + abs);
  }
  if (chmod(root.c_str(), 0755) != 0) return ErrnoStatus("chmod " + root);
  return Status::Ok();
}

// Removes rootfs.tmp-<pid> leftovers of crashed processes (and of this process's own earlier
// failed attempt). A live process's build directory is left alone.
void CleanStaleSkeletonTmps(const std::string& host_dir) {
  UniqueFd fd(open(host_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return;
  auto names = ReadDirNames(fd.get(), host_dir);
  if (!names.ok()) return;
  const std::string prefix = "rootfs.tmp-";
  for (const auto& n : *names) {
    if (n.rfind(prefix, 0) != 0) continue;
    std::string pid_text = n.substr(prefix.size());
    if (!AllDigits(pid_text) || pid_text.size() > 9) continue;
    pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid != getpid() && (kill(pid, 0) == 0 || errno == EPERM)) continue;
    Status st = RemoveTree(host_dir + "/" + n);
    if (!st.ok()) spdlog::warn("template store: {}", st.ToString());
  }
}

// Builds the skeleton in rootfs.tmp-<pid> and moves it into place in one rename, so a crash
// never leaves a half-built rootfs that a sandbox could use as its lower layer.
Status BuildSkeleton(const std::string& host_dir, const std::vector<SkeletonEntry>& layout) {
  CleanStaleSkeletonTmps(host_dir);
  std::string root = host_dir + "/rootfs";
  std::string tmp = host_dir + "/rootfs.tmp-" + std::to_string(getpid());
  Status st = BuildSkeletonAt(tmp, layout);
  if (st.ok()) {
    if (rename(tmp.c_str(), root.c_str()) != 0) {
      if (errno != ENOTEMPTY && errno != EEXIST && errno != ENOTDIR && errno != EISDIR) {
        st = ErrnoStatus("rename " + tmp + " to " + root);
      } else if (syscall(SYS_renameat2, AT_FDCWD, tmp.c_str(), AT_FDCWD, root.c_str(),
                         RENAME_EXCHANGE) != 0) {
        // An invalid skeleton is in the way: swap atomically, then delete the old one.
        st = ErrnoStatus("exchange " + tmp + " with " + root);
      }
    }
  }
  if (!st.ok()) {
    (void)RemoveTree(tmp);
    return st;
  }
  (void)RemoveTree(tmp);  // the replaced skeleton, if any
  FsyncDir(host_dir);
  return Status::Ok();
}

// What the host digest was computed from. /usr/lib covers most library installs, dpkg's
// status file every Debian package change; other changes deep in /usr are missed (the digest
// walk itself is the expensive part we avoid at every start).
std::string HostSourceStamp() {
  std::string stamp = kStampVersion;
  for (const char* p :
       {"/usr", "/usr/bin", "/usr/lib", "/var/lib/dpkg/status", "/etc/alternatives"}) {
    struct stat st;
    stamp += ";";
    stamp += p;
    stamp += "=";
    if (stat(p, &st) == 0) {
      stamp += std::to_string(MtimeNs(st)) + ":" + std::to_string(st.st_size);
    } else {
      stamp += "absent";
    }
  }
  return stamp;
}

bool PathIsWithin(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// DigestTree

Result<std::string> DigestTree(const std::string& root, bool content_for_files,
                               uint64_t* file_count, uint64_t* total_bytes) {
  UniqueFd root_fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) {
    if (errno == ENOTDIR) return InvalidArgument("DigestTree: " + root + " is not a directory");
    return ErrnoStatus("DigestTree: open " + root);
  }
  struct stat root_st;
  if (fstat(root_fd.get(), &root_st) != 0) return ErrnoStatus("DigestTree: stat " + root);

  Sha256 tree;
  Sha256 file_sha;
  std::vector<char> buf(1 << 16);
  uint64_t files = 0, bytes = 0;

  // One canonical record per entry: seven NUL-terminated fields. Paths and link targets cannot
  // contain NUL, so the byte stream decodes to exactly one sequence of records.
  auto emit = [&](const std::string& rel, const struct stat& st, const std::string& extra) {
    std::string rec;
    rec.reserve(rel.size() + extra.size() + 64);
    rec += rel;
    rec += '\0';
    rec += TypeChar(st.st_mode);
    rec += '\0';
    rec += Octal(st.st_mode & 07777);
    rec += '\0';
    rec += std::to_string(st.st_uid);
    rec += '\0';
    rec += std::to_string(st.st_gid);
    rec += '\0';
    // A directory's st_size is a filesystem artefact (block-rounded, grows but never shrinks on
    // ext4); its children are covered by their own records.
    rec += std::to_string(S_ISDIR(st.st_mode) ? 0 : st.st_size);
    rec += '\0';
    rec += extra;
    rec += '\0';
    tree.Update(rec);
  };

  struct Frame {
    UniqueFd fd;
    std::string rel;
    std::vector<std::string> names;
    size_t next = 0;
  };
  std::vector<Frame> stack;

  {
    auto names = ReadDirNames(root_fd.get(), root);
    if (!names.ok()) return names.status();
    emit(".", root_st, "");
    stack.push_back(Frame{std::move(root_fd), "", std::move(names).value(), 0});
  }

  // Depth-first, children in byte order: each directory's record is followed by its subtree.
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.next == top.names.size()) {
      stack.pop_back();
      continue;
    }
    const std::string name = top.names[top.next++];
    const int dir_fd = top.fd.get();
    const std::string rel = top.rel.empty() ? name : top.rel + "/" + name;

    struct stat st;
    if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed while we walked
      struct stat unknown {};
      emit(rel, unknown, "unreadable");
      continue;
    }
    switch (st.st_mode & S_IFMT) {
      case S_IFREG: {
        ++files;
        bytes += static_cast<uint64_t>(st.st_size);
        if (!content_for_files) {
          emit(rel, st, "mtime:" + std::to_string(MtimeNs(st)));
          break;
        }
        // O_NONBLOCK: if the entry was swapped for a FIFO since fstatat, open must not hang.
        UniqueFd f(openat(dir_fd, name.c_str(),
                          O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
        struct stat fst;
        if (!f || fstat(f.get(), &fst) != 0 || !S_ISREG(fst.st_mode) || fst.st_ino != st.st_ino ||
            fst.st_dev != st.st_dev) {
          emit(rel, st, "unreadable");
          break;
        }
        std::optional<std::string> hex = HashFd(f.get(), file_sha, buf);
        emit(rel, fst, hex ? "sha256:" + *hex : std::string("unreadable"));
        break;
      }
      case S_IFLNK: {
        std::optional<std::string> target =
            ReadLinkAt(dir_fd, name.c_str(), static_cast<size_t>(st.st_size));
        emit(rel, st, target ? "->" + *target : std::string("unreadable"));
        break;
      }
      case S_IFCHR:
      case S_IFBLK:
        emit(rel, st,
             "rdev:" + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev)));
        break;
      case S_IFDIR: {
        // Another filesystem mounted here (e.g. /usr/local on its own volume) is not part of
        // the tree and may be huge or a pseudo filesystem: leave it out entirely.
        if (st.st_dev != root_st.st_dev) break;
        UniqueFd sub(openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub) {
          if (errno == EMFILE || errno == ENFILE) {
            return ResourceExhausted("DigestTree: out of file descriptors at " + root + "/" + rel);
          }
          emit(rel, st, "unreadable");
          break;
        }
        struct stat sst;
        if (fstat(sub.get(), &sst) != 0 || sst.st_ino != st.st_ino || sst.st_dev != st.st_dev) {
          emit(rel, st, "unreadable");  // replaced between fstatat and open
          break;
        }
        auto names = ReadDirNames(sub.get(), root + "/" + rel);
        if (!names.ok()) {
          emit(rel, st, "unreadable");
          break;
        }
        emit(rel, st, "");
        // push_back may reallocate: `top` is not used after this point.
        stack.push_back(Frame{std::move(sub), rel, std::move(names).value(), 0});
        break;
      }
      default:
        emit(rel, st, "");
        break;
    }
  }

  if (file_count) *file_count = files;
  if (total_bytes) *total_bytes = bytes;
  return "sha256:" + tree.HexFinal();
}

// ---------------------------------------------------------------------------------------------
// DetectRuntimes

void DetectRuntimes(const std::string& rootfs, TemplateManifest* manifest) {
  RootFs root(rootfs);
  if (!root.valid()) return;

  // Python: usr/lib/python3.N holds the standard library of CPython 3.N.
  std::string best_python;
  for (const auto& n : root.List("usr/lib")) {
    if (n.rfind("python3.", 0) != 0 || !AllDigits(std::string_view(n).substr(8))) continue;
    if (!root.IsDir("usr/lib/" + n)) continue;
    std::string ver = n.substr(6);
    if (best_python.empty() || CompareVersions(ver, best_python) > 0) best_python = ver;
  }
  if (!best_python.empty()) {
    manifest->runtimes["python3"] = best_python;
    AddCapability(manifest, "python");
  }
  if (root.Exists("usr/bin/pip3") || root.IsDir("usr/lib/python3/dist-packages/pip")) {
    AddCapability(manifest, "pip");
  }

  // Node.js: the binary, and its version from the development header when installed.
  if (root.Exists("usr/bin/node") || root.Exists("usr/bin/nodejs")) {
    std::string header = root.ReadSmall("usr/include/node/node_version.h");
    std::string major_v = DefineValue(header, "NODE_MAJOR_VERSION");
    std::string minor_v = DefineValue(header, "NODE_MINOR_VERSION");
    std::string patch = DefineValue(header, "NODE_PATCH_VERSION");
    std::string ver = "unknown";
    if (!major_v.empty()) {
      ver = major_v;
      if (!minor_v.empty()) ver += "." + minor_v;
      if (!minor_v.empty() && !patch.empty()) ver += "." + patch;
    }
    manifest->runtimes["node"] = ver;
    AddCapability(manifest, "node");
  }

  // GCC: usr/lib/gcc/<triplet>/<version> (the native triplet; cross compilers live in
  // usr/lib/gcc-cross).
  std::string best_gcc;
  for (const auto& triplet : root.List("usr/lib/gcc")) {
    for (const auto& ver : root.List("usr/lib/gcc/" + triplet)) {
      if (ver.empty() || ver[0] < '0' || ver[0] > '9') continue;
      if (!root.IsDir("usr/lib/gcc/" + triplet + "/" + ver)) continue;
      if (best_gcc.empty() || CompareVersions(ver, best_gcc) > 0) best_gcc = ver;
    }
  }
  if (!best_gcc.empty()) {
    manifest->runtimes["gcc"] = best_gcc;
    AddCapability(manifest, "gcc");
  }

  // Java: one directory per JDK/JRE under usr/lib/jvm; the highest major version wins.
  bool have_java = false;
  std::string best_java;
  for (const auto& n : root.List("usr/lib/jvm")) {
    if (!root.IsDir("usr/lib/jvm/" + n)) continue;
    have_java = true;
    std::string ver = JavaVersionFromDirName(n);
    if (!ver.empty() && (best_java.empty() || CompareVersions(ver, best_java) > 0)) best_java = ver;
  }
  if (have_java) {
    manifest->runtimes["java"] = best_java.empty() ? "unknown" : best_java;
    AddCapability(manifest, "java");
  }

  if (root.Exists("usr/bin/git")) AddCapability(manifest, "git");
  if (root.Exists("usr/bin/chromium") || root.Exists("usr/bin/chromium-browser")) {
    AddCapability(manifest, "chromium");
  }
  std::sort(manifest->capabilities.begin(), manifest->capabilities.end());
}

// ---------------------------------------------------------------------------------------------
// TemplateStore

namespace {

Result<TemplateManifest> LoadManifest(const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name + "/" + kManifestFile;
  auto text = ReadFile(path, 16 << 20);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return NotFound("template \"" + name + "\" not found (no " + path + ")");
    }
    return text.status();
  }
  auto m = ManifestFromJson(*text, path);
  if (!m.ok()) return m.status();
  if (m->name != name) {
    return Internal(path + ": manifest names template \"" + m->name + "\", expected \"" + name +
                    "\"");
  }
  return m;
}

Status StoreManifest(const std::string& dir, const TemplateManifest& m) {
  std::string tdir = dir + "/" + m.name;
  PADDOCK_RETURN_IF_ERROR(MakeDirs(tdir));
  return WriteFileAtomic(tdir + "/" + kManifestFile, ManifestToJson(m));
}

}  // namespace

TemplateStore::TemplateStore(std::string dir) {
  std::error_code ec;
  fs::path abs = fs::absolute(dir, ec);
  dir_ = (ec ? fs::path(dir) : abs).lexically_normal().string();
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

Result<TemplateManifest> TemplateStore::EnsureHostTemplate() {
  std::lock_guard<std::mutex> lock(mu_);
  return EnsureHostTemplateLocked();
}

// ctime of every directory of the skeleton: any entry added, removed, renamed or chmod'ed in
// the skeleton changes one of them, so an unchanged value proves the skeleton still matches
// what was verified, without re-reading the layout (hundreds of /etc/alternatives links).
std::string SkeletonDirsStamp(const std::string& rootfs, const std::vector<std::string>& dirs) {
  std::string stamp;
  for (const auto& d : dirs) {
    struct stat st;
    std::string abs = d.empty() ? rootfs : rootfs + "/" + d;
    if (lstat(abs.c_str(), &st) != 0) return "missing:" + d;
    stamp += std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec) + ";";
  }
  return stamp;
}

Result<TemplateManifest> TemplateStore::EnsureHostTemplateLocked() {
  const std::string host_dir = dir_ + "/" + kHostName;
  const std::string rootfs = host_dir + "/rootfs";

  // Stamp first: if /usr changes during the walk below, the stored stamp is already stale.
  const std::string stamp = HostSourceStamp();
  // Fast path, taken by every sandbox creation: verified earlier in this process, and neither
  // the host sources nor the skeleton's directories changed since.
  if (host_verified_ && host_verified_->manifest.source_stamp == stamp &&
      SkeletonDirsStamp(rootfs, host_verified_->dirs) == host_verified_->dirs_stamp) {
    return host_verified_->manifest;
  }
  host_verified_.reset();
  PADDOCK_RETURN_IF_ERROR(MakeDirs(host_dir));
  const std::vector<SkeletonEntry> layout = SkeletonLayout();
  std::vector<std::string> layout_dirs = {""};
  for (const auto& e : layout) {
    if (e.target.empty()) layout_dirs.push_back(e.path);
  }
  auto remember = [&](const TemplateManifest& m) {
    host_verified_ = HostVerified{m, layout_dirs, SkeletonDirsStamp(rootfs, layout_dirs)};
  };
  const bool skeleton_ok = SkeletonMatches(rootfs, layout);

  auto cached = LoadManifest(dir_, kHostName);
  if (cached.ok() && skeleton_ok && cached->source_stamp == stamp && cached->rootfs == rootfs &&
      cached->kind == "host") {
    remember(*cached);
    return cached;
  }
  if (!cached.ok() && cached.status().code() != StatusCode::kNotFound) {
    spdlog::warn("template store: rebuilding host manifest: {}", cached.status().ToString());
  }

  if (!skeleton_ok) PADDOCK_RETURN_IF_ERROR(BuildSkeleton(host_dir, layout));

  TemplateManifest m;
  m.name = kHostName;
  m.kind = "host";
  m.rootfs = rootfs;
  m.readonly_binds = {{"/usr", "/usr"}};
  m.source_stamp = stamp;

  uint64_t skel_files = 0, skel_bytes = 0, usr_files = 0, usr_bytes = 0;
  PADDOCK_ASSIGN_OR_RETURN(std::string skel_digest, DigestTree(rootfs, /*content_for_files=*/true,
                                                               &skel_files, &skel_bytes));
  // /usr by metadata only: hashing its content (gigabytes) would take minutes.
  PADDOCK_ASSIGN_OR_RETURN(std::string usr_digest,
                           DigestTree("/usr", /*content_for_files=*/false, &usr_files, &usr_bytes));
  Sha256 sha;
  sha.Update(skel_digest);
  sha.Update(usr_digest);
  m.digest = "sha256:" + sha.HexFinal();
  m.file_count = skel_files + usr_files;
  m.total_bytes = skel_bytes + usr_bytes;
  m.created_at_unix = static_cast<int64_t>(time(nullptr));
  // /usr is the host's, bound read-only: look for runtimes where it really comes from.
  DetectRuntimes("/", &m);

  PADDOCK_RETURN_IF_ERROR(StoreManifest(dir_, m));
  remember(m);
  return m;
}

Result<TemplateManifest> TemplateStore::ImportDirectory(const std::string& name,
                                                        const std::string& source_dir) {
  PADDOCK_RETURN_IF_ERROR(CheckName(name));
  if (name == kHostName) {
    return InvalidArgument("name: \"host\" is reserved for the generated host template");
  }
  if (source_dir.empty() || source_dir[0] != '/') {
    return InvalidArgument("source_dir: \"" + source_dir + "\" must be an absolute path");
  }
  char resolved[PATH_MAX];
  if (realpath(source_dir.c_str(), resolved) == nullptr) {
    return InvalidArgument("source_dir: " + source_dir + ": " + strerror(errno));
  }
  const std::string rootfs = resolved;
  struct stat st;
  if (stat(rootfs.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return InvalidArgument("source_dir: " + source_dir + " is not a directory");
  }
  if (rootfs == "/") {
    return InvalidArgument(
        "source_dir: the host root cannot be imported; use the \"host\" template");
  }
  struct stat usr_st, bin_st;
  bool has_usr = lstat((rootfs + "/usr").c_str(), &usr_st) == 0 && S_ISDIR(usr_st.st_mode);
  bool has_bin = lstat((rootfs + "/bin").c_str(), &bin_st) == 0 &&
                 (S_ISDIR(bin_st.st_mode) || S_ISLNK(bin_st.st_mode));
  if (!has_usr && !has_bin) {
    return InvalidArgument("source_dir: " + source_dir +
                           " does not look like a root filesystem (no usr/ or bin/)");
  }
  // A source inside the store could be deleted by Remove() of its own or another template.
  char store_real[PATH_MAX];
  if (realpath(dir_.c_str(), store_real) != nullptr &&
      (PathIsWithin(rootfs, store_real) || PathIsWithin(store_real, rootfs))) {
    return InvalidArgument("source_dir: " + source_dir + " overlaps the template store " + dir_);
  }

  TemplateManifest m;
  m.name = name;
  m.kind = "directory";
  m.rootfs = rootfs;
  m.source_stamp = "dir:" + rootfs + ":" + std::to_string(MtimeNs(st));
  // The full content walk can take long: done before taking the lock so it does not stall
  // host template starts. Concurrent imports of one name: the last to finish wins.
  PADDOCK_ASSIGN_OR_RETURN(
      m.digest, DigestTree(rootfs, /*content_for_files=*/true, &m.file_count, &m.total_bytes));
  m.created_at_unix = static_cast<int64_t>(time(nullptr));
  DetectRuntimes(rootfs, &m);

  std::lock_guard<std::mutex> lock(mu_);
  PADDOCK_RETURN_IF_ERROR(StoreManifest(dir_, m));
  return m;
}

Result<TemplateManifest> TemplateStore::Get(const std::string& name) {
  PADDOCK_RETURN_IF_ERROR(CheckName(name));
  if (name == kHostName) return EnsureHostTemplate();
  // Manifests are replaced by rename, so reading without the lock sees a whole file.
  auto m = LoadManifest(dir_, name);
  if (!m.ok()) return m.status();
  struct stat st;
  if (stat(m->rootfs.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return FailedPrecondition("template \"" + name + "\": rootfs " + m->rootfs +
                              " no longer exists");
  }
  return m;
}

std::vector<TemplateManifest> TemplateStore::List() {
  std::vector<TemplateManifest> out;
  UniqueFd fd(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return out;
  auto names = ReadDirNames(fd.get(), dir_);
  if (!names.ok()) {
    spdlog::warn("template store: {}", names.status().ToString());
    return out;
  }
  for (const auto& n : *names) {  // sorted
    if (!ValidTemplateName(n)) continue;
    auto m = LoadManifest(dir_, n);
    if (m.ok()) {
      out.push_back(std::move(m).value());
    } else if (m.status().code() != StatusCode::kNotFound) {
      spdlog::warn("template store: skipping {}: {}", n, m.status().ToString());
    }
  }
  return out;
}

Status TemplateStore::Remove(const std::string& name) {
  PADDOCK_RETURN_IF_ERROR(CheckName(name));
  std::lock_guard<std::mutex> lock(mu_);
  const std::string tdir = dir_ + "/" + name;
  struct stat st;
  if (lstat(tdir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return NotFound("template \"" + name + "\" not found");
  }
  if (name == kHostName) {
    host_verified_.reset();
    return RemoveTree(tdir);  // the skeleton is ours
  }

  // An imported template's rootfs is the user's directory, used in place: delete only what the
  // store wrote (the manifest and its temp files), never recursively.
  const std::string manifest = tdir + "/" + kManifestFile;
  if (unlink(manifest.c_str()) != 0) {
    if (errno == ENOENT)
      return NotFound("template \"" + name + "\" not found (no " + manifest + ")");
    return ErrnoStatus("remove " + manifest);
  }
  UniqueFd fd(open(tdir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd) {
    auto names = ReadDirNames(fd.get(), tdir);
    if (names.ok()) {
      const std::string tmp_prefix = std::string(kManifestFile) + ".tmp-";
      for (const auto& n : *names) {
        if (n.rfind(tmp_prefix, 0) == 0) unlinkat(fd.get(), n.c_str(), 0);
      }
    }
  }
  if (rmdir(tdir.c_str()) != 0) {
    spdlog::warn("template store: left {} in place: {}", tdir, strerror(errno));
  }
  return Status::Ok();
}

}  // namespace paddock::runtime::linux
