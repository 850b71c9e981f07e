// Sleeping: cancellable waits on the runtime's timer queue.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/timer.hpp"
#include "shoal/runtime/errors.hpp"

namespace shoal {

/// The clock of every shoal time point and deadline (monotonic). Read the
/// runtime's time with now(), not Clock::now(): they differ under a manual clock.
using Clock = std::chrono::steady_clock;

/// The runtime's time: Clock::now(), except on a runtime with a manual clock
/// (RuntimeOptions::manual_clock), where it is that clock's time when called
/// from a task. Deadlines passed to sleep_until should be built from it.
inline Clock::time_point now() noexcept { return detail::clock_now(); }

namespace detail {

class SleepAwaiter final : public WaitHook {
 public:
  explicit SleepAwaiter(Clock::time_point until) noexcept : until_(until) {}
  const char* wait_kind() const noexcept override { return "shoal::sleep"; }
  SleepAwaiter(const SleepAwaiter&) = delete;
  SleepAwaiter& operator=(const SleepAwaiter&) = delete;

  bool await_ready() const noexcept { return false; }

  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    f_ = record_of(h);
    if (f_ == nullptr) return false;  // await_resume reports the misuse
    if (f_->cancelled()) {
      cancelled_ = true;
      return false;
    }
    if (until_ <= clock_now()) {  // already due: still a schedule point
      yield_from(f_, h, this);
      return true;
    }
    f_->resume = h;
    entry_.deadline = to_ns(until_);
    entry_.fire = &SleepAwaiter::on_fire;
    entry_.owner = this;
    timer_bind(f_->sched, &entry_);  // before the hook: cancel_wait reads which wheel
    publish_hook(f_, this);
    const TimerInsert r = timer_insert(f_->sched, &entry_, f_);
    if (r == TimerInsert::queued) return true;  // the timer or a canceller resumes us
    disarm_wait(f_, this);  // cancelled before it was queued
    cancelled_ = true;
    return false;
  }

  // Always inline (see CheckpointAwaiter::await_resume): an out-of-line
  // throw costs ~135 ns more per cancelled sleeper.
  [[gnu::always_inline]] void await_resume() const {
    if (f_ == nullptr) [[unlikely]] throw_outside_task();
    if (cancelled_ || f_->cancelled()) [[unlikely]] detail::raise_cancelled();
  }
  [[noreturn]] static void throw_outside_task();

  bool cancel_wait() noexcept override {
    if (!timer_remove(f_->sched, &entry_)) return false;  // already firing: it wakes us
    cancelled_ = true;
    return true;
  }

 private:
  static void on_fire(TimerEntry* e) noexcept;

  struct Entry : TimerEntry {
    SleepAwaiter* owner = nullptr;
  };
  Clock::time_point until_;
  TaskRecord* f_ = nullptr;
  bool cancelled_ = false;
  Entry entry_;
};

}  // namespace detail

/// Suspends the task until `deadline` (steady clock; see now()).
/// Allocation: none beyond the frame.
/// Checkpoint: yes (also when already due: it then yields once, every time).
/// Cancellation: throws Cancelled promptly and the timer is removed; a
///   cancellation that arrives as the timer fires still throws.
/// Thread-safety: from a task.
/// Throws: Cancelled; std::bad_alloc if the timer heap cannot grow;
///   std::logic_error when awaited outside a shoal task.
[[nodiscard]] inline detail::SleepAwaiter sleep_until(Clock::time_point deadline) noexcept {
  return detail::SleepAwaiter(deadline);
}

/// Suspends the task for `d`, counted from this call (the runtime's clock).
/// Checkpoint, Cancellation, Thread-safety, Throws: as sleep_until.
template <class Rep, class Period>
[[nodiscard]] detail::SleepAwaiter sleep_for(std::chrono::duration<Rep, Period> d) noexcept {
  return detail::SleepAwaiter(detail::clock_now() + std::chrono::duration_cast<Clock::duration>(d));
}

}  // namespace shoal
