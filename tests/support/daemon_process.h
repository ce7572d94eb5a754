// Runs a real paddockd (`serve`) for integration tests: a temporary data dir, a config written
// by the test, an ephemeral loopback port, and the admin key it prints on first start.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "api/http_client.h"

namespace paddock::testing {

class DaemonProcess {
 public:
  // `config_yaml` is written to <data dir>/paddock.yaml and passed with --config.
  explicit DaemonProcess(std::string config_yaml, std::string data_dir = "");
  ~DaemonProcess();  // SIGTERM, wait; removes the data dir if it created it

  // Starts paddockd and waits until it listens. Returns false (with a message) on failure.
  bool Start(std::string* error);
  // Graceful stop (SIGTERM) or crash (SIGKILL); both wait for the process.
  void Stop();
  void Kill9();

  uint16_t port() const { return port_; }
  const std::string& admin_key() const { return admin_key_; }
  const std::string& data_dir() const { return data_dir_; }
  pid_t pid() const { return pid_; }
  std::unique_ptr<api::HttpClient> Client() const;

 private:
  std::string config_yaml_;
  std::string data_dir_;
  bool own_data_dir_ = false;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  uint16_t port_ = 0;
  std::string admin_key_;
};

// The paddockd binary next to the test executable.
std::string PaddockdPath();

}  // namespace paddock::testing
