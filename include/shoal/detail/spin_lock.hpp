// A small test-and-test-and-set lock for short critical sections (cancel
// nodes). Falls back to yielding so a preempted holder cannot burn a core.
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
    for (unsigned spins = 0;; ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (spins < 64) {
          shim::spin_pause();
          ++spins;
        } else {
          shim::thread_yield();
        }
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }
  shim::atomic<bool> locked_{false};
};

}  // namespace shoal::detail
