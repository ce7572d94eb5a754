#include "runtime/linux/template_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace paddock::runtime::linux {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/paddock-tpl-test-XXXXXX";
    char* p = mkdtemp(tmpl);
    EXPECT_NE(p, nullptr);
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  ASSERT_TRUE(out.good()) << path;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string Digest(const std::string& root, bool content = true) {
  auto d = DigestTree(root, content);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? *d : std::string();
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode;
}

bool HasCapability(const TemplateManifest& m, const std::string& cap) {
  return std::find(m.capabilities.begin(), m.capabilities.end(), cap) != m.capabilities.end();
}

// A small tree with a file, a subdirectory, a symlink and an empty directory.
void MakeSampleTree(const std::string& root) {
  WriteFile(root + "/a.txt", "hello\n");
  WriteFile(root + "/sub/b.bin", std::string("\x00\x01\x02", 3));
  WriteFile(root + "/sub/deeper/c", "c");
  fs::create_directories(root + "/empty");
  fs::create_symlink("sub/b.bin", root + "/link");
  chmod((root + "/a.txt").c_str(), 0644);
  chmod((root + "/sub/b.bin").c_str(), 0600);
  chmod((root + "/sub/deeper/c").c_str(), 0644);
}

// ---------------------------------------------------------------------------------------------
// DigestTree

TEST(DigestTreeTest, DeterministicAndFormatted) {
  TempDir a, b;
  MakeSampleTree(a.path());
  MakeSampleTree(b.path());
  std::string da = Digest(a.path());
  EXPECT_EQ(da.rfind("sha256:", 0), 0u);
  EXPECT_EQ(da.size(), 7u + 64u);
  EXPECT_EQ(Digest(a.path()), da);
  // An identical tree elsewhere, created at another time: same content digest.
  EXPECT_EQ(Digest(b.path()), da);
  // Content mode ignores mtimes.
  struct timespec times[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (b / "a.txt").c_str(), times, 0), 0);
  EXPECT_EQ(Digest(b.path()), da);
  // Metadata mode sees the mtime.
  EXPECT_NE(Digest(b.path(), false), Digest(a.path(), false));

  uint64_t files = 0, bytes = 0;
  ASSERT_TRUE(DigestTree(a.path(), true, &files, &bytes).ok());
  EXPECT_EQ(files, 3u);
  EXPECT_EQ(bytes, 6u + 3u + 1u);
}

TEST(DigestTreeTest, SensitiveToEveryRecordedProperty) {
  TempDir t;
  MakeSampleTree(t.path());
  std::string base = Digest(t.path());

  WriteFile(t / "sub/deeper/c", "d");  // one byte, same size
  EXPECT_NE(Digest(t.path()), base);
  WriteFile(t / "sub/deeper/c", "c");
  chmod((t / "sub/deeper/c").c_str(), 0644);
  EXPECT_EQ(Digest(t.path()), base);

  chmod((t / "a.txt").c_str(), 0755);
  EXPECT_NE(Digest(t.path()), base);
  chmod((t / "a.txt").c_str(), 0644);
  EXPECT_EQ(Digest(t.path()), base);

  WriteFile(t / "empty/new", "");
  EXPECT_NE(Digest(t.path()), base);
  fs::remove(t / "empty/new");
  EXPECT_EQ(Digest(t.path()), base);

  fs::create_directories(t / "empty/newdir");
  EXPECT_NE(Digest(t.path()), base);
  fs::remove(t / "empty/newdir");

  fs::remove(t / "link");
  fs::create_symlink("sub/deeper/c", t / "link");
  EXPECT_NE(Digest(t.path()), base);
  fs::remove(t / "link");
  fs::create_symlink("sub/b.bin", t / "link");
  EXPECT_EQ(Digest(t.path()), base);

  fs::rename(t / "a.txt", t / "a2.txt");
  EXPECT_NE(Digest(t.path()), base);
  fs::rename(t / "a2.txt", t / "a.txt");

  if (geteuid() == 0) {  // only root can change ownership
    struct stat st;
    ASSERT_EQ(stat((t / "a.txt").c_str(), &st), 0);
    ASSERT_EQ(chown((t / "a.txt").c_str(), 12345, 12345), 0);
    EXPECT_NE(Digest(t.path()), base);
    ASSERT_EQ(chown((t / "a.txt").c_str(), st.st_uid, st.st_gid), 0);
    EXPECT_EQ(Digest(t.path()), base);
  }
}

