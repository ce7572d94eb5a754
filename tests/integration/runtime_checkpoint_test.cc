// Checkpoint (a sandbox's writable layer frozen into a host directory), fork (sandboxes stacked
// on such layers) and id-mapped binds, on real sandboxes: contents, owners, deletions and opaque
// directories survive a checkpoint; the host copy carries in-sandbox ids; binds look the same
// from every sandbox's uid range; and nothing a sandbox plants in its layer reaches the host.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/random.h"
#include "integration/integration_helpers.h"
#include "support/runtime_fixture.h"

namespace paddock::testing {
namespace {

namespace fs = std::filesystem;
using runtime::BindMount;
using runtime::ChangedPath;

class RuntimeCheckpointTest : public SandboxTest {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    if (IsSkipped()) return;
    dir_ = TestDataDir() + "/checkpoint-test-" + RandomHex(4);
    fs::create_directories(dir_);
    ::chmod(dir_.c_str(), 0700);
  }
  void TearDown() override {
    SandboxTest::TearDown();
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  std::string NewWith(std::vector<std::string> layers, std::vector<BindMount> binds = {}) {
    runtime::SandboxSpec spec = DefaultSpec();
    spec.layers = std::move(layers);
    spec.binds = std::move(binds);
    return NewSandbox(spec);
  }
  std::string Root(const std::string& id, const std::string& script) {
    CommandOutput o = Sh(id, script, std::chrono::seconds(30), "root");
    EXPECT_EQ(o.result.exit_code, 0) << script << "\n" << o.err;
    return o.out;
  }
  std::string User(const std::string& id, const std::string& script) {
    CommandOutput o = Sh(id, script);
    EXPECT_EQ(o.result.exit_code, 0) << script << "\n" << o.err;
    return o.out;
  }
  std::vector<std::string> Listing(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
  static std::string HostFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_;
};

TEST_F(RuntimeCheckpointTest, ForkSeesContentOwnersDeletionsAndIsIndependent) {
  std::string a = NewSandbox();
  ASSERT_FALSE(a.empty());
  User(a,
       "cd /home/sandbox && mkdir -p proj keep && echo a > proj/a && echo b > proj/b && "
       "chmod 640 proj/a && ln -s a proj/link && echo x > keep/x && echo g > gone.txt && "
       "TZ=UTC0 touch -d '2001-02-03 04:05:06' keep/x");
  // As root: a root-owned file, and a template directory removed (a whiteout in the layer).
  Root(a, "echo r > /root/secret && chmod 600 /root/secret && rmdir /mnt");

  const std::string l1 = dir_ + "/l1";
  auto stats = rt().Checkpoint(a, l1);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_GT(stats->files, 5u);
  EXPECT_GE(stats->bytes, 10u);

  const std::string check =
      "cd /home/sandbox && cat proj/a proj/b keep/x gone.txt && readlink proj/link && "
      "stat -c '%u %g %a' proj/a proj/b keep/x && stat -c %Y keep/x && "
      "if test -e /mnt; then echo mnt; else echo no-mnt; fi";
  const std::string expected =
      "a\nb\nx\ng\na\n1000 1000 640\n1000 1000 644\n1000 1000 644\n981173106\nno-mnt\n";
  std::string b = NewWith({l1});
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(User(a, check), expected);
  EXPECT_EQ(User(b, check), expected);
  EXPECT_EQ(Root(b, "cat /root/secret; stat -c '%u %g %a' /root/secret"), "r\n0 0 600\n");
  auto info = rt().Get(b);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->layers, std::vector<std::string>{l1});

  // Writes in the fork change neither the checkpoint nor the original.
  User(b,
       "cd /home/sandbox && echo changed > proj/a && echo new > proj/new && rm gone.txt && "
       "rm -rf proj && mkdir proj && echo c > proj/c");
  EXPECT_EQ(HostFile(l1 + "/home/sandbox/proj/a"), "a\n");
  EXPECT_FALSE(fs::exists(l1 + "/home/sandbox/proj/new"));
  EXPECT_EQ(User(a, "cat /home/sandbox/proj/a /home/sandbox/gone.txt; ls /home/sandbox/proj"),
            "a\ng\na\nb\nlink\n");

  // A fork of the fork: two layers. The replaced directory is opaque (only the new content),
  // the deleted file stays deleted, untouched content of the first layer shows through.
  const std::string l2 = dir_ + "/l2";
  stats = rt().Checkpoint(b, l2);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  // The second layer holds only the fork's own changes.
  EXPECT_FALSE(fs::exists(l2 + "/home/sandbox/keep"));
  char opaque[8] = {};
  EXPECT_EQ(::lgetxattr((l2 + "/home/sandbox/proj").c_str(), "user.overlay.opaque", opaque,
                        sizeof opaque),
            1);
  EXPECT_EQ(opaque[0], 'y');
  struct stat wh;
  ASSERT_EQ(::lstat((l2 + "/home/sandbox/gone.txt").c_str(), &wh), 0);
  EXPECT_TRUE(S_ISCHR(wh.st_mode) && wh.st_rdev == makedev(0, 0));

  std::string c = NewWith({l2, l1});
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(User(c,
                 "cd /home/sandbox && ls -A proj && cat proj/c keep/x && "
                 "stat -c '%u %g' proj proj/c keep/x && "
                 "if test -e gone.txt; then echo gone-present; fi; test -e /mnt || echo no-mnt"),
            "c\nc\nx\n1000 1000\n1000 1000\n1000 1000\nno-mnt\n");
  EXPECT_EQ(Root(c, "cat /root/secret"), "r\n");
  // The sandbox user can change layer content (copy-up of id-mapped files it owns).
  EXPECT_EQ(User(c, "echo more >> /home/sandbox/keep/x && cat /home/sandbox/keep/x"), "x\nmore\n");
  EXPECT_EQ(HostFile(l1 + "/home/sandbox/keep/x"), "x\n");
}

TEST_F(RuntimeCheckpointTest, LayerOnHostHasInSandboxIdsAndAppearsWhole) {
  std::string a = NewSandbox();
  ASSERT_FALSE(a.empty());
  User(a, "echo mine > /home/sandbox/f.txt && chmod 604 /home/sandbox/f.txt");
  Root(a, "echo root > /root/r.txt");

  const std::string dest = dir_ + "/layer";
  ASSERT_FALSE(fs::exists(dest));
  auto stats = rt().Checkpoint(a, dest);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(Listing(dir_), std::vector<std::string>{"layer"});  // no temporary left over

  struct stat st;
  ASSERT_EQ(::lstat((dest + "/home/sandbox/f.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 1000u);
  EXPECT_EQ(st.st_mode & 07777, 0604u);
  ASSERT_EQ(::lstat((dest + "/home/sandbox").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  ASSERT_EQ(::lstat((dest + "/root/r.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 0u);
  ASSERT_EQ(::lstat(dest.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);  // other host users cannot reach into a layer
  EXPECT_EQ(HostFile(dest + "/home/sandbox/f.txt"), "mine\n");

  // An existing destination is refused and left alone.
  User(a, "echo later > /home/sandbox/g.txt");
  auto again = rt().Checkpoint(a, dest);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(fs::exists(dest + "/home/sandbox/g.txt"));
  EXPECT_EQ(Listing(dir_), std::vector<std::string>{"layer"});

  auto unknown = rt().Checkpoint("no-such-sandbox", dir_ + "/other");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  auto no_parent = rt().Checkpoint(a, dir_ + "/missing/layer");
  EXPECT_FALSE(no_parent.ok());
  for (const char* bad : {"relative/layer", "/", "", "/x,upperdir=/etc"}) {
    auto r = rt().Checkpoint(a, bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(Listing(dir_), std::vector<std::string>{"layer"});
  // The sandbox runs on after all of this.
  EXPECT_EQ(User(a, "cat /home/sandbox/g.txt"), "later\n");

  // A layer path that could inject overlay options is refused at create.
  runtime::SandboxSpec spec = DefaultSpec();
  spec.layers = {dest + ":/etc"};
  auto bad = rt().Create(spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RuntimeCheckpointTest, PausedSandboxIsCheckpointedAndStaysPaused) {
  std::string a = NewSandbox();
  ASSERT_FALSE(a.empty());
  User(a, "echo paused > /home/sandbox/p.txt");
  ASSERT_TRUE(rt().Pause(a).ok());
  auto stats = rt().Checkpoint(a, dir_ + "/p");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  auto info = rt().Get(a);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, runtime::SandboxState::kPaused);
  ASSERT_TRUE(rt().Resume(a).ok());
  EXPECT_EQ(User(a, "cat /home/sandbox/p.txt"), "paused\n");
  std::string b = NewWith({dir_ + "/p"});
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(User(b, "cat /home/sandbox/p.txt"), "paused\n");
}

TEST_F(RuntimeCheckpointTest, BindsAreIdMappedForEverySandbox) {
  const std::string ws = dir_ + "/ws", cache = dir_ + "/cache";
  fs::create_directories(ws);
  fs::create_directories(cache);
  ASSERT_EQ(::chown(ws.c_str(), 1000, 1000), 0);
  ASSERT_EQ(::chown(cache.c_str(), 1000, 1000), 0);
  std::ofstream(cache + "/dep.txt") << "cached\n";

  std::string a = NewWith({}, {{ws, "/workspace"}, {cache, "/cache/deps", true}});
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(User(a,
                 "echo hi > /workspace/f && stat -c '%u %g' /workspace /workspace/f && "
                 "cat /cache/deps/dep.txt && stat -c '%u' /cache/deps/dep.txt"),
            "1000 1000\n1000 1000\ncached\n0\n");
  struct stat st;
  ASSERT_EQ(::stat((ws + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 1000u);

  // A second sandbox (another host uid range) sees the same owners and can modify the file.
  std::string b = NewWith({}, {{ws, "/workspace"}});
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(
      User(b, "stat -c '%u %g' /workspace/f && echo more >> /workspace/f && cat /workspace/f"),
      "1000 1000\nhi\nmore\n");
  EXPECT_EQ(HostFile(ws + "/f"), "hi\nmore\n");
  EXPECT_EQ(User(a, "cat /workspace/f"), "hi\nmore\n");

  // Read-only: nobody inside can write, not even root.
  CommandOutput o = Sh(a, "echo x > /cache/deps/new");
  EXPECT_NE(o.result.exit_code, 0);
  o = Sh(a, "echo x > /cache/deps/dep.txt", std::chrono::seconds(30), "root");
  EXPECT_NE(o.result.exit_code, 0);
  EXPECT_EQ(HostFile(cache + "/dep.txt"), "cached\n");
  EXPECT_FALSE(fs::exists(cache + "/new"));

  // The bind is not part of the writable layer: a checkpoint holds the mount point only.
  ASSERT_TRUE(rt().Checkpoint(a, dir_ + "/ckpt").ok());
  EXPECT_TRUE(fs::is_directory(dir_ + "/ckpt/workspace"));
  EXPECT_FALSE(fs::exists(dir_ + "/ckpt/workspace/f"));
}

TEST_F(RuntimeCheckpointTest, BadBindsAreRefusedLeavingNothing) {
  const std::string ws = dir_ + "/ws";
  fs::create_directories(ws);
  const size_t sandboxes = rt().List().size();
  const size_t objects = rt().ListHostObjects().size();
  for (const char* target : {"workspace", "/", "/proc/x", "/proc", "/a/../b", "/tmp/x", "/dev",
                             "/sys/fs", "/a/./b", "/a//b", "/a/", ""}) {
    runtime::SandboxSpec spec = DefaultSpec();
    spec.binds = {{ws, target}};
    auto r = rt().Create(spec);
    ASSERT_FALSE(r.ok()) << target;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << target;
  }
  runtime::SandboxSpec spec = DefaultSpec();
  spec.binds = {{ws, "/workspace"}, {ws, "/workspace/sub"}};
  auto r = rt().Create(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  spec.binds = {{dir_ + "/missing", "/workspace"}};
  r = rt().Create(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  spec.binds = {{"relative/dir", "/workspace"}};
  EXPECT_EQ(rt().Create(spec).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt().List().size(), sandboxes);
  EXPECT_EQ(rt().ListHostObjects().size(), objects);
}

TEST_F(RuntimeCheckpointTest, ChangedPathsAtDepthWithDeletionsAndTruncation) {
  std::string a = NewSandbox();
  ASSERT_FALSE(a.empty());
  User(a, "mkdir -p /home/sandbox/.local/share/x && touch /home/sandbox/.local/share/x/y");
  Root(a, "rmdir /mnt");
  bool truncated = true;
  auto deep = rt().ChangedPaths(a, 3, 1000, &truncated);
  ASSERT_TRUE(deep.ok()) << deep.status().ToString();
  EXPECT_FALSE(truncated);
  EXPECT_TRUE(
      std::is_sorted(deep->begin(), deep->end(),
                     [](const ChangedPath& x, const ChangedPath& y) { return x.path < y.path; }));
  auto has = [](const std::vector<ChangedPath>& v, const ChangedPath& p) {
    return std::find(v.begin(), v.end(), p) != v.end();
  };
  auto has_path = [](const std::vector<ChangedPath>& v, const std::string& p) {
    return std::any_of(v.begin(), v.end(), [&](const ChangedPath& c) { return c.path == p; });
  };
  EXPECT_TRUE(has(*deep, {"/home/sandbox/.local", false}));
  EXPECT_TRUE(has(*deep, {"/mnt", true}));
  EXPECT_TRUE(has(*deep, {"/home/sandbox", false}));
  EXPECT_FALSE(has_path(*deep, "/home/sandbox/.local/share"));
  // Reported once, no duplicates.
  std::set<std::string> unique;
  for (const auto& c : *deep) unique.insert(c.path);
  EXPECT_EQ(unique.size(), deep->size());

  auto top = rt().ChangedPaths(a, 1, 1000, &truncated);
  ASSERT_TRUE(top.ok());
  EXPECT_TRUE(has(*top, {"/home", false}));
  EXPECT_TRUE(has(*top, {"/mnt", true}));
  EXPECT_FALSE(has_path(*top, "/home/sandbox"));

  auto few = rt().ChangedPaths(a, 3, 2, &truncated);
  ASSERT_TRUE(few.ok());
  EXPECT_TRUE(truncated);
  ASSERT_EQ(few->size(), 2u);
  EXPECT_EQ((*few)[0], (*deep)[0]);
  EXPECT_EQ((*few)[1], (*deep)[1]);
  EXPECT_EQ(rt().ChangedPaths(a, 0, 10, &truncated).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt().ChangedPaths("no-such-sandbox", 2, 10, &truncated).status().code(),
            StatusCode::kNotFound);

  // In a fork, removing a file of the layer below is a deletion.
  ASSERT_TRUE(rt().Checkpoint(a, dir_ + "/l").ok());
  std::string b = NewWith({dir_ + "/l"});
  ASSERT_FALSE(b.empty());
  User(b, "rm /home/sandbox/.local/share/x/y");
  auto forked = rt().ChangedPaths(b, 6, 1000, &truncated);
  ASSERT_TRUE(forked.ok());
  EXPECT_TRUE(has(*forked, {"/home/sandbox/.local/share/x/y", true}));
  EXPECT_FALSE(has_path(*forked, "/mnt"));  // the layer's deletion is not the fork's change
}

TEST_F(RuntimeCheckpointTest, PlantedLinksAndSpecialFilesNeverExposeTheHost) {
  const std::string secret = dir_ + "/host-secret.txt";
  std::ofstream(secret) << "HOST-SECRET\n";
  std::string a = NewSandbox();
  ASSERT_FALSE(a.empty());
  // Symlinks to host paths (absolute, and relative climbing out), a file named like a
  // whiteout, a fifo (copying must not block on it), a socket-like leftover, a sparse file far
  // larger than the disk cap, and one file hard-linked many times.
  User(a, "cd /home/sandbox && ln -s " + secret +
              " abs && ln -s /etc/shadow shadow && "
              "ln -s ../../../../../../.." +
              secret + " rel && mkdir d && ln -s " + dir_ +
              " d/dirlink && touch .wh.abs && mkfifo fifo && truncate -s 20G sparse && "
              "echo data | dd of=sparse bs=1 seek=10000000000 conv=notrunc 2>/dev/null && "
              "head -c 1048576 /dev/urandom > big && for i in $(seq 1 50); do ln big big.$i; done");
  auto stats = rt().Checkpoint(a, dir_ + "/l");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  // Only real data was written: one copy of `big`, the few bytes of `sparse`.
  EXPECT_LT(stats->bytes, 3u << 20);

  const std::string home = dir_ + "/l/home/sandbox";
  struct stat st;
  ASSERT_EQ(::lstat((home + "/abs").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(fs::read_symlink(home + "/abs").string(), secret);
  ASSERT_EQ(::lstat((home + "/rel").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_EQ(::lstat((home + "/d/dirlink").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_EQ(::lstat((home + "/.wh.abs").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  ASSERT_EQ(::lstat((home + "/fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(::lstat((home + "/sparse").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 20ll << 30);
  EXPECT_LT(st.st_blocks * 512, 1 << 20);
  ASSERT_EQ(::lstat((home + "/big").c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 51u);
  // Nothing of the host's content was copied in, and the host file is untouched.
  EXPECT_EQ(HostFile(secret), "HOST-SECRET\n");
  for (const auto& e : fs::recursive_directory_iterator(dir_ + "/l")) {
    if (e.is_regular_file() && !e.is_symlink() && e.file_size() < 100) {
      EXPECT_EQ(HostFile(e.path()).find("HOST-SECRET"), std::string::npos) << e.path();
    }
  }

  // The fork sees links to paths that do not exist in its world.
  std::string b = NewWith({dir_ + "/l"});
  ASSERT_FALSE(b.empty());
  CommandOutput o = Sh(b,
                       "cd /home/sandbox; cat abs rel shadow d/dirlink/host-secret.txt; "
                       "readlink abs; dd if=sparse bs=1 skip=10000000000 count=5 2>/dev/null; "
                       "test -p fifo && echo fifo");
  EXPECT_EQ(o.out.find("HOST-SECRET"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(secret + "\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("data\nfifo\n"), std::string::npos) << o.out;
  EXPECT_EQ(User(b, "cmp /home/sandbox/big /home/sandbox/big.50 && echo same"), "same\n");
  // Writing through a planted link inside the fork stays inside the fork.
  Sh(b, "echo pwned > /home/sandbox/abs");
  EXPECT_EQ(HostFile(secret), "HOST-SECRET\n");
}

TEST_F(RuntimeCheckpointTest, FailedCheckpointLeavesNothingAndThaws) {
  std::string a = NewSandbox();
  ASSERT_FALSE(a.empty());
  // Deeper than the copy goes (each level would hold daemon descriptors).
  User(a, "p=/home/sandbox/deep; for i in $(seq 1 140); do p=$p/d; done; mkdir -p $p");
  auto r = rt().Checkpoint(a, dir_ + "/deep");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
  EXPECT_TRUE(Listing(dir_).empty());
  auto info = rt().Get(a);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, runtime::SandboxState::kRunning);
  EXPECT_EQ(User(a, "echo alive"), "alive\n");
  // ChangedPaths bounds its walk instead of failing.
  bool truncated = false;
  auto changed = rt().ChangedPaths(a, 1000, 100000, &truncated);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
}

TEST_F(RuntimeCheckpointTest, SymlinkPlantedAtABindTargetIsRefused) {
  const std::string ws = dir_ + "/ws", host_dir = dir_ + "/host";
  fs::create_directories(ws);
  fs::create_directories(host_dir);
  std::string a = NewSandbox();
  ASSERT_FALSE(a.empty());
  // Root inside owns the overlay's root directory: it can put symlinks where a later fork
  // will have its binds.
  Root(a, "ln -s " + host_dir + " /cache && ln -s ../../../../../.." + host_dir + " /rel");
  ASSERT_TRUE(rt().Checkpoint(a, dir_ + "/l").ok());
  const size_t sandboxes = rt().List().size();
  const size_t objects = rt().ListHostObjects().size();
  for (const char* target : {"/cache", "/cache/sub", "/rel/x"}) {
    auto r = rt().Create([&] {
      runtime::SandboxSpec spec = DefaultSpec();
      spec.layers = {dir_ + "/l"};
      spec.binds = {{ws, target}};
      return spec;
    }());
    ASSERT_FALSE(r.ok()) << target;
    EXPECT_NE(r.status().message().find("bind target"), std::string::npos) << r.status().ToString();
  }
  EXPECT_TRUE(Listing(host_dir).empty());  // nothing was created through the links
  EXPECT_TRUE(Listing(ws).empty());
  EXPECT_EQ(rt().List().size(), sandboxes);
  EXPECT_EQ(rt().ListHostObjects().size(), objects);
}

}  // namespace
}  // namespace paddock::testing
