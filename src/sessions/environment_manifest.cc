// The environment manifest scan. Where it looks is a fixed list of directories walked to a
// fixed depth (site dir -> *.dist-info, node_modules -> [@scope ->] package/package.json), so
// a symlink loop or a deep tree cannot make it walk forever; every listing and read is charged
// to a budget, and running out marks the manifest truncated rather than failing it.
#include "sessions/environment_manifest.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "common/sha256.h"

namespace paddock::sessions {
namespace {

using json = nlohmann::json;
using runtime::FileStat;

// npm's limit on a package name, applied to every name we keep (python names included).
constexpr size_t kMaxNameBytes = 214;
constexpr size_t kMaxVersionBytes = 128;
constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kMaxContextStringBytes = 4096;
// Parsing back: a context string of 4096 bytes may triple when invalid UTF-8 is replaced.
constexpr size_t kMaxJsonStringBytes = 16384;
constexpr size_t kMaxJsonItems = 100000;
// package.json nesting beyond this is not a real manifest; stop before building anything.
constexpr int kMaxJsonDepth = 64;
// HostDirView: the same cap on one listing as the runtime's SandboxFiles.
constexpr size_t kMaxListEntries = 100000;
constexpr int kOpenAt2Retries = 128;

// --- small helpers ------------------------------------------------------------------------

// Replaces invalid UTF-8 (overlong forms, surrogates, stray bytes) with U+FFFD, so the
// manifest always serialises: nlohmann::json::dump throws on invalid UTF-8 by default, and
// dirty paths are file names the sandbox chose.
std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t lowest = 0;  // below this the form is overlong
    uint32_t cp = 0;
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, lowest = 0x80, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, lowest = 0x800, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, lowest = 0x10000, cp = c & 0x07;
    }
    bool ok = len != 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xc0) == 0x80;
      cp = (cp << 6) | (cc & 0x3f);
    }
    ok = ok && cp >= lowest && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out.append("\xef\xbf\xbd");
      ++i;
    }
  }
  return out;
}

