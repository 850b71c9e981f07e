// Once<T>: a value computed exactly once, by whichever caller comes first.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "shoal/sync/detail/once_core.hpp"
#include "shoal/sync/detail/sync_ops.hpp"
#include "shoal/sync/mutex.hpp"

namespace shoal {

/// A value computed exactly once, by the first caller's `init`. Tasks and
/// plain threads may race on it: exactly one runs `init`; the others wait
/// without burning CPU (a suspended task, a parked thread) and get the
/// winner's value.
///  - If `init` throws, the winner rethrows it and every other and later
///    caller gets SyncError{init_failed} (single-shot: no retry).
///  - If `init` ends by cancellation (its caller was cancelled) or by
///    std::bad_alloc (memory ran out for the moment), that is not a failure
///    of the value: the Once is empty again and the next caller (a waiter,
///    at once) runs `init`; the winner rethrows what ended it.
/// Destroying a Once that is waited on aborts with a message naming it.
template <class T>
class Once;

namespace detail {
template <class T, class F>
Task<const T&> once_do_task(Once<T>& once, F init);
template <class T, class F>
class OnceCall;
}  // namespace detail

template <class T>
class Once {
  static_assert(!std::is_reference_v<T> && !std::is_void_v<T>, "shoal::Once<T>: T must be a value type");

 public:
  /// An empty Once; `name` is how errors and the abort message refer to it
  /// (empty: by its address).
  explicit Once(std::string name = {}) : core_(sync_object_name("Once", name, reinterpret_cast<std::uintptr_t>(this))) {}
  Once(const Once&) = delete;
  Once& operator=(const Once&) = delete;

  /// The value, if init has succeeded (a snapshot; never waits).
  const T* get() const noexcept { return core_.state() == detail::OnceCore::done ? &*value_ : nullptr; }

 private:
  template <class U, class F>
  friend Task<const U&> detail::once_do_task(Once<U>& once, F init);
  template <class U, class F>
  friend class detail::OnceCall;
  template <class U, class F>
  friend const U& blocking_once_do(Once<U>& once, F& init);
  detail::OnceCore core_;
  std::optional<T> value_;
};

namespace detail {
enum class OnceStep { ready, wait, run };
/// One look at the state: the value is there, someone else is running
/// init (wait, then look again), or this caller won and runs init.
/// Throws SyncError{init_failed} once init has failed.
inline OnceStep once_step(OnceCore& core) {
  switch (core.state()) {
    case OnceCore::done:
      return OnceStep::ready;
    case OnceCore::failed:
      core.throw_failed();
    case OnceCore::running:
      return OnceStep::wait;
    case OnceCore::empty:
      break;
  }
  return core.try_begin() ? OnceStep::run : OnceStep::wait;
}

/// True for a std::bad_alloc: running out of memory is the moment's, not init's.
bool is_out_of_memory(const std::exception_ptr& e) noexcept;

/// The winner's end: publishes the value, or the failure and rethrows it.
/// A cancellation or std::bad_alloc leaves the Once empty (the next caller
/// runs init); any other fault fails it for good.
template <class T>
const T& once_settle(OnceCore& core, std::optional<T>& slot, std::optional<T>& made, std::exception_ptr error) {
  if (!error) {
    slot.emplace(std::move(*made));
    core.finish(OnceCore::done);
    return *slot;
  }
  core.finish(is_cancellation(error) || is_out_of_memory(error) ? OnceCore::empty : OnceCore::failed);
  std::rethrow_exception(error);
}
}  // namespace detail

namespace detail {
template <class T, class F>
Task<const T&> once_do_task(Once<T>& once, F init) {
  if (detail::TaskRecord* f = co_await detail::CurrentRecord{}; f != nullptr && f->cancelled()) detail::raise_cancelled();
  detail::OnceStep step;
  while ((step = detail::once_step(once.core_)) == detail::OnceStep::wait) {
    if (once.core_.state() == detail::OnceCore::running) co_await detail::OnceCore::Awaiter(once.core_);
  }
  if (step == detail::OnceStep::ready) co_return *once.value_;
  std::optional<T> made;
  std::exception_ptr error;
  try {
    if constexpr (detail::body_is_task<F>) {
      made.emplace(co_await std::invoke(init));
    } else {
      made.emplace(std::invoke(init));
    }
  } catch (...) {
    error = std::current_exception();
  }
  co_return detail::once_settle(once.core_, once.value_, made, error);
}

/// once_do as an awaitable: once the value is there a call allocates
/// nothing; before that it runs once_do_task.
template <class T, class F>
class [[nodiscard]] OnceCall {
 public:
  using task_type = Task<const T&>;
  OnceCall(Once<T>& once, F init) : once_(once), init_(std::move(init)) {}
  OnceCall(OnceCall&&) = default;
  OnceCall& operator=(OnceCall&&) = delete;

