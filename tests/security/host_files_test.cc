// Host files stay out of reach: secrets planted on the host (in /root, the runtime's data and
// state dirs) cannot be found or read from inside by any path; setuid binaries give nothing;
// the shared template and the host's /usr cannot be modified.
#include <sys/stat.h>
#include <unistd.h>

#include "security/security_support.h"

namespace paddock::testing {
namespace {

using HostFilesTest = PerUserSecurityTest;

constexpr const char* kSecretPrefix = "PADDOCK-SECRET-";
// Matches the secret without containing it: the random part never enters the sandbox, so the
// only way it can show up in a command's output is by reading a host file.
constexpr const char* kSecretRegexShell = "'PADDOCK-SEC''RET-[0-9a-f]{32}'";

TEST_P(HostFilesTest, HostMarkersCannotBeFoundOrRead) {
  const std::string secret = kSecretPrefix + RandomToken(16);
  const std::string pid = std::to_string(getpid());
  const std::string marker_name = "paddock-marker-" + pid;
  const std::vector<std::string> host_markers = {
      "/root/" + marker_name,
      "/" + marker_name,
      "/tmp/" + marker_name,
      TestDataDir() + "/templates/marker",
      TestDataDir() + "/templates/" + marker_name,
      "/run/paddock/marker",
      "/run/paddock/staging/" + marker_name,
  };
  HostCleanup cleanup;
  for (const auto& m : host_markers) {
    cleanup.Add(m);
    ASSERT_TRUE(WriteHostFile(m, secret + "\n", 0644)) << m;
  }

  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());

  // Every path we could think of, including through /proc's magic links, the host-bound /usr,
  // and ".." past the root.
  std::string paths;
  for (const auto& m : host_markers) {
    for (const std::string& prefix :
         {std::string(""), std::string("/proc/1/root"), std::string("/proc/self/root"),
          std::string("/proc/1/cwd"), std::string("/proc/self/cwd/../../../../.."),
          std::string("/usr/../../.."), std::string("/proc/1/root/proc/1/root"),
          std::string("/dev/fd/../../../.."), std::string("/proc/self/fd/0/../..")}) {
      paths += " '" + prefix + m + "'";
    }
  }
  const std::string script =
      "for f in" + paths +
      "; do cat \"$f\"; done 2>/dev/null\n"
      "find / -name 'paddock-marker*' 2>/dev/null\n"
      "find / -path /proc -prune -o -name marker -print 2>/dev/null\n"
      "grep -rsoE " +
      std::string(kSecretRegexShell) +
      " / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=usr\n"
      "python3 -c '\n"
      "import os\n"
      "for m in " +
      [&] {
        std::string list = "[";
        for (const auto& m : host_markers) list += "\"" + m + "\",";
        return list + "]";
      }() +
      ":\n"
      "  for base in (\"/\", \"/proc/1/root\", \"/proc/self/root\", \"/usr\"):\n"
      "    try:\n"
      "      fd = os.open(base, os.O_PATH)\n"
      "      print(open(os.open(\"../../../../..\" + m, os.O_RDONLY, dir_fd=fd)).read())\n"
      "    except OSError:\n"
      "      pass\n"
      "'\n";
  CommandOutput o = ShAs(id, user(), script, std::chrono::seconds(120));
  EXPECT_EQ(o.out.find(secret), std::string::npos) << o.out;
  EXPECT_EQ(o.err.find(secret), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("paddock-marker"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find(kSecretPrefix), std::string::npos) << o.out;
  // The search itself works: the same commands find a marker planted inside the sandbox.
  const std::string inside_secret = kSecretPrefix + RandomToken(16);
  ASSERT_TRUE(WriteSandboxFile(id, "/tmp/paddock-marker-inside", inside_secret + "\n").ok());
  CommandOutput control = ShAs(id, user(), script, std::chrono::seconds(120));
  EXPECT_NE(control.out.find("/tmp/paddock-marker-inside"), std::string::npos) << control.out;
  EXPECT_NE(control.out.find(inside_secret), std::string::npos) << control.out;
  EXPECT_EQ(control.out.find(secret), std::string::npos) << control.out;

  // Nor through the runtime's files API, which resolves paths inside the sandbox root.
  for (const auto& m : host_markers) {
    for (const std::string& prefix : {std::string(""), std::string("/proc/1/root"),
                                      std::string("/../../.."), std::string("/usr/../..")}) {
      auto r = ReadSandboxFile(id, prefix + m);
      if (r.ok()) {
        EXPECT_EQ(r->find(secret), std::string::npos) << prefix + m;
      }
    }
  }
  for (const auto& m : host_markers) EXPECT_EQ(ReadHostFile(m), secret + "\n") << m;
}

// A setuid-root binary from the host's /usr, run inside: what credentials did the process get?
// The probe reads /proc/<pid>/status of the child once it has exec'd (or is a zombie).
std::string SetuidProbeScript() {
  return R"PY(
import os, subprocess, time
for argv in (["/usr/bin/su", "root", "-c", "id -u > /tmp/pwned"], ["/usr/bin/passwd", "root"]):
    name = os.path.basename(argv[0])
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    st = ""
    for _ in range(5000):
        st = open("/proc/%d/status" % p.pid).read()
        if "Name:\t" + name + "\n" in st:
            break
        time.sleep(0.001)
    f = dict(l.split(":\t", 1) for l in st.splitlines() if ":\t" in l)
    print(name, f["Name"], ",".join(f["Uid"].split()), f["CapEff"], f["CapPrm"], f["NoNewPrivs"])
    p.kill()
    p.wait()
)PY";
}

TEST_P(HostFilesTest, SetuidBinariesGainNothing) {
  struct stat st;
  ASSERT_EQ(stat("/usr/bin/su", &st), 0);
  ASSERT_TRUE(st.st_mode & S_ISUID) << "the host's su is expected to be setuid root";
  ASSERT_EQ(stat("/usr/bin/passwd", &st), 0);
  ASSERT_TRUE(st.st_mode & S_ISUID);

  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  const std::string uid = as_root() ? "0" : "1000";
  const std::string ids = uid + "," + uid + "," + uid + "," + uid;
  CommandOutput probe = Run(id, user(), {"/usr/bin/python3", "-c", SetuidProbeScript()});
  EXPECT_EQ(probe.out, "su su " + ids +
                           " 0000000000000000 0000000000000000 1\n"
                           "passwd passwd " +
                           ids + " 0000000000000000 0000000000000000 1\n")
      << probe.err;

  // The classic: su with no password must not run anything as root.
  CommandOutput su = Run(id, user(), {"/usr/bin/su", "root", "-c", "id -u > /tmp/pwned"}, "\n");
  if (!as_root()) {
    EXPECT_NE(su.result.exit_code, 0);
    CommandOutput check = ShAs(id, user(), "ls /tmp/pwned 2>&1; cat /tmp/pwned 2>/dev/null");
    EXPECT_EQ(check.out.find("/tmp/pwned\n"), std::string::npos) << check.out;
    EXPECT_EQ(check.out.find("0\n"), std::string::npos) << check.out;
    EXPECT_FALSE(ReadSandboxFile(id, "/tmp/pwned").ok());
  }
  // Whatever su managed, it was not with capabilities.
  CommandOutput caps = Run(
      id, user(), {"/usr/bin/su", "root", "-c", "grep -E '^Cap(Eff|Bnd)' /proc/self/status"}, "\n");
  if (!caps.out.empty()) {
    EXPECT_EQ(caps.out, "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n");
  }
}

TEST_F(SecurityTest, SetuidFilesPlantedByRootInsideGiveTheSandboxUserNothing) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  CommandOutput plant = ShAs(id, "root",
                             "for d in /tmp /var/tmp; do cp /tmp/attack $d/suid-attack && "
                             "chmod 4755 $d/suid-attack && stat -c %a $d/suid-attack; done");
  ASSERT_EQ(plant.out, "4755\n4755\n") << plant.err;
  for (const char* p : {"/tmp/suid-attack", "/var/tmp/suid-attack"}) {
    CommandOutput o = Run(id, "sandbox", {p, "ids"});
    EXPECT_EQ(o.out, "ok uid=1000 euid=1000 suid=1000 capeff=0000000000000000\n") << p;
  }
}

