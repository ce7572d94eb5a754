#include "runtime/linux/sandbox_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace paddock::runtime::linux {
namespace {

using namespace std::chrono_literals;

// --- host-side helpers (the test may use host paths; the code under test may not) ----------

std::string MakeTempDir(const char* prefix, const std::string& base = "/tmp") {
  std::string tmpl = base + "/" + prefix + "XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr) << std::strerror(errno);
  return tmpl;
}

void HostWrite(const std::string& path, const std::string& content, mode_t mode = 0644) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  ASSERT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  ASSERT_EQ(fchmod(fd, mode), 0);
  close(fd);
}

std::string HostRead(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// tmpfs when available: deep and wide trees are slow to build on a journaled disk, and tmpfs
// numbers directory offsets differently from ext4, which the recursive remove must handle.
std::string TmpfsBase() {
  struct statfs sfs {};
  if (statfs("/dev/shm", &sfs) == 0 && sfs.f_type == TMPFS_MAGIC && access("/dev/shm", W_OK) == 0) {
    return "/dev/shm";
  }
  return "/tmp";
}

bool HostExists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> HostList(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (!d) return names;
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool HasUploadTemp(const std::string& dir) {
  for (const auto& n : HostList(dir)) {
    if (n.rfind(".paddock-upload-", 0) == 0) return true;
  }
  return false;
}

// fd-relative, never follows symlinks, works for trees deeper than PATH_MAX.
void RemoveTreeAt(int dirfd, const std::string& name) {
  struct stat st;
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    unlinkat(dirfd, name.c_str(), 0);
    return;
  }
  int fd = openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  std::vector<std::string> names;
  if (DIR* d = fdopendir(dup(fd))) {
    while (struct dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
  }
  for (const auto& n : names) RemoveTreeAt(fd, n);
  close(fd);
  unlinkat(dirfd, name.c_str(), AT_REMOVEDIR);
}

void RemoveHostTree(const std::string& path) {
  if (path.empty()) return;
  size_t slash = path.rfind('/');
  std::string parent = path.substr(0, slash);
  int fd = open(parent.empty() ? "/" : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  RemoveTreeAt(fd, path.substr(slash + 1));
  close(fd);
}

std::function<Result<std::string>()> ChunkSource(std::string data, size_t chunk) {
  auto d = std::make_shared<std::string>(std::move(data));
  auto pos = std::make_shared<size_t>(0);
  return [d, pos, chunk]() -> Result<std::string> {
    if (*pos >= d->size()) return std::string();
    size_t n = std::min(chunk, d->size() - *pos);
    std::string c = d->substr(*pos, n);
    *pos += n;
    return c;
  };
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// --- fixture ----------------------------------------------------------------------------------

class SandboxFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir("paddock-sbf-root-");
    outside_ = MakeTempDir("paddock-sbf-out-");
    secret_path_ = outside_ + "/secret";
    secret_ =
        "TOP-SECRET-" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}());
    HostWrite(secret_path_, secret_, 0600);
    files_ = MakeFiles(SandboxIdentity{});
  }
  void TearDown() override {
    RemoveHostTree(root_);
    RemoveHostTree(outside_);
  }

  std::unique_ptr<SandboxFiles> MakeFiles(SandboxIdentity id) {
    int fd = open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    return std::make_unique<SandboxFiles>(UniqueFd(fd), id);
  }
  std::string In(const std::string& rel) const { return root_ + "/" + rel; }

  static Status Write(const SandboxFiles& f, const std::string& path, const std::string& content,
                      uint32_t mode = 0644, uint64_t max = 1 << 20, size_t chunk = 4096) {
    return f.WriteFile(path, mode, max, ChunkSource(content, chunk));
  }
  Status Write(const std::string& path, const std::string& content, uint32_t mode = 0644,
               uint64_t max = 1 << 20, size_t chunk = 4096) {
    return Write(*files_, path, content, mode, max, chunk);
  }
  static Result<std::string> Read(const SandboxFiles& f, const std::string& path,
                                  uint64_t max = 1 << 20, int* chunks = nullptr) {
    std::string out;
    Status st = f.ReadFile(path, max, [&](std::string_view c) {
      out.append(c);
      if (chunks) ++*chunks;
      return Status::Ok();
    });
    if (!st.ok()) return st;
    return out;
  }
  Result<std::string> Read(const std::string& path, uint64_t max = 1 << 20, int* chunks = nullptr) {
    return Read(*files_, path, max, chunks);
  }

  // A read through an escape attempt must never yield the secret.
  void ExpectNoSecret(const std::string& path) {
    Result<std::string> r = Read(path);
    if (r.ok()) {
      EXPECT_NE(*r, secret_) << path << " leaked the outside secret";
    }
  }

  std::string root_, outside_, secret_path_, secret_;
  std::unique_ptr<SandboxFiles> files_;
};

mode_t HostMode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// --- basic operations ---------------------------------------------------------------------

