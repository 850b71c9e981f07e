// ThreadWake on a futex: untimed and timed waits on one word, so a waker
// needs no lock and a timed lock attempt needs no condition variable.
#include "shoal/detail/thread_wake.hpp"

#include "src/runtime/futex.hpp"

namespace shoal::detail {

void ThreadWake::wait() noexcept {
  while (flag_.load(std::memory_order_acquire) == 0) futex_wait(flag_, 0, nullptr);
}

bool ThreadWake::wait_until(std::chrono::steady_clock::time_point deadline) noexcept {
  while (flag_.load(std::memory_order_acquire) == 0) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    futex_wait_for(flag_, 0, std::chrono::duration_cast<std::chrono::nanoseconds>(left));
  }
  return true;
}

void ThreadWake::notify() noexcept {
  flag_.store(1, std::memory_order_release);
  futex_wake(flag_, 1);
}

}  // namespace shoal::detail
