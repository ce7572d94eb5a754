// No network: a sandbox has its own network namespace with only loopback, so host services (on
// the host's loopback, its real addresses, or abstract unix sockets) are unreachable.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "security/security_support.h"

namespace paddock::testing {
namespace {

// Listening sockets on the host, served by one thread that accepts (and counts) every
// connection until destroyed.
class HostServer {
 public:
  HostServer() : stop_(::eventfd(0, EFD_CLOEXEC)) {}
  ~HostServer() {
    if (thread_.joinable()) {
      uint64_t one = 1;
      (void)!::write(stop_, &one, sizeof one);
      thread_.join();
    }
    for (int fd : fds_) ::close(fd);
    ::close(stop_);
  }

  // Returns the bound port (0 on failure).
  int ListenTcp4(const std::string& ip) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || ::listen(fd, 16) < 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) < 0) {
      ::close(fd);
      return 0;
    }
    fds_.push_back(fd);
    return ntohs(a.sin_port);
  }

  int ListenTcp6Loopback() {
    int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || ::listen(fd, 16) < 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) < 0) {
      ::close(fd);
      return 0;
    }
    fds_.push_back(fd);
    return ntohs(a.sin6_port);
  }

  bool ListenAbstract(const std::string& name) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) < 0 || ::listen(fd, 16) < 0) {
      ::close(fd);
      return false;
    }
    fds_.push_back(fd);
    return true;
  }

  void Start() {
    thread_ = std::thread([this] {
      while (true) {
        std::vector<pollfd> p;
        p.push_back({stop_, POLLIN, 0});
        for (int fd : fds_) p.push_back({fd, POLLIN, 0});
        if (::poll(p.data(), p.size(), -1) < 0) continue;
        if (p[0].revents) return;
        for (size_t i = 1; i < p.size(); ++i) {
          if (!p[i].revents) continue;
          int c = ::accept4(p[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
          if (c >= 0) {
            ++accepted_;
            ::close(c);
          }
        }
      }
    });
  }

  int accepted() const { return accepted_.load(); }

 private:
  int stop_;
  std::vector<int> fds_;
  std::thread thread_;
  std::atomic<int> accepted_{0};
};

std::vector<std::string> HostNonLoopbackIpv4() {
  std::vector<std::string> out;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
    if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127) continue;
    ::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf);
    out.push_back(buf);
  }
  ::freeifaddrs(ifs);
  return out;
}

using NetworkIsolationTest = PerUserSecurityTest;