TEST(DigestTreeTest, DoesNotFollowSymlinks) {
  TempDir t, outside;
  MakeSampleTree(t.path());
  WriteFile(outside / "secret", "one");
  fs::create_symlink(outside / "secret", t / "to-file");
  fs::create_symlink(outside.path(), t / "to-dir");
  std::string base = Digest(t.path());
  uint64_t files = 0;
  ASSERT_TRUE(DigestTree(t.path(), true, &files).ok());
  EXPECT_EQ(files, 3u);  // the link targets are not counted as files of the tree

  WriteFile(outside / "secret", "two");
  WriteFile(outside / "more", "x");
  EXPECT_EQ(Digest(t.path()), base);
}

TEST(DigestTreeTest, FifoDoesNotHangAndErrorsNamePath) {
  TempDir t;
  MakeSampleTree(t.path());
  std::string base = Digest(t.path());
  ASSERT_EQ(mkfifo((t / "fifo").c_str(), 0600), 0);
  EXPECT_NE(Digest(t.path()), base);

  auto missing = DigestTree(t / "nope", true);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(t / "nope"), std::string::npos);

  auto file = DigestTree(t / "a.txt", true);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
}

TEST(DigestTreeTest, SkipsOtherFilesystems) {
  TempDir t;
  MakeSampleTree(t.path());
  fs::create_directories(t / "mnt");
  if (mount("paddock-test", (t / "mnt").c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount tmpfs here: " << strerror(errno);
  }
  uint64_t files_before = 0, files_after = 0;
  auto before = DigestTree(t.path(), true, &files_before);
  WriteFile(t / "mnt/inside", "data");
  auto after = DigestTree(t.path(), true, &files_after);
  ASSERT_EQ(umount2((t / "mnt").c_str(), MNT_DETACH), 0);
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_EQ(*after, *before);  // the mounted filesystem's content is not part of the tree
  EXPECT_EQ(files_after, files_before);
  EXPECT_EQ(files_after, 3u);
}

// ---------------------------------------------------------------------------------------------
// DetectRuntimes

TEST(TemplateDetectTest, FindsRuntimesStatically) {
  TempDir r;
  fs::create_directories(r / "usr/lib/python3.9");
  fs::create_directories(r / "usr/lib/python3.11");
  fs::create_directories(r / "usr/lib/python3");  // dist-packages only: not a version
  fs::create_directories(r / "usr/lib/gcc/x86_64-linux-gnu/9");
  fs::create_directories(r / "usr/lib/gcc/x86_64-linux-gnu/12");
  fs::create_directories(r / "usr/lib/jvm/java-1.8.0-openjdk-amd64");
  fs::create_directories(r / "usr/lib/jvm/java-17-openjdk-amd64");
  fs::create_directories(r / "usr/lib/jvm/default-java");
  WriteFile(r / "usr/bin/nodejs", "");
  WriteFile(r / "usr/include/node/node_version.h",
            "#define NODE_MAJOR_VERSION 18\n#define NODE_MINOR_VERSION 19\n"
            "#define NODE_PATCH_VERSION 1\n#define NODE_VERSION_IS_RELEASE 1\n");
  WriteFile(r / "usr/bin/git", "");
  WriteFile(r / "usr/bin/chromium", "");
  fs::create_directories(r / "usr/lib/python3/dist-packages/pip");

  TemplateManifest m;
  DetectRuntimes(r.path(), &m);
  EXPECT_EQ(m.runtimes["python3"], "3.11");
  EXPECT_EQ(m.runtimes["gcc"], "12");
  EXPECT_EQ(m.runtimes["java"], "17");
  EXPECT_EQ(m.runtimes["node"], "18.19.1");
  EXPECT_EQ(m.capabilities,
            (std::vector<std::string>{"chromium", "gcc", "git", "java", "node", "pip", "python"}));

  // Idempotent: a second pass adds no duplicates.
  DetectRuntimes(r.path(), &m);
  EXPECT_EQ(m.capabilities.size(), 7u);
}

TEST(TemplateDetectTest, NodeWithoutHeaderAndEmptyRoot) {
  TempDir r;
  fs::create_directories(r / "usr/bin");
  fs::create_symlink("/usr/share/nodejs/bin/node", r / "usr/bin/node");  // dangling is fine
  TemplateManifest m;
  DetectRuntimes(r.path(), &m);
  EXPECT_EQ(m.runtimes["node"], "unknown");
  EXPECT_EQ(m.capabilities, std::vector<std::string>{"node"});

  TempDir empty;
  TemplateManifest none;
  DetectRuntimes(empty.path(), &none);
  EXPECT_TRUE(none.runtimes.empty());
  EXPECT_TRUE(none.capabilities.empty());
}

TEST(TemplateDetectTest, AbsoluteSymlinksResolveInsideTheRootfs) {
  TempDir r;
  fs::create_directories(r / "usr/lib");
  fs::create_directories(r / "opt/jvm/temurin-21-jdk");
  // In the image, /usr/lib/jvm points at the image's /opt/jvm, not the host's.
  fs::create_symlink("/opt/jvm", r / "usr/lib/jvm");
  // Pointing at a host path that exists on the host but not in the image finds nothing.
  fs::create_symlink("/usr/lib/gcc", r / "usr/lib/gcc");
  fs::create_symlink("/usr/lib/python3.11", r / "usr/lib/python3.11");
  TemplateManifest m;
  DetectRuntimes(r.path(), &m);
  EXPECT_EQ(m.runtimes["java"], "21");
  EXPECT_EQ(m.runtimes.count("gcc"), 0u);
  EXPECT_EQ(m.runtimes.count("python3"), 0u);
}

// ---------------------------------------------------------------------------------------------
// ImportDirectory, Get, List, Remove

void MakeFakeRootfs(const std::string& root) {
  WriteFile(root + "/usr/bin/sh", "#!fake shell\n");
  fs::create_directories(root + "/usr/lib/python3.11");
  WriteFile(root + "/usr/lib/python3.11/os.py", "# os\n");
  fs::create_directories(root + "/usr/lib/gcc/x86_64-linux-gnu/12");
  fs::create_symlink("usr/bin", root + "/bin");
  fs::create_symlink("/usr/bin/python3.11", root + "/usr/bin/python3");
  WriteFile(root + "/etc/os-release", "ID=fake\n");
}

TEST(TemplateStoreImportTest, ValidatesNameAndSource) {
  TempDir store_dir, src;
  MakeFakeRootfs(src.path());
  TemplateStore store(store_dir.path());

  for (const std::string& bad : std::vector<std::string>{
           "", "Upper", "-lead", ".hidden", "../x", "a/b", "a b", "x\n", std::string(64, 'a')}) {
    auto r = store.ImportDirectory(bad, src.path());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("name"), std::string::npos) << r.status().message();
  }
  EXPECT_TRUE(store.ImportDirectory(std::string(63, 'a'), src.path()).ok());

  auto reserved = store.ImportDirectory("host", src.path());
  ASSERT_FALSE(reserved.ok());
  EXPECT_EQ(reserved.status().code(), StatusCode::kInvalidArgument);

  TempDir not_rootfs;
  WriteFile(not_rootfs / "file", "x");
  for (const std::string& bad_src : std::vector<std::string>{
           std::string("relative/dir"), std::string(""), src / "missing", src / "usr/bin/sh",
           not_rootfs.path(), std::string("/"), store_dir / "inside"}) {
    if (bad_src == store_dir / "inside") MakeFakeRootfs(bad_src);
    auto r = store.ImportDirectory("ok-name", bad_src);
    ASSERT_FALSE(r.ok()) << bad_src;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad_src;
    EXPECT_NE(r.status().message().find("source_dir"), std::string::npos) << r.status().message();
  }

  auto traversal = store.Get("../x");
  ASSERT_FALSE(traversal.ok());
  EXPECT_EQ(traversal.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Remove("../x").code(), StatusCode::kInvalidArgument);
  auto unknown = store.Get("nope");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store.Remove("nope").code(), StatusCode::kNotFound);
}

