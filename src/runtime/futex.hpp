// The futex calls shoal makes on an atomic word of its own (a thread's
// one-shot wake, the block_on threads' word). Private.
#pragma once

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>

#include "shoal/detail/sync_shim.hpp"
#include "src/platform/platform.hpp"

#if defined(SHOAL_LINUX_CALLS)
#include <linux/futex.h>
#include <sys/syscall.h>
#define SHOAL_HAVE_FUTEX 1
#else
#include <condition_variable>
#include <cstddef>
#include <mutex>
#endif

// The block_on threads sleep on a condition variable instead (watch.cpp)
// under TSan, and where there is no futex; the dump signal's handler then
// cannot wake them, so they look every kDumpLook.
#if defined(SHOAL_TSAN) || !defined(SHOAL_HAVE_FUTEX)
#define SHOAL_ROOT_SLEEPS_ON_CONDVAR 1
#endif

namespace shoal::detail {

static_assert(sizeof(shim::atomic<std::uint32_t>) == sizeof(std::uint32_t), "the futex word is the atomic itself");

#if defined(SHOAL_HAVE_FUTEX)
/// Sleeps while `*word == expected`, at most `relative` (null: no limit).
/// Returns early, spuriously or on a signal; the caller re-checks.
inline void futex_wait(shim::atomic<std::uint32_t>& word, std::uint32_t expected, const timespec* relative) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, relative, nullptr, 0);
}

/// Wakes up to `n` threads sleeping on `word`. Async-signal-safe.
inline void futex_wake(shim::atomic<std::uint32_t>& word, int n = INT_MAX) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}
#else
// Without a futex (macOS, the BSDs; Linux under SHOAL_PORTABLE_POSIX): the
// same contract on a table of condition variables, shared by the words that
// hash alike (a wake wakes them all; each re-checks its word). Not
// async-signal-safe: the dump signal's wake is polled instead (watch.cpp).
struct FutexBucket {
  std::mutex mu;
  std::condition_variable cv;
};
inline FutexBucket& futex_bucket(const void* word) noexcept {
  static FutexBucket table[64];
  return table[(reinterpret_cast<std::uintptr_t>(word) >> 4) % 64];
}

inline void futex_wait(shim::atomic<std::uint32_t>& word, std::uint32_t expected, const timespec* relative) noexcept {
  FutexBucket& b = futex_bucket(&word);
  std::unique_lock<std::mutex> g(b.mu);
  if (word.load(std::memory_order_acquire) != expected) return;
  if (relative == nullptr) {
    b.cv.wait(g);
  } else {
    b.cv.wait_for(g, std::chrono::seconds(relative->tv_sec) + std::chrono::nanoseconds(relative->tv_nsec));
  }
}

inline void futex_wake(shim::atomic<std::uint32_t>& word, int /*n*/ = INT_MAX) noexcept {
  FutexBucket& b = futex_bucket(&word);
  // A waiter between its check and its sleep holds the lock: once we have
  // had it, that waiter sleeps, and the notify reaches it.
  { std::lock_guard<std::mutex> g(b.mu); }
  b.cv.notify_all();
}
#endif

inline void futex_wait_for(shim::atomic<std::uint32_t>& word, std::uint32_t expected,
                           std::chrono::nanoseconds ns) noexcept {
  const timespec rel{static_cast<time_t>(ns.count() / 1'000'000'000), static_cast<long>(ns.count() % 1'000'000'000)};
  futex_wait(word, expected, &rel);
}

}  // namespace shoal::detail
