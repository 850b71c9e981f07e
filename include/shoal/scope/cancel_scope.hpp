// CancelScope: a cancel scope as an object (Trio's CancelScope): code can
// hold it, pass it down, cancel it from any task or thread, and move its
// deadline while the work inside runs.
//
//   shoal::CancelScope cs(shoal::now() + 30s);
//   s.spawn([&]() -> shoal::Task<void> { co_await stop.wait(); cs.cancel(); });
//   // (elsewhere, on progress: cs.set_deadline(shoal::now() + 30s);)
//   std::optional<std::string> body = co_await cs.run(download(url));  // nullopt if cs cut it off
//   if (body) save(*body);
#pragma once

#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "shoal/detail/spin_lock.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/detail/timer.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/task.hpp"
#include "shoal/scope/scope.hpp"
#include "shoal/time/sleep.hpp"

namespace shoal {

/// A cancel scope that code holds. `run(task)` runs a task inside it, once;
/// `cancel()` and the deadline cancel what runs inside (and everything it
/// spawned), and `run` then returns empty instead of throwing. An enclosing
/// cancellation is never absorbed: it goes on upward as Cancelled. The one
/// cancel scope: with_timeout, move_on_after and shielded each run a task
/// in one made for the call.
/// Thread-safety: cancel, set_deadline and the queries from any task or
/// thread, before, during and after run. Not movable (tasks may hold it).
class CancelScope {
 public:
  /// No deadline.
  CancelScope() noexcept = default;
  /// Cancels itself at `deadline` (the runtime's clock, shoal::now()).
  explicit CancelScope(Clock::time_point deadline) noexcept : deadline_(deadline) {}
  /// Selects a shield (Trio's `shield=True`).
  struct Shield {
    explicit Shield() = default;
  };
  /// A shield: cancellation from outside does not reach what runs inside
  /// (run does not check it first either; it is seen again at the first
  /// checkpoint after run returns). Its own cancel() and `deadline` still
  /// cut the task off: async cleanup with a time limit.
  static constexpr Shield kShield{};
  /// A shield (pass kShield), with its own `deadline` if given.
  explicit CancelScope(Shield, Clock::time_point deadline = Clock::time_point::max()) noexcept
      : deadline_(deadline), shield_(true) {}
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;
  ~CancelScope() = default;

  /// Cancels the scope: what runs inside stops at its next checkpoint.
  /// Before run: run starts cancelled (its task stops at its first
  /// checkpoint). After run: nothing. Idempotent; never waits.
  void cancel() noexcept;

  /// Moves the deadline, earlier or later, also while it runs; one that has
  /// passed cancels at once. A scope already cancelled stays cancelled.
  void set_deadline(Clock::time_point deadline) noexcept;
  /// The deadline, or Clock::time_point::max() for none.
  Clock::time_point deadline() const noexcept;

  /// True once cancel() was called or the deadline passed.
  bool cancel_called() const noexcept;
  /// After run: true if this scope's cancellation cut its task off (run
  /// returned empty).
  bool cancelled_caught() const noexcept;

  /// Runs `task` inside the scope. Returns its value, or empty when this
  /// scope's cancellation cut it off (for a Task<void>: true if it
  /// completed). A scope runs once.
  /// Checkpoint: yes (a shield: no): in a cancelled context it throws
  ///   Cancelled and `task` never starts. No budget yield of its own.
  /// Cancellation: `task` has unwound. An enclosing cancellation goes on as
  ///   Cancelled (even if this scope was cancelled too). A value produced
  ///   before this scope's cancellation is returned.
  /// Thread-safety: any task (once).
  /// Throws: `task`'s faults; Cancelled; std::logic_error for a second run
  ///   or outside a shoal task.
  template <class T>
  auto run(Task<T> task) -> Task<std::conditional_t<std::is_void_v<T>, bool, std::optional<T>>>;

 private:
  // Under lock_: enter/leave the running node; arm the deadline's timer.
  void enter(detail::CancelNode* node, detail::Scheduler* s);
  void leave() noexcept;
  void arm_locked() noexcept;
  void cancel_locked() noexcept;
  static void on_fire(detail::TimerEntry* e) noexcept;

  mutable detail::SpinLock lock_;
  detail::CancelNode* node_ = nullptr;  // while run is inside
  detail::Scheduler* sched_ = nullptr;
  Clock::time_point deadline_ = Clock::time_point::max();
  detail::OwnedTimer<CancelScope> entry_;
  bool armed_ = false;  // entry_ is (or may be, while firing) in a timer wheel
  bool cancel_called_ = false;
  bool caught_ = false;
  bool used_ = false;
  const bool shield_ = false;
};

template <class T>
auto CancelScope::run(Task<T> task) -> Task<std::conditional_t<std::is_void_v<T>, bool, std::optional<T>>> {
  detail::TaskRecord* f = co_await detail::CurrentRecord{};
  if (f == nullptr) throw std::logic_error("shoal::CancelScope::run: awaited outside a shoal task");
  if (!shield_ && f->cancelled()) detail::raise_cancelled();
  detail::CancelNode node;
  node.shielded = shield_;
  node.enter(f);
  try {
    enter(&node, f->sched);
  } catch (...) {
    node.leave(f);
    throw;
  }
  detail::Outcome<T> out;
  try {
    out = co_await detail::TaskAccess::capture(task);  // a fault comes back as a value
  } catch (...) {
    out.error = std::current_exception();
  }
  leave();
  const bool outer = node.parent != nullptr && node.parent->cancelled.load(std::memory_order_acquire);
  node.leave(f);
  if (out.error) {
    // Our own Cancelled, and nobody further out wants one: absorbed.
    if (!outer && node.self_cancelled.load(std::memory_order_acquire) && detail::is_cancelled_exception(out.error)) {
      lock_.lock();
      caught_ = true;
      lock_.unlock();
      if constexpr (std::is_void_v<T>) {
        co_return false;
      } else {
        co_return std::nullopt;
      }
    }
    std::rethrow_exception(out.error);
  }
  if constexpr (std::is_void_v<T>) {
    co_return true;
  } else {
    co_return std::move(out.value);
  }
}

}  // namespace shoal