TEST(TemplateStoreImportTest, ImportGetListRemove) {
  TempDir store_dir, src, src2;
  MakeFakeRootfs(src.path());
  MakeFakeRootfs(src2.path());
  TemplateStore store(store_dir.path());

  // A path with a "." component and a trailing slash: the manifest stores the real path.
  auto imported = store.ImportDirectory("deb12", src.path() + "/./");
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  const TemplateManifest& m = *imported;
  EXPECT_EQ(m.name, "deb12");
  EXPECT_EQ(m.kind, "directory");
  EXPECT_EQ(m.rootfs, fs::canonical(src.path()).string());
  EXPECT_TRUE(m.readonly_binds.empty());
  EXPECT_EQ(m.digest, Digest(src.path()));
  EXPECT_EQ(m.file_count, 3u);
  EXPECT_GT(m.created_at_unix, 0);
  EXPECT_EQ(m.runtimes.at("python3"), "3.11");
  EXPECT_EQ(m.runtimes.at("gcc"), "12");
  EXPECT_TRUE(HasCapability(m, "python"));
  EXPECT_TRUE(HasCapability(m, "gcc"));
  EXPECT_FALSE(HasCapability(m, "java"));
  EXPECT_TRUE(fs::exists(store_dir / "deb12/manifest.json"));

  auto got = store.Get("deb12");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->digest, m.digest);
  EXPECT_EQ(got->rootfs, m.rootfs);
  EXPECT_EQ(got->runtimes, m.runtimes);
  EXPECT_EQ(got->capabilities, m.capabilities);
  EXPECT_EQ(got->file_count, m.file_count);
  EXPECT_EQ(got->total_bytes, m.total_bytes);
  EXPECT_EQ(got->created_at_unix, m.created_at_unix);
  EXPECT_EQ(got->source_stamp, m.source_stamp);

  ASSERT_TRUE(store.ImportDirectory("alpha", src2.path()).ok());
  auto list = store.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "alpha");
  EXPECT_EQ(list[1].name, "deb12");

  // Re-import after a change replaces the manifest.
  WriteFile(src / "usr/bin/sh", "#!fake shell v2\n");
  auto again = store.ImportDirectory("deb12", src.path());
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->digest, m.digest);
  EXPECT_EQ(store.Get("deb12")->digest, again->digest);

  // Remove drops the manifest and never the imported directory.
  ASSERT_TRUE(store.Remove("deb12").ok());
  EXPECT_EQ(store.Get("deb12").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(store_dir / "deb12"));
  EXPECT_EQ(ReadText(src / "usr/bin/sh"), "#!fake shell v2\n");
  EXPECT_TRUE(fs::is_directory(src / "usr/lib/gcc/x86_64-linux-gnu/12"));
  EXPECT_TRUE(fs::is_symlink(src / "bin"));
  EXPECT_EQ(store.Remove("deb12").code(), StatusCode::kNotFound);
  ASSERT_EQ(store.List().size(), 1u);

  // A template whose source went away is reported, not silently used.
  fs::remove_all(src2.path());
  EXPECT_EQ(store.Get("alpha").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store.Remove("alpha").ok());
  EXPECT_TRUE(store.List().empty());
}

