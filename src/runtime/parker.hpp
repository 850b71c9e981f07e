// Parker: how one worker sleeps and is woken. Header-only and generic over
// the I/O driver so model tests can run this exact code with a model driver.
#pragma once

#include <cstdint>

#include "shoal/detail/sync_shim.hpp"
#if !defined(SHOAL_MODEL) && !defined(SHOAL_RELACY)
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
///
/// Orderings: what the waker did before unpark (a pinned task pushed to the
/// inbox, a shutdown flag) happens before what the parker does after park
/// returns: unpark's exchange releases, and park acquires the kNotified it
/// consumes, in its first CAS or in the exchange it leaves with (leave()).
/// Nothing else needs an order: the waker reads nothing the parker wrote,
/// and every way out of park passes through an acquire (the first CAS or
/// leave()), so the CASes into the sleeping states and the sleep loop's
/// look are relaxed. Wakes that go through Idle are also ordered by Idle's
/// mutex. Checked under
/// Relacy: tests/relacy/pinned_lane_relacy_test.cpp (a pinned push wakes
/// through the Parker alone) and park_relacy_test.cpp.
class Parker {
 public:
  template <class Driver>
  void park(Driver& d) noexcept {
    std::uint32_t expected = kNotified;
    if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) return;
    if (d.try_lock_driver()) {
      expected = kEmpty;
      if (state_.compare_exchange_strong(expected, kParkedDriver, std::memory_order_relaxed)) {
        d.drive();
      }
      leave();
      d.unlock_driver();
      return;
    }
    expected = kEmpty;
    if (state_.compare_exchange_strong(expected, kParked, std::memory_order_relaxed)) {
      while (state_.load(std::memory_order_relaxed) == kParked) sleep_while_parked();
    }
    leave();
  }

  /// Returns the state it found: kParked (a futex wake was made),
  /// kParkedDriver (the driver was woken) or another (no system call).
  template <class Driver>
  std::uint32_t unpark(Driver& d) noexcept {
    std::uint32_t prev = state_.exchange(kNotified, std::memory_order_release);
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
  // Back to kEmpty, taking whatever notification is there: an exchange that
  // acquires it, not a store. A drive can end on its own (I/O, a timer) and a
  // futex sleeper can read one kNotified while a second unpark writes another;
  // a store would overwrite the newest unpark unread, and its waker's work
  // (a pinned task pushed to the inbox, which nothing else tells us of) would
  // not happen before our next look for work: that look could miss it and we
  // would sleep on it (C++ allows it, so does POWER: R+lwsync+sync).
  void leave() noexcept { (void)state_.exchange(kEmpty, std::memory_order_acquire); }

  // A plain futex: libstdc++'s atomic wait spins through sched_yield before
  // it sleeps, which a parking worker must not do (it found nothing to run).
  // The model and Relacy shims sleep on the atomic's wait (Relacy's is a
  // futex-like waitset: a sleeper nobody wakes is a deadlock report).
#if defined(SHOAL_MODEL) || defined(SHOAL_RELACY)
  void sleep_while_parked() noexcept { state_.wait(kParked, std::memory_order_acquire); }
  void wake_parked() noexcept { state_.notify_one(); }
#else
  void sleep_while_parked() noexcept { futex_wait(state_, kParked, nullptr); }
  void wake_parked() noexcept { futex_wake(state_, 1); }
#endif

  shim::atomic<std::uint32_t> state_{kEmpty};
};

}  // namespace shoal::detail
