// ThreadWake on a futex: untimed and timed waits on one word, so a waker
// needs no lock and a timed lock attempt needs no condition variable.
#include "shoal/detail/thread_wake.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace shoal::detail {
namespace {

static_assert(sizeof(shim::atomic<std::uint32_t>) == sizeof(std::uint32_t), "the futex word is the atomic itself");

void futex_wait(shim::atomic<std::uint32_t>* word, const timespec* relative) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, 0u, relative, nullptr, 0);
}

}  // namespace

void ThreadWake::wait() noexcept {
  while (flag_.load(std::memory_order_acquire) == 0) futex_wait(&flag_, nullptr);
}

bool ThreadWake::wait_until(std::chrono::steady_clock::time_point deadline) noexcept {
  while (flag_.load(std::memory_order_acquire) == 0) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    const timespec rel{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    futex_wait(&flag_, &rel);
  }
  return true;
}

void ThreadWake::notify() noexcept {
  flag_.store(1, std::memory_order_release);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&flag_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace shoal::detail
