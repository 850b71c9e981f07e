// A one-shot wake-up for a plain thread blocked in a bridge call.
#pragma once

#include <cstdint>

#include "shoal/detail/sync_shim.hpp"

namespace shoal::detail {

class ThreadWake {
 public:
  void wait() noexcept {
    while (flag_.load(std::memory_order_acquire) == 0) flag_.wait(0, std::memory_order_acquire);
  }
  void notify() noexcept {
    flag_.store(1, std::memory_order_release);
    flag_.notify_one();
  }

 private:
  shim::atomic<std::uint32_t> flag_{0};
};

/// True on one of a runtime's worker threads (where blocking is a bug).
bool on_worker_thread() noexcept;

}  // namespace shoal::detail
