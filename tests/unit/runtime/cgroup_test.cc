#include "runtime/linux/cgroup.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace paddock::runtime::linux {
namespace {

namespace fs = std::filesystem;

// This host's layout: v1 controllers each on their own mount, a controller-less cgroup2 beside
// them, optional fields ("shared:N") on some lines.
constexpr const char* kHybridMountinfo =
    "22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup rw,memory\n"
    "35 30 0:32 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
    "36 30 0:33 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "37 30 0:34 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
    "38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// A systemd-era hybrid host: cpu and cpuacct co-mounted, optional fields everywhere.
constexpr const char* kSystemdHybridMountinfo =
    "25 24 0:22 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 "
    "cgroup2 rw,nsdelegate\n"
    "26 24 0:23 / /sys/fs/cgroup/systemd rw,nosuid shared:6 - cgroup cgroup "
    "rw,xattr,name=systemd\n"
    "29 24 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup "
    "rw,cpu,cpuacct\n"
    "30 24 0:27 / /sys/fs/cgroup/memory rw,nosuid shared:10 - cgroup cgroup rw,memory\n"
    "31 24 0:28 / /sys/fs/cgroup/pids rw,nosuid shared:11 master:3 - cgroup cgroup rw,pids\n"
    "32 24 0:29 / /sys/fs/cgroup/freezer rw,nosuid shared:12 - cgroup cgroup rw,freezer\n";

constexpr const char* kPureV2Mountinfo =
    "22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "26 22 0:6 / /sys/kernel/security rw,nosuid shared:8 - securityfs securityfs rw\n"
    "27 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
    "28 22 0:24 / /sys/fs/pstore rw,nosuid shared:10 - pstore pstore rw\n";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

uid_t OwnerUid(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_uid;
}

gid_t OwnerGid(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_gid;
}

// ---------------------------------------------------------------------------------------------
// Layout parsing

TEST(CgroupLayoutTest, HybridHostIsV1) {
  auto layout = ParseCgroupLayout(kHybridMountinfo);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->version, CgroupVersion::kV1);
  EXPECT_EQ(layout->v1_mounts.at("cpu"), "/sys/fs/cgroup/cpu");
  EXPECT_EQ(layout->v1_mounts.at("cpuacct"), "/sys/fs/cgroup/cpuacct");
  EXPECT_EQ(layout->v1_mounts.at("memory"), "/sys/fs/cgroup/memory");
  EXPECT_EQ(layout->v1_mounts.at("pids"), "/sys/fs/cgroup/pids");
  EXPECT_EQ(layout->v1_mounts.at("freezer"), "/sys/fs/cgroup/freezer");
  // Only the controllers Paddock uses are recorded.
  EXPECT_EQ(layout->v1_mounts.size(), 5u);
  EXPECT_FALSE(layout->fake_for_tests);
}