  /// For the APIs that take a Task (spawn, move_on_after, ...).
  operator task_type() && { return once_do_task(once_, std::move(init_)); }

  bool await_ready() const noexcept { return false; }
  template <class P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
    TaskRecord* f = record_of(h);
    if (f != nullptr && !f->cancelled() && once_.core_.state() == OnceCore::done) {
      if (!consume_budget(f)) return h;
      record_ = f;  // a schedule point once per budget, like every awaitable
      yield_from(f, h, this);
      return std::noop_coroutine();
    }
    slow_ = once_do_task(once_, std::move(init_));
    return TaskAccess::awaiter(slow_).await_suspend(h);
  }
  const T& await_resume() {
    if (slow_) return TaskAccess::awaiter(slow_).await_resume();
    if (record_ != nullptr && record_->cancelled()) detail::raise_cancelled();  // cancelled while it yielded
    return *once_.value_;
  }

 private:
  Once<T>& once_;
  F init_;
  task_type slow_;
  TaskRecord* record_ = nullptr;  // set when it yielded
};
}  // namespace detail

/// The stored value, computing it with `init()` (a callable returning T, or
/// Task<T>) if no one has. Awaited; once the value is there it allocates
/// nothing. Converts to Task<const T&> where a Task is wanted.
/// Checkpoint: yes (a cancelled caller gets Cancelled even when the value is
///   ready); with the value ready it still yields once per budget.
/// Cancellation: a waiter leaves the queue and takes nothing; the winner's
///   init ended by Cancelled leaves the Once empty (the next caller runs it).
/// Thread-safety: any task; plain threads use blocking::once_do. `init`
///   must not call once_do on the same Once (it would wait for itself,
///   undetected).
/// Throws: Cancelled; for the winner, what `init` threw (std::bad_alloc
///   leaves the Once empty, anything else fails it); for every other and
///   later caller after a failure, SyncError{init_failed}.
template <class T, class F>
detail::OnceCall<T, F> once_do(Once<T>& once, F init) {
  return detail::OnceCall<T, F>(once, std::move(init));
}

template <class T, class F>
const T& blocking_once_do(Once<T>& once, F& init) {
  static_assert(!detail::body_is_task<F>, "shoal::blocking::once_do: init runs on this thread; it must not return a Task");
  detail::OnceStep step;
  while ((step = detail::once_step(once.core_)) == detail::OnceStep::wait) {
    detail::require_blocking_allowed("once_do");
    once.core_.wait_blocking();
  }
  if (step == detail::OnceStep::ready) return *once.value_;
  std::optional<T> made;
  std::exception_ptr error;
  try {
    made.emplace(std::invoke(init));
  } catch (...) {
    error = std::current_exception();
  }
  return detail::once_settle(once.core_, once.value_, made, error);
}

namespace blocking {
/// once_do for plain threads: a loser blocks the thread until the winner
/// (a task or a thread) is done. `init` must not return a Task.
/// Checkpoint: not applicable (a thread is in no scope: nothing cancels it).
/// Cancellation: none for the thread; a task winner's cancelled init lets
///   this caller run `init` instead.
/// Thread-safety: plain threads; on a runtime worker only while it need not wait.
/// Throws: as once_do, without Cancelled; std::logic_error on a runtime
///   worker if it would have to wait.
template <class T, class F>
const T& once_do(Once<T>& once, F init) {
  return blocking_once_do(once, init);
}
}  // namespace blocking

}  // namespace shoal
