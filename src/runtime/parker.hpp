// Parker: how one worker sleeps and is woken. Header-only and generic over
// the I/O driver so model tests can run this exact code with a model driver.
#pragma once

#include <cstdint>

#include "shoal/detail/sync_shim.hpp"
#if !defined(SHOAL_MODEL)
#include "src/runtime/futex.hpp"
#endif

namespace shoal::detail {

/// One per worker. A worker parks either inside the I/O backend (if it got
/// the driver) or on its own futex; `unpark` knows which.
///
/// `Driver` provides try_lock_driver(), unlock_driver(), drive() (blocks
/// until wake_driver(), I/O or a timer) and wake_driver() (any thread; a wake
/// before drive() makes the next drive() return at once, as an eventfd does).
///
/// A notification is never lost: unpark swaps in kNotified whatever the state
/// was, so a parker that has not slept yet sees it in its CAS, and one that
/// sleeps is woken by the futex or by the driver wake.
class Parker {
 public:
  template <class Driver>
  void park(Driver& d) noexcept {
    std::uint32_t expected = kNotified;
    if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acq_rel)) return;
    if (d.try_lock_driver()) {
      expected = kEmpty;
      if (state_.compare_exchange_strong(expected, kParkedDriver, std::memory_order_acq_rel)) {
        d.drive();
      }
      state_.store(kEmpty, std::memory_order_release);
      d.unlock_driver();
      return;
    }
    expected = kEmpty;
    if (state_.compare_exchange_strong(expected, kParked, std::memory_order_acq_rel)) {
      while (state_.load(std::memory_order_acquire) == kParked) sleep_while_parked();
    }
    state_.store(kEmpty, std::memory_order_release);
  }

  /// Returns the state it found: kParked (a futex wake was made),
  /// kParkedDriver (the driver was woken) or another (no system call).
  template <class Driver>
  std::uint32_t unpark(Driver& d) noexcept {
    std::uint32_t prev = state_.exchange(kNotified, std::memory_order_acq_rel);
    if (prev == kParked) {
      wake_parked();
    } else if (prev == kParkedDriver) {
      d.wake_driver();
    }
    return prev;
  }

  std::uint32_t state() const noexcept { return state_.load(std::memory_order_relaxed); }

  static constexpr std::uint32_t kEmpty = 0, kParked = 1, kParkedDriver = 2, kNotified = 3;

 private:
  // A plain futex: libstdc++'s atomic wait spins through sched_yield before
  // it sleeps, which a parking worker must not do (it found nothing to run).
#if defined(SHOAL_MODEL)
  void sleep_while_parked() noexcept { state_.wait(kParked, std::memory_order_acquire); }
  void wake_parked() noexcept { state_.notify_one(); }
#else
  void sleep_while_parked() noexcept { futex_wait(state_, kParked, nullptr); }
  void wake_parked() noexcept { futex_wake(state_, 1); }
#endif

  shim::atomic<std::uint32_t> state_{kEmpty};
};

}  // namespace shoal::detail
