// Clock seam: components take a Clock so tests can drive time (TTL, idle timeout, lease expiry)
// without sleeping.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace paddock {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time in unix milliseconds (what the registry stores). Thread-safe.
  virtual int64_t NowMs() const = 0;
};

class SystemClock : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock tests move by hand.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  int64_t NowMs() const override { return now_.load(); }
  void Advance(std::chrono::milliseconds d) { now_ += d.count(); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace paddock
