#include "support/child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string_view>

extern char** environ;

namespace paddock::testing {

CliResult RunChild(const std::vector<std::string>& args, const std::string& input,
                   const std::function<void(pid_t, const std::string&)>& on_stdout,
                   const std::vector<std::string>& env) {
  CliResult res;
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) < 0 || ::pipe2(out, O_CLOEXEC) < 0 || ::pipe2(err, O_CLOEXEC) < 0) {
    ADD_FAILURE() << "pipe: " << strerror(errno);
    return res;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  std::vector<std::string> full = args;
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child must not inherit a blocked SIGPIPE/SIGTERM mask from gtest threads; spawn with
  // default signal state.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  // The parent's environment with `env` (KEY=VALUE) replacing same-named entries.
  std::vector<std::string> env_strings = env;
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    const std::string_view name = kv.substr(0, kv.find('='));
    bool overridden = false;
    for (const auto& o : env)
      overridden |= o.compare(0, name.size() + 1, std::string(name) + "=") == 0;
    if (!overridden) env_strings.emplace_back(kv);
  }
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const auto start = std::chrono::steady_clock::now();
  int rc = ::posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ADD_FAILURE() << "spawn " << argv[0] << ": " << strerror(rc);
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    return res;
  }
  size_t in_off = 0;
  int in_fd = in[1];
  if (input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  } else {
    ::fcntl(in_fd, F_SETFL, O_NONBLOCK);
  }
  int out_fd = out[0], err_fd = err[0];
  bool killed = false;
  while (out_fd >= 0 || err_fd >= 0) {
    pollfd p[3];
    int n = 0;
    if (out_fd >= 0) p[n++] = {out_fd, POLLIN, 0};
    if (err_fd >= 0) p[n++] = {err_fd, POLLIN, 0};
    if (in_fd >= 0) p[n++] = {in_fd, POLLOUT, 0};
    ::poll(p, static_cast<nfds_t>(n), 200);
    for (int i = 0; i < n; ++i) {
      if (!p[i].revents) continue;
      if (p[i].fd == in_fd) {
        ssize_t w = ::write(in_fd, input.data() + in_off, input.size() - in_off);
        if (w > 0) in_off += static_cast<size_t>(w);
        if (w < 0 || in_off == input.size()) {
          ::close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      char buf[65536];
      ssize_t r = ::read(p[i].fd, buf, sizeof buf);
      if (r <= 0) {
        ::close(p[i].fd);
        (p[i].fd == out_fd ? out_fd : err_fd) = -1;
        continue;
      }
      if (p[i].fd == out_fd) {
        res.out.append(buf, static_cast<size_t>(r));
        if (on_stdout) on_stdout(pid, res.out);
      } else {
        res.err.append(buf, static_cast<size_t>(r));
      }
    }
    if (!killed && std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) {
      ADD_FAILURE() << "paddockd ran for over 60 s; killing it";
      ::kill(pid, SIGKILL);
      killed = true;
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  res.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return res;
}

}  // namespace paddock::testing