TEST_P(HostFilesTest, TemplateAndHostUsrCannotBeModified) {
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  const std::string rootfs = TestDataDir() + "/templates/host/rootfs";
  ASSERT_TRUE(HostPathExists(rootfs + "/etc"));
  const std::string template_before = TreeDigest(rootfs);
  ASSERT_FALSE(template_before.empty());
  const std::string dash_before = ReadHostFile("/usr/bin/dash").value_or("");
  ASSERT_FALSE(dash_before.empty());

  for (const char* p : {"/usr/bin/dash", "/usr/lib/os-release", "/usr/bin/su"}) {
    std::string out = Attack(id, user(), {"openw", p});
    EXPECT_TRUE(IsRefusal(out)) << p << ": " << out;
  }
  CommandOutput vandal = ShAs(id, user(),
                              "touch /usr/bin/paddock-pwned; echo pwned >> /usr/bin/dash; "
                              "chmod 777 /usr/bin /usr/bin/su; rm -f /usr/bin/su; "
                              "echo pwned > /etc/passwd; rm -rf /etc/hosts /var /mnt /lib64; "
                              "chmod 777 / /etc /home; mkdir /paddock-pwned; "
                              "ln -s / /paddock-pwned-link; "
                              "/tmp/attack remount /; true",
                              std::chrono::seconds(60));
  EXPECT_FALSE(HostPathExists("/usr/bin/paddock-pwned"));
  EXPECT_FALSE(HostPathExists("/paddock-pwned"));
  EXPECT_FALSE(HostPathExists(rootfs + "/paddock-pwned"));
  EXPECT_EQ(ReadHostFile("/usr/bin/dash").value_or(""), dash_before);
  struct stat st;
  ASSERT_EQ(stat("/usr/bin/su", &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 04755u);
  EXPECT_EQ(TreeDigest(rootfs), template_before);

  // The next sandbox built from the same template is pristine.
  std::string next = NewAttackSandbox();
  ASSERT_FALSE(next.empty());
  CommandOutput fresh =
      ShAs(next, user(), "grep -c '^sandbox:' /etc/passwd; ls -d /paddock-pwned 2>&1");
  EXPECT_EQ(fresh.out.rfind("1\n", 0), 0u) << fresh.out;
  EXPECT_NE(fresh.out.find("No such file"), std::string::npos) << fresh.out;
}

PADDOCK_INSTANTIATE_PER_USER(HostFilesTest);

}  // namespace
}  // namespace paddock::testing
