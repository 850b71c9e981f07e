// A one-shot wake-up for a plain thread blocked in a bridge call (a channel's
// or a lock's blocking form): the thread half of the one wait queue.
#pragma once

#include <chrono>
#include <cstdint>

#include "shoal/detail/runtime_abi.hpp"
#include "shoal/detail/sync_shim.hpp"

namespace shoal::detail {

class ThreadWake {
 public:
  /// Blocks until notify().
  void wait() noexcept;
  /// Blocks until notify() (true) or `deadline` (false).
  bool wait_until(std::chrono::steady_clock::time_point deadline) noexcept;
  /// Any thread; once. The waiter may return (and destroy this) as soon as
  /// the flag is set: nothing after that touches more than the address.
  void notify() noexcept;

 private:
  shim::atomic<std::uint32_t> flag_{0};
};

}  // namespace shoal::detail
