// Timer entries: the intrusive records sleeps and deadlines put in the
// runtime's timer queue. They live in the waiting coroutine's frame.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "shoal/detail/intrusive_list.hpp"
#include "shoal/detail/sync_shim.hpp"

namespace shoal::detail {

class Scheduler;

using Clock = std::chrono::steady_clock;

inline std::int64_t to_ns(Clock::time_point t) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

/// The current time of the runtime whose worker calls this (its manual
/// clock, if it has one); Clock::now() on any other thread.
Clock::time_point clock_now() noexcept;

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
  /// last touch of the entry is storing `done`.
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

struct TaskRecord;

enum class TimerInsert { queued, cancelled };

/// Queues `e` (state idle -> queued) on the calling worker's shard unless
/// `unless_cancelled` is given and already cancelled (checked under the
/// shard's lock, which a canceller's timer_remove also takes, so a cancel is
/// never missed). O(1), no allocation. Wakes the driver if it sleeps past
/// the deadline.
/// `e` must be bound first (timer_bind).
TimerInsert timer_insert(Scheduler* s, TimerEntry* e, const TaskRecord* unless_cancelled = nullptr) noexcept;
/// Chooses the wheel `e` will be filed on (the calling worker's). Before
/// anyone else can reach `e`: a canceller reads it to find the wheel's lock.
void timer_bind(Scheduler* s, TimerEntry* e) noexcept;
/// Takes `e` out if it has not started firing. True if removed.
bool timer_remove(Scheduler* s, TimerEntry* e) noexcept;
/// Removes `e`, or waits until an in-progress firing of it has finished, so
/// the caller may destroy it.
void timer_cancel_and_wait(Scheduler* s, TimerEntry* e) noexcept;

}  // namespace shoal::detail
