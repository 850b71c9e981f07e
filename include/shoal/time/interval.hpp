// Interval: ticks at a fixed period (heartbeats, polling, rate limits), on
// the runtime's timers and clock (the manual clock in tests).
//
//   shoal::Interval every(1s, shoal::MissedTick::skip);
//   for (;;) { co_await every.tick(); send_heartbeat(); }
#pragma once

#include <chrono>
#include <coroutine>

#include "shoal/runtime/task.hpp"
#include "shoal/time/sleep.hpp"

namespace shoal {

/// What a tick that comes late (seen more than 5 ms after it was due: the
/// task was busy, or the machine was) does to the ticks after it.
enum class MissedTick {
  /// The missed ticks fire at once, one per tick(), until the schedule is
  /// caught up: the count of ticks over time stays exact.
  burst,
  /// The schedule moves: the next tick is one period after this late one.
  delay,
  /// The missed ticks are dropped: the next tick is the next one on the
  /// original schedule that is still ahead.
  skip,
};

/// A schedule of ticks, one period apart. The first tick is due at once
/// (or at `start`). Not thread-safe: one task ticks it.
class Interval {
 public:
  /// Ticks every `period` (> 0), the first at once.
  explicit Interval(Clock::duration period, MissedTick missed = MissedTick::burst) noexcept
      : Interval(now(), period, missed) {}
  /// Ticks every `period` (> 0), the first at `start`.
  Interval(Clock::time_point start, Clock::duration period, MissedTick missed = MissedTick::burst) noexcept
      : next_(start), period_(period.count() > 0 ? period : Clock::duration(1)), missed_(missed) {}

  /// What tick() returns: `co_await` it for the time the tick was due.
  class Awaiter {
   public:
    /// Also usable where a Task is taken (move_on_after, with_timeout, spawn).
    using task_type = Task<Clock::time_point>;
    /// Waits for `iv`'s next tick; made by tick().
    explicit Awaiter(Interval* iv) noexcept : iv_(iv), sleep_(iv->next_) {}
    /// Wraps the tick in a Task (allocates its frame), for APIs that take a Task.
    operator task_type() && { return as_task(iv_); }
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
      return sleep_.await_suspend(h);
    }
    /// The time the tick was due (not when it was seen).
    Clock::time_point await_resume() {
      sleep_.await_resume();  // throws Cancelled: the tick stays due
      return iv_->advance();
    }

   private:
    static task_type as_task(Interval* iv) { co_return co_await Awaiter(iv); }
    Interval* iv_;
    detail::SleepAwaiter sleep_;
  };

  /// Waits until the next tick is due and returns the time it was due.
  /// Checkpoint: yes, every call (a due tick still yields once).
  /// Cancellation: the tick is not consumed: the next tick() returns it.
  /// Thread-safety: the one task that owns the interval.
  /// Throws: Cancelled; std::logic_error outside a shoal task.
  [[nodiscard]] Awaiter tick() noexcept { return Awaiter(this); }

  /// Starts the schedule again: the next tick is one period from now.
  void reset() noexcept { next_ = now() + period_; }
  /// When the next tick is due.
  Clock::time_point next_tick() const noexcept { return next_; }
  /// The time between ticks (a period <= 0 given at construction became the
  /// smallest Clock::duration).
  Clock::duration period() const noexcept { return period_; }

 private:
  Clock::time_point advance() noexcept {
    const Clock::time_point due = next_;
    const Clock::time_point t = now();
    next_ = due + period_;
    if (t - due <= kLate) return due;  // on time (a timer fires up to a tick late)
    switch (missed_) {
      case MissedTick::burst:
        break;
      case MissedTick::delay:
        next_ = t + period_;
        break;
      case MissedTick::skip:
        next_ = due + period_ * ((t - due) / period_ + 1);
        break;
    }
    return due;
  }

  static constexpr Clock::duration kLate = std::chrono::milliseconds(5);
  Clock::time_point next_;
  Clock::duration period_;
  MissedTick missed_;
};

}  // namespace shoal
