#include "sessions/environment_manifest.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace paddock::sessions {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A fake sandbox root under /tmp, removed with everything in it (remove_all never follows
// symlinks, so links pointing outside are removed, not their targets).
class TempTree {
 public:
  TempTree() {
    std::string tmpl = "/tmp/paddock-manifest-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    root_ = tmpl;
  }
  ~TempTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  const std::string& root() const { return root_; }
  std::string Host(const std::string& path) const { return root_ + path; }

  void Dir(const std::string& path) const { fs::create_directories(Host(path)); }
  void File(const std::string& path, const std::string& content) const {
    fs::create_directories(fs::path(Host(path)).parent_path());
    std::ofstream(Host(path), std::ios::binary) << content;
  }
  void Symlink(const std::string& path, const std::string& target) const {
    fs::create_directories(fs::path(Host(path)).parent_path());
    fs::create_symlink(target, Host(path));
  }
  // node_modules/<name>/package.json with a version.
  void NodePkg(const std::string& modules, const std::string& name,
               const std::string& version) const {
    File(modules + "/" + name + "/package.json",
         json{{"name", name}, {"version", version}, {"main", "index.js"}}.dump());
  }

 private:
  std::string root_;
};

ManifestContext Context() {
  ManifestContext ctx;
  ctx.base_digest = "sha256:" + std::string(64, 'a');
  ctx.runtimes = {{"python3", "3.11"}, {"node", "18"}};
  ctx.template_capabilities = {"python", "node", "gcc"};
  ctx.workspace_id = "ws-1";
  ctx.dirty_paths = {"/workspace/a.py"};
  return ctx;
}

EnvironmentManifest Compute(const TempTree& t, const ManifestContext& ctx = Context(),
                            const ScanLimits& limits = {}) {
  HostDirView view(t.root());
  Result<EnvironmentManifest> m = ComputeManifest(view, ctx, limits);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : EnvironmentManifest{};
}

// A small Debian-like image: system, /usr/local and user-site python packages.
void DebianPython(const TempTree& t) {
  const std::string dist = "/usr/lib/python3/dist-packages";
  t.Dir(dist + "/PyYAML-6.0-py3.11.egg-info");
  t.File(dist + "/python_apt-2.6.0.egg-info", "Metadata-Version: 1.1\nName: python-apt\n");
  t.Dir(dist + "/distro_info-1.5+deb12u1.egg-info");
  t.Dir(dist + "/numpy-1.24.2.dist-info");
  t.Dir(dist + "/numpy");  // the package itself: not metadata
  t.Dir(dist + "/zope.interface-5.5.2-py3.11-linux-x86_64.egg-info");
  t.File(dist + "/unparsed.dist-info/METADATA",
         "Metadata-Version: 2.1\nName: Ruamel.YAML_clib\nVersion: 0.2.7\n\nName: not-this\n");
  t.Dir("/usr/local/lib/python3.11/site-packages/requests-2.31.0.dist-info");
  t.Dir("/usr/local/lib/python3.11/dist-packages/Flask_SQLAlchemy-3.1.1.dist-info");
  t.Dir("/home/sandbox/.local/lib/python3.11/site-packages/numpy-2.0.0.dist-info");
}

