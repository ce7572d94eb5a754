// Helpers shared by the security tests: the attack tool inside a sandbox, commands run as a
// given user, host-side canaries and markers that must stay out of reach.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/random.h"
#include "support/runtime_fixture.h"

namespace paddock::testing {

// Every attack runs as both identities a caller can ask for: root inside must be as powerless on
// the host as the sandbox user.
inline const std::vector<std::string>& SandboxUsers() {
  static const std::vector<std::string> kUsers = {"sandbox", "root"};
  return kUsers;
}

inline std::string RandomToken(size_t bytes = 16) { return RandomHex(bytes); }

inline std::optional<std::string> ReadHostFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool WriteHostFile(const std::string& path, const std::string& content, mode_t mode = 0644) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ::close(fd);
  return ok && ::chmod(path.c_str(), mode) == 0;
}

inline bool HostPathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// The static attack tool built next to the test binary (tests/security/attack_tool.c).
inline std::string AttackToolHostPath() {
  return (std::filesystem::path(TestDataDir()).parent_path() / "paddock-attack").string();
}

// Deletes host files and directories the test created, however the test ends.
class HostCleanup {
 public:
  HostCleanup() = default;
  HostCleanup(const HostCleanup&) = delete;
  HostCleanup& operator=(const HostCleanup&) = delete;
  ~HostCleanup() {
    for (auto it = paths_.rbegin(); it != paths_.rend(); ++it) {
      std::error_code ec;
      std::filesystem::remove_all(*it, ec);
    }
  }
  void Add(const std::string& path) { paths_.push_back(path); }

 private:
  std::vector<std::string> paths_;
};

// Digest of a directory tree: names, types, modes, owners, sizes, link targets and file content.
inline std::string TreeDigest(const std::string& root) {
  std::vector<std::string> entries;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(
           root, std::filesystem::directory_options::none, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string path = it->path().string();
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    std::string e = path + " " + std::to_string(st.st_mode) + " " + std::to_string(st.st_uid) +
                    ":" + std::to_string(st.st_gid) + " " + std::to_string(st.st_size) + " " +
                    std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    if (S_ISLNK(st.st_mode)) {
      e += " -> " + std::filesystem::read_symlink(path, ec).string();
    } else if (S_ISREG(st.st_mode)) {
      e += " " + std::to_string(std::hash<std::string>{}(ReadHostFile(path).value_or("?")));
    }
    entries.push_back(e);
  }
  std::sort(entries.begin(), entries.end());
  std::string out;
  for (const auto& e : entries) out += e + "\n";
  return out;
}

class SecurityTest : public SandboxTest {
 protected:
  // A fresh sandbox with the attack tool installed at /tmp/attack (mode 0755, owned by the
  // sandbox user, so both users can run it).
  std::string NewAttackSandbox() {
    std::string id = NewSandbox();
    if (id.empty()) return id;
    auto tool = ReadHostFile(AttackToolHostPath());
    EXPECT_TRUE(tool.has_value()) << "missing " << AttackToolHostPath();
    if (!tool) return id;
    Status st = WriteSandboxFile(id, "/tmp/attack", *tool, 0755);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return id;
  }

  Status WriteSandboxFile(const std::string& id, const std::string& path,
                          const std::string& content, uint32_t mode = 0644) {
    bool sent = false;
    return rt().WriteFile(id, path, mode, 64ull << 20, [&]() -> Result<std::string> {
      if (sent) return std::string();
      sent = true;
      return content;
    });
  }

  // The file's content through the runtime's host-side files API, or the error.
  Result<std::string> ReadSandboxFile(const std::string& id, const std::string& path) {
    std::string data;
    Status st = rt().ReadFile(id, path, 16ull << 20, [&](std::string_view chunk) {
      data.append(chunk);
      return Status::Ok();
    });
    if (!st.ok()) return st;
    return data;
  }

  // Runs argv directly (no shell) as `user`.
  CommandOutput Run(const std::string& id, const std::string& user,
                    const std::vector<std::string>& argv, const std::string& stdin_data = "",
                    std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    runtime::ExecRequest req;
    req.argv = argv;
    req.user = user;
    req.stdin_data = stdin_data;
    req.timeout = timeout;
    return SandboxTest::Run(id, req);
  }

  CommandOutput ShAs(const std::string& id, const std::string& user, const std::string& script,
                     std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    return Sh(id, script, timeout, user);
  }

  // Runs one attack-tool subcommand; returns its single result line (with the newline).
  std::string Attack(const std::string& id, const std::string& user,
                     std::vector<std::string> args) {
    args.insert(args.begin(), "/tmp/attack");
    CommandOutput o = Run(id, user, args);
    EXPECT_TRUE(o.err.empty()) << Describe(args, user) << " stderr: " << o.err;
    return o.out;
  }

  static std::string Describe(const std::vector<std::string>& args, const std::string& user) {
    std::string s = "[as " + user + "]";
    for (const auto& a : args) s += " " + a;
    return s;
  }

  // First host uid of the sandbox's user-namespace mapping (root inside), from its uid_map.
  uid_t HostIdBase(const std::string& id) {
    auto info = rt().Get(id);
    EXPECT_TRUE(info.ok());
    if (!info.ok()) return 0;
    auto map = ReadHostFile("/proc/" + std::to_string(info->init_pid) + "/uid_map");
    EXPECT_TRUE(map.has_value());
    if (!map) return 0;
    std::istringstream in(*map);
    unsigned long inside = 1, outside = 0, count = 0;
    in >> inside >> outside >> count;
    EXPECT_EQ(inside, 0u);
    EXPECT_GT(outside, 0u) << "root inside must not be host root";
    return static_cast<uid_t>(outside);
  }
};

// "<step>: E<NAME>\n": the attack tool reports a refused step.
inline bool IsRefusal(const std::string& line) {
  static const std::regex kRefusal("[a-z0-9_+ ]+: E[A-Z0-9]+\n");
  return std::regex_match(line, kRefusal);
}

// A parameterized security test: the parameter is the user the attacks run as.
class PerUserSecurityTest : public SecurityTest, public ::testing::WithParamInterface<std::string> {
 protected:
  const std::string& user() const { return GetParam(); }
  bool as_root() const { return GetParam() == "root"; }
};

inline std::string UserParamName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param == "root" ? "AsRootInside" : "AsSandboxUser";
}

#define PADDOCK_INSTANTIATE_PER_USER(suite)                                                       \
  INSTANTIATE_TEST_SUITE_P(Users, suite, ::testing::ValuesIn(::paddock::testing::SandboxUsers()), \
                           ::paddock::testing::UserParamName)

}  // namespace paddock::testing
