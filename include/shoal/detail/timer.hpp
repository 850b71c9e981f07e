// Timer entries: the intrusive records sleeps and deadlines put in the
// runtime's timer queue. They live in the waiting coroutine's frame.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "shoal/detail/intrusive_list.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/runtime_abi.hpp"

namespace shoal::detail {

inline std::int64_t to_ns(Clock::time_point t) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}


struct TimerWheelTag;

/// Filed in one shard's timer wheel (src/runtime/driver/time/timer_wheel.hpp) through its
/// hook; `shard` and `slot` say where, under that shard's lock.
struct TimerEntry : ListHook<TimerWheelTag> {
  using WheelTag = TimerWheelTag;
  enum State : std::uint32_t { idle, queued, firing, done };

  std::int64_t deadline = 0;  // steady_clock, ns
  shim::atomic<std::uint32_t> state{idle};
  std::uint16_t shard = 0;
  std::uint16_t slot = 0;  // level * 64 + slot in that level
  /// Runs on the thread that fires the timer, outside the shard's lock, with
  /// `state == firing`. If anyone may wait for it (timer_cancel_and_wait), its
  /// last touch of the entry is storing `done`, with release: the owner's
  /// acquire load of it orders the callback's (plain) reads of the owner
  /// before the owner frees it. Relacy (tests/relacy/timer_relacy_test.cpp)
  /// checks the wait-out (the entry in freed memory), not this pair: those
  /// reads are of plain fields, whose races it does not track.
  void (*fire)(TimerEntry*) noexcept = nullptr;
};

/// A timer entry that an object owns (a sleep, a deadline, a select's
/// deadline case, an I/O idle limit): the one adapter between the wheel and
/// what a timer is for. The owner's `fire` function finds it with owner_of.
template <class Owner>
struct OwnedTimer : TimerEntry {
  Owner* owner = nullptr;
  /// The owner of `e`, which must be an OwnedTimer<Owner>.
  static Owner& owner_of(TimerEntry* e) noexcept { return *static_cast<OwnedTimer*>(e)->owner; }
};

}  // namespace shoal::detail