TEST(EnvironmentManifestTest, DebianStylePythonPackages) {
  TempTree t;
  DebianPython(t);
  EnvironmentManifest m = Compute(t);
  EXPECT_FALSE(m.truncated);
  EXPECT_EQ(m.python_packages.at("pyyaml"), "6.0");
  EXPECT_EQ(m.python_packages.at("python-apt"), "2.6.0");
  EXPECT_EQ(m.python_packages.at("distro-info"), "1.5+deb12u1");
  EXPECT_EQ(m.python_packages.at("zope-interface"), "5.5.2");
  EXPECT_EQ(m.python_packages.at("ruamel-yaml-clib"), "0.2.7");  // from METADATA
  EXPECT_EQ(m.python_packages.at("requests"), "2.31.0");
  EXPECT_EQ(m.python_packages.at("flask-sqlalchemy"), "3.1.1");
  // The user site shadows the system one, as on sys.path.
  EXPECT_EQ(m.python_packages.at("numpy"), "2.0.0");
  EXPECT_EQ(m.python_packages.size(), 8u);
  EXPECT_TRUE(m.python_lock_hash.starts_with("sha256:"));
  EXPECT_EQ(m.python_lock_hash.size(), 7u + 64u);
  EXPECT_EQ(m.node_lock_hash, "");
  EXPECT_EQ(m.dpkg_status_hash, "");
  EXPECT_EQ(m.base_digest, Context().base_digest);
  EXPECT_EQ(m.runtimes, Context().runtimes);
  EXPECT_EQ(m.workspace_id, "ws-1");
  EXPECT_EQ(m.capabilities, (std::vector<std::string>{"gcc", "node", "python"}));
  EXPECT_TRUE(m.fingerprint.starts_with("env-"));
  EXPECT_EQ(m.fingerprint.size(), 4u + 12u);
}

TEST(EnvironmentManifestTest, ShadowedVersionStillChangesTheLockHash) {
  TempTree a, b;
  DebianPython(a);
  DebianPython(b);
  fs::rename(b.Host("/usr/lib/python3/dist-packages/numpy-1.24.2.dist-info"),
             b.Host("/usr/lib/python3/dist-packages/numpy-1.26.0.dist-info"));
  EnvironmentManifest ma = Compute(a), mb = Compute(b);
  EXPECT_EQ(ma.python_packages, mb.python_packages);  // user-site numpy wins in both
  EXPECT_NE(ma.python_lock_hash, mb.python_lock_hash);
  EXPECT_NE(ma.fingerprint, mb.fingerprint);
}

TEST(EnvironmentManifestTest, VenvsNeedPyvenvCfg) {
  TempTree t;
  t.File("/opt/venvs/ml/pyvenv.cfg", "home = /usr/bin\n");
  t.Dir("/opt/venvs/ml/lib/python3.11/site-packages/torch-2.3.0.dist-info");
  t.Dir("/opt/venvs/ml/lib/python3.11/site-packages/Pillow-10.0.0.dist-info");
  t.Dir("/opt/venvs/notavenv/lib/python3.11/site-packages/six-1.16.0.dist-info");
  t.File("/home/sandbox/.venv/pyvenv.cfg", "");
  t.Dir("/home/sandbox/venvs/tools/lib");
  t.File("/home/sandbox/venvs/tools/pyvenv.cfg", "");
  t.File("/workspace/.venv/pyvenv.cfg", "");
  t.Dir("/workspace/.venv/lib/python3.12/site-packages/black-24.1.0.dist-info");
  EnvironmentManifest m = Compute(t);
  EXPECT_FALSE(m.truncated);
  ASSERT_EQ(m.venvs.size(), 4u);
  EXPECT_EQ(m.venvs.at("/opt/venvs/ml"),
            (std::map<std::string, std::string>{{"torch", "2.3.0"}, {"pillow", "10.0.0"}}));
  EXPECT_TRUE(m.venvs.at("/home/sandbox/.venv").empty());
  EXPECT_TRUE(m.venvs.at("/home/sandbox/venvs/tools").empty());
  EXPECT_EQ(m.venvs.at("/workspace/.venv").at("black"), "24.1.0");
  EXPECT_EQ(m.venvs.count("/opt/venvs/notavenv"), 0u);
  EXPECT_TRUE(m.python_packages.empty());  // venv packages are not system packages
  EXPECT_EQ(m.python_lock_hash, "");
}