TEST_F(SandboxFilesTest, WriteThenReadRoundTrip) {
  ASSERT_TRUE(files_->MakeDirs("dir", 0755).ok());
  ASSERT_TRUE(Write("/dir/f.txt", "hello sandbox", 0640).ok());
  EXPECT_EQ(HostRead(In("dir/f.txt")), "hello sandbox");
  EXPECT_EQ(HostMode(In("dir/f.txt")), 0640u);
  Result<std::string> r = Read("dir/f.txt");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "hello sandbox");
  // Overwrite replaces atomically, including a change of mode.
  ASSERT_TRUE(Write("dir/f.txt", "v2", 0600).ok());
  EXPECT_EQ(*Read("dir/f.txt"), "v2");
  EXPECT_EQ(HostMode(In("dir/f.txt")), 0600u);
  // Setuid/setgid bits are never set by an upload.
  ASSERT_TRUE(Write("dir/suid", "x", 06755).ok());
  EXPECT_EQ(HostMode(In("dir/suid")), 0755u);
  EXPECT_FALSE(HasUploadTemp(In("dir")));
}

TEST_F(SandboxFilesTest, StreamsLargeFilesInChunks) {
  const std::string data = RandomBytes((1 << 20) + 123, 7);
  ASSERT_TRUE(Write("big.bin", data, 0644, 2 << 20, 7777).ok());
  EXPECT_EQ(HostRead(In("big.bin")), data);
  int chunks = 0;
  Result<std::string> r = Read("big.bin", 2 << 20, &chunks);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, data);
  EXPECT_GT(chunks, 1);
}

TEST_F(SandboxFilesTest, ReadEnforcesMaxBytesBeforeReading) {
  HostWrite(In("hundred"), std::string(100, 'x'));
  int chunks = 0;
  Result<std::string> r = Read("hundred", 99, &chunks);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(chunks, 0);
  r = Read("hundred", 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 100u);
  HostWrite(In("empty"), "");
  EXPECT_EQ(*Read("empty", 0), "");
}

TEST_F(SandboxFilesTest, ReadPropagatesSinkError) {
  HostWrite(In("f"), "data");
  Status st = files_->ReadFile("f", 100, [](std::string_view) {
    return Status(StatusCode::kUnavailable, "client went away");
  });
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
}

TEST_F(SandboxFilesTest, WriteEnforcesMaxBytesAndKeepsOldContent) {
  ASSERT_TRUE(Write("f", "old content").ok());
  Status st = Write("f", std::string(1000, 'n'), 0644, 500, 100);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(HostRead(In("f")), "old content");
  EXPECT_FALSE(HasUploadTemp(root_));
  // Exactly at the cap is fine.
  EXPECT_TRUE(Write("g", std::string(500, 'y'), 0644, 500, 100).ok());
}

TEST_F(SandboxFilesTest, WriteSourceErrorLeavesNothingBehind) {
  ASSERT_TRUE(Write("f", "keep me").ok());
  int calls = 0;
  Status st = files_->WriteFile("f", 0644, 1 << 20, [&]() -> Result<std::string> {
    if (++calls < 3) return std::string("partial");
    return Status(StatusCode::kDeadlineExceeded, "upload stalled");
  });
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(HostRead(In("f")), "keep me");
  st = files_->WriteFile("new", 0644, 1 << 20,
                         []() -> Result<std::string> { throw std::runtime_error("boom"); });
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_FALSE(HostExists(In("new")));
  EXPECT_EQ(HostList(root_), std::vector<std::string>{"f"});
}

