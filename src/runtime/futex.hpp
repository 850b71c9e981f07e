// The futex calls shoal makes on an atomic word of its own (a thread's
// one-shot wake, the block_on threads' word). Private.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>

#include "shoal/detail/sync_shim.hpp"

namespace shoal::detail {

static_assert(sizeof(shim::atomic<std::uint32_t>) == sizeof(std::uint32_t), "the futex word is the atomic itself");

/// Sleeps while `*word == expected`, at most `relative` (null: no limit).
/// Returns early, spuriously or on a signal; the caller re-checks.
inline void futex_wait(shim::atomic<std::uint32_t>& word, std::uint32_t expected, const timespec* relative) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, relative, nullptr, 0);
}

inline void futex_wait_for(shim::atomic<std::uint32_t>& word, std::uint32_t expected,
                           std::chrono::nanoseconds ns) noexcept {
  const timespec rel{static_cast<time_t>(ns.count() / 1'000'000'000), static_cast<long>(ns.count() % 1'000'000'000)};
  futex_wait(word, expected, &rel);
}

/// Wakes up to `n` threads sleeping on `word`.
inline void futex_wake(shim::atomic<std::uint32_t>& word, int n = INT_MAX) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

}  // namespace shoal::detail
