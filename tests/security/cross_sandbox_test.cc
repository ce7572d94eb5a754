// Sandboxes are strangers to each other: one cannot see, signal or connect to another's
// processes, read its files, or share its IPC objects; their host uid ranges do not overlap.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include "security/security_support.h"

namespace paddock::testing {
namespace {

using CrossSandboxTest = PerUserSecurityTest;

TEST_P(CrossSandboxTest, CannotSeeSignalOrReadAnotherSandbox) {
  std::string victim = NewAttackSandbox();
  std::string attacker = NewAttackSandbox();
  ASSERT_FALSE(victim.empty());
  ASSERT_FALSE(attacker.empty());
  auto victim_info = rt().Get(victim);
  ASSERT_TRUE(victim_info.ok());
  const std::string victim_init = std::to_string(victim_info->init_pid);

  // Separate host identities: root of one is not root (or anyone) of the other.
  const uid_t base_a = HostIdBase(attacker), base_v = HostIdBase(victim);
  EXPECT_GE(std::llabs(static_cast<long long>(base_a) - static_cast<long long>(base_v)), 65536);

  const std::string token = RandomToken(16);
  const std::string secret = "PADDOCK-SECRET-" + token;
  const std::string sleep_arg = std::to_string(3600 + std::random_device{}() % 100000) + "." +
                                std::to_string(std::random_device{}() % 1000000);
  const std::string abstract_name = "paddock-victim-" + RandomToken(8);
  CommandOutput plant = ShAs(victim, "sandbox",
                             "echo " + secret +
                                 " > /tmp/victim-secret && "
                                 "echo " +
                                 secret +
                                 " > /home/sandbox/victim-secret && "
                                 "echo " +
                                 secret +
                                 " > /workspace/victim-secret && "
                                 "echo " +
                                 secret +
                                 " > /dev/shm/victim-secret && "
                                 "ipcmk -M 4096 >/dev/null && echo ok");
  ASSERT_EQ(plant.out, "ok\n") << plant.err;
  runtime::ExecRequest bg;
  bg.argv = {"/usr/bin/sleep", sleep_arg};
  auto sleeper = rt().StartBackground(victim, bg);
  ASSERT_TRUE(sleeper.ok());
  runtime::ExecRequest server;
  server.argv = {"/usr/bin/python3", "-c",
                 "import socket\n"
                 "s = socket.socket(socket.AF_UNIX)\n"
                 "s.bind('\\0" +
                     abstract_name +
                     "')\n"
                     "s.listen(4)\n"
                     "t = socket.socket(); t.bind(('127.0.0.1', 47123)); t.listen(4)\n"
                     "open('/tmp/listening', 'w').close()\n"
                     "while True:\n"
                     "    s.accept()[0].sendall(b'" +
                     secret + "')\n"};
  auto listener = rt().StartBackground(victim, server);
  ASSERT_TRUE(listener.ok());
  CommandOutput ready = ShAs(victim, "sandbox",
                             "for i in $(seq 200); do [ -e /tmp/listening ] && break; sleep 0.05; "
                             "done; ps -e -o args=");
  ASSERT_NE(ready.out.find(sleep_arg), std::string::npos) << ready.out;
  ASSERT_NE(ready.out.find("python3"), std::string::npos) << ready.out;

  const std::string search =
      "find / -path /proc -prune -o -name '*victim-sec''ret*' -print 2>/dev/null; "
      "grep -rsoE 'PADDOCK-SEC''RET-[0-9a-f]{32}' / --exclude-dir=proc --exclude-dir=sys "
      "--exclude-dir=dev --exclude-dir=usr; grep -rsoE 'PADDOCK-SEC''RET-[0-9a-f]{32}' /dev/shm; "
      "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done; ps -e -o args=; "
      "ipcs -m | grep -c '^0x'";
  CommandOutput o = ShAs(attacker, user(), search, std::chrono::seconds(120));
  EXPECT_EQ(o.out.find(token), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find(sleep_arg), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("victim-secret"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("python3"), std::string::npos) << o.out;
  // ipcs found no shared memory segments (the victim's lives in its own IPC namespace).
  EXPECT_EQ(o.out.substr(o.out.size() >= 2 ? o.out.size() - 2 : 0), "0\n") << o.out;

  EXPECT_EQ(Attack(attacker, user(), {"kill", victim_init, "9"}), "kill: ESRCH\n");
  EXPECT_EQ(Attack(attacker, user(), {"pidfd_open", victim_init}), "pidfd_open: ESRCH\n");
  EXPECT_EQ(Attack(attacker, user(), {"listdir", "/proc/" + victim_init}), "opendir: ENOENT\n");
  EXPECT_EQ(Attack(attacker, user(), {"kill", "-1", "9"}), "kill: ESRCH\n");
  EXPECT_EQ(Attack(attacker, user(), {"connect_abstract", abstract_name}),
            "connect: ECONNREFUSED\n");
  EXPECT_EQ(Attack(attacker, user(), {"connect", "127.0.0.1", "47123"}), "connect: ECONNREFUSED\n");

  // Through the files API, each sandbox's paths are its own.
  auto r = ReadSandboxFile(attacker, "/tmp/victim-secret");
  EXPECT_FALSE(r.ok());
  r = ReadSandboxFile(attacker, "/proc/" + victim_init + "/root/tmp/victim-secret");
  EXPECT_FALSE(r.ok());

  // The victim is unharmed: its processes still run and its files are intact.
  CommandOutput after = ShAs(victim, "sandbox",
                             "ps -e -o args= | grep -c '^/usr/bin/sleep " + sleep_arg +
                                 "'; cat /tmp/victim-secret; "
                                 "python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); "
                                 "s.connect(\"\\0" +
                                 abstract_name + "\"); print(s.recv(100).decode())'");
  EXPECT_EQ(after.out, "1\n" + secret + "\n" + secret + "\n") << after.err;
  (void)rt().Kill(victim, *sleeper, SIGKILL);
  (void)rt().Kill(victim, *listener, SIGKILL);
  (void)rt().Wait(victim, *sleeper);
  (void)rt().Wait(victim, *listener);
}

PADDOCK_INSTANTIATE_PER_USER(CrossSandboxTest);

}  // namespace
}  // namespace paddock::testing