TEST(EnvironmentManifestTest, NodePackagesTopLevelAndScoped) {
  TempTree t;
  t.NodePkg("/usr/local/lib/node_modules", "typescript", "5.3.3");
  t.NodePkg("/usr/local/lib/node_modules", "@angular/cli", "17.0.0");
  t.NodePkg("/usr/local/lib/node_modules", "npm", "10.2.4");
  t.File("/usr/local/lib/node_modules/.package-lock.json", "{}");
  t.Dir("/usr/local/lib/node_modules/.bin");
  t.NodePkg("/usr/lib/node_modules", "corepack", "0.23.0");
  t.NodePkg("/usr/share/nodejs", "semver", "7.5.4");
  t.Dir("/usr/share/nodejs/no-package-json");
  t.NodePkg("/home/sandbox/node_modules", "lodash", "4.17.21");
  t.NodePkg("/home/sandbox/.npm-global/lib/node_modules", "pnpm", "8.15.0");
  t.NodePkg("/workspace/node_modules", "typescript", "5.4.0");  // shadows the global one
  t.NodePkg("/workspace/node_modules", "@types/node", "20.11.0");
  EnvironmentManifest m = Compute(t);
  EXPECT_FALSE(m.truncated);
  EXPECT_EQ(m.node_packages, (std::map<std::string, std::string>{{"typescript", "5.4.0"},
                                                                 {"@angular/cli", "17.0.0"},
                                                                 {"npm", "10.2.4"},
                                                                 {"corepack", "0.23.0"},
                                                                 {"semver", "7.5.4"},
                                                                 {"lodash", "4.17.21"},
                                                                 {"pnpm", "8.15.0"},
                                                                 {"@types/node", "20.11.0"}}));
  EXPECT_TRUE(m.node_lock_hash.starts_with("sha256:"));
}

TEST(EnvironmentManifestTest, DpkgStatusHashedAndChromiumIsABrowser) {
  TempTree t;
  const std::string status =
      "Package: bash\nStatus: install ok installed\nVersion: 5.2\n\n"
      "Package: chromium\nStatus: install ok installed\nVersion: 120.0\n";
  t.File("/var/lib/dpkg/status", status);
  EnvironmentManifest m = Compute(t);
  EXPECT_TRUE(m.dpkg_status_hash.starts_with("sha256:"));
  EXPECT_EQ(m.capabilities, (std::vector<std::string>{"browser", "gcc", "node", "python"}));

  // Removed (config files left): not a browser any more, and the hash moves.
  t.File("/var/lib/dpkg/status",
         "Package: bash\nStatus: install ok installed\n\n"
         "Package: chromium\nStatus: deinstall ok config-files\n");
  EnvironmentManifest removed = Compute(t);
  EXPECT_NE(removed.dpkg_status_hash, m.dpkg_status_hash);
  EXPECT_EQ(removed.capabilities, (std::vector<std::string>{"gcc", "node", "python"}));
}

TEST(EnvironmentManifestTest, BrowserFromPlaywrightOrPuppeteer) {
  {
    TempTree t;
    t.Dir("/home/sandbox/.local/lib/python3.11/site-packages/playwright-1.41.0.dist-info");
    EXPECT_EQ(Compute(t).capabilities.front(), "browser");
  }
  {
    TempTree t;
    t.NodePkg("/workspace/node_modules", "puppeteer", "21.0.0");
    EXPECT_EQ(Compute(t).capabilities.front(), "browser");
  }
  {
    TempTree t;
    t.NodePkg("/workspace/node_modules", "@playwright/test", "1.41.0");
    EXPECT_EQ(Compute(t).capabilities.front(), "browser");
  }
  {
    TempTree t;
    t.NodePkg("/workspace/node_modules", "left-pad", "1.3.0");
    EXPECT_EQ(Compute(t).capabilities.front(), "gcc");
  }
}