TEST_F(SandboxFilesTest, WriteRejectsDirectoriesAndBadNames) {
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  EXPECT_EQ(Write("d", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Write("/", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Write("d/..", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Write("d/.", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Write("", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Write(std::string("a\0b", 3), "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Write(std::string(256, 'n'), "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Write("missing/f", "x").code(), StatusCode::kNotFound);
  // Trailing slashes are stripped.
  EXPECT_TRUE(Write("d/f//", "x").ok());
  EXPECT_EQ(HostRead(In("d/f")), "x");
  EXPECT_FALSE(HasUploadTemp(In("d")));
}

TEST_F(SandboxFilesTest, ReadRejectsDirectoriesAndFifosWithoutHanging) {
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  EXPECT_EQ(Read("d").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Read("/").status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(mkfifo(In("fifo").c_str(), 0666), 0);
  auto fut = std::async(std::launch::async, [&] { return Read("fifo").status().code(); });
  if (fut.wait_for(5s) != std::future_status::ready) {
    // Unblock the reader so the test can finish, then fail.
    int w = open(In("fifo").c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) close(w);
    fut.wait();
    FAIL() << "ReadFile on a FIFO blocked";
  }
  EXPECT_EQ(fut.get(), StatusCode::kInvalidArgument);
}

TEST_F(SandboxFilesTest, ListDirIsSortedWithTypesAndLinkTargets) {
  HostWrite(In("b"), "bbbb", 0600);
  HostWrite(In("a"), "a", 0644);
  ASSERT_EQ(mkdir(In("c").c_str(), 0750), 0);
  ASSERT_EQ(symlink("a", In("d").c_str()), 0);
  ASSERT_EQ(mkfifo(In("e").c_str(), 0600), 0);
  Result<std::vector<FileStat>> r = files_->ListDir("/");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 5u);
  const auto& v = *r;
  EXPECT_EQ(v[0].name, "a");
  EXPECT_EQ(v[0].type, FileStat::Type::kFile);
  EXPECT_EQ(v[1].name, "b");
  EXPECT_EQ(v[1].size, 4u);
  EXPECT_EQ(v[1].mode, 0600u);
  EXPECT_EQ(v[2].name, "c");
  EXPECT_EQ(v[2].type, FileStat::Type::kDir);
  EXPECT_EQ(v[2].mode, 0750u);
  EXPECT_EQ(v[3].name, "d");
  EXPECT_EQ(v[3].type, FileStat::Type::kSymlink);
  EXPECT_EQ(v[3].link_target, "a");
  EXPECT_EQ(v[4].type, FileStat::Type::kOther);
  EXPECT_GT(v[0].mtime_unix, 0);
  EXPECT_EQ(files_->ListDir("a").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(files_->ListDir("nope").status().code(), StatusCode::kNotFound);
  // A symlink to a directory inside the root is listed as the directory.
  ASSERT_EQ(symlink("/c", In("clink").c_str()), 0);
  HostWrite(In("c/inner"), "");
  r = files_->ListDir("clink");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "inner");
}

TEST_F(SandboxFilesTest, StatUsesLstatSemantics) {
  HostWrite(In("f"), "12345", 0640);
  ASSERT_EQ(symlink("f", In("l").c_str()), 0);
  Result<FileStat> s = files_->Stat("f");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->name, "f");
  EXPECT_EQ(s->type, FileStat::Type::kFile);
  EXPECT_EQ(s->size, 5u);
  EXPECT_EQ(s->mode, 0640u);
  EXPECT_EQ(s->uid, getuid());  // base 0: host ids are the inside ids
  s = files_->Stat("l");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->type, FileStat::Type::kSymlink);
  EXPECT_EQ(s->link_target, "f");
  s = files_->Stat("/");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->type, FileStat::Type::kDir);
  EXPECT_EQ(s->name, "/");
  EXPECT_EQ(files_->Stat("missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(files_->Stat("f/x").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SandboxFilesTest, OwnershipIsReportedAsSeenInside) {
  HostWrite(In("f"), "x");
  ASSERT_EQ(chown(In("f").c_str(), 101000, 101005), 0);
  SandboxIdentity id;
  id.host_id_base = 100000;  // no host_uid: no credential switch, only id translation
  auto files = MakeFiles(id);
  Result<FileStat> s = files->Stat("f");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->uid, 1000u);
  EXPECT_EQ(s->gid, 1005u);
  s = files->Stat("/");  // owned by host root: outside the mapping
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->uid, 65534u);
}

TEST_F(SandboxFilesTest, MakeDirsCreatesParentsWithExactMode) {
  mode_t old_umask = umask(077);
  Status st = files_->MakeDirs("x/y/z", 0755);
  umask(old_umask);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(HostMode(In("x")), 0755u);
  EXPECT_EQ(HostMode(In("x/y/z")), 0755u);
  EXPECT_TRUE(files_->MakeDirs("x/y/z", 0700).ok());  // existing is fine, mode untouched
  EXPECT_EQ(HostMode(In("x/y/z")), 0755u);
  EXPECT_TRUE(files_->MakeDirs("/", 0755).ok());
  HostWrite(In("x/file"), "");
  EXPECT_EQ(files_->MakeDirs("x/file", 0755).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(files_->MakeDirs("x/file/sub", 0755).code(), StatusCode::kAlreadyExists);
  // An existing symlink to a directory inside the root is followed.
  ASSERT_EQ(symlink("/x/y", In("ylink").c_str()), 0);
  EXPECT_TRUE(files_->MakeDirs("ylink/w", 0700).ok());
  EXPECT_EQ(HostMode(In("x/y/w")), 0700u);
  // ".." is clamped at the root: this creates /q/r inside.
  EXPECT_TRUE(files_->MakeDirs("x/../../../q/./r", 0755).ok());
  EXPECT_TRUE(HostExists(In("q/r")));
}

TEST_F(SandboxFilesTest, RemoveFilesDirectoriesAndTrees) {
  HostWrite(In("f"), "x");
  EXPECT_TRUE(files_->Remove("f", false).ok());
  EXPECT_FALSE(HostExists(In("f")));
  EXPECT_EQ(files_->Remove("f", false).code(), StatusCode::kNotFound);

  ASSERT_EQ(mkdir(In("empty").c_str(), 0755), 0);
  EXPECT_TRUE(files_->Remove("empty/", false).ok());
  EXPECT_FALSE(HostExists(In("empty")));

  // A tree with many entries, directories interleaved with files, nesting and symlinks.
  ASSERT_EQ(mkdir(In("t").c_str(), 0755), 0);
  for (int i = 0; i < 300; ++i) {
    std::string d = In("t/d" + std::to_string(i));
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
    for (int j = 0; j < 4; ++j) HostWrite(d + "/f" + std::to_string(j), "x");
    HostWrite(In("t/f" + std::to_string(i)), "x");
  }
  std::string deep = In("t/deep");
  for (int i = 0; i < 60; ++i) {
    ASSERT_EQ(mkdir(deep.c_str(), 0700), 0);
    deep += "/n";
  }
  ASSERT_EQ(symlink("/t/d1", In("t/link").c_str()), 0);
  EXPECT_EQ(files_->Remove("t", false).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(HostExists(In("t/d0/f0")));
  Status st = files_->Remove("t", true);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(HostExists(In("t")));

  EXPECT_EQ(files_->Remove("/", true).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(files_->Remove("///", false).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(mkdir(In("a").c_str(), 0755), 0);
  EXPECT_EQ(files_->Remove("a/..", true).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(files_->Remove("a/.", true).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HostExists(In("a")));
}

TEST(SandboxFilesTreeTest, RemoveRecursiveOnTmpfs) {
  std::string root = MakeTempDir("paddock-sbf-tmpfs-", TmpfsBase());
  ASSERT_EQ(mkdir((root + "/t").c_str(), 0755), 0);
  for (int i = 0; i < 500; ++i) {
    std::string d = root + "/t/d" + std::to_string(i);
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
    HostWrite(d + "/f", "x");
    HostWrite(root + "/t/f" + std::to_string(i), "x");
  }
  SandboxFiles files(UniqueFd(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)),
                     SandboxIdentity{});
  Status st = files.Remove("t", true);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(HostExists(root + "/t"));
  RemoveHostTree(root);
}

TEST(SandboxFilesTreeTest, RemoveRecursiveTerminatesWhileSandboxKeepsWriting) {
  std::string root = MakeTempDir("paddock-sbf-busy-", TmpfsBase());
  ASSERT_EQ(mkdir((root + "/t").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root + "/t/sub").c_str(), 0755), 0);
  int sub = open((root + "/t/sub").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(sub, 0);
  std::atomic<bool> stop{false};
  std::atomic<long> created{0};
  std::thread writer([&] {
    for (long i = 0; !stop.load(); ++i) {
      int fd = openat(sub, ("f" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd >= 0) {
        close(fd);
        created.fetch_add(1);
      }
    }
  });
  while (created.load() < 100) std::this_thread::yield();
  SandboxFiles files(UniqueFd(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)),
                     SandboxIdentity{});
  Status st = files.Remove("t", true);
  stop = true;
  writer.join();
  close(sub);
  // Either it won the race or it gave up after bounded retries; it never spins forever.
  EXPECT_TRUE(st.ok() || st.code() == StatusCode::kConflict) << st.ToString();
  RemoveHostTree(root);
}

TEST(SandboxFilesTreeTest, RemoveRecursiveHasADepthLimit) {
  std::string root = MakeTempDir("paddock-sbf-deep-", TmpfsBase());
  int cur = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(cur, 0);
  // Deeper than any path can name: built fd by fd, as a process inside could.
  for (int i = 0; i < 4200; ++i) {
    ASSERT_EQ(mkdirat(cur, "d", 0755), 0);
    int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(cur);
    ASSERT_GE(next, 0);
    cur = next;
  }
  close(cur);
  SandboxFiles files(UniqueFd(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)),
                     SandboxIdentity{});
  EXPECT_EQ(files.Remove("d", true).code(), StatusCode::kResourceExhausted);
  RemoveHostTree(root);
  EXPECT_FALSE(HostExists(root));
}

TEST_F(SandboxFilesTest, RenameMovesEntries) {
  HostWrite(In("f"), "content");
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  EXPECT_TRUE(files_->Rename("f", "d/g").ok());
  EXPECT_FALSE(HostExists(In("f")));
  EXPECT_EQ(HostRead(In("d/g")), "content");
  EXPECT_TRUE(files_->Rename("/d", "/e/").ok());
  EXPECT_EQ(HostRead(In("e/g")), "content");
  EXPECT_EQ(files_->Rename("missing", "x").code(), StatusCode::kNotFound);
  EXPECT_EQ(files_->Rename("/", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(files_->Rename("e", "/").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(files_->Rename("e/..", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HostExists(In("e/g")));
}

TEST_F(SandboxFilesTest, ChmodChangesPermissionBitsOnly) {
  HostWrite(In("f"), "x", 0644);
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  EXPECT_TRUE(files_->Chmod("f", 0600).ok());
  EXPECT_EQ(HostMode(In("f")), 0600u);
  EXPECT_TRUE(files_->Chmod("f", 0104755).ok());  // file-type bits are ignored
  EXPECT_EQ(HostMode(In("f")), 04755u);
  EXPECT_TRUE(files_->Chmod("d/", 01777).ok());
  EXPECT_EQ(HostMode(In("d")), 01777u);
  ASSERT_EQ(symlink("f", In("l").c_str()), 0);
  EXPECT_EQ(files_->Chmod("l", 0777).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(HostMode(In("f")), 04755u);
  EXPECT_EQ(files_->Chmod("missing", 0777).code(), StatusCode::kNotFound);
}

// --- escapes ------------------------------------------------------------------------------

using SandboxFilesEscapeTest = SandboxFilesTest;

TEST_F(SandboxFilesEscapeTest, AbsoluteSymlinkResolvesInsideRoot) {
  ASSERT_EQ(symlink(secret_path_.c_str(), In("evil").c_str()), 0);
  EXPECT_EQ(Read("evil").status().code(), StatusCode::kNotFound);
  // The same absolute path inside the root is what the link names from the sandbox's view.
  ASSERT_TRUE(files_->MakeDirs(outside_, 0755).ok());
  HostWrite(In(secret_path_.substr(1)), "decoy inside the root");
  Result<std::string> r = Read("evil");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "decoy inside the root");
}

TEST_F(SandboxFilesEscapeTest, DotDotCannotLeaveRoot) {
  ASSERT_EQ(symlink(("../../../../../../.." + secret_path_).c_str(), In("up").c_str()), 0);
  ASSERT_EQ(mkdir(In("a").c_str(), 0755), 0);
  ExpectNoSecret("up");
  EXPECT_EQ(Read("up").status().code(), StatusCode::kNotFound);
  ExpectNoSecret("a/../../../../.." + secret_path_);
  EXPECT_EQ(Read("a/../../../../etc/passwd").status().code(), StatusCode::kNotFound);
  ASSERT_EQ(mkdir(In("etc").c_str(), 0755), 0);
  HostWrite(In("etc/passwd"), "sandbox passwd");
  EXPECT_EQ(*Read("a/../../../../etc/passwd"), "sandbox passwd");
  EXPECT_EQ(*Read("../../etc/passwd"), "sandbox passwd");
}

TEST_F(SandboxFilesEscapeTest, IntermediateSymlinkToOutsideDirectory) {
  ASSERT_EQ(symlink(outside_.c_str(), In("outdir").c_str()), 0);
  ASSERT_EQ(symlink(("../../../../../.." + outside_).c_str(), In("outrel").c_str()), 0);
  for (const char* link : {"outdir", "outrel"}) {
    std::string p = std::string(link) + "/secret";
    SCOPED_TRACE(p);
    ExpectNoSecret(p);
    EXPECT_EQ(Read(p).status().code(), StatusCode::kNotFound);
    EXPECT_EQ(files_->Stat(p).status().code(), StatusCode::kNotFound);
    EXPECT_EQ(files_->ListDir(link).status().code(), StatusCode::kNotFound);
    EXPECT_FALSE(files_->MakeDirs(std::string(link) + "/newdir", 0755).ok());
  }
  EXPECT_EQ(HostList(outside_), std::vector<std::string>{"secret"});
}

TEST_F(SandboxFilesEscapeTest, WriteThroughSymlinksNeverTouchesOutside) {
  ASSERT_EQ(symlink(secret_path_.c_str(), In("evil").c_str()), 0);
  ASSERT_EQ(symlink(outside_.c_str(), In("outdir").c_str()), 0);
  // A hard link to an outside file (same filesystem) planted in the root.
  ASSERT_EQ(link(secret_path_.c_str(), In("hardlink").c_str()), 0);

  EXPECT_TRUE(Write("evil", "pwned").ok());  // replaces the link itself
  struct stat st {};
  ASSERT_EQ(lstat(In("evil").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(HostRead(In("evil")), "pwned");

  EXPECT_TRUE(Write("hardlink", "pwned").ok());  // a new inode, not written through
  EXPECT_EQ(Write("outdir/secret", "pwned").code(), StatusCode::kNotFound);
  EXPECT_EQ(Write("outdir/new", "pwned").code(), StatusCode::kNotFound);

  EXPECT_EQ(HostRead(secret_path_), secret_);
  EXPECT_EQ(HostMode(secret_path_), 0600u);
  EXPECT_EQ(HostList(outside_), std::vector<std::string>{"secret"});
}

TEST_F(SandboxFilesEscapeTest, RecursiveRemoveDoesNotFollowSymlinks) {
  HostWrite(outside_ + "/other", "keep");
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(In("d/sub").c_str(), 0755), 0);
  ASSERT_EQ(symlink(outside_.c_str(), In("d/abs").c_str()), 0);
  ASSERT_EQ(symlink(("../../../../../.." + outside_).c_str(), In("d/sub/rel").c_str()), 0);
  ASSERT_EQ(symlink(outside_.c_str(), In("outdir").c_str()), 0);
  Status st = files_->Remove("d", true);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(HostExists(In("d")));
  EXPECT_EQ(files_->Remove("outdir/secret", false).code(), StatusCode::kNotFound);
  EXPECT_EQ(files_->Remove("outdir/", true).code(), StatusCode::kOk);  // the link only
  EXPECT_FALSE(HostExists(In("outdir")));
  EXPECT_EQ(HostRead(secret_path_), secret_);
  EXPECT_EQ(HostList(outside_), (std::vector<std::string>{"other", "secret"}));
}

TEST_F(SandboxFilesEscapeTest, ChmodThroughSymlinkIsRejected) {
  ASSERT_EQ(symlink(secret_path_.c_str(), In("evil").c_str()), 0);
  ASSERT_EQ(symlink(outside_.c_str(), In("outdir").c_str()), 0);
  EXPECT_EQ(files_->Chmod("evil", 0777).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(files_->Chmod("outdir/secret", 0777).code(), StatusCode::kNotFound);
  EXPECT_EQ(files_->Chmod("outdir", 0777).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(HostMode(secret_path_), 0600u);
  EXPECT_EQ(HostMode(outside_), 0700u);
}

TEST_F(SandboxFilesEscapeTest, RenameThroughSymlinkedParentStaysInside) {
  ASSERT_EQ(symlink(outside_.c_str(), In("outdir").c_str()), 0);
  HostWrite(In("loot"), "loot");
  EXPECT_EQ(files_->Rename("loot", "outdir/loot").code(), StatusCode::kNotFound);
  EXPECT_EQ(files_->Rename("outdir/secret", "stolen").code(), StatusCode::kNotFound);
  EXPECT_TRUE(HostExists(In("loot")));
  EXPECT_FALSE(HostExists(In("stolen")));
  EXPECT_EQ(HostList(outside_), std::vector<std::string>{"secret"});
}

TEST_F(SandboxFilesEscapeTest, ProcSelfRootSymlinkIsNotFollowed) {
  ASSERT_EQ(symlink("/proc/self/root", In("self").c_str()), 0);
  EXPECT_FALSE(Read("self/etc/hostname").ok());
  EXPECT_FALSE(Read("self" + secret_path_).ok());
  EXPECT_FALSE(files_->ListDir("self/").ok());
}

// --- races --------------------------------------------------------------------------------

TEST(SandboxFilesRaceTest, SymlinkSwapsNeverEscape) {
  std::string root = MakeTempDir("paddock-sbf-race-");
  std::string outside = MakeTempDir("paddock-sbf-raceout-");
  const std::string secret = "RACE-SECRET";
  HostWrite(outside + "/file", secret, 0644);
  ASSERT_EQ(mkdir((root + "/sw").c_str(), 0755), 0);
  ASSERT_EQ(symlink(outside.c_str(), (root + "/alt_abs").c_str()), 0);
  ASSERT_EQ(symlink(("../../../../.." + outside).c_str(), (root + "/alt_rel").c_str()), 0);
  int flip_dir = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(flip_dir, 0);

  SandboxFiles files(UniqueFd(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)),
                     SandboxIdentity{});
  // Without the attacker the path works: failures below come from the swaps.
  ASSERT_TRUE(files.WriteFile("sw/file", 0644, 1024, ChunkSource("calm", 64)).ok());
  ASSERT_TRUE(files.ReadFile("sw/file", 1024, [](std::string_view) { return Status::Ok(); }).ok());
  std::atomic<bool> stop{false};
  std::atomic<long> flips{0}, flip_errors{0};
  // The hostile sandbox: atomically exchanges "sw" between a real directory and symlinks to
  // the outside directory (absolute and via ".."), as fast as it can.
  std::thread flipper([&] {
    std::minstd_rand rng(42);
    const char* alts[] = {"alt_abs", "alt_abs", "alt_rel", "alt_rel"};
    for (int step = 0; !stop.load(std::memory_order_relaxed);) {
      // Advance only on success so "sw" really alternates between the directory and a link.
      if (syscall(SYS_renameat2, flip_dir, "sw", flip_dir, alts[step], RENAME_EXCHANGE) == 0) {
        flips.fetch_add(1, std::memory_order_relaxed);
        step = (step + 1) % 4;
        // Dwell a random few microseconds so operations start in both states, not only in
        // the middle of an exchange (path lookups retry while renames are in flight). Longer
        // in the directory state (even step): lookups otherwise mostly observe the links.
        const unsigned dwell = step % 2 == 0 ? 16384 : 4096;
        for (unsigned k = 0, n = rng() % dwell; k < n; ++k) {
          std::atomic_signal_fence(std::memory_order_seq_cst);
        }
      } else {
        flip_errors.fetch_add(1, std::memory_order_relaxed);
      }
    }
  });

  int writes_ok = 0, reads_ok = 0;
  bool leaked = false;
  for (int i = 0; i < 3000; ++i) {
    std::string payload = "payload-" + std::to_string(i);
    if (files.WriteFile("sw/file", 0644, 1024, ChunkSource(payload, 64)).ok()) ++writes_ok;
    std::string got;
    Status st = files.ReadFile("sw/file", 1024, [&](std::string_view c) {
      got.append(c);
      return Status::Ok();
    });
    if (st.ok()) {
      ++reads_ok;
      if (got == secret) leaked = true;
    }
  }
  stop = true;
  flipper.join();
  close(flip_dir);

  EXPECT_FALSE(leaked) << "read the outside file through a swapped symlink";
  EXPECT_EQ(HostList(outside), std::vector<std::string>{"file"});
  EXPECT_EQ(HostRead(outside + "/file"), secret);
  EXPECT_GT(flips.load(), 100);
  EXPECT_EQ(flip_errors.load(), 0);
  // How often an operation found the directory depends on scheduling (since Linux 6.5 an
  // exchange also locks the moved directory, so it waits for our create/rename inside it and
  // lands right after), so it is recorded, not asserted.
  RecordProperty("writes_ok", writes_ok);
  RecordProperty("reads_ok", reads_ok);
  RemoveHostTree(root);
  RemoveHostTree(outside);
}

// --- mounts inside the root (needs root; runs in a child with its own mount namespace) ------

int MountChecks(const std::string& root, const std::string& secret_path) {
  if (unshare(CLONE_NEWNS) != 0) return 77;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
  if (mount("proc", (root + "/proc").c_str(), "proc", 0, nullptr) != 0) return 77;
  if (mount("tmpfs", (root + "/d/mnt").c_str(), "tmpfs", 0, "size=1m") != 0) return 77;
  {
    std::ofstream keep(root + "/d/mnt/keep");
    keep << "keep";
  }
  int secret_fd = open(secret_path.c_str(), O_RDONLY);
  if (secret_fd < 0) return 78;
  std::string fd_link = "/proc/self/fd/" + std::to_string(secret_fd);
  if (symlink(fd_link.c_str(), (root + "/fdleak").c_str()) != 0) return 78;

  SandboxFiles files(UniqueFd(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)),
                     SandboxIdentity{});
  auto read = [&](const std::string& p) {
    std::string out;
    Status st = files.ReadFile(p, 1 << 20, [&](std::string_view c) {
      out.append(c);
      return Status::Ok();
    });
    return std::make_pair(st, out);
  };
  // Magic links through the sandbox's own procfs are refused (RESOLVE_NO_MAGICLINKS).
  if (read("self/etc/hostname").first.ok()) return 1;
  if (read("fdleak").first.ok()) return 2;
  if (read("proc/self/fd/" + std::to_string(secret_fd)).first.ok()) return 3;
  // Plain procfs files are refused as pseudo-filesystem objects.
  if (read("proc/self/status").first.code() != StatusCode::kPermissionDenied) return 4;
  if (files.ListDir("proc").status().code() != StatusCode::kPermissionDenied) return 5;
  if (files.Stat("proc/self").status().code() != StatusCode::kPermissionDenied) return 6;
  if (files.WriteFile("proc/x", 0644, 10, ChunkSource("x", 1)).code() !=
      StatusCode::kPermissionDenied) {
    return 7;
  }
  if (files.Chmod("proc/self/status", 0777).code() != StatusCode::kPermissionDenied) return 8;
  if (files.MakeDirs("proc/newdir", 0755).code() != StatusCode::kPermissionDenied) return 9;
  // A recursive remove never crosses into another mount.
  if (files.Remove("proc", true).code() != StatusCode::kPermissionDenied) return 10;
  struct statfs sfs {};
  if (statfs((root + "/proc").c_str(), &sfs) != 0 || sfs.f_type != PROC_SUPER_MAGIC) return 11;
  if (files.Remove("d", true).code() != StatusCode::kPermissionDenied) return 12;
  if (access((root + "/d/mnt/keep").c_str(), F_OK) != 0) return 13;
  umount2((root + "/d/mnt").c_str(), MNT_DETACH);
  umount2((root + "/proc").c_str(), MNT_DETACH);
  return 0;
}

TEST_F(SandboxFilesTest, MountsInsideRootAreRefusedOrNotCrossed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount";
  ASSERT_EQ(mkdir(In("proc").c_str(), 0555), 0);
  ASSERT_EQ(mkdir(In("d").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(In("d/mnt").c_str(), 0755), 0);
  HostWrite(In("d/other"), "x");
  ASSERT_EQ(symlink("/proc/self/root", In("self").c_str()), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(MountChecks(root_, secret_path_));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot create a mount namespace here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "mount check number " << WEXITSTATUS(status) << " failed";
}

// Sandbox root filesystems are usually overlayfs, whose merged directories number their
// seek offsets by position in a cached list that is rebuilt after every deletion.
int OverlayRemoveChecks(const std::string& root) {
  if (unshare(CLONE_NEWNS) != 0) return 77;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
  std::string opts =
      "lowerdir=" + root + "/lower,upperdir=" + root + "/upper,workdir=" + root + "/work";
  if (mount("overlay", (root + "/merged").c_str(), "overlay", 0, opts.c_str()) != 0) return 77;
  // Entries only in the upper layer, next to the lower ones.
  for (int i = 0; i < 100; ++i) {
    std::string d = root + "/merged/t/u" + std::to_string(i);
    if (mkdir(d.c_str(), 0755) != 0) return 78;
    std::ofstream(d + "/f") << "x";
    std::ofstream(root + "/merged/t/uf" + std::to_string(i)) << "x";
  }
  SandboxFiles files(UniqueFd(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)),
                     SandboxIdentity{});
  Status st = files.Remove("merged/t", true);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  if (access((root + "/merged/t").c_str(), F_OK) == 0) return 2;
  if (access((root + "/lower/t/d0/f").c_str(), F_OK) != 0) return 3;  // lower is read-only
  umount2((root + "/merged").c_str(), MNT_DETACH);
  return 0;
}

TEST_F(SandboxFilesTest, RemoveRecursiveOnOverlayfs) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount";
  for (const char* d : {"lower", "lower/t", "upper", "work", "merged"}) {
    ASSERT_EQ(mkdir(In(d).c_str(), 0755), 0);
  }
  for (int i = 0; i < 200; ++i) {
    std::string d = In("lower/t/d" + std::to_string(i));
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
    HostWrite(d + "/f", "x");
    HostWrite(In("lower/t/f" + std::to_string(i)), "x");
  }
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(OverlayRemoveChecks(root_));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot mount overlayfs here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "overlay check number " << WEXITSTATUS(status);
}

// --- credential switching -----------------------------------------------------------------

struct ThreadIdentity {
  long fsuid, fsgid;
  uid_t euid;
  std::vector<gid_t> groups;
  uint32_t eff[2], perm[2], inh[2];
  bool operator==(const ThreadIdentity& o) const {
    return fsuid == o.fsuid && fsgid == o.fsgid && euid == o.euid && groups == o.groups &&
           std::equal(eff, eff + 2, o.eff) && std::equal(perm, perm + 2, o.perm) &&
           std::equal(inh, inh + 2, o.inh);
  }
};

ThreadIdentity CurrentThreadIdentity() {
  ThreadIdentity t{};
  t.fsuid = syscall(SYS_setfsuid, static_cast<uid_t>(-1));
  t.fsgid = syscall(SYS_setfsgid, static_cast<gid_t>(-1));
  t.euid = geteuid();
  long n = syscall(SYS_getgroups, 0, nullptr);
  t.groups.resize(static_cast<size_t>(std::max(n, 0L)));
  n = syscall(SYS_getgroups, t.groups.size(), t.groups.data());
  t.groups.resize(static_cast<size_t>(std::max(n, 0L)));
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  syscall(SYS_capget, &h, d);
  for (int i = 0; i < 2; ++i) {
    t.eff[i] = d[i].effective;
    t.perm[i] = d[i].permitted;
    t.inh[i] = d[i].inheritable;
  }
  return t;
}

class SandboxFilesCredentialsTest : public SandboxFilesTest {
 protected:
  static constexpr uid_t kHostUid = 123456;
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "credential switching needs root";
    SandboxFilesTest::SetUp();
    // The sandbox user must be able to traverse the root, as in a real rootfs.
    ASSERT_EQ(chmod(root_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(In("home").c_str(), 0755), 0);
    ASSERT_EQ(chown(In("home").c_str(), kHostUid, kHostUid), 0);
    ASSERT_EQ(mkdir(In("rootonly").c_str(), 0755), 0);
    HostWrite(In("rootonly/private"), "root only", 0600);
    HostWrite(In("rootonly/readable"), "readable", 0644);
    SandboxIdentity id;
    id.host_uid = kHostUid;
    id.host_gid = kHostUid;
    id.host_id_base = kHostUid - 1000;
    user_files_ = MakeFiles(id);
  }
  std::unique_ptr<SandboxFiles> user_files_;
};

TEST_F(SandboxFilesCredentialsTest, OperationsRunAsTheSandboxUser) {
  const ThreadIdentity before = CurrentThreadIdentity();
  ASSERT_EQ(before.fsuid, 0);
  ASSERT_NE(before.eff[0], 0u);

  // Another thread must never observe a changed identity: the switch is per thread.
  std::atomic<bool> stop{false}, other_thread_changed{false};
  std::thread watcher([&] {
    while (!stop.load()) {
      if (!(CurrentThreadIdentity() == before)) other_thread_changed = true;
    }
  });
  auto& f = *user_files_;

  ASSERT_TRUE(Write(f, "home/f", "data", 0640).ok());
  EXPECT_EQ(CurrentThreadIdentity(), before);
  struct stat st {};
  ASSERT_EQ(stat(In("home/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kHostUid);
  EXPECT_EQ(st.st_gid, kHostUid);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  Result<FileStat> s = f.Stat("home/f");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->uid, 1000u);
  EXPECT_EQ(s->gid, 1000u);
  EXPECT_EQ(f.Stat("rootonly")->uid, 65534u);  // host root is outside the mapping

  // Root-owned 0755 directory: the sandbox user cannot create, and neither can we for it.
  EXPECT_EQ(Write(f, "rootonly/f", "x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(CurrentThreadIdentity(), before);
  EXPECT_FALSE(HostExists(In("rootonly/f")));
  EXPECT_FALSE(HasUploadTemp(In("rootonly")));
  // CAP_DAC_OVERRIDE and CAP_FOWNER are really gone.
  EXPECT_EQ(Read(f, "rootonly/private").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(*Read(f, "rootonly/readable"), "readable");
  EXPECT_EQ(f.MakeDirs("rootonly/sub", 0755).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(f.Chmod("rootonly/readable", 0666).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(HostMode(In("rootonly/readable")), 0644u);
  EXPECT_EQ(f.Remove("rootonly/readable", false).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(f.Rename("rootonly/readable", "home/stolen").code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(HostExists(In("rootonly/readable")));
  EXPECT_EQ(CurrentThreadIdentity(), before);

  // Things the sandbox user may do still work, with files owned by it.
  ASSERT_TRUE(f.MakeDirs("home/a/b", 0700).ok());
  ASSERT_EQ(stat(In("home/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kHostUid);
  EXPECT_TRUE(Write(f, "home/a/b/c", "x").ok());
  EXPECT_TRUE(f.Chmod("home/a/b/c", 0600).ok());
  EXPECT_TRUE(f.Rename("home/a/b/c", "home/c").ok());
  EXPECT_TRUE(f.ListDir("home").ok());
  EXPECT_TRUE(f.Remove("home/a", true).ok());
  EXPECT_FALSE(HostExists(In("home/a")));
  EXPECT_EQ(CurrentThreadIdentity(), before);

  stop = true;
  watcher.join();
  EXPECT_FALSE(other_thread_changed.load());
}

TEST_F(SandboxFilesCredentialsTest, IdentityWithoutGroupIsRefused) {
  SandboxIdentity id;
  id.host_uid = kHostUid;  // host_gid left at -1
  auto f = MakeFiles(id);
  EXPECT_EQ(Write(*f, "home/f", "x").code(), StatusCode::kPermissionDenied);
  EXPECT_FALSE(HostExists(In("home/f")));
}

}  // namespace
}  // namespace paddock::runtime::linux