TEST(CgroupLayoutTest, CoMountedCpuCpuacctShareOneDirectory) {
  auto layout = ParseCgroupLayout(kSystemdHybridMountinfo);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->version, CgroupVersion::kV1);
  EXPECT_EQ(layout->v1_mounts.at("cpu"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(layout->v1_mounts.at("cpuacct"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(layout->v1_mounts.count("systemd"), 0u);

  SandboxCgroup cg = SandboxCgroup::Attach(*layout, "s1");
  // cpu and cpuacct resolve to one directory, so four hierarchies in all.
  EXPECT_EQ(cg.dirs().size(), 4u);
  EXPECT_EQ(cg.exec_parent_dir(), "/sys/fs/cgroup/freezer/paddock-s1");
}

TEST(CgroupLayoutTest, PureV2HostIsV2) {
  auto layout = ParseCgroupLayout(kPureV2Mountinfo);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->version, CgroupVersion::kV2);
  EXPECT_EQ(layout->v2_root, "/sys/fs/cgroup");
  EXPECT_TRUE(layout->v1_mounts.empty());
}

TEST(CgroupLayoutTest, DecodesOctalEscapesInMountPoints) {
  auto layout = ParseCgroupLayout(
      "27 22 0:23 / /srv/my\\040cgroups\\134x rw,relatime shared:9 - cgroup2 cgroup2 rw\n");
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->v2_root, "/srv/my cgroups\\x");
}

TEST(CgroupLayoutTest, MissingV1ControllerIsUnimplementedAndNamed) {
  // memory and pids in v1 commit the host to v1, but freezer and cpuacct are absent.
  auto layout = ParseCgroupLayout(
      "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
      "34 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "38 30 0:35 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
      "40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.status().code(), StatusCode::kUnimplemented);
  const std::string& msg = layout.status().message();
  EXPECT_NE(msg.find("freezer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpuacct"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("memory"), std::string::npos) << msg;
}

TEST(CgroupLayoutTest, NoCgroupsAtAllIsUnimplemented) {
  auto layout = ParseCgroupLayout(
      "22 1 0:21 / /sys rw - sysfs sysfs rw\n"
      "garbage line\n"
      "\n");
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.status().code(), StatusCode::kUnimplemented);
}

TEST(CgroupLayoutTest, DetectOnThisHostFindsExistingDirectories) {
  auto layout = DetectCgroupLayout();
  if (!layout.ok()) GTEST_SKIP() << "no usable cgroups here: " << layout.status().ToString();
  if (layout->version == CgroupVersion::kV2) {
    EXPECT_TRUE(fs::is_directory(layout->v2_root));
  } else {
    for (const auto& [ctrl, dir] : layout->v1_mounts) EXPECT_TRUE(fs::is_directory(dir)) << ctrl;
  }
}

// ---------------------------------------------------------------------------------------------
// Fake cgroupfs trees

class FakeTree {
 public:
  FakeTree() {
    std::string tmpl = (fs::temp_directory_path() / "paddock-cgroup-test-XXXXXX").string();
    char* made = ::mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    root_ = tmpl;
  }
  ~FakeTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  const std::string& root() const { return root_; }
  std::string Path(const std::string& rel) const { return root_ + "/" + rel; }

  CgroupLayout V2Layout(const std::string& subtree_control = "") {
    WriteText(Path("cgroup.subtree_control"), subtree_control);
    WriteText(Path("cgroup.controllers"), "cpuset cpu io memory pids\n");
    CgroupLayout layout;
    layout.version = CgroupVersion::kV2;
    layout.v2_root = root_;
    layout.fake_for_tests = true;
    return layout;
  }

  CgroupLayout V1Layout(bool co_mount_cpu = false) {
    CgroupLayout layout;
    layout.version = CgroupVersion::kV1;
    layout.fake_for_tests = true;
    for (const char* ctrl : {"cpu", "cpuacct", "memory", "pids", "freezer"}) {
      std::string dir = Path(ctrl);
      if (co_mount_cpu && (std::string(ctrl) == "cpu" || std::string(ctrl) == "cpuacct")) {
        dir = Path("cpu,cpuacct");
      }
      fs::create_directories(dir);
      layout.v1_mounts[ctrl] = dir;
    }
    return layout;
  }

 private:
  std::string root_;
};

constexpr uid_t kDelegateUid = 123457;
constexpr gid_t kDelegateGid = 234568;

bool IsRoot() { return ::geteuid() == 0; }

TEST(CgroupV2FakeTest, CreateWritesLimitsAndDelegatesOnlyProcsFiles) {
  if (!IsRoot()) GTEST_SKIP() << "chown to another uid needs root";
  FakeTree tree;
  CgroupLayout layout = tree.V2Layout();
  CgroupLimits limits{.cpus = 1.5, .memory_bytes = 256ull << 20, .pids = 100};
  auto cg = SandboxCgroup::Create(layout, "abc", limits, kDelegateUid, kDelegateGid);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();

  const std::string dir = tree.Path("paddock-abc");
  EXPECT_EQ(cg->version(), CgroupVersion::kV2);
  EXPECT_EQ(cg->sandbox_id(), "abc");
  EXPECT_EQ(cg->exec_parent_dir(), dir);
  EXPECT_EQ(cg->dirs(), std::vector<std::string>{dir});

  EXPECT_EQ(ReadText(tree.Path("cgroup.subtree_control")), "+cpu +memory +pids");
  EXPECT_EQ(ReadText(dir + "/cpu.max"), "150000 100000");
  EXPECT_EQ(ReadText(dir + "/memory.max"), "268435456");
  EXPECT_EQ(ReadText(dir + "/memory.swap.max"), "0");
  EXPECT_EQ(ReadText(dir + "/pids.max"), "100");

  for (const std::string& p : {dir, dir + "/cgroup.procs", dir + "/cgroup.threads"}) {
    EXPECT_EQ(OwnerUid(p), kDelegateUid) << p;
    EXPECT_EQ(OwnerGid(p), kDelegateGid) << p;
  }
  // Limits stay with root so the sandbox cannot raise them.
  for (const char* f : {"cpu.max", "memory.max", "memory.swap.max", "pids.max"}) {
    EXPECT_EQ(OwnerUid(dir + "/" + f), 0u) << f;
  }
  EXPECT_FALSE(Exists(dir + "/cgroup.subtree_control"));

  auto parent = cg->OpenExecParentDir();
  ASSERT_TRUE(parent.ok()) << parent.status().ToString();
  EXPECT_TRUE(parent->valid());
  auto clone_fd = cg->OpenV2DirForClone();
  ASSERT_TRUE(clone_fd.ok()) << clone_fd.status().ToString();
  EXPECT_EQ(::fcntl(clone_fd->get(), F_GETFL) & O_PATH, O_PATH);

  ASSERT_TRUE(cg->Remove().ok());
  EXPECT_FALSE(Exists(dir));
}

TEST(CgroupV2FakeTest, UnlimitedWritesMax) {
  FakeTree tree;
  CgroupLayout layout = tree.V2Layout();
  CgroupLimits limits{.cpus = 0, .memory_bytes = 0, .pids = 0};
  auto cg = SandboxCgroup::Create(layout, "unl", limits, ::getuid(), ::getgid());
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  const std::string dir = tree.Path("paddock-unl");
  EXPECT_EQ(ReadText(dir + "/cpu.max"), "max 100000");
  EXPECT_EQ(ReadText(dir + "/memory.max"), "max");
  EXPECT_EQ(ReadText(dir + "/pids.max"), "max");
  ASSERT_TRUE(cg->Remove().ok());
}

TEST(CgroupV2FakeTest, AlreadyEnabledControllersAreNotRewritten) {
  FakeTree tree;
  CgroupLayout layout = tree.V2Layout("cpu io memory pids\n");
  auto cg = SandboxCgroup::Create(layout, "x", {}, ::getuid(), ::getgid());
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ(ReadText(tree.Path("cgroup.subtree_control")), "cpu io memory pids\n");
  ASSERT_TRUE(cg->Remove().ok());
}

TEST(CgroupV2FakeTest, UnwritableSubtreeControlFailsAndLeavesNothing) {
  FakeTree tree;
  CgroupLayout layout = tree.V2Layout();
  // A directory where the file should be: every read and write of it fails (EISDIR).
  fs::remove(tree.Path("cgroup.subtree_control"));
  fs::create_directory(tree.Path("cgroup.subtree_control"));
  auto cg = SandboxCgroup::Create(layout, "bad", {}, ::getuid(), ::getgid());
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.status().message().find("cgroup.subtree_control"), std::string::npos)
      << cg.status().ToString();
  EXPECT_FALSE(Exists(tree.Path("paddock-bad")));
}

TEST(CgroupV2FakeTest, WriteFailureAfterMkdirRemovesTheDirectory) {
  FakeTree tree;
  CgroupLayout layout = tree.V2Layout("cpu memory pids");
  // RLIMIT_FSIZE 0 makes every write to a regular file fail with EFBIG, i.e. the first limit
  // write after the mkdir. Done in a child so the limit cannot touch the test runner.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit zero = {0, 0};
    ::setrlimit(RLIMIT_FSIZE, &zero);
    auto cg = SandboxCgroup::Create(layout, "efbig", {.cpus = 1}, ::getuid(), ::getgid());
    int code = 0;
    if (cg.ok()) code |= 1;
    if (cg.status().message().find("cpu.max") == std::string::npos) code |= 2;
    if (cg.status().err() != EFBIG) code |= 4;
    ::_exit(code);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "bit 1: created, 2: message, 4: errno";
  EXPECT_FALSE(Exists(tree.Path("paddock-efbig")));
}

TEST(CgroupV2FakeTest, ExistingCgroupIsNeitherReusedNorRemoved) {
  FakeTree tree;
  CgroupLayout layout = tree.V2Layout();
  fs::create_directory(tree.Path("paddock-dup"));
  WriteText(tree.Path("paddock-dup/marker"), "live sandbox");
  auto cg = SandboxCgroup::Create(layout, "dup", {}, ::getuid(), ::getgid());
  ASSERT_FALSE(cg.ok());
  EXPECT_EQ(cg.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ReadText(tree.Path("paddock-dup/marker")), "live sandbox");
}

TEST(CgroupV2FakeTest, RejectsIdsThatAreNotOnePathComponent) {
  FakeTree tree;
  CgroupLayout layout = tree.V2Layout();
  for (const std::string& id :
       std::vector<std::string>{"", "..", "a/b", "../../etc", std::string(300, 'x')}) {
    auto cg = SandboxCgroup::Create(layout, id, {}, ::getuid(), ::getgid());
    ASSERT_FALSE(cg.ok()) << id;
    EXPECT_EQ(cg.status().code(), StatusCode::kInvalidArgument) << id;
  }
  EXPECT_TRUE(SandboxCgroup::ListSandboxIds(layout).empty());
}

TEST(CgroupV2FakeTest, FreezeWaitsForTheFrozenEvent) {
  FakeTree tree;
  CgroupLayout layout = tree.V2Layout();
  auto cg = SandboxCgroup::Create(layout, "frz", {}, ::getuid(), ::getgid());
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  const std::string dir = tree.Path("paddock-frz");
  WriteText(dir + "/cgroup.events", "populated 1\nfrozen 1\n");
  ASSERT_TRUE(cg->Freeze().ok());
  EXPECT_EQ(ReadText(dir + "/cgroup.freeze"), "1");
  EXPECT_TRUE(cg->IsFrozen());
  ASSERT_TRUE(cg->Thaw().ok());
  EXPECT_EQ(ReadText(dir + "/cgroup.freeze"), "0");
  ASSERT_TRUE(cg->Remove().ok());
}

TEST(CgroupV2FakeTest, FreezeTimesOutAndThawsWhenNeverFrozen) {
  FakeTree tree;
  CgroupLayout layout = tree.V2Layout();
  auto cg = SandboxCgroup::Create(layout, "stuck", {}, ::getuid(), ::getgid());
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  const std::string dir = tree.Path("paddock-stuck");
  WriteText(dir + "/cgroup.events", "populated 1\nfrozen 0\n");
  Status st = cg->Freeze();
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_FALSE(cg->IsFrozen());
  EXPECT_EQ(ReadText(dir + "/cgroup.freeze"), "0");
  ASSERT_TRUE(cg->Remove().ok());
}

TEST(CgroupV2FakeTest, UsageAndPidsComeFromTheInterfaceFiles) {
  FakeTree tree;
  CgroupLayout layout = tree.V2Layout();
  auto cg = SandboxCgroup::Create(layout, "use", {}, ::getuid(), ::getgid());
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  const std::string dir = tree.Path("paddock-use");
  WriteText(dir + "/memory.current", "4096\n");
  WriteText(dir + "/memory.peak", "8192\n");
  WriteText(dir + "/cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n");
  WriteText(dir + "/pids.current", "3\n");
  WriteText(dir + "/memory.events", "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n");
  WriteText(dir + "/cgroup.procs", "10\n11\n");
  fs::create_directories(dir + "/exec-1/inner");
  WriteText(dir + "/exec-1/cgroup.procs", "12\n");
  WriteText(dir + "/exec-1/inner/cgroup.procs", "13\n10\n");

  auto usage = cg->ReadUsage();
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  EXPECT_EQ(usage->memory_bytes, 4096u);
  EXPECT_EQ(usage->memory_peak_bytes, 8192u);
  EXPECT_EQ(usage->cpu_usage_ns, 1500000u);
  EXPECT_EQ(usage->pids, 3u);
  EXPECT_EQ(usage->oom_kills, 2u);
  EXPECT_EQ(*cg->OomKillCount(), 2u);

  auto pids = cg->Pids();
  ASSERT_TRUE(pids.ok()) << pids.status().ToString();
  EXPECT_EQ(*pids, (std::vector<pid_t>{10, 11, 12, 13}));

  // Remove is depth-first and idempotent.
  ASSERT_TRUE(cg->Remove().ok());
  EXPECT_FALSE(Exists(dir));
  EXPECT_TRUE(cg->Remove().ok());
  auto gone = cg->Pids();
  EXPECT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  // Nothing left to kill in a removed cgroup.
  EXPECT_TRUE(cg->KillAll().ok());
}

TEST(CgroupV2FakeTest, ListSandboxIdsAndAttach) {
  FakeTree tree;
  CgroupLayout layout = tree.V2Layout();
  auto a = SandboxCgroup::Create(layout, "a", {}, ::getuid(), ::getgid());
  auto b = SandboxCgroup::Create(layout, "b-2", {}, ::getuid(), ::getgid());
  ASSERT_TRUE(a.ok() && b.ok());
  fs::create_directory(tree.Path("system.slice"));
  fs::create_directory(tree.Path("paddock-"));  // bare prefix: no id
  WriteText(tree.Path("paddock-file"), "");     // not a directory

  EXPECT_EQ(SandboxCgroup::ListSandboxIds(layout), (std::vector<std::string>{"a", "b-2"}));
  SandboxCgroup attached = SandboxCgroup::Attach(layout, "b-2");
  EXPECT_EQ(attached.dirs(), b->dirs());
  EXPECT_EQ(attached.exec_parent_dir(), b->exec_parent_dir());
  ASSERT_TRUE(attached.Remove().ok());
  EXPECT_EQ(SandboxCgroup::ListSandboxIds(layout), std::vector<std::string>{"a"});
  ASSERT_TRUE(a->Remove().ok());
}

TEST(CgroupV1FakeTest, CreateWritesLimitsAndDelegatesFreezer) {
  if (!IsRoot()) GTEST_SKIP() << "chown to another uid needs root";
  FakeTree tree;
  CgroupLayout layout = tree.V1Layout();
  CgroupLimits limits{.cpus = 0.5, .memory_bytes = 64ull << 20, .pids = 50};
  auto cg = SandboxCgroup::Create(layout, "v1", limits, kDelegateUid, kDelegateGid);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ(cg->dirs().size(), 5u);
  EXPECT_EQ(cg->exec_parent_dir(), tree.Path("freezer/paddock-v1"));

  EXPECT_EQ(ReadText(tree.Path("cpu/paddock-v1/cpu.cfs_period_us")), "100000");
  EXPECT_EQ(ReadText(tree.Path("cpu/paddock-v1/cpu.cfs_quota_us")), "50000");
  EXPECT_EQ(ReadText(tree.Path("memory/paddock-v1/memory.limit_in_bytes")), "67108864");
  EXPECT_EQ(ReadText(tree.Path("memory/paddock-v1/memory.memsw.limit_in_bytes")), "67108864");
  EXPECT_EQ(ReadText(tree.Path("memory/paddock-v1/memory.swappiness")), "0");
  EXPECT_EQ(ReadText(tree.Path("pids/paddock-v1/pids.max")), "50");
  EXPECT_TRUE(fs::is_directory(tree.Path("cpuacct/paddock-v1")));

  const std::string freezer = tree.Path("freezer/paddock-v1");
  for (const std::string& p : {freezer, freezer + "/cgroup.procs", freezer + "/tasks"}) {
    EXPECT_EQ(OwnerUid(p), kDelegateUid) << p;
    EXPECT_EQ(OwnerGid(p), kDelegateGid) << p;
  }
  EXPECT_EQ(OwnerUid(tree.Path("memory/paddock-v1")), 0u);
  EXPECT_EQ(OwnerUid(tree.Path("pids/paddock-v1")), 0u);

  auto clone_fd = cg->OpenV2DirForClone();
  EXPECT_EQ(clone_fd.status().code(), StatusCode::kUnimplemented);

  // On a fake tree freezer.state simply reads back what was written.
  ASSERT_TRUE(cg->Freeze().ok());
  EXPECT_TRUE(cg->IsFrozen());
  ASSERT_TRUE(cg->Thaw().ok());
  EXPECT_FALSE(cg->IsFrozen());

  EXPECT_EQ(SandboxCgroup::ListSandboxIds(layout), std::vector<std::string>{"v1"});
  ASSERT_TRUE(cg->Remove().ok());
  for (const auto& d : cg->dirs()) EXPECT_FALSE(Exists(d)) << d;
  EXPECT_TRUE(SandboxCgroup::ListSandboxIds(layout).empty());
}

TEST(CgroupV1FakeTest, UnlimitedWritesMinusOneAndMax) {
  FakeTree tree;
  CgroupLayout layout = tree.V1Layout();
  auto cg = SandboxCgroup::Create(layout, "u", {.cpus = -1}, ::getuid(), ::getgid());
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ(ReadText(tree.Path("cpu/paddock-u/cpu.cfs_quota_us")), "-1");
  EXPECT_EQ(ReadText(tree.Path("pids/paddock-u/pids.max")), "max");
  // An unlimited cgroup keeps the kernel's default (unlimited) memory limit.
  EXPECT_FALSE(Exists(tree.Path("memory/paddock-u/memory.limit_in_bytes")));
  ASSERT_TRUE(cg->Remove().ok());
}

TEST(CgroupV1FakeTest, CoMountedCpuCpuacctMakesOneDirectory) {
  FakeTree tree;
  CgroupLayout layout = tree.V1Layout(/*co_mount_cpu=*/true);
  auto cg = SandboxCgroup::Create(layout, "co", {.cpus = 2}, ::getuid(), ::getgid());
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ(cg->dirs().size(), 4u);
  EXPECT_EQ(ReadText(tree.Path("cpu,cpuacct/paddock-co/cpu.cfs_quota_us")), "200000");
  ASSERT_TRUE(cg->Remove().ok());
  EXPECT_FALSE(Exists(tree.Path("cpu,cpuacct/paddock-co")));
}

TEST(CgroupV1FakeTest, FailureRemovesEverythingCreated) {
  FakeTree tree;
  CgroupLayout layout = tree.V1Layout();
  // The freezer hierarchy is created last; a vanished mount makes its mkdir fail after the
  // other four directories exist and hold limit files.
  fs::remove(tree.Path("freezer"));
  auto cg = SandboxCgroup::Create(layout, "f", {.cpus = 1, .memory_bytes = 1 << 20, .pids = 5},
                                  ::getuid(), ::getgid());
  ASSERT_FALSE(cg.ok());
  EXPECT_EQ(cg.status().code(), StatusCode::kNotFound);
  EXPECT_NE(cg.status().message().find("freezer/paddock-f"), std::string::npos)
      << cg.status().ToString();
  for (const char* ctrl : {"cpu", "cpuacct", "memory", "pids"}) {
    EXPECT_FALSE(Exists(tree.Path(std::string(ctrl) + "/paddock-f"))) << ctrl;
  }
}

TEST(CgroupV1FakeTest, MissingControllerInLayoutIsUnimplemented) {
  FakeTree tree;
  CgroupLayout layout = tree.V1Layout();
  layout.v1_mounts.erase("pids");
  auto cg = SandboxCgroup::Create(layout, "m", {}, ::getuid(), ::getgid());
  ASSERT_FALSE(cg.ok());
  EXPECT_EQ(cg.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(cg.status().message().find("pids"), std::string::npos);
  EXPECT_FALSE(Exists(tree.Path("cpu/paddock-m")));
}

// ---------------------------------------------------------------------------------------------
// The real v1 hierarchy of this host (CI machines are hybrid v1).

class CgroupV1HostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IsRoot()) GTEST_SKIP() << "needs root";
    auto layout = DetectCgroupLayout();
    if (!layout.ok() || layout->version != CgroupVersion::kV1) {
      GTEST_SKIP() << "no cgroup v1 memory controller here";
    }
    layout_ = *layout;
    id_ = "unittest-" + std::to_string(::getpid());
  }

  void TearDown() override {
    for (pid_t pid : children_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (!id_.empty()) (void)SandboxCgroup::Attach(layout_, id_).Remove();
  }

  // A child that waits for a byte on a pipe, then (if asked) forks a grandchild, then sleeps.
  pid_t SpawnSleeper(int* go_fd) {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      char c = 0;
      if (::read(p[0], &c, 1) != 1) ::_exit(1);  // the test went away
      if (c == 'f') (void)::fork();
      for (;;) ::pause();
    }
    ::close(p[0]);
    children_.push_back(pid);
    *go_fd = p[1];
    return pid;
  }

  CgroupLayout layout_;
  std::string id_;
  std::vector<pid_t> children_;
};

