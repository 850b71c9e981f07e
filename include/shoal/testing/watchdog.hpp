// A test watchdog: if not disarmed within its deadline it prints every live
// runtime's worker and task state, then aborts, so a hang fails loudly.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "shoal/runtime/run.hpp"

/// What shoal's own tests use, for yours (link shoal::testing): frame
/// counting and allocation-failure injection, the deterministic executor's
/// step hook, a watchdog, and leak checks.
namespace shoal::testing {

/// Fails a hung test loudly: unless destroyed within its limit, it prints
/// every live runtime's worker and task state to stderr and aborts.
class Watchdog {
 public:
  /// Starts a thread that waits up to `limit`; `what` names the test in the
  /// message. The destructor disarms it and joins the thread.
  explicit Watchdog(std::chrono::seconds limit, std::string what = "test")
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock<std::mutex> g(mu_);
          if (!cv_.wait_for(g, limit, [this] { return disarmed_; })) {
            std::fprintf(stderr, "\nshoal watchdog: %s did not finish within %llds; state:\n", what_.c_str(),
                         static_cast<long long>(limit.count()));
            Runtime::dump_all(std::cerr);
            std::cerr.flush();
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> g(mu_);
      disarmed_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread thread_;
};

}  // namespace shoal::testing
