// Deadlines and shields: cancel scopes around one task, each a CancelScope
// made and run for the call. A deadline cancels the task it wraps and waits
// for it to unwind; it never abandons work.
#pragma once

#include <chrono>
#include <exception>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/task.hpp"
#include "shoal/scope/cancel_scope.hpp"
#include "shoal/scope/scope.hpp"
#include "shoal/time/sleep.hpp"

namespace shoal {

/// Thrown by `with_timeout` when the deadline cut the task off. A fault.
class TimedOut : public std::runtime_error {
 public:
  /// A timeout of a deadline `after` long; what() gives it in whole milliseconds.
  explicit TimedOut(std::chrono::nanoseconds after)
      : std::runtime_error("shoal: deadline of " + std::to_string(after.count() / 1'000'000) + " ms exceeded") {}
};

/// Runs `task`; if it has not finished `d` after this call is awaited, it is
/// cancelled, awaited until it has unwound, and TimedOut is thrown. A cancel
/// scope around `task`: it never abandons work. A deadline already passed
/// (d <= 0) starts `task` cancelled: it runs to its first checkpoint.
/// Checkpoint: yes: in a cancelled context it throws Cancelled and `task`
///   never starts. No budget yield of its own.
/// Cancellation: `task` has unwound. An enclosing cancellation goes on
///   upward as Cancelled (the deadline does not turn it into TimedOut). A
///   value produced before the deadline is returned even if the deadline
///   then hit (as is one that `task` returns after catching the Cancelled).
/// Thread-safety: any task.
/// Throws: TimedOut (`task` ended with the deadline's Cancelled); `task`'s
///   faults unchanged; Cancelled; std::bad_alloc if the timer heap cannot
///   grow (`task` not started); std::logic_error outside a shoal task.
template <class T, class Rep, class Period>
Task<T> with_timeout(std::chrono::duration<Rep, Period> d, Task<T> task) {
  CancelScope scope(detail::clock_now() + std::chrono::duration_cast<Clock::duration>(d));
  auto r = co_await scope.run(std::move(task));
  if (!r) throw TimedOut(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
  if constexpr (!std::is_void_v<T>) co_return std::move(*r);
}

/// Like with_timeout, but a deadline is not a fault: returns the value, or
/// std::nullopt when cut off (for Task<void>: true if it completed).
/// Checkpoint, Cancellation, Thread-safety: as with_timeout.
/// Throws: as with_timeout, without TimedOut.
template <class T, class Rep, class Period>
auto move_on_after(std::chrono::duration<Rep, Period> d, Task<T> task)
    -> Task<std::conditional_t<std::is_void_v<T>, bool, std::optional<T>>> {
  CancelScope scope(detail::clock_now() + std::chrono::duration_cast<Clock::duration>(d));
  co_return co_await scope.run(std::move(task));
}

/// The same three for a Task-like awaitable (e.g. `with_lock(m, body)`).
template <detail::TaskLike A, class Rep, class Period>
auto with_timeout(std::chrono::duration<Rep, Period> d, A call) {
  return with_timeout(d, typename A::task_type(std::move(call)));
}
/// move_on_after for a Task-like awaitable.
template <detail::TaskLike A, class Rep, class Period>
auto move_on_after(std::chrono::duration<Rep, Period> d, A call) {
  return move_on_after(d, typename A::task_type(std::move(call)));
}
/// shielded for a Task-like awaitable.
template <detail::TaskLike A>
auto shielded(A call) {
  return shielded(typename A::task_type(std::move(call)));
}

/// Runs `task` where cancellation from outside cannot reach it (cleanup that
/// must finish). Cancellation requested outside is seen again at the first
/// checkpoint after it returns. Deadlines and scopes inside `task` still work.
/// Checkpoint: no (it does not start cancelled, even in a cancelled context).
/// Cancellation: outer cancellation never makes it throw; `task` runs to its
///   end (a Cancelled of `task`'s own, e.g. from an inner deadline, passes).
/// Thread-safety: any task.
/// Throws: what `task` throws; std::logic_error outside a shoal task.
template <class T>
Task<T> shielded(Task<T> task) {
  CancelScope scope(CancelScope::kShield);
  auto r = co_await scope.run(std::move(task));  // a shield is never cancelled: r holds the value
  if constexpr (!std::is_void_v<T>) co_return std::move(*r);
}

/// Runs `task`, then `cleanup` shielded whatever the outcome, then returns
/// the value or rethrows the task's fault. (`co_await` is ill-formed inside
/// a catch handler; this is the idiom for async cleanup.)
/// Checkpoint: no check of its own (`task`'s checkpoints apply); `cleanup`
///   runs even when the caller is already cancelled.
/// Cancellation: if `task` threw Cancelled, `cleanup` has run to its end and
///   Cancelled is rethrown.
/// Thread-safety: any task.
/// Throws: `task`'s fault or Cancelled (a cleanup fault then goes to
///   on_suppressed_fault); the cleanup's fault if `task` succeeded (its value
///   is discarded).
template <class T>
Task<T> finally(Task<T> task, Task<void> cleanup) {
  detail::Outcome<T> out;
  try {
    out = co_await detail::TaskAccess::capture(task);
  } catch (...) {
    out.error = std::current_exception();
  }
  std::exception_ptr& error = out.error;
  std::exception_ptr cleanup_error;
  try {
    co_await shielded(std::move(cleanup));
  } catch (...) {
    cleanup_error = std::current_exception();
  }
  if (error) {
    if (cleanup_error) {
      detail::TaskRecord* f = co_await detail::CurrentRecord{};
      detail::report_suppressed_fault(f->sched, cleanup_error);
    }
    std::rethrow_exception(error);
  }
  if (cleanup_error) std::rethrow_exception(cleanup_error);
  if constexpr (!std::is_void_v<T>) co_return std::move(*out.value);
}

}  // namespace shoal
