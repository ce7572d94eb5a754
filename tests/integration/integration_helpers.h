// Small helpers shared by the runtime integration tests (header-only: the build globs only
// *_test.cc files into the integration binary).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/runtime.h"

namespace paddock::testing {

using SteadyClock = std::chrono::steady_clock;

// A WriteFile source that yields `content` once, then the empty chunk that ends the stream.
inline std::function<Result<std::string>()> OneChunk(std::string content) {
  auto done = std::make_shared<bool>(false);
  return [content = std::move(content), done]() -> Result<std::string> {
    if (*done) return std::string();
    *done = true;
    return content;
  };
}

inline Status WriteString(runtime::Runtime& rt, const std::string& id, const std::string& path,
                          const std::string& content, uint32_t mode = 0644) {
  return rt.WriteFile(id, path, mode, 1ull << 30, OneChunk(content));
}

inline Result<std::string> ReadString(runtime::Runtime& rt, const std::string& id,
                                      const std::string& path, uint64_t max_bytes = 1ull << 30) {
  std::string out;
  Status st = rt.ReadFile(id, path, max_bytes, [&](std::string_view chunk) {
    out.append(chunk);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

// Polls `pred` every 20 ms until it holds or `timeout` passes; returns its last value.
inline bool WaitFor(const std::function<bool()>& pred,
                    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Every host cgroup directory named paddock-<id>, in any mounted hierarchy (v1 controllers and
// the v2 tree).
inline std::vector<std::string> HostCgroupDirsFor(const std::string& id) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  const std::string name = "paddock-" + id;
  if (fs::exists(fs::path("/sys/fs/cgroup") / name, ec)) out.push_back("/sys/fs/cgroup/" + name);
  for (const auto& e : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    if (!e.is_directory(ec)) continue;
    fs::path p = e.path() / name;
    if (fs::exists(p, ec)) out.push_back(p.string());
  }
  return out;
}

// True when `pid` names a live (non-zombie) process on the host.
inline bool HostProcessAlive(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  if (!f) return false;
  std::string stat;
  std::getline(f, stat);
  auto rp = stat.rfind(')');
  if (rp == std::string::npos || rp + 2 >= stat.size()) return false;
  return stat[rp + 2] != 'Z' && stat[rp + 2] != 'X';
}

inline std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace paddock::testing
