// A small test-and-test-and-set lock for short critical sections (cancel
// nodes, wait lists). Waits with SpinWait, so a preempted holder cannot make
// a waiter burn its time slice.
#pragma once

#include "shoal/detail/sync_shim.hpp"

namespace shoal::detail {

class SpinLock {
 public:
  void lock() noexcept {
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    lock_slow();
  }
  bool try_lock() noexcept { return !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  void lock_slow() noexcept {
    SpinWait wait;
    for (;;) {
      while (locked_.load(std::memory_order_relaxed)) wait.pause();
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }
  shim::atomic<bool> locked_{false};
};

}  // namespace shoal::detail