TEST(EnvironmentManifestTest, HashesStableAndOrderIndependent) {
  // The same packages created in opposite orders (so directory order differs on disk), and
  // the context's capabilities listed in another order with a duplicate.
  TempTree a, b;
  const std::vector<std::pair<std::string, std::string>> pkgs = {
      {"alpha", "1.0"}, {"beta", "2.0"}, {"gamma", "3.0"}, {"delta", "4.0"}};
  for (const auto& [n, v] : pkgs) {
    a.Dir("/usr/lib/python3/dist-packages/" + n + "-" + v + ".dist-info");
    a.NodePkg("/usr/lib/node_modules", n, v);
  }
  for (auto it = pkgs.rbegin(); it != pkgs.rend(); ++it) {
    b.Dir("/usr/lib/python3/dist-packages/" + it->first + "-" + it->second + ".dist-info");
    b.NodePkg("/usr/lib/node_modules", it->first, it->second);
  }
  ManifestContext other = Context();
  other.template_capabilities = {"python", "gcc", "node", "gcc"};
  other.dirty_paths = {"/workspace/z", "/workspace/a.py", "/workspace/z"};
  EnvironmentManifest ma = Compute(a), mb = Compute(b, other);
  EXPECT_EQ(ma.python_lock_hash, mb.python_lock_hash);
  EXPECT_EQ(ma.node_lock_hash, mb.node_lock_hash);
  EXPECT_EQ(ma.capabilities, mb.capabilities);
  EXPECT_EQ(ma.fingerprint, mb.fingerprint);
  EXPECT_EQ(mb.dirty_paths, (std::vector<std::string>{"/workspace/a.py", "/workspace/z"}));
  // Recomputing gives the identical manifest.
  EXPECT_EQ(Compute(a), ma);
  EXPECT_EQ(ManifestFingerprint(ma), ma.fingerprint);
}

TEST(EnvironmentManifestTest, FingerprintFollowsPackagesNotDirtyPathsOrWorkspace) {
  TempTree t;
  DebianPython(t);
  t.NodePkg("/workspace/node_modules", "lodash", "4.17.21");
  EnvironmentManifest base = Compute(t);

  ManifestContext ctx = Context();
  ctx.dirty_paths = {"/workspace/other.py", "/home/sandbox/.bashrc"};
  ctx.workspace_id = "ws-2";
  EnvironmentManifest dirty = Compute(t, ctx);
  EXPECT_NE(dirty.dirty_paths, base.dirty_paths);
  EXPECT_EQ(dirty.fingerprint, base.fingerprint);

  t.NodePkg("/workspace/node_modules", "lodash", "4.17.20");
  EnvironmentManifest node_changed = Compute(t);
  EXPECT_NE(node_changed.fingerprint, base.fingerprint);
  EXPECT_NE(node_changed.node_lock_hash, base.node_lock_hash);

  fs::rename(t.Host("/usr/local/lib/python3.11/site-packages/requests-2.31.0.dist-info"),
             t.Host("/usr/local/lib/python3.11/site-packages/requests-2.32.0.dist-info"));
  EnvironmentManifest py_changed = Compute(t);
  EXPECT_EQ(py_changed.python_packages.at("requests"), "2.32.0");
  EXPECT_NE(py_changed.fingerprint, node_changed.fingerprint);

  ManifestContext rebased = Context();
  rebased.base_digest = "sha256:" + std::string(64, 'b');
  EXPECT_NE(Compute(t, rebased).fingerprint, py_changed.fingerprint);
}

// --- hostile sandboxes ----------------------------------------------------------------------

TEST(EnvironmentManifestHostileTest, HugePackageJsonIsSkipped) {
  TempTree t;
  std::string huge = "{\"version\":\"1.0.0\",\"x\":\"" + std::string(10u << 20, 'x') + "\"}";
  t.File("/workspace/node_modules/huge/package.json", huge);
  t.NodePkg("/workspace/node_modules", "small", "1.0.0");
  EnvironmentManifest m = Compute(t);
  EXPECT_EQ(m.node_packages, (std::map<std::string, std::string>{{"small", "1.0.0"}}));
  EXPECT_FALSE(m.truncated);  // a per-file cap, not the scan budget
}