// Printable ASCII without spaces: what we accept for versions and path components.
bool Printable(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

bool SaneVersion(std::string_view v) { return Printable(v, kMaxVersionBytes); }

// A normalised python name: [a-z0-9-], alphanumeric at both ends.
bool SanePythonName(std::string_view n) {
  if (n.empty() || n.size() > kMaxNameBytes || n.front() == '-' || n.back() == '-') return false;
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

// One component of a node package name: printable, no '/' or '\\', not hidden.
bool SaneNodeComponent(std::string_view s) {
  if (!Printable(s, kMaxNameBytes) || s.front() == '.') return false;
  return s.find('/') == std::string_view::npos && s.find('\\') == std::string_view::npos;
}

// "name" or "@scope/name", at most 214 bytes in all.
bool SaneNodeName(std::string_view n) {
  if (n.empty() || n.size() > kMaxNameBytes) return false;
  if (n.front() != '@') return SaneNodeComponent(n);
  size_t slash = n.find('/');
  if (slash == std::string_view::npos || slash < 2) return false;
  return SaneNodeComponent(n.substr(1, slash - 1)) && SaneNodeComponent(n.substr(slash + 1));
}

// An absolute path of printable components (venv keys).
bool SaneAbsolutePath(std::string_view p) {
  if (p.size() < 2 || p.size() > kMaxPathBytes || p.front() != '/' || p.back() == '/') {
    return false;
  }
  size_t start = 1;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    std::string_view comp = p.substr(start, end - start);
    if (!Printable(comp, 255) || comp == "." || comp == "..") return false;
    start = end + 1;
  }
  return true;
}

bool IsHex(std::string_view s, size_t len) {
  if (s.size() != len) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool SaneHash(std::string_view h) {
  return h.empty() || (h.starts_with("sha256:") && IsHex(h.substr(7), 64));
}

std::string LockHash(const std::set<std::string>& lines) {
  if (lines.empty()) return "";
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  return "sha256:" + Sha256Hex(text);
}

bool IsDirLike(const FileStat& e) {
  return e.type == FileStat::Type::kDir || e.type == FileStat::Type::kSymlink;
}

// "python3.<digits>", the directories the site globs (python3.*) name.
bool IsPythonVersionDir(std::string_view n) {
  if (!n.starts_with("python3.") || n.size() == 8 || n.size() > 11) return false;
  for (char c : n.substr(8)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Nothing there to scan. A symlink loop (ELOOP) counts: it hides no files, so treating it as
// unreadable would only let a sandbox spoil its own manifest.
bool IsMissing(const Status& st) {
  return st.code() == StatusCode::kNotFound || st.err() == ENOENT || st.err() == ENOTDIR ||
         st.err() == ELOOP;
}

// --- python metadata ------------------------------------------------------------------------

struct NameVersion {
  std::string name;
  std::string version;
};

bool StartsWithDigit(std::string_view s) { return !s.empty() && s[0] >= '0' && s[0] <= '9'; }

// "name-version" (the stem of a *.dist-info). Wheel names escape '-' as '_' in both parts, so
// there is one '-'; splitting at the last one also copes with older tools that left '-' in the
// name (a version never contains one).
std::optional<NameVersion> ParseDistInfoStem(std::string_view stem) {
  size_t dash = stem.rfind('-');
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  std::string_view version = stem.substr(dash + 1);
  if (!StartsWithDigit(version)) return std::nullopt;
  return NameVersion{std::string(stem.substr(0, dash)), std::string(version)};
}

// "name-version[-pyX.Y[-platform]]" (the stem of a *.egg-info, e.g. Debian's
// "PyYAML-6.0-py3.11" or "distro_info-1.5+deb12u1").
std::optional<NameVersion> ParseEggInfoStem(std::string_view stem) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    size_t dash = stem.find('-', start);
    parts.push_back(stem.substr(start, dash == std::string_view::npos ? dash : dash - start));
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  size_t end = parts.size();
  for (size_t i = 2; i < parts.size(); ++i) {
    if (parts[i].size() > 2 && parts[i].starts_with("py") && StartsWithDigit(parts[i].substr(2))) {
      end = i;
      break;
    }
  }
  if (end < 2 || !StartsWithDigit(parts[end - 1])) return std::nullopt;
  std::string name;
  for (size_t i = 0; i + 1 < end; ++i) {
    if (i) name += '-';
    name += parts[i];
  }
  if (name.empty()) return std::nullopt;
  return NameVersion{name, std::string(parts[end - 1])};
}

// Name and Version from the header block of a METADATA / PKG-INFO file (RFC 822 style).
std::optional<NameVersion> ParseCoreMetadata(std::string_view text) {
  NameVersion nv;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    std::string_view line = text.substr(pos, eol == std::string_view::npos ? eol : eol - pos);
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;  // end of the headers; the description follows
    auto value = [&](std::string_view key) -> std::optional<std::string> {
      if (!line.starts_with(key)) return std::nullopt;
      std::string_view v = line.substr(key.size());
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
      return std::string(v);
    };
    if (auto v = value("Name:"); v && nv.name.empty()) nv.name = *v;
    if (auto v = value("Version:"); v && nv.version.empty()) nv.version = *v;
  }
  if (nv.name.empty() || nv.version.empty()) return std::nullopt;
  return nv;
}

// --- package.json ---------------------------------------------------------------------------

// Pulls the top-level "version" string out of a package.json without building a DOM: a hostile
// file can be deeply nested or enormous in structure, and this keeps the work to one pass with
// bounded depth. Any parse error (or excess depth) means "no version".
class VersionSax {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  std::optional<std::string> version;

  bool null() { return Value(); }
  bool boolean(bool) { return Value(); }
  bool number_integer(number_integer_t) { return Value(); }
  bool number_unsigned(number_unsigned_t) { return Value(); }
  bool number_float(number_float_t, const string_t&) { return Value(); }
  bool string(string_t& s) {
    if (depth_ == 1 && key_is_version_ && !version) version = s;
    return Value();
  }
  bool binary(binary_t&) { return Value(); }
  bool start_object(std::size_t) { return Enter(true); }
  bool end_object() { return Leave(); }
  bool start_array(std::size_t) { return Enter(false); }
  bool end_array() { return Leave(); }
  bool key(string_t& k) {
    key_is_version_ = depth_ == 1 && k == "version";
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

  bool top_level_object() const { return top_level_object_; }

 private:
  bool Value() {
    if (depth_ == 0) top_level_object_ = false;  // a bare scalar document
    key_is_version_ = false;
    return true;
  }
  bool Enter(bool object) {
    if (depth_ == 0) top_level_object_ = object;
    key_is_version_ = false;
    return ++depth_ <= kMaxJsonDepth;
  }
  bool Leave() {
    --depth_;
    key_is_version_ = false;
    return true;
  }

  int depth_ = 0;
  bool key_is_version_ = false;
  bool top_level_object_ = false;
};

std::optional<std::string> PackageJsonVersion(const std::string& text) {
  VersionSax sax;
  bool ok = false;
  try {
    ok = json::sax_parse(text, &sax, json::input_format_t::json, /*strict=*/true);
  } catch (const std::exception&) {
    ok = false;
  }
  if (!ok || !sax.top_level_object() || !sax.version) return std::nullopt;
  return sax.version;
}

// --- the scan -------------------------------------------------------------------------------

class Scanner {
 public:
  Scanner(FileView& view, const ScanLimits& limits, EnvironmentManifest& m)
      : view_(view), limits_(limits), m_(m) {}

  void Run() {
    ScanPythonSystem();
    ScanVenvs();
    ScanNode();
    ScanDpkg();
    m_.python_lock_hash = LockHash(python_lines_);
    m_.node_lock_hash = LockHash(node_lines_);
  }

  bool browser_package = false;  // a playwright / pyppeteer / puppeteer package
  bool browser_dpkg = false;     // an installed chromium / chrome dpkg package

 private:
  // A directory's entries, sorted by name, charged to the entry budget. Missing (or a symlink
  // loop): empty. Any other failure (permission, too many entries for the view) leaves part of
  // the environment unseen, so it marks the manifest truncated.
  std::vector<FileStat> List(const std::string& path) {
    Result<std::vector<FileStat>> r = view_.ListDir(path);
    if (!r.ok()) {
      if (!IsMissing(r.status())) m_.truncated = true;
      return {};
    }
    std::vector<FileStat> entries = std::move(r).value();
    std::sort(entries.begin(), entries.end(),
              [](const FileStat& a, const FileStat& b) { return a.name < b.name; });
    const uint64_t left = limits_.max_entries - std::min(entries_used_, limits_.max_entries);
    if (entries.size() > left) {
      m_.truncated = true;
      entries.resize(left);
    }
    entries_used_ += entries.size();
    // Names we could not even build a path from are never looked at.
    std::erase_if(entries, [](const FileStat& e) { return !Printable(e.name, 255); });
    return entries;
  }

  // A file's contents, charged to the read budget; nullopt when missing, unreadable, larger
  // than `cap`, or beyond the budget (which also marks the manifest truncated).
  std::optional<std::string> Read(const std::string& path, uint64_t cap) {
    if (read_used_ >= limits_.max_read_bytes) {
      m_.truncated = true;
      return std::nullopt;
    }
    const uint64_t want = std::min(cap, limits_.max_read_bytes - read_used_);
    Result<std::string> r = view_.ReadFile(path, want);
    if (!r.ok() || r->size() > want) {
      // Refused with less than the per-file cap on offer: it may have fit the cap but not the
      // budget that was left, so the package is unknown rather than absent.
      if ((!r.ok() && !IsMissing(r.status()) && want < cap) || (r.ok() && r->size() > want)) {
        m_.truncated = true;
      }
      return std::nullopt;
    }
    read_used_ += r->size();
    return std::move(r).value();
  }

  // parent/python3.* directories.
  std::vector<std::string> PythonDirs(const std::string& parent) {
    std::vector<std::string> out;
    for (const FileStat& e : List(parent)) {
      if (IsDirLike(e) && IsPythonVersionDir(e.name)) out.push_back(parent + "/" + e.name);
    }
    return out;
  }

  // One site dir's *.dist-info / *.egg-info. `pkgs` keeps the first version seen per name
  // (callers scan in import precedence order); `lines` collects every install when non-null.
  void ScanSite(const std::string& dir, std::map<std::string, std::string>* pkgs,
                std::set<std::string>* lines) {
    for (const FileStat& e : List(dir)) {
      std::string_view n = e.name;
      std::optional<NameVersion> nv;
      if (n.ends_with(".dist-info") && IsDirLike(e)) {
        nv = ParseDistInfoStem(n.substr(0, n.size() - 10));
        if (!nv) nv = MetadataFile(dir + "/" + e.name + "/METADATA");
      } else if (n.ends_with(".egg-info")) {
        nv = ParseEggInfoStem(n.substr(0, n.size() - 9));
        // An egg-info is a directory holding PKG-INFO, or (distutils) the PKG-INFO itself.
        if (!nv && e.type == FileStat::Type::kFile) nv = MetadataFile(dir + "/" + e.name);
        if (!nv && IsDirLike(e)) nv = MetadataFile(dir + "/" + e.name + "/PKG-INFO");
      } else {
        continue;
      }
      if (!nv) continue;
      std::string name = NormalizePythonName(nv->name);
      if (!SanePythonName(name) || !SaneVersion(nv->version)) continue;
      if (name == "playwright" || name == "pyppeteer") browser_package = true;
      if (lines) lines->insert(name + "==" + nv->version);
      pkgs->emplace(std::move(name), std::move(nv->version));
    }
  }

  std::optional<NameVersion> MetadataFile(const std::string& path) {
    std::optional<std::string> text = Read(path, limits_.max_metadata_bytes);
    if (!text) return std::nullopt;
    return ParseCoreMetadata(*text);
  }

  // sys.path order: user site, then /usr/local, then the distribution's directories.
  void ScanPythonSystem() {
    for (const std::string& d : PythonDirs("/home/sandbox/.local/lib")) {
      ScanSite(d + "/site-packages", &m_.python_packages, &python_lines_);
    }
    for (const std::string& d : PythonDirs("/usr/local/lib")) {
      ScanSite(d + "/site-packages", &m_.python_packages, &python_lines_);
      ScanSite(d + "/dist-packages", &m_.python_packages, &python_lines_);
    }
    for (const std::string& d : PythonDirs("/usr/lib")) {
      ScanSite(d + "/site-packages", &m_.python_packages, &python_lines_);
    }
    ScanSite("/usr/lib/python3/dist-packages", &m_.python_packages, &python_lines_);
  }

  void ScanVenvs() {
    std::vector<std::string> candidates;
    auto children = [&](const std::string& parent) {
      for (const FileStat& e : List(parent)) {
        if (IsDirLike(e) && SaneAbsolutePath(parent + "/" + e.name)) {
          candidates.push_back(parent + "/" + e.name);
        }
      }
    };
    children("/opt/venvs");
    candidates.push_back("/home/sandbox/.venv");
    children("/home/sandbox/venvs");
    candidates.push_back("/workspace/.venv");
    for (const std::string& c : candidates) {
      bool is_venv = false;
      for (const FileStat& e : List(c)) {
        is_venv = is_venv || (e.name == "pyvenv.cfg" && e.type != FileStat::Type::kDir);
      }
      if (!is_venv) continue;
      std::map<std::string, std::string>& pkgs = m_.venvs[c];
      for (const std::string& d : PythonDirs(c + "/lib")) {
        ScanSite(d + "/site-packages", &pkgs, nullptr);
      }
    }
  }

  void NodePackage(const std::string& location, const std::string& name) {
    if (!SaneNodeName(name)) return;
    std::optional<std::string> text =
        Read(location + "/" + name + "/package.json", limits_.max_package_json_bytes);
    if (!text) return;
    std::optional<std::string> version = PackageJsonVersion(*text);
    if (!version || !SaneVersion(*version)) return;
    if (name == "playwright" || name == "playwright-core" || name == "@playwright/test" ||
        name == "puppeteer" || name == "puppeteer-core") {
      browser_package = true;
    }
    node_lines_.insert(name + "@" + *version);
    m_.node_packages.emplace(name, std::move(*version));
  }

  // Top level and @scope/ of each node_modules, nearest to /workspace first (require()
  // resolution from the workspace), globals last.
  void ScanNode() {
    for (const char* location :
         {"/workspace/node_modules", "/home/sandbox/node_modules",
          "/home/sandbox/.npm-global/lib/node_modules", "/usr/local/lib/node_modules",
          "/usr/lib/node_modules", "/usr/share/nodejs"}) {
      const std::string loc = location;
      for (const FileStat& e : List(loc)) {
        // .bin, .package-lock.json, .cache: npm's own, never packages.
        if (e.name.starts_with(".") || !IsDirLike(e)) continue;
        if (!e.name.starts_with("@")) {
          NodePackage(loc, e.name);
          continue;
        }
        if (!SaneNodeComponent(e.name.substr(1))) continue;
        for (const FileStat& s : List(loc + "/" + e.name)) {
          if (!s.name.starts_with(".") && IsDirLike(s)) NodePackage(loc, e.name + "/" + s.name);
        }
      }
    }
  }

  void ScanDpkg() {
    const std::string path = "/var/lib/dpkg/status";
    Result<std::string> r = view_.ReadFile(path, limits_.max_dpkg_status_bytes);
    if (!r.ok() || r->size() > limits_.max_dpkg_status_bytes) {
      // Present but unhashable: the image's packages are unknown.
      if (!r.ok() && IsMissing(r.status())) return;
      m_.truncated = true;
      return;
    }
    m_.dpkg_status_hash = "sha256:" + Sha256Hex(*r);
    browser_dpkg = DpkgHasBrowser(*r);
  }

  // Whether an installed dpkg stanza names a chromium / chrome package.
  static bool DpkgHasBrowser(std::string_view text) {
    std::string_view package;
    bool installed = false;
    auto stanza_has_browser = [&] {
      return installed &&
             (package == "chromium" || package == "chromium-browser" ||
              package == "chromium-headless-shell" || package == "google-chrome-stable");
    };
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t eol = text.find('\n', pos);
      std::string_view line = text.substr(pos, eol == std::string_view::npos ? eol : eol - pos);
      pos = eol == std::string_view::npos ? text.size() + 1 : eol + 1;
      if (line.empty()) {
        if (stanza_has_browser()) return true;
        package = {};
        installed = false;
      } else if (line.starts_with("Package: ")) {
        package = line.substr(9);
      } else if (line.starts_with("Status: ")) {
        installed = line.ends_with(" installed");
      }
    }
    return stanza_has_browser();
  }

  FileView& view_;
  const ScanLimits& limits_;
  EnvironmentManifest& m_;
  uint64_t entries_used_ = 0;
  uint64_t read_used_ = 0;
  std::set<std::string> python_lines_;
  std::set<std::string> node_lines_;
};

Status CheckContextString(const std::string& s, const std::string& field) {
  if (s.size() > kMaxContextStringBytes) {
    return InvalidArgument(field + ": longer than " + std::to_string(kMaxContextStringBytes) +
                           " bytes");
  }
  return Status::Ok();
}

// --- strict JSON reading --------------------------------------------------------------------

// Field paths in errors, with hostile keys bounded and made printable.
std::string Child(const std::string& path, std::string_view key) {
  std::string k = ValidUtf8(key.substr(0, 100));
  for (char& c : k) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return path.empty() ? k : path + "." + k;
}

Status Bad(const std::string& path, const std::string& what) {
  return InvalidArgument(path + ": " + what);
}

Status ReadString(const json& j, const std::string& path, size_t max, std::string* out) {
  if (!j.is_string()) return Bad(path, "must be a string");
  const std::string& s = j.get_ref<const std::string&>();
  if (s.size() > max) return Bad(path, "longer than " + std::to_string(max) + " bytes");
  *out = s;
  return Status::Ok();
}

Status ReadStringList(const json& j, const std::string& path, std::vector<std::string>* out) {
  if (!j.is_array()) return Bad(path, "must be a list of strings");
  if (j.size() > kMaxJsonItems) {
    return Bad(path, "more than " + std::to_string(kMaxJsonItems) + " items");
  }
  out->clear();
  for (size_t i = 0; i < j.size(); ++i) {
    std::string s;
    PADDOCK_RETURN_IF_ERROR(
        ReadString(j[i], path + "[" + std::to_string(i) + "]", kMaxJsonStringBytes, &s));
    out->push_back(std::move(s));
  }
  return Status::Ok();
}

enum class KeyKind { kAny, kPython, kNode };

Status ReadStringMap(const json& j, const std::string& path, KeyKind kind,
                     std::map<std::string, std::string>* out) {
  if (!j.is_object()) return Bad(path, "must be an object of strings");
  if (j.size() > kMaxJsonItems) {
    return Bad(path, "more than " + std::to_string(kMaxJsonItems) + " entries");
  }
  out->clear();
  for (const auto& [key, value] : j.items()) {
    const std::string where = Child(path, key);
    switch (kind) {
      case KeyKind::kAny:
        if (key.size() > kMaxJsonStringBytes) return Bad(where, "name is too long");
        break;
      case KeyKind::kPython:
        if (!SanePythonName(key) || NormalizePythonName(key) != key) {
          return Bad(where, "not a normalised python package name");
        }
        break;
      case KeyKind::kNode:
        if (!SaneNodeName(key)) return Bad(where, "not a valid node package name");
        break;
    }
    std::string v;
    PADDOCK_RETURN_IF_ERROR(ReadString(value, where, kMaxJsonStringBytes, &v));
    if (kind != KeyKind::kAny && !SaneVersion(v)) return Bad(where, "not a valid version");
    out->emplace(key, std::move(v));
  }
  return Status::Ok();
}

Status ReadHash(const json& j, const std::string& path, std::string* out) {
  PADDOCK_RETURN_IF_ERROR(ReadString(j, path, 71, out));
  if (!SaneHash(*out)) return Bad(path, "must be \"\" or \"sha256:\" and 64 hex digits");
  return Status::Ok();
}

}  // namespace

// --- HostDirView ----------------------------------------------------------------------------

namespace {

int OpenInRoot(int root, const std::string& rel, uint64_t flags) {
  struct open_how how {};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    long fd = syscall(SYS_openat2, root, rel.c_str(), &how, sizeof(how));
    if (fd >= 0) return static_cast<int>(fd);
    if (errno == EINTR) continue;
    // RESOLVE_IN_ROOT may refuse a ".." raced by a rename; retrying is the documented answer.
    if (errno == EAGAIN && attempt < kOpenAt2Retries) continue;
    return -1;
  }
}

// The path relative to the root ("." for the root itself); the kernel does the resolving.
Result<std::string> RelativePath(const std::string& path) {
  if (path.find('\0') != std::string::npos || path.size() > kMaxPathBytes) {
    return InvalidArgument("bad path");
  }
  size_t start = path.find_first_not_of('/');
  return start == std::string::npos ? std::string(".") : path.substr(start);
}

FileStat ToFileStat(std::string name, const struct stat& st) {
  FileStat fs;
  fs.name = std::move(name);
  if (S_ISREG(st.st_mode)) {
    fs.type = FileStat::Type::kFile;
  } else if (S_ISDIR(st.st_mode)) {
    fs.type = FileStat::Type::kDir;
  } else if (S_ISLNK(st.st_mode)) {
    fs.type = FileStat::Type::kSymlink;
  } else {
    fs.type = FileStat::Type::kOther;
  }
  fs.size = static_cast<uint64_t>(st.st_size);
  fs.mode = st.st_mode & 07777;
  fs.uid = st.st_uid;
  fs.gid = st.st_gid;
  fs.mtime_unix = st.st_mtim.tv_sec;
  return fs;
}

struct DirCloser {
  void operator()(DIR* d) const { closedir(d); }
};

}  // namespace