TEST(TemplateStoreImportTest, CorruptManifestIsAnErrorNotACrash) {
  TempDir store_dir, src;
  MakeFakeRootfs(src.path());
  TemplateStore store(store_dir.path());
  ASSERT_TRUE(store.ImportDirectory("good", src.path()).ok());
  WriteFile(store_dir / "bad/manifest.json", "{not json");
  auto bad = store.Get("bad");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("manifest.json"), std::string::npos);
  auto list = store.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].name, "good");
}

// ---------------------------------------------------------------------------------------------
// Host template

TEST(TemplateStoreHostTest, SkeletonLayoutAndManifest) {
  TempDir store_dir;
  TemplateStore store(store_dir.path());
  auto t0 = std::chrono::steady_clock::now();
  auto host = store.EnsureHostTemplate();
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  std::printf(
      "[ info ] first EnsureHostTemplate (skeleton + /usr metadata walk): %.2fs, %llu "
      "files\n",
      elapsed, static_cast<unsigned long long>(host->file_count));

  const std::string root = store_dir / "host/rootfs";
  EXPECT_EQ(host->name, "host");
  EXPECT_EQ(host->kind, "host");
  EXPECT_EQ(host->rootfs, root);
  ASSERT_EQ(host->readonly_binds.size(), 1u);
  EXPECT_EQ(host->readonly_binds[0].source, "/usr");
  EXPECT_EQ(host->readonly_binds[0].target, "/usr");
  EXPECT_EQ(host->digest.rfind("sha256:", 0), 0u);
  EXPECT_EQ(host->digest.size(), 71u);
  EXPECT_GT(host->file_count, 100u);
  EXPECT_FALSE(host->source_stamp.empty());

  EXPECT_EQ(ModeOf(root) & 07777, 0755u);
  for (const char* d :
       {"usr", "etc", "dev", "proc", "sys", "run", "var", "home", "workspace", "mnt"}) {
    mode_t mode = ModeOf(root + "/" + d);
    EXPECT_TRUE(S_ISDIR(mode)) << d;
    EXPECT_EQ(mode & 07777, 0755u) << d;
  }
  EXPECT_EQ(ModeOf(root + "/tmp") & 07777, 01777u);
  EXPECT_EQ(ModeOf(root + "/var/tmp") & 07777, 01777u);
  // 0755, not 0700: lower-layer dirs are owned by an unmapped host uid inside the sandbox, and
  // overlayfs looks up names with the mounter's credentials, so 0700 would lock out even root
  // inside. The sandbox sees the upper layer's own 0700 /root.
  EXPECT_EQ(ModeOf(root + "/root") & 07777, 0755u);
  for (const char* l : {"bin", "sbin", "lib", "lib64", "lib32", "libx32"}) {
    std::string target = std::string("usr/") + l;
    if (fs::is_directory("/" + target)) {
      ASSERT_TRUE(fs::is_symlink(root + "/" + l)) << l;
      EXPECT_EQ(fs::read_symlink(root + "/" + l).string(), target);
    } else {
      EXPECT_FALSE(fs::exists(fs::symlink_status(root + "/" + l))) << l;
    }
  }
  // Nothing of the host is copied but /etc/alternatives symlinks into /usr (the init writes
  // the rest of /etc; /usr is bound).
  for (const auto& e : fs::directory_iterator(root + "/etc")) {
    EXPECT_EQ(e.path().filename().string(), "alternatives");
  }
  if (fs::exists(root + "/etc/alternatives")) {
    for (const auto& e : fs::directory_iterator(root + "/etc/alternatives")) {
      ASSERT_TRUE(fs::is_symlink(e.symlink_status())) << e.path();
      EXPECT_EQ(fs::read_symlink(e.path()).string().rfind("/usr/", 0), 0u) << e.path();
    }
  }
  EXPECT_TRUE(fs::is_empty(root + "/usr"));
  EXPECT_FALSE(fs::exists(root + "/etc/passwd"));
  EXPECT_FALSE(fs::exists(root + "/etc/shadow"));
  // No build directory left behind.
  for (const auto& e : fs::directory_iterator(store_dir / "host")) {
    EXPECT_EQ(e.path().filename().string().find("tmp"), std::string::npos) << e.path();
  }

  // Runtimes are detected on the host's real /usr.
  EXPECT_EQ(HasCapability(*host, "git"), fs::exists("/usr/bin/git"));
  EXPECT_EQ(HasCapability(*host, "gcc"), fs::is_directory("/usr/lib/gcc/x86_64-linux-gnu") &&
                                             !fs::is_empty("/usr/lib/gcc/x86_64-linux-gnu"));
  if (fs::is_directory("/usr/lib/python3.11")) {
    EXPECT_TRUE(HasCapability(*host, "python"));
  }
}