TEST(EnvironmentManifestHostileTest, BadPackageJsonIsSkipped) {
  TempTree t;
  const std::string nm = "/workspace/node_modules";
  t.File(nm + "/broken/package.json", "{\"version\": \"1.0.0\",");
  t.File(nm + "/array/package.json", "[\"version\", \"1.0.0\"]");
  t.File(nm + "/number/package.json", "{\"version\": 1}");
  t.File(nm + "/newline/package.json", "{\"version\": \"1.0\\n2.0\"}");
  t.File(nm + "/spaces/package.json", "{\"version\": \"1.0 beta\"}");
  t.File(nm + "/longversion/package.json", json{{"version", std::string(500, '1')}}.dump());
  t.File(nm + "/deep/package.json", std::string(100000, '[') + std::string(100000, ']'));
  t.File(nm + "/trailing/package.json", "{\"version\": \"1.0.0\"} garbage");
  t.File(nm + "/badutf8/package.json", "{\"version\": \"1.0\xff\"}");
  t.File(nm + "/nested/package.json", "{\"a\": {\"version\": \"9.9.9\"}}");
  t.NodePkg(nm, std::string("new\nline"), "1.0.0");
  t.NodePkg(nm, std::string(250, 'n'), "1.0.0");
  t.NodePkg(nm, "@scope/" + std::string(220, 's'), "1.0.0");
  t.File(nm + "/notadir", "{\"version\": \"1.0.0\"}");
  t.File(nm + "/fifo/.keep", "");
  ASSERT_EQ(mkfifo(t.Host(nm + "/fifo/package.json").c_str(), 0644), 0);
  t.File(nm + "/dup/package.json", "{\"version\": \"1.0.0\", \"nested\": [1, {\"version\": 2}]}");
  EnvironmentManifest m = Compute(t);
  // Only the well-formed one survives; the FIFO neither blocks nor counts.
  EXPECT_EQ(m.node_packages, (std::map<std::string, std::string>{{"dup", "1.0.0"}}));
  EXPECT_FALSE(m.truncated);
}

TEST(EnvironmentManifestHostileTest, WeirdPythonNamesAreSkipped) {
  TempTree t;
  const std::string site = "/usr/lib/python3/dist-packages";
  t.Dir(site + "/ok-1.0.dist-info");
  t.Dir(site + "/bad\nname-1.0.dist-info");
  t.Dir(site + "/" + std::string(230, 'a') + "-1.0.dist-info");
  t.Dir(site + "/nover-.dist-info");
  t.Dir(site + "/-1.0.dist-info");
  t.Dir(site + "/ver-1.0\x01.dist-info");
  t.File(site + "/meta.dist-info/METADATA", "Name: ok\xff\nVersion: 1\n");
  t.File(site + "/meta2.dist-info/METADATA", std::string(300u << 10, 'x'));  // over the cap
  EnvironmentManifest m = Compute(t);
  EXPECT_EQ(m.python_packages, (std::map<std::string, std::string>{{"ok", "1.0"}}));
  EXPECT_FALSE(m.truncated);
}

TEST(EnvironmentManifestHostileTest, SymlinksOutOfTheRootAreNotFollowed) {
  TempTree outside;
  outside.NodePkg("/node_modules", "secret", "6.6.6");
  outside.File("/venv/pyvenv.cfg", "");
  outside.Dir("/venv/lib/python3.11/site-packages/secret-6.6.6.dist-info");
  outside.Dir("/site/secret-6.6.6.dist-info");
  outside.File("/status", "Package: chromium\nStatus: install ok installed\n");

  TempTree t;
  // Absolute host paths and ../ climbs: both resolve inside the root, where nothing is.
  t.Symlink("/workspace/node_modules/secret", outside.Host("/node_modules/secret"));
  t.Symlink("/usr/lib/node_modules", "../../../../../../../../.." + outside.Host("/node_modules"));
  t.Symlink("/home/sandbox/.venv", outside.Host("/venv"));
  t.Symlink("/usr/lib/python3/dist-packages", outside.Host("/site"));
  t.Symlink("/var/lib/dpkg/status", "../../../../../../.." + outside.Host("/status"));
  // Loops, in both places we list and places we read.
  t.Symlink("/workspace/node_modules/loop", "loop");
  t.Symlink("/opt/venvs/a", "/opt/venvs/b");
  t.Symlink("/opt/venvs/b", "/opt/venvs/a");
  // A symlink that stays inside the root is followed like `cat` would.
  t.NodePkg("/usr/share/nodejs", "inside", "1.0.0");
  t.Symlink("/usr/local/lib/node_modules/inside", "/usr/share/nodejs/inside");

  EnvironmentManifest m = Compute(t);
  EXPECT_EQ(m.node_packages, (std::map<std::string, std::string>{{"inside", "1.0.0"}}));
  EXPECT_TRUE(m.venvs.empty());
  EXPECT_TRUE(m.python_packages.empty());
  EXPECT_EQ(m.dpkg_status_hash, "");
  EXPECT_EQ(m.capabilities, (std::vector<std::string>{"gcc", "node", "python"}));
  EXPECT_FALSE(m.truncated);  // a loop holds nothing: it is not a hidden part of the scan
}