TEST_P(NetworkIsolationTest, HostServicesAreUnreachable) {
  HostServer server;
  const int loopback_port = server.ListenTcp4("127.0.0.1");
  const int any_port = server.ListenTcp4("0.0.0.0");
  const int v6_port = server.ListenTcp6Loopback();
  const std::string abstract_name = "paddock-security-" + RandomToken(8);
  ASSERT_GT(loopback_port, 0);
  ASSERT_GT(any_port, 0);
  ASSERT_TRUE(server.ListenAbstract(abstract_name));
  server.Start();
  const std::vector<std::string> host_ips = HostNonLoopbackIpv4();

  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  const std::string lp = std::to_string(loopback_port), ap = std::to_string(any_port);
  // The sandbox's own loopback has nothing listening on these ports.
  EXPECT_EQ(Attack(id, user(), {"connect", "127.0.0.1", lp}), "connect: ECONNREFUSED\n");
  EXPECT_EQ(Attack(id, user(), {"connect", "127.0.0.1", ap}), "connect: ECONNREFUSED\n");
  // No route anywhere else.
  for (const auto& ip : host_ips) {
    EXPECT_EQ(Attack(id, user(), {"connect", ip, ap}), "connect: ENETUNREACH\n") << ip;
  }
  EXPECT_EQ(Attack(id, user(), {"connect", "10.0.0.1", ap}), "connect: ENETUNREACH\n");
  EXPECT_EQ(Attack(id, user(), {"connect", "169.254.169.254", "80"}), "connect: ENETUNREACH\n");
  // Abstract unix sockets belong to the network namespace.
  EXPECT_EQ(Attack(id, user(), {"connect_abstract", abstract_name}), "connect: ECONNREFUSED\n");

  std::string py =
      "import socket\n"
      "def tcp(family, addr):\n"
      "    s = socket.socket(family, socket.SOCK_STREAM)\n"
      "    s.settimeout(3)\n"
      "    try:\n"
      "        s.connect(addr)\n"
      "        return 'connected'\n"
      "    except OSError as e:\n"
      "        return type(e).__name__\n"
      "def udp(addr):\n"
      "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
      "    try:\n"
      "        s.sendto(b'x', addr)\n"
      "        return 'sent'\n"
      "    except OSError as e:\n"
      "        return type(e).__name__\n";
  if (v6_port > 0) {
    py += "print(tcp(socket.AF_INET6, ('::1', " + std::to_string(v6_port) + ")))\n";
  } else {
    py += "print('ConnectionRefusedError')\n";
  }
  for (const auto& ip : host_ips) py += "print(udp(('" + ip + "', " + ap + ")))\n";
  py += "print(udp(('8.8.8.8', 53)))\n";
  CommandOutput o = Run(id, user(), {"/usr/bin/python3", "-c", py});
  std::string expected = "ConnectionRefusedError\n";
  for (size_t i = 0; i < host_ips.size(); ++i) expected += "OSError\n";
  expected += "OSError\n";
  EXPECT_EQ(o.out, expected) << o.err;

  // Control: loopback inside the sandbox works, and the tool reports a real connection.
  CommandOutput control = ShAs(id, user(),
                               "python3 -c 'import socket,sys\n"
                               "s=socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(1)\n"
                               "print(s.getsockname()[1], flush=True); s.accept()' > /tmp/port &\n"
                               "while [ ! -s /tmp/port ]; do sleep 0.05; done\n"
                               "/tmp/attack connect 127.0.0.1 $(cat /tmp/port); wait");
  EXPECT_EQ(control.out, "ok\n") << control.err;

  EXPECT_EQ(server.accepted(), 0) << "the host server accepted a connection from a sandbox";
}

TEST_P(NetworkIsolationTest, OnlyLoopbackExists) {
  // The check means something only if the host has other interfaces.
  auto host_dev = ReadHostFile("/proc/net/dev");
  ASSERT_TRUE(host_dev.has_value());
  std::string id = NewAttackSandbox();
  ASSERT_FALSE(id.empty());
  auto interfaces = [](const std::string& dev) {
    std::set<std::string> names;
    std::istringstream in(dev);
    std::string line;
    std::getline(in, line);
    std::getline(in, line);
    while (std::getline(in, line)) {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      name.erase(0, name.find_first_not_of(' '));
      names.insert(name);
    }
    return names;
  };
  ASSERT_GT(interfaces(*host_dev).size(), 1u);
  CommandOutput dev = ShAs(id, user(), "cat /proc/net/dev");
  EXPECT_EQ(interfaces(dev.out), std::set<std::string>{"lo"}) << dev.out;
  CommandOutput py = Run(id, user(),
                         {"/usr/bin/python3", "-c",
                          "print(sorted(l.split(':')[0].strip() for l in "
                          "open('/proc/net/dev').readlines()[2:]))"});
  EXPECT_EQ(py.out, "['lo']\n") << py.err;
  // No routes at all in the main table (loopback's live in the local table).
  CommandOutput route = ShAs(id, user(), "tail -n +2 /proc/net/route | wc -l");
  EXPECT_EQ(route.out, "0\n");
  CommandOutput v6 = ShAs(id, user(), "awk '{print $6}' /proc/net/if_inet6 | sort -u");
  EXPECT_TRUE(v6.out == "lo\n" || v6.out.empty()) << v6.out;
  // No resolver configured.
  CommandOutput dns = ShAs(id, user(), "getent hosts example.com; echo rc=$?");
  EXPECT_EQ(dns.out, "rc=2\n");
}

PADDOCK_INSTANTIATE_PER_USER(NetworkIsolationTest);

}  // namespace
}  // namespace paddock::testing