TEST(TemplateStoreHostTest, ManifestIsCachedUntilTheStampChanges) {
  TempDir store_dir;
  TemplateStore store(store_dir.path());
  auto first = store.EnsureHostTemplate();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string manifest = store_dir / "host/manifest.json";
  struct stat before, after;
  ASSERT_EQ(stat(manifest.c_str(), &before), 0);

  auto t0 = std::chrono::steady_clock::now();
  auto second = store.EnsureHostTemplate();
  auto cached_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info ] cached EnsureHostTemplate: %.4fs\n", cached_s);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(stat(manifest.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);  // not rewritten
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(second->digest, first->digest);
  EXPECT_EQ(second->created_at_unix, first->created_at_unix);
  EXPECT_EQ(second->runtimes, first->runtimes);
  EXPECT_EQ(second->capabilities, first->capabilities);
  EXPECT_EQ(second->file_count, first->file_count);

  // A fresh store object on the same directory reads the same manifest (round trip via disk).
  TemplateStore reopened(store_dir.path());
  auto via_get = reopened.Get("host");
  ASSERT_TRUE(via_get.ok());
  EXPECT_EQ(via_get->digest, first->digest);
  EXPECT_EQ(via_get->rootfs, first->rootfs);
  ASSERT_EQ(reopened.List().size(), 1u);

  // Proof that the cached manifest is served without recomputing: a planted digest survives.
  std::string text = ReadText(manifest);
  size_t p = text.find(first->digest);
  ASSERT_NE(p, std::string::npos);
  text.replace(p, first->digest.size(), "sha256:planted");
  WriteFile(manifest, text);
  // The instance that verified it serves its in-memory copy (the per-create fast path) ...
  EXPECT_EQ(store.EnsureHostTemplate()->digest, first->digest);
  // ... and a new instance trusts the manifest on disk while stamp and skeleton match.
  EXPECT_EQ(TemplateStore(store_dir.path()).EnsureHostTemplate()->digest, "sha256:planted");

  // A different source stamp forces a recompute.
  p = text.find(first->source_stamp);
  ASSERT_NE(p, std::string::npos);
  text.replace(p, first->source_stamp.size(), "v0;stale");
  WriteFile(manifest, text);
  TemplateStore fresh(store_dir.path());
  auto recomputed = fresh.EnsureHostTemplate();
  ASSERT_TRUE(recomputed.ok());
  EXPECT_EQ(recomputed->digest, first->digest);
  EXPECT_EQ(recomputed->source_stamp, first->source_stamp);
}

