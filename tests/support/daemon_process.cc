#include "support/daemon_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>

#include "common/random.h"
#include "support/runtime_fixture.h"

extern char** environ;

namespace paddock::testing {

std::string PaddockdPath() {
  std::error_code ec;
  return (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "paddockd").string();
}

DaemonProcess::DaemonProcess(std::string config_yaml, std::string data_dir)
    : config_yaml_(std::move(config_yaml)), data_dir_(std::move(data_dir)) {
  if (data_dir_.empty()) {
    data_dir_ = TestDataDir() + "/daemon-" + RandomHex(4);
    own_data_dir_ = true;
  }
}

DaemonProcess::~DaemonProcess() {
  Stop();
  if (own_data_dir_) {
    std::error_code ec;
    std::filesystem::remove_all(data_dir_, ec);
  }
}

bool DaemonProcess::Start(std::string* error) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir_, ec);
  // Templates are shared with the other tests so the host digest is computed once.
  std::filesystem::create_directories(TestDataDir() + "/templates", ec);
  if (!std::filesystem::exists(data_dir_ + "/templates"))
    std::filesystem::create_directory_symlink(TestDataDir() + "/templates",
                                              data_dir_ + "/templates", ec);
  const std::string config = data_dir_ + "/paddock.yaml";
  std::ofstream(config) << config_yaml_;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    *error = "pipe";
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  const std::string bin = PaddockdPath();
  std::vector<std::string> args = {bin,        "--data-dir", data_dir_, "serve",
                                   "--config", config,       "--port",  "0"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = posix_spawn(&pid_, bin.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  if (rc != 0) {
    close(p[0]);
    *error = "spawn " + bin;
    return false;
  }
  out_fd_ = p[0];
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  static const std::regex kListen("listening on http://[^:]+:([0-9]+)");
  static const std::regex kKey("(pdk_[0-9a-f]+)");
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{out_fd_, POLLIN, 0};
    if (poll(&pfd, 1, 200) <= 0) continue;
    char buf[4096];
    ssize_t n = read(out_fd_, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    std::smatch m;
    if (std::regex_search(out, m, kKey)) admin_key_ = m[1];
    if (std::regex_search(out, m, kListen)) {
      port_ = static_cast<uint16_t>(std::stoi(m[1]));
      return true;
    }
  }
  *error = "paddockd did not start; output: " + out;
  Kill9();
  return false;
}

void DaemonProcess::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  if (out_fd_ >= 0) close(out_fd_);
  out_fd_ = -1;
}

void DaemonProcess::Kill9() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  if (out_fd_ >= 0) close(out_fd_);
  out_fd_ = -1;
}

std::unique_ptr<api::HttpClient> DaemonProcess::Client() const {
  return std::make_unique<api::HttpClient>("127.0.0.1", port_);
}

}  // namespace paddock::testing