TEST(EnvironmentManifestHostileTest, HugeDirectoryTruncatesTheScan) {
  TempTree t;
  const std::string site = "/usr/lib/python3/dist-packages";
  t.Dir(site);
  // Distutils-style egg-info files: creating files is much cheaper than directories.
  for (int i = 0; i < 20000; ++i) {
    std::string p = t.Host(site + "/pkg" + std::to_string(i) + "-1.0.egg-info");
    int fd = open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  EnvironmentManifest m = Compute(t);
  EXPECT_TRUE(m.truncated);
  EXPECT_LE(m.python_packages.size(), 5000u);
  EXPECT_GT(m.python_packages.size(), 0u);

  // A truncated scan never shares a fingerprint with a complete one of the same packages.
  EnvironmentManifest copy = m;
  copy.truncated = false;
  EXPECT_NE(ManifestFingerprint(copy), m.fingerprint);
}

TEST(EnvironmentManifestHostileTest, ReadBudgetTruncatesTheScan) {
  TempTree t;
  for (int i = 0; i < 20; ++i) {
    t.NodePkg("/workspace/node_modules", "p" + std::to_string(i), "1.0." + std::to_string(i));
  }
  ScanLimits limits;
  limits.max_read_bytes = 300;  // a few package.json files' worth
  EnvironmentManifest m = Compute(t, Context(), limits);
  EXPECT_TRUE(m.truncated);
  EXPECT_GT(m.node_packages.size(), 0u);
  EXPECT_LT(m.node_packages.size(), 20u);
  EXPECT_FALSE(Compute(t).truncated);
}

TEST(EnvironmentManifestHostileTest, OversizedDpkgStatusTruncates) {
  TempTree t;
  t.File("/var/lib/dpkg/status", std::string(2048, 'x'));
  ScanLimits limits;
  limits.max_dpkg_status_bytes = 1024;
  EnvironmentManifest m = Compute(t, Context(), limits);
  EXPECT_TRUE(m.truncated);
  EXPECT_EQ(m.dpkg_status_hash, "");
}

// A view that refuses one path, as the runtime does for a directory the sandbox user cannot
// read (works when the test runs as root, where chmod 000 would not stop it).
class RefusingView final : public FileView {
 public:
  RefusingView(std::string root, std::string refused)
      : inner_(std::move(root)), refused_(std::move(refused)) {}
  Result<std::vector<runtime::FileStat>> ListDir(const std::string& path) override {
    if (path == refused_) return PermissionDenied("list " + path);
    return inner_.ListDir(path);
  }
  Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) override {
    if (path == refused_) return PermissionDenied("read " + path);
    // A misbehaving adapter that returns more than asked must not be trusted either.
    if (path.ends_with("/liar/package.json")) return std::string(max_bytes + 1, ' ');
    return inner_.ReadFile(path, max_bytes);
  }

 private:
  HostDirView inner_;
  std::string refused_;
};

TEST(EnvironmentManifestHostileTest, UnreadableDirectoryTruncates) {
  TempTree t;
  t.Dir("/usr/lib/python3/dist-packages/hidden-1.0.dist-info");
  t.NodePkg("/workspace/node_modules", "fine", "1.0.0");
  t.NodePkg("/workspace/node_modules", "liar", "1.0.0");
  {
    RefusingView view(t.root(), "/usr/lib/python3/dist-packages");
    Result<EnvironmentManifest> m = ComputeManifest(view, Context());
    ASSERT_TRUE(m.ok());
    EXPECT_TRUE(m->truncated);  // unseen, not absent
    EXPECT_TRUE(m->python_packages.empty());
    EXPECT_EQ(m->node_packages, (std::map<std::string, std::string>{{"fine", "1.0.0"}}));
  }
  {
    // An unreadable package.json only loses that package.
    RefusingView view(t.root(), "/workspace/node_modules/fine/package.json");
    Result<EnvironmentManifest> m = ComputeManifest(view, Context());
    ASSERT_TRUE(m.ok());
    EXPECT_TRUE(m->node_packages.empty());
    EXPECT_EQ(m->python_packages.at("hidden"), "1.0");
  }
}

