// Sleeping: cancellable waits on the runtime's timer queue.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <variant>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/timer.hpp"
#include "shoal/detail/wait_queue.hpp"
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
    // Checks the cancel under the shard's lock, seq_cst after our seq_cst hook
    // store (Dekker with the canceller: tests/relacy/timer_relacy_test.cpp).
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

  Clock::time_point until_;
  TaskRecord* f_ = nullptr;
  bool cancelled_ = false;
  OwnedTimer<SleepAwaiter> entry_;
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

namespace detail {

/// The deadline case: a timer entry that claims the select when it fires.
class DeadlineCase {
 public:
  using outcome_type = std::monostate;
  explicit DeadlineCase(std::chrono::steady_clock::time_point at) noexcept : at_(at) {}
  DeadlineCase(DeadlineCase&& o) noexcept : at_(o.at_) {}

  int poll_fast() noexcept { return -1; }
  SpinLock* lock() noexcept { return nullptr; }
  bool poll_locked(WakeList&) noexcept { return at_ <= clock_now(); }
  bool link_locked(WakeList&, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept {
    entry_.owner = this;
    entry_.fire = &DeadlineCase::on_fire;
    entry_.deadline = to_ns(at_);
    entry_.state.store(TimerEntry::idle, std::memory_order_relaxed);
    claim_ = &claim;
    index_ = index;
    f_ = f;
    timer_bind(f->sched, &entry_);
    (void)timer_insert(f->sched, &entry_);  // no cancel check: the select's own re-check covers it
    armed_ = true;
    return false;
  }
  void after_unlock() noexcept {}
  void disarm_locked() noexcept {
    if (armed_) timer_cancel_and_wait(f_->sched, &entry_);  // waits out a firing in progress
    armed_ = false;
  }
  bool finish() noexcept { return true; }
  void reset() noexcept {}
  outcome_type take() noexcept { return {}; }

 private:
  static void on_fire(TimerEntry* e) noexcept {
    DeadlineCase& c = OwnedTimer<DeadlineCase>::owner_of(e);
    bool wake = false;
    if (c.claim_->try_win(c.index_, wake) && wake) {
      TaskRecord* f = c.f_;
      disarm_wait(f, c.claim_);
      schedule(f);
    }
    // The select waits for this store (disarm_locked) before the entry goes;
    // release: our reads of the case happen before it is freed (timer.hpp).
    e->state.store(TimerEntry::done, std::memory_order_release);
  }

  std::chrono::steady_clock::time_point at_;
  OwnedTimer<DeadlineCase> entry_;
  // Read by the firing driver, which the select waits out (the entry's
  // done store, release, and timer_cancel_and_wait's acquire) before it
  // frees or relinks the case.
  shim::plain<SelectClaim*> claim_ = nullptr;
  shim::plain<TaskRecord*> f_ = nullptr;
  shim::plain<std::uint32_t> index_ = 0;
  bool armed_ = false;
};

}  // namespace detail

/// A select case: `deadline` passed (the runtime's clock, shoal::now()).
inline detail::DeadlineCase on_deadline(std::chrono::steady_clock::time_point deadline) noexcept {
  return detail::DeadlineCase(deadline);
}

/// A select case: `d` passed, counted from this call.
template <class Rep, class Period>
detail::DeadlineCase on_timeout(std::chrono::duration<Rep, Period> d) noexcept {
  return detail::DeadlineCase(detail::clock_now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d));
}

}  // namespace shoal
