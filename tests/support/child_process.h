// Runs a program as a child process for tests: stdin fed from a string, stdout and stderr
// collected (stdout also streamed to a callback with the child's pid, to send it signals), the
// exit status (128 + signal when it died of one); killed after 60 s.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace paddock::testing {

struct CliResult {
  int status = -1;  // exit status, or 128 + signal if paddockd itself died of one
  std::string out, err;
  double seconds = 0;
};

// argv[0] is the program's path. `env` entries (KEY=VALUE) override the parent's environment.
CliResult RunChild(const std::vector<std::string>& args, const std::string& input = "",
                   const std::function<void(pid_t, const std::string&)>& on_stdout = {},
                   const std::vector<std::string>& env = {});

}  // namespace paddock::testing