TEST(EnvironmentManifestHostileTest, DirtyPathsWithInvalidUtf8StillSerialise) {
  TempTree t;
  ManifestContext ctx = Context();
  ctx.dirty_paths = {"/workspace/\xff\xfe", "/workspace/new\nline"};
  EnvironmentManifest m = Compute(t, ctx);
  std::string text;
  EXPECT_NO_THROW(text = ManifestToJson(m).dump());
  Result<EnvironmentManifest> back = ManifestFromJson(json::parse(text));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);
}

TEST(EnvironmentManifestHostileTest, OverlongContextIsAnError) {
  TempTree t;
  HostDirView view(t.root());
  ManifestContext ctx = Context();
  ctx.dirty_paths.push_back(std::string(5000, 'p'));
  Result<EnvironmentManifest> m = ComputeManifest(view, ctx);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("dirty_paths"), std::string::npos);
}

// --- HostDirView ----------------------------------------------------------------------------

TEST(EnvironmentManifestHostDirViewTest, ListsReadsAndStaysInsideTheRoot) {
  TempTree outside;
  outside.File("/secret", "s3cret");
  TempTree t;
  t.File("/etc/file", "hello");
  t.Symlink("/etc/link", outside.Host("/secret"));
  t.Dir("/etc/sub");
  HostDirView view(t.root());

  Result<std::vector<runtime::FileStat>> list = view.ListDir("/etc");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].name, "file");
  EXPECT_EQ((*list)[0].type, runtime::FileStat::Type::kFile);
  EXPECT_EQ((*list)[0].size, 5u);
  EXPECT_EQ((*list)[1].name, "link");
  EXPECT_EQ((*list)[1].type, runtime::FileStat::Type::kSymlink);
  EXPECT_EQ((*list)[1].link_target, outside.Host("/secret"));
  EXPECT_EQ((*list)[2].type, runtime::FileStat::Type::kDir);

  EXPECT_EQ(*view.ReadFile("/etc/file", 100), "hello");
  EXPECT_EQ(*view.ReadFile("etc/file", 5), "hello");
  EXPECT_EQ(view.ReadFile("/etc/file", 4).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(view.ReadFile("/etc/link", 100).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(view.ReadFile("/../../../../../../.." + outside.Host("/secret"), 100).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(view.ReadFile("/etc/sub", 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(view.ListDir("/missing").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(view.ListDir("/etc/file").ok());

  HostDirView nowhere("/nonexistent-paddock-root");
  EXPECT_FALSE(nowhere.ListDir("/").ok());
}

// --- JSON -----------------------------------------------------------------------------------

// Built once: trees on a busy disk are slow to create.
const EnvironmentManifest& Sample() {
  static const EnvironmentManifest sample = [] {
    TempTree t;
    DebianPython(t);
    t.File("/opt/venvs/ml/pyvenv.cfg", "");
    t.Dir("/opt/venvs/ml/lib/python3.11/site-packages/torch-2.3.0.dist-info");
    t.NodePkg("/workspace/node_modules", "@types/node", "20.11.0");
    t.File("/var/lib/dpkg/status", "Package: bash\nStatus: install ok installed\n");
    return Compute(t);
  }();
  return sample;
}

TEST(EnvironmentManifestJsonTest, RoundTrip) {
  const EnvironmentManifest& m = Sample();
  json j = ManifestToJson(m);
  Result<EnvironmentManifest> back = ManifestFromJson(json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);
  EXPECT_EQ(j.at("venvs").at("/opt/venvs/ml").at("torch"), "2.3.0");

  EnvironmentManifest empty;
  empty.fingerprint = ManifestFingerprint(empty);
  Result<EnvironmentManifest> empty_back = ManifestFromJson(ManifestToJson(empty));
  ASSERT_TRUE(empty_back.ok()) << empty_back.status().ToString();
  EXPECT_EQ(*empty_back, empty);
}

// The error for `j` after `edit`, which must name `field`.
void ExpectError(const std::function<void(json&)>& edit, const std::string& field) {
  json j = ManifestToJson(Sample());
  edit(j);
  Result<EnvironmentManifest> r = ManifestFromJson(j);
  ASSERT_FALSE(r.ok()) << "accepted after editing " << field;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(r.status().message().starts_with(field + ":")) << r.status().message();
}

TEST(EnvironmentManifestJsonTest, StrictErrorsNameTheField) {
  EXPECT_FALSE(ManifestFromJson(json::array()).ok());
  ExpectError([](json& j) { j.erase("python_packages"); }, "python_packages");
  ExpectError([](json& j) { j["extra"] = 1; }, "extra");
  ExpectError([](json& j) { j["base_digest"] = 7; }, "base_digest");
  ExpectError([](json& j) { j["runtimes"] = json::array(); }, "runtimes");
  ExpectError([](json& j) { j["runtimes"]["node"] = 18; }, "runtimes.node");
  ExpectError([](json& j) { j["python_packages"]["numpy"] = 2; }, "python_packages.numpy");
  ExpectError([](json& j) { j["python_packages"]["NumPy"] = "1.0"; }, "python_packages.NumPy");
  ExpectError([](json& j) { j["python_packages"]["x"] = "1 0"; }, "python_packages.x");
  ExpectError([](json& j) { j["venvs"]["relative/dir"] = json::object(); }, "venvs.relative/dir");
  ExpectError([](json& j) { j["venvs"]["/opt/venvs/ml"]["torch"] = nullptr; },
              "venvs./opt/venvs/ml.torch");
  ExpectError([](json& j) { j["node_packages"]["bad/name/x"] = "1.0"; },
              "node_packages.bad/name/x");
  ExpectError([](json& j) { j["python_lock_hash"] = "md5:abc"; }, "python_lock_hash");
  ExpectError([](json& j) { j["node_lock_hash"] = "sha256:" + std::string(64, 'G'); },
              "node_lock_hash");
  ExpectError([](json& j) { j["dpkg_status_hash"] = nullptr; }, "dpkg_status_hash");
  ExpectError([](json& j) { j["workspace_id"] = json::object(); }, "workspace_id");
  ExpectError([](json& j) { j["dirty_paths"] = "/workspace/a"; }, "dirty_paths");
  ExpectError([](json& j) { j["dirty_paths"] = {"/a", 3}; }, "dirty_paths[1]");
  ExpectError([](json& j) { j["capabilities"] = {nullptr}; }, "capabilities[0]");
  ExpectError([](json& j) { j["fingerprint"] = "env-xyz"; }, "fingerprint");
  ExpectError([](json& j) { j["fingerprint"] = ""; }, "fingerprint");
  ExpectError([](json& j) { j["truncated"] = "no"; }, "truncated");
}

TEST(EnvironmentManifestNameTest, NormalizePythonName) {
  EXPECT_EQ(NormalizePythonName("NumPy"), "numpy");
  EXPECT_EQ(NormalizePythonName("zope.interface"), "zope-interface");
  EXPECT_EQ(NormalizePythonName("Flask_SQLAlchemy"), "flask-sqlalchemy");
  EXPECT_EQ(NormalizePythonName("a-_.-b"), "a-b");
  EXPECT_EQ(NormalizePythonName("ruamel.yaml.clib"), "ruamel-yaml-clib");
  EXPECT_EQ(NormalizePythonName("already-normal"), "already-normal");
  EXPECT_EQ(NormalizePythonName(""), "");
  EXPECT_EQ(NormalizePythonName("__x__"), "-x-");
}

}  // namespace
}  // namespace paddock::sessions