bool Contains(const std::vector<pid_t>& v, pid_t pid) {
  return std::find(v.begin(), v.end(), pid) != v.end();
}

TEST_F(CgroupV1HostTest, FullLifecycleOnRealHierarchy) {
  CgroupLimits limits{.cpus = 0.5, .memory_bytes = 64ull << 20, .pids = 32};
  auto cg = SandboxCgroup::Create(layout_, id_, limits, kDelegateUid, kDelegateGid);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  const std::string name = "paddock-" + id_;
  const std::string mem = layout_.v1_mounts.at("memory") + "/" + name;
  const std::string freezer = layout_.v1_mounts.at("freezer") + "/" + name;

  EXPECT_EQ(Trimmed(ReadText(mem + "/memory.limit_in_bytes")), "67108864");
  EXPECT_EQ(Trimmed(ReadText(layout_.v1_mounts.at("pids") + "/" + name + "/pids.max")), "32");
  EXPECT_EQ(Trimmed(ReadText(layout_.v1_mounts.at("cpu") + "/" + name + "/cpu.cfs_quota_us")),
            "50000");
  EXPECT_EQ(OwnerUid(freezer + "/cgroup.procs"), kDelegateUid);
  EXPECT_EQ(OwnerUid(freezer + "/freezer.state"), 0u);
  auto ids = SandboxCgroup::ListSandboxIds(layout_);
  EXPECT_NE(std::find(ids.begin(), ids.end(), id_), ids.end());

  // The grandchild's parent dies first; being its subreaper lets this test reap it instead of
  // leaving a zombie for the host's pid 1.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int go_a = -1, go_b = -1;
  pid_t a = SpawnSleeper(&go_a);
  pid_t b = SpawnSleeper(&go_b);
  ASSERT_TRUE(cg->AddProcess(a).ok());
  ASSERT_TRUE(cg->AddProcess(b).ok());
  // b goes one level down, as an exec sub-cgroup made by the sandbox init would be.
  const std::string sub = freezer + "/exec-1";
  ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
  {
    std::ofstream procs(sub + "/cgroup.procs");
    procs << b;
  }
  ASSERT_EQ(::write(go_a, "f", 1), 1);  // a forks a grandchild inside the cgroup
  ASSERT_EQ(::write(go_b, "s", 1), 1);
  ::close(go_a);
  ::close(go_b);

  std::vector<pid_t> pids;
  for (int i = 0; i < 2000 && pids.size() < 3; ++i) {
    auto r = cg->Pids();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    pids = *r;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(pids.size(), 3u);
  EXPECT_TRUE(Contains(pids, a));
  EXPECT_TRUE(Contains(pids, b));
  EXPECT_EQ(Trimmed(ReadText(sub + "/cgroup.procs")), std::to_string(b));

  auto usage = cg->ReadUsage();
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  // Only b's freezer membership moved; in the pids hierarchy all three are still counted.
  EXPECT_EQ(usage->pids, 3u);
  EXPECT_EQ(usage->oom_kills, 0u);

  ASSERT_TRUE(cg->Freeze().ok());
  EXPECT_TRUE(cg->IsFrozen());
  // The v1 freezer is hierarchical: the sub-cgroup is frozen through its parent.
  EXPECT_EQ(Trimmed(ReadText(sub + "/freezer.state")), "FROZEN");
  ASSERT_TRUE(cg->Thaw().ok());
  EXPECT_FALSE(cg->IsFrozen());

  ASSERT_TRUE(cg->KillAll().ok());
  auto after = cg->Pids();
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
  for (pid_t pid : {a, b}) {
    int wstatus = 0;
    ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
  }
  children_.clear();
  // Reap the reparented grandchild.
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 0), 0);

  ASSERT_TRUE(cg->Remove().ok());
  EXPECT_FALSE(Exists(sub));
  for (const auto& [ctrl, mount] : layout_.v1_mounts) {
    EXPECT_FALSE(Exists(mount + "/" + name)) << ctrl;
  }
  EXPECT_TRUE(cg->Remove().ok());
}

TEST_F(CgroupV1HostTest, KernelRejectedLimitRemovesEverything) {
  // CFS refuses quotas under 1 ms per period: 0.001 cpus = 100 us fails with EINVAL after the
  // cpu directory (and possibly others) exist.
  auto cg = SandboxCgroup::Create(layout_, id_, {.cpus = 0.001}, 0, 0);
  ASSERT_FALSE(cg.ok());
  EXPECT_EQ(cg.status().err(), EINVAL);
  EXPECT_NE(cg.status().message().find("cpu.cfs_quota_us"), std::string::npos)
      << cg.status().ToString();
  for (const auto& [ctrl, mount] : layout_.v1_mounts) {
    EXPECT_FALSE(Exists(mount + "/paddock-" + id_)) << ctrl;
  }
}

}  // namespace
}  // namespace paddock::runtime::linux