TEST(TemplateStoreHostTest, TamperedOrMissingSkeletonIsRebuilt) {
  TempDir store_dir;
  TemplateStore store(store_dir.path());
  auto first = store.EnsureHostTemplate();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string root = store_dir / "host/rootfs";

  // A file planted in the lower layer would appear in every sandbox.
  WriteFile(root + "/etc/passwd", "evil::0:0::/:/bin/sh\n");
  chmod((root + "/tmp").c_str(), 0777);
  auto rebuilt = store.EnsureHostTemplate();
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
  EXPECT_FALSE(fs::exists(root + "/etc/passwd"));
  EXPECT_EQ(ModeOf(root + "/tmp") & 07777, 01777u);
  EXPECT_EQ(rebuilt->digest, first->digest);

  fs::remove_all(root);
  // A stale build directory of a dead process is cleaned up on the way.
  fs::create_directories(store_dir / "host/rootfs.tmp-999999999/usr");
  auto again = store.EnsureHostTemplate();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(fs::is_symlink(root + "/bin"));
  EXPECT_EQ(again->digest, first->digest);
  EXPECT_FALSE(fs::exists(store_dir / "host/rootfs.tmp-999999999"));

  ASSERT_TRUE(store.Remove("host").ok());
  EXPECT_FALSE(fs::exists(store_dir / "host"));
}

TEST(TemplateStoreHostTest, ConcurrentEnsureBuildsOnce) {
  TempDir store_dir;
  TemplateStore store(store_dir.path());
  std::vector<std::string> digests(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto r = store.Get("host");
      digests[i] = r.ok() ? r->digest : r.status().ToString();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& d : digests) {
    EXPECT_EQ(d.rfind("sha256:", 0), 0u) << d;
    EXPECT_EQ(d, digests[0]);
  }
}

}  // namespace
}  // namespace paddock::runtime::linux