HostDirView::HostDirView(std::string root) : root_path_(std::move(root)) {
  int fd = ::open(root_path_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    open_errno_ = errno;
  } else {
    root_.reset(fd);
  }
}

Result<std::vector<FileStat>> HostDirView::ListDir(const std::string& path) {
  if (!root_) return ErrnoStatus("open " + root_path_, open_errno_);
  PADDOCK_ASSIGN_OR_RETURN(std::string rel, RelativePath(path));
  int fd = OpenInRoot(root_.get(), rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("list " + path);
  std::unique_ptr<DIR, DirCloser> dir(fdopendir(fd));
  if (!dir) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("list " + path, err);
  }
  std::vector<FileStat> out;
  for (;;) {
    errno = 0;
    struct dirent* d = readdir(dir.get());
    if (!d) {
      if (errno != 0) return ErrnoStatus("list " + path);
      break;
    }
    std::string name = d->d_name;
    if (name == "." || name == "..") continue;
    if (out.size() >= kMaxListEntries) {
      return ResourceExhausted("list " + path + ": more than " + std::to_string(kMaxListEntries) +
                               " entries");
    }
    struct stat st {};
    if (fstatat(dirfd(dir.get()), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed since readdir
      return ErrnoStatus("stat " + path + "/" + name);
    }
    FileStat fs = ToFileStat(name, st);
    if (S_ISLNK(st.st_mode)) {
      std::string target(kMaxPathBytes + 1, '\0');
      ssize_t n = readlinkat(dirfd(dir.get()), name.c_str(), target.data(), target.size());
      if (n >= 0) {
        target.resize(static_cast<size_t>(n));
        fs.link_target = std::move(target);
      }
    }
    out.push_back(std::move(fs));
  }
  std::sort(out.begin(), out.end(),
            [](const FileStat& a, const FileStat& b) { return a.name < b.name; });
  return out;
}

Result<std::string> HostDirView::ReadFile(const std::string& path, uint64_t max_bytes) {
  if (!root_) return ErrnoStatus("open " + root_path_, open_errno_);
  PADDOCK_ASSIGN_OR_RETURN(std::string rel, RelativePath(path));
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  int raw = OpenInRoot(root_.get(), rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (raw < 0) return ErrnoStatus("open " + path);
  UniqueFd fd(raw);
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISREG(st.st_mode)) return InvalidArgument("read " + path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return ResourceExhausted("read " + path + ": larger than " + std::to_string(max_bytes) +
                             " bytes");
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[64 * 1024];
  for (;;) {
    // One byte beyond the cap at most: a file growing while we read is caught without
    // reading an unbounded amount.
    const uint64_t room = max_bytes - out.size();
    const size_t want = room >= sizeof(buf) ? sizeof(buf) : static_cast<size_t>(room) + 1;
    ssize_t n = ::read(fd.get(), buf, want);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoStatus("read " + path);
    }
    if (n == 0) break;
    if (static_cast<uint64_t>(n) > room) {
      return ResourceExhausted("read " + path + ": grew beyond " + std::to_string(max_bytes) +
                               " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// --- public functions -----------------------------------------------------------------------

std::string NormalizePythonName(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  bool in_run = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_run) out.push_back('-');
      in_run = true;
      continue;
    }
    in_run = false;
    out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return out;
}

std::string ManifestFingerprint(const EnvironmentManifest& m) {
  json j = {{"base_digest", m.base_digest},         {"runtimes", m.runtimes},
            {"python_packages", m.python_packages}, {"venvs", m.venvs},
            {"node_packages", m.node_packages},     {"python_lock_hash", m.python_lock_hash},
            {"node_lock_hash", m.node_lock_hash},   {"dpkg_status_hash", m.dpkg_status_hash},
            {"capabilities", m.capabilities},       {"truncated", m.truncated}};
  // Keys are sorted (std::map), so the text, and the fingerprint, do not depend on scan order.
  return "env-" + Sha256Hex(j.dump(-1, ' ', false, json::error_handler_t::replace)).substr(0, 12);
}

Result<EnvironmentManifest> ComputeManifest(FileView& view, const ManifestContext& ctx,
                                            const ScanLimits& limits) {
  try {
    EnvironmentManifest m;
    PADDOCK_RETURN_IF_ERROR(CheckContextString(ctx.base_digest, "base_digest"));
    PADDOCK_RETURN_IF_ERROR(CheckContextString(ctx.workspace_id, "workspace_id"));
    m.base_digest = ValidUtf8(ctx.base_digest);
    m.workspace_id = ValidUtf8(ctx.workspace_id);
    for (const auto& [name, version] : ctx.runtimes) {
      PADDOCK_RETURN_IF_ERROR(CheckContextString(name, "runtimes"));
      PADDOCK_RETURN_IF_ERROR(CheckContextString(version, "runtimes." + ValidUtf8(name)));
      m.runtimes[ValidUtf8(name)] = ValidUtf8(version);
    }
    std::set<std::string> caps;
    for (const std::string& c : ctx.template_capabilities) {
      PADDOCK_RETURN_IF_ERROR(CheckContextString(c, "template_capabilities"));
      caps.insert(ValidUtf8(c));
    }
    std::set<std::string> dirty;
    for (const std::string& p : ctx.dirty_paths) {
      PADDOCK_RETURN_IF_ERROR(CheckContextString(p, "dirty_paths"));
      dirty.insert(ValidUtf8(p));
    }
    m.dirty_paths.assign(dirty.begin(), dirty.end());
    if (m.dirty_paths.size() > limits.max_dirty_paths) {
      m.dirty_paths.resize(limits.max_dirty_paths);
      m.truncated = true;
    }

    Scanner scanner(view, limits, m);
    scanner.Run();
    if (scanner.browser_package || scanner.browser_dpkg) caps.insert("browser");
    m.capabilities.assign(caps.begin(), caps.end());
    m.fingerprint = ManifestFingerprint(m);
    return m;
  } catch (const std::exception& e) {
    // Allocation failure or a library throwing on hostile input: a failed scan, not a crash.
    return Internal(std::string("environment manifest: ") + e.what());
  }
}

json ManifestToJson(const EnvironmentManifest& m) {
  return json{{"base_digest", m.base_digest},
              {"runtimes", m.runtimes},
              {"python_packages", m.python_packages},
              {"venvs", m.venvs},
              {"node_packages", m.node_packages},
              {"python_lock_hash", m.python_lock_hash},
              {"node_lock_hash", m.node_lock_hash},
              {"dpkg_status_hash", m.dpkg_status_hash},
              {"workspace_id", m.workspace_id},
              {"dirty_paths", m.dirty_paths},
              {"capabilities", m.capabilities},
              {"fingerprint", m.fingerprint},
              {"truncated", m.truncated}};
}

Result<EnvironmentManifest> ManifestFromJson(const json& j) {
  try {
    if (!j.is_object()) return InvalidArgument("manifest: must be an object");
    static const char* const kFields[] = {
        "base_digest",      "runtimes",       "python_packages",  "venvs",        "node_packages",
        "python_lock_hash", "node_lock_hash", "dpkg_status_hash", "workspace_id", "dirty_paths",
        "capabilities",     "fingerprint",    "truncated"};
    for (const auto& [key, value] : j.items()) {
      bool known = false;
      for (const char* f : kFields) known = known || key == f;
      if (!known) return Bad(Child("", key), "unknown field");
    }
    for (const char* f : kFields) {
      if (!j.contains(f)) return Bad(f, "missing");
    }
    EnvironmentManifest m;
    PADDOCK_RETURN_IF_ERROR(
        ReadString(j.at("base_digest"), "base_digest", kMaxJsonStringBytes, &m.base_digest));
    PADDOCK_RETURN_IF_ERROR(
        ReadStringMap(j.at("runtimes"), "runtimes", KeyKind::kAny, &m.runtimes));
    PADDOCK_RETURN_IF_ERROR(ReadStringMap(j.at("python_packages"), "python_packages",
                                          KeyKind::kPython, &m.python_packages));
    const json& venvs = j.at("venvs");
    if (!venvs.is_object()) return Bad("venvs", "must be an object");
    if (venvs.size() > kMaxJsonItems) return Bad("venvs", "too many entries");
    for (const auto& [dir, pkgs] : venvs.items()) {
      const std::string where = Child("venvs", dir);
      if (!SaneAbsolutePath(dir)) return Bad(where, "not a valid absolute directory");
      PADDOCK_RETURN_IF_ERROR(ReadStringMap(pkgs, where, KeyKind::kPython, &m.venvs[dir]));
    }
    PADDOCK_RETURN_IF_ERROR(
        ReadStringMap(j.at("node_packages"), "node_packages", KeyKind::kNode, &m.node_packages));
    PADDOCK_RETURN_IF_ERROR(
        ReadHash(j.at("python_lock_hash"), "python_lock_hash", &m.python_lock_hash));
    PADDOCK_RETURN_IF_ERROR(ReadHash(j.at("node_lock_hash"), "node_lock_hash", &m.node_lock_hash));
    PADDOCK_RETURN_IF_ERROR(
        ReadHash(j.at("dpkg_status_hash"), "dpkg_status_hash", &m.dpkg_status_hash));
    PADDOCK_RETURN_IF_ERROR(
        ReadString(j.at("workspace_id"), "workspace_id", kMaxJsonStringBytes, &m.workspace_id));
    PADDOCK_RETURN_IF_ERROR(ReadStringList(j.at("dirty_paths"), "dirty_paths", &m.dirty_paths));
    PADDOCK_RETURN_IF_ERROR(ReadStringList(j.at("capabilities"), "capabilities", &m.capabilities));
    PADDOCK_RETURN_IF_ERROR(ReadString(j.at("fingerprint"), "fingerprint", 16, &m.fingerprint));
    if (!m.fingerprint.starts_with("env-") || !IsHex(m.fingerprint.substr(4), 12)) {
      return Bad("fingerprint", "must be \"env-\" and 12 hex digits");
    }
    const json& truncated = j.at("truncated");
    if (!truncated.is_boolean()) return Bad("truncated", "must be true or false");
    m.truncated = truncated.get<bool>();
    return m;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("manifest: ") + e.what());
  }
}

}  // namespace paddock::sessions
