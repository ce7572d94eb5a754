// The runtime's host-side files API (ReadFile/WriteFile/Remove/Rename/Chmod/...) on a live,
// hostile sandbox: symlinks planted inside (absolute, relative, to "/", through /proc magic
// links) and directories swapped for symlinks mid-operation must never make the daemon read or
// change a host file.
//
// The host canary directory is owned by the sandbox user's *host* uid, so the daemon's
// per-operation switch to the sandbox user's credentials would not stop an escape: only the
// path confinement (openat2 RESOLVE_IN_ROOT) does, which is what these tests attack.
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "security/security_support.h"

namespace paddock::testing {
namespace {

// Host paths named `name` anywhere on the host's filesystems that the daemon uses (found by a
// walk that stays on each root's filesystem).
std::vector<std::string> FindOnHost(const std::string& name,
                                    const std::vector<std::string>& roots) {
  static thread_local std::string wanted;
  static thread_local std::vector<std::string>* found;
  std::vector<std::string> out;
  wanted = name;
  found = &out;
  for (const auto& root : roots) {
    nftw(
        root.c_str(),
        [](const char* path, const struct stat*, int, struct FTW* ftw) {
          if (std::string(path + ftw->base) == wanted) found->push_back(path);
          return 0;
        },
        64, FTW_PHYS | FTW_MOUNT);
  }
  return out;
}

class FilesApiEscapeTest : public SecurityTest {
 protected:
  void SetUp() override {
    SecurityTest::SetUp();
    if (IsSkipped()) return;
    id_ = NewAttackSandbox();
    ASSERT_FALSE(id_.empty());
    owner_ = HostIdBase(id_) + 1000;
    token_ = RandomToken(16);
    canary_name_ = "paddock-sec-" + token_;
    canary_dir_ = "/tmp/" + canary_name_;
    victim_content_ = "HOST-CANARY-" + token_ + "\n";
    cleanup_.Add(canary_dir_);
    ASSERT_EQ(mkdir(canary_dir_.c_str(), 0755), 0);
    ASSERT_TRUE(WriteHostFile(canary_dir_ + "/victim", victim_content_, 0644));
    ASSERT_EQ(mkdir((canary_dir_ + "/tree").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((canary_dir_ + "/tree/sub").c_str(), 0755), 0);
    ASSERT_TRUE(WriteHostFile(canary_dir_ + "/tree/a", "a\n"));
    ASSERT_TRUE(WriteHostFile(canary_dir_ + "/tree/sub/b", "b\n"));
    for (const char* p : {"", "/victim", "/tree", "/tree/sub", "/tree/a", "/tree/sub/b"}) {
      ASSERT_EQ(lchown((canary_dir_ + p).c_str(), owner_, owner_), 0);
    }
    canary_digest_ = TreeDigest(canary_dir_);
    auto shadow = ReadHostFile("/etc/shadow");
    ASSERT_TRUE(shadow.has_value() && !shadow->empty());
    host_shadow_ = *shadow;
  }

  void ExpectHostUntouched() {
    EXPECT_EQ(TreeDigest(canary_dir_), canary_digest_) << "host canary directory changed";
    EXPECT_EQ(ReadHostFile(canary_dir_ + "/victim"), victim_content_);
    EXPECT_EQ(ReadHostFile("/etc/shadow"), host_shadow_);
  }

  // A read through the API must never return host content.
  void ExpectNoHostContent(const std::string& path) {
    auto r = ReadSandboxFile(id_, path);
    if (!r.ok()) return;
    EXPECT_NE(*r, host_shadow_) << "read host /etc/shadow through " << path;
    EXPECT_EQ(r->find(token_), std::string::npos) << "read the host canary through " << path;
  }

  std::string id_;
  uid_t owner_ = 0;
  std::string token_, canary_name_, canary_dir_, victim_content_, canary_digest_, host_shadow_;
  HostCleanup cleanup_;
};

TEST_F(FilesApiEscapeTest, AbsolutePathsResolveInsideTheSandbox) {
  // The sandbox's /tmp is its own: a host path given to the API names a sandbox path.
  EXPECT_FALSE(ReadSandboxFile(id_, canary_dir_ + "/victim").ok());
  EXPECT_FALSE(WriteSandboxFile(id_, canary_dir_ + "/victim", "pwned\n").ok());
  EXPECT_FALSE(rt().Remove(id_, canary_dir_ + "/victim", false).ok());
  EXPECT_FALSE(rt().Remove(id_, canary_dir_, true).ok());
  EXPECT_FALSE(rt().Chmod(id_, canary_dir_ + "/victim", 0777).ok());
  EXPECT_FALSE(rt().Rename(id_, canary_dir_ + "/victim", "/tmp/stolen").ok());
  auto listing = rt().ListDir(id_, "/tmp");
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  for (const auto& e : *listing) EXPECT_NE(e.name, canary_name_);

  // A new file lands in the sandbox, not in the host's /tmp.
  const std::string fresh = "/tmp/" + canary_name_ + "-new";
  cleanup_.Add(fresh);
  ASSERT_TRUE(WriteSandboxFile(id_, fresh, "inside\n").ok());
  EXPECT_FALSE(HostPathExists(fresh)) << "WriteFile created a file on the host";
  EXPECT_EQ(ShAs(id_, "sandbox", "cat " + fresh).out, "inside\n");
  ASSERT_TRUE(rt().MakeDirs(id_, canary_dir_ + "/made", 0755).ok());
  EXPECT_FALSE(HostPathExists(canary_dir_ + "/made"));
  ExpectNoHostContent("/etc/shadow");
  ExpectNoHostContent("/../../../etc/shadow");
  auto hostname = ReadSandboxFile(id_, "/etc/hostname");
  ASSERT_TRUE(hostname.ok());
  EXPECT_EQ(*hostname, id_ + "\n");
  ExpectHostUntouched();
}

TEST_F(FilesApiEscapeTest, PlantedSymlinksCannotEscape) {
  const std::string H = canary_dir_;
  CommandOutput plant = ShAs(id_, "sandbox",
                             "cd /home/sandbox && "
                             "ln -s /etc/shadow shadow && "
                             "ln -s ../../../../../../etc/shadow rel && "
                             "ln -s / rootlink && "
                             "ln -s /proc/1/root p1 && "
                             "ln -s /proc/self/root pself && "
                             "ln -s " +
                                 H +
                                 " hostdir && "
                                 "ln -s ../../../../../.." +
                                 H +
                                 " reldir && "
                                 "ln -s " +
                                 H +
                                 "/victim victimlink && "
                                 "ln -s /proc/1/root" +
                                 H +
                                 " p1dir && "
                                 "ln -s /proc/self/cwd/../../../.." +
                                 H +
                                 " cwddir && "
                                 "mkdir tree && ln -s " +
                                 H +
                                 " tree/hostlink && "
                                 "ln -s /proc/1/root" +
                                 H +
                                 " tree/magic && "
                                 "ln -s ../../../../../.." +
                                 H +
                                 " tree/rel && touch tree/inside && "
                                 "echo ok");
  ASSERT_EQ(plant.out, "ok\n") << plant.err;
  const std::string S = "/home/sandbox/";

  for (const std::string& p :
       {S + "shadow", S + "rel", S + "rootlink/etc/shadow", S + "p1/etc/shadow",
        S + "pself/etc/shadow", S + "hostdir/victim", S + "reldir/victim", S + "victimlink",
        S + "p1dir/victim", S + "cwddir/victim", S + "tree/hostlink/victim",
        S + "tree/magic/victim", S + "tree/rel/victim", S + "rootlink" + H + "/victim",
        std::string("/proc/1/root/etc/shadow"), std::string("/proc/self/root/etc/shadow"),
        std::string("/proc/1/root") + H + "/victim", S + "../../../etc/shadow",
        S + "../../.." + H + "/victim"}) {
    ExpectNoHostContent(p);
  }
  // Writes through every link (a final-component symlink is replaced, never followed).
  for (const std::string& p :
       {S + "hostdir/victim", S + "reldir/victim", S + "p1dir/victim", S + "cwddir/victim",
        S + "tree/hostlink/victim", S + "tree/magic/victim", S + "rootlink" + H + "/victim",
        S + "hostdir/planted", S + "reldir/planted", S + "p1/tmp/planted", S + "victimlink",
        std::string("/proc/1/root") + H + "/victim"}) {
    (void)WriteSandboxFile(id_, p, "pwned\n", 0777);
  }
  for (const std::string& p : {S + "hostdir/victim", S + "reldir/victim", S + "p1dir/victim",
                               S + "victimlink", S + "tree/hostlink/victim"}) {
    (void)rt().Chmod(id_, p, 0777);
  }
  for (const std::string& p : {S + "hostdir/newdir", S + "reldir/newdir", S + "p1dir/newdir"}) {
    (void)rt().MakeDirs(id_, p, 0777);
  }
  (void)rt().Rename(id_, S + "hostdir/victim", S + "stolen");
  (void)rt().Rename(id_, S + "reldir/tree", S + "stolen-tree");
  (void)WriteSandboxFile(id_, S + "plant-src", "pwned\n");
  (void)rt().Rename(id_, S + "plant-src", S + "hostdir/planted2");
  (void)rt().Rename(id_, S + "plant-src", S + "reldir/planted2");
  (void)rt().Remove(id_, S + "hostdir/victim", false);
  (void)rt().Remove(id_, S + "reldir/tree", true);
  (void)rt().Remove(id_, S + "p1dir/tree", true);
  for (const std::string& p : {S + "hostdir", S + "reldir", S + "p1dir", S + "tree/hostlink"}) {
    auto listing = rt().ListDir(id_, p);
    if (!listing.ok()) continue;
    for (const auto& e : *listing) EXPECT_NE(e.name, "victim") << "listed the host dir via " << p;
  }
  // Removing a tree that holds links to host directories removes the links only.
  Status removed = rt().Remove(id_, S + "tree", true);
  EXPECT_TRUE(removed.ok()) << removed.ToString();
  EXPECT_NE(ShAs(id_, "sandbox", "ls -A /home/sandbox/tree 2>&1").out.find("No such file"),
            std::string::npos);
  ExpectHostUntouched();
  for (const char* extra : {"planted", "planted2", "newdir", "stolen"}) {
    EXPECT_FALSE(HostPathExists(H + "/" + extra)) << extra;
    EXPECT_FALSE(HostPathExists(std::string("/") + extra)) << extra;
  }
  EXPECT_FALSE(HostPathExists("/tmp/planted"));
}

TEST_F(FilesApiEscapeTest, DirectorySwappedForSymlinkMidOperationNeverEscapes) {
  const std::string H = canary_dir_;
  const std::string canary_file = "paddock-race-" + token_;
  // The real directory d holds look-alikes of what the attack aims at, so operations that stay
  // inside succeed and show the race is being run in both states.
  CommandOutput setup = ShAs(id_, "sandbox",
                             "mkdir -p /home/sandbox/d/etc /home/sandbox/d" + H +
                                 " && echo inside-shadow > /home/sandbox/d/etc/shadow && "
                                 "echo inside-victim > /home/sandbox/d" +
                                 H + "/victim && echo ok");
  ASSERT_EQ(setup.out, "ok\n") << setup.err;
  runtime::ExecRequest req;
  req.argv = {"/tmp/attack", "swaploop", "/home/sandbox", "300"};
  req.user = "sandbox";
  auto swapper = rt().StartBackground(id_, req);
  ASSERT_TRUE(swapper.ok()) << swapper.status().ToString();
  // Wait until the swapping has started.
  bool saw_link = false;
  for (int i = 0; i < 2000 && !saw_link; ++i) {
    auto st = rt().Stat(id_, "/home/sandbox/d");
    saw_link = st.ok() && st->type == runtime::FileStat::Type::kSymlink;
  }
  ASSERT_TRUE(saw_link) << "the swap loop did not start";

  const std::string D = "/home/sandbox/d";
  int write_ok = 0, write_failed = 0, read_inside = 0;
  for (int i = 0; i < 2000; ++i) {
    if (WriteSandboxFile(id_, D + "/" + canary_file, "race\n").ok()) {
      ++write_ok;
    } else {
      ++write_failed;
    }
    (void)WriteSandboxFile(id_, D + H + "/victim", "pwned\n");
    (void)WriteSandboxFile(id_, D + H + "/" + canary_file, "race\n");
    auto shadow = ReadSandboxFile(id_, D + "/etc/shadow");
    if (shadow.ok()) {
      EXPECT_NE(*shadow, host_shadow_) << "iteration " << i;
      if (*shadow == "inside-shadow\n") ++read_inside;
    }
    auto victim = ReadSandboxFile(id_, D + H + "/victim");
    if (victim.ok()) {
      EXPECT_EQ(victim->find(token_), std::string::npos) << "iteration " << i;
    }
    if (i % 10 == 0) {
      (void)rt().Chmod(id_, D + H + "/victim", 0777);
      (void)rt().Remove(id_, D + H + "/tree", true);
      (void)rt().MakeDirs(id_, D + H + "/made-" + std::to_string(i), 0755);
      (void)rt().Rename(id_, D + H + "/victim", D + "/moved");
    }
    if (HasFailure()) break;
  }
  ASSERT_TRUE(rt().Kill(id_, *swapper, SIGKILL).ok());
  (void)rt().Wait(id_, *swapper);

  // Both states were hit: some operations landed in the real directory, some met a symlink.
  EXPECT_GT(write_ok, 0);
  EXPECT_GT(write_failed, 0);
  EXPECT_GT(read_inside, 0);
  ExpectHostUntouched();
  EXPECT_FALSE(HostPathExists("/" + canary_file));
  EXPECT_FALSE(HostPathExists(H + "/" + canary_file));
  EXPECT_FALSE(HostPathExists(H + "/moved"));
  const std::vector<std::string> found =
      FindOnHost(canary_file, {"/", "/tmp", "/run", "/root", TestDataDir(), "/dev/shm"});
  EXPECT_TRUE(found.empty()) << "race canary on the host at " << found.front();
  // The canary exists inside, where it belongs.
  CommandOutput inside = ShAs(id_, "sandbox", "find /home/sandbox -name " + canary_file);
  EXPECT_NE(inside.out.find(canary_file), std::string::npos) << inside.err;
}

}  // namespace
}  // namespace paddock::testing
