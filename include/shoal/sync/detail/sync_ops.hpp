// The one implementation of "run a body while holding permits" behind every
// with_* function of Mutex, RwLock and Semaphore: acquire (a checkpoint),
// run the body, release on return, throw and cancellation alike.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "shoal/sync/detail/permits.hpp"
#include "shoal/runtime/task.hpp"
#include "shoal/scope/cancel.hpp"
#include "shoal/scope/scope.hpp"
#include "shoal/scope/timeout.hpp"
#include "shoal/sync/sync_error.hpp"

namespace shoal::detail {

template <class R>
struct BodyValue {
  using type = R;
};
template <class T>
struct BodyValue<Task<T>> {
  using type = T;
};
/// What `body()` produces once awaited: T for a body returning Task<T>.
template <class F>
using body_value_t = typename BodyValue<std::invoke_result_t<F&>>::type;
template <class F>
inline constexpr bool body_is_task = IsTask<std::invoke_result_t<F&>>::value;

/// Who holds a lock, for self-deadlock detection: a task's task, or a
/// plain thread (odd values).
inline std::uintptr_t holder_id(TaskRecord* f) noexcept { return reinterpret_cast<std::uintptr_t>(f); }
std::uintptr_t thread_holder_id() noexcept;

/// What one with_* call takes: `n` permits of `core`. `record` (optional)
/// notes the holder while the body runs; `check` (optional) is compared with
/// the caller first, for self-deadlock detection.
struct LockSpec {
  PermitCore* core;
  std::uint32_t n;
  std::atomic<std::uintptr_t>* record;
  const std::atomic<std::uintptr_t>* check;
};

[[noreturn]] void throw_self_deadlock(const PermitCore& core, const char* call);

inline void check_self_deadlock(const LockSpec& l, std::uintptr_t me, const char* call) {
  if (l.check != nullptr && l.check->load(std::memory_order_relaxed) == me) throw_self_deadlock(*l.core, call);
}

/// Holds the permits for a body's duration: releases in every way out.
class Held {
 public:
  Held(const LockSpec& l, std::uintptr_t me) noexcept : l_(l) {
    if (l_.record != nullptr) {
      l_.record->store(me, std::memory_order_relaxed);
      // Where the holder runs, for contenders to move there (a plain thread: nowhere).
      l_.core->holder_worker.store((me & 1) != 0 ? TaskRecord::kNoWorker : reinterpret_cast<TaskRecord*>(me)->worker,
                                   std::memory_order_relaxed);
    }
  }
  ~Held() {
    if (l_.record != nullptr) l_.record->store(0, std::memory_order_relaxed);
    l_.core->release(l_.n);
  }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;

 private:
  LockSpec l_;
};

/// Waits for the permits of `l` (the retry loop of PermitCore::Awaiter).
Task<void> acquire_permits(PermitCore& core, std::uint32_t n);

inline TaskRecord* require_task(TaskRecord* f, const PermitCore& core, const char* call) {
  if (f == nullptr) throw std::logic_error("shoal::" + std::string(call) + " on " + core.what() + " awaited outside a shoal task");
  return f;
}

/// The uncontended path: not cancelled, budget left, permits free. Else the
/// Awaiter (which checks cancellation, yields and queues as needed).
inline bool try_fast_acquire(TaskRecord* f, const LockSpec& l) noexcept {
  if (f->budget <= 1 || f->cancelled() || !l.core->try_acquire(l.n)) return false;
  --f->budget;
  return true;
}

template <class F>
Task<body_value_t<F>> locked(LockSpec l, F body, const char* call) {
  TaskRecord* f = require_task(co_await CurrentRecord{}, *l.core, call);
  check_self_deadlock(l, holder_id(f), call);
  if (!try_fast_acquire(f, l)) co_await acquire_permits(*l.core, l.n);
  Held held(l, holder_id(f));
  if constexpr (body_is_task<F>) {
    co_return co_await std::invoke(body);
  } else if constexpr (std::is_void_v<body_value_t<F>>) {
    std::invoke(body);
  } else {
    co_return std::invoke(body);
  }
}

/// Runs a plain body holding permits already taken; its value as a SyncResult
/// (the try and timed forms, for tasks and threads).
template <class F>
SyncResult<std::invoke_result_t<F&>> run_plain_held(LockSpec l, std::uintptr_t me, F& body) {
  Held held(l, me);
  if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
    std::invoke(body);
    return SyncResult<void>(std::in_place);
  } else {
    return SyncResult<std::invoke_result_t<F&>>(std::in_place, std::invoke(body));
  }
}

enum class CallMode : std::uint8_t { wait, try_once };

/// with_lock and friends for a plain-callable body, as an awaitable rather
/// than a coroutine: while the permits are free nothing is allocated and the
/// body runs inline in await_resume (a Task frame per call cost 3x the
/// lock's own work). A contended call waits in acquire_permits, one frame.
/// `wait` yields the body's value; `try_once` a SyncResult (busy: not run).
template <class F, CallMode M>
class [[nodiscard]] LockCall {
 public:
  using body_type = std::invoke_result_t<F&>;
  using value_type = std::conditional_t<M == CallMode::wait, body_type, SyncResult<body_type>>;
  using task_type = Task<value_type>;

  LockCall(LockSpec l, F body, const char* call) : l_(l), body_(std::move(body)), call_(call) {}
  LockCall(LockCall&&) = default;
  LockCall& operator=(LockCall&&) = delete;

  /// For the APIs that take a Task (spawn, move_on_after, ...).
  operator task_type() && { return as_task(std::move(*this)); }

  bool await_ready() const noexcept { return false; }
  template <class P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
    TaskRecord* f = record_of(h);
    if (f == nullptr) {
      err_ = Err::no_task;
      return h;
    }
    me_ = holder_id(f);
    if constexpr (M == CallMode::wait) {
      // The fast path first: taking the permits proves this task did not
      // hold them, and reading the holder first would pull the contended
      // line in shared only to upgrade it for the CAS (two transfers).
      if (try_fast_acquire(f, l_)) return h;
      if (l_.check != nullptr && l_.check->load(std::memory_order_relaxed) == me_) {
        err_ = Err::self_deadlock;
        return h;
      }
      // The slow path's frame: out of memory is the task's std::bad_alloc,
      // never std::terminate from this noexcept function.
      try {
        slow_ = acquire_permits(*l_.core, l_.n);  // checks cancellation, yields, queues
      } catch (...) {
        err_ = Err::no_memory;
        return h;
      }
      return TaskAccess::awaiter(slow_).await_suspend(h);
    } else {
      // Never waits, but is a cancellation point and a schedule point once
      // per budget like every other.
      if (f->cancelled()) {
        err_ = Err::cancelled;
        return h;
      }
      if (!consume_budget(f)) return h;
      record_ = f;
      yield_from(f, h, this);
      return std::noop_coroutine();
    }
  }
  [[gnu::always_inline]] value_type await_resume() {  // see CheckpointAwaiter::await_resume
    if (err_ == Err::no_task) require_task(nullptr, *l_.core, call_);
    if (err_ == Err::self_deadlock) throw_self_deadlock(*l_.core, call_);
    if (err_ == Err::no_memory) throw std::bad_alloc();
    if (err_ == Err::cancelled || (record_ != nullptr && record_->cancelled())) detail::raise_cancelled();
    if constexpr (M == CallMode::wait) {
      if (slow_) TaskAccess::awaiter(slow_).await_resume();  // Cancelled, having handed on
      Held held(l_, me_);
      return std::invoke(body_);
    } else {
      if (!l_.core->try_acquire(l_.n)) return SyncError::Code::busy;
      return run_plain_held(l_, me_, body_);
    }
  }

 private:
  enum class Err : std::uint8_t { none, no_task, self_deadlock, cancelled, no_memory };
  static task_type as_task(LockCall call) {
    if constexpr (std::is_void_v<value_type>) {
      co_await std::move(call);
    } else {
      co_return co_await std::move(call);
    }
  }
  LockSpec l_;
  F body_;
  const char* call_;
  Task<void> slow_;
  TaskRecord* record_ = nullptr;  // try_once after a yield: re-check cancellation
  std::uintptr_t me_ = 0;
  Err err_ = Err::none;
};

/// with_lock & co: the allocation-free awaitable for a plain body; a Task
/// body gets a coroutine anyway, so the call is one too.
template <class F>
auto lock_call(LockSpec l, F body, const char* call) {
  if constexpr (body_is_task<F>) {
    return locked(l, std::move(body), call);
  } else {
    return LockCall<F, CallMode::wait>(l, std::move(body), call);
  }
}

template <class F>
Task<SyncResult<body_value_t<F>>> run_held(LockSpec l, std::uintptr_t me, F& body) {
  Held held(l, me);
  if constexpr (std::is_void_v<body_value_t<F>>) {
    if constexpr (body_is_task<F>) {
      co_await std::invoke(body);
    } else {
      std::invoke(body);
    }
    co_return SyncResult<void>(std::in_place);
  } else if constexpr (body_is_task<F>) {
    co_return SyncResult<body_value_t<F>>(std::in_place, co_await std::invoke(body));
  } else {
    co_return SyncResult<body_value_t<F>>(std::in_place, std::invoke(body));
  }
}

// The body's frame is made before the permits are taken: a frame that
// cannot be allocated must not leave them taken with no guard to give them
// back (a lazy run_held holds nothing until it runs).
template <class F>
Task<SyncResult<body_value_t<F>>> try_locked(LockSpec l, F body, const char* call) {
  TaskRecord* f = require_task(co_await CurrentRecord{}, *l.core, call);
  co_await checkpoint();  // never waits, but is a cancellation point like every other
  auto held_body = run_held(l, holder_id(f), body);
  if (!l.core->try_acquire(l.n)) co_return SyncError::Code::busy;
  co_return co_await std::move(held_body);
}

template <class F>
auto try_lock_call(LockSpec l, F body, const char* call) {
  if constexpr (body_is_task<F>) {
    return try_locked(l, std::move(body), call);
  } else {
    return LockCall<F, CallMode::try_once>(l, std::move(body), call);
  }
}

template <class F>
Task<SyncResult<body_value_t<F>>> timed_locked(LockSpec l, std::chrono::nanoseconds limit, F body,
                                               const char* call) {
  TaskRecord* f = require_task(co_await CurrentRecord{}, *l.core, call);
  check_self_deadlock(l, holder_id(f), call);
  auto held_body = run_held(l, holder_id(f), body);  // before the permits: see try_locked
  if (try_fast_acquire(f, l)) co_return co_await std::move(held_body);
  if (limit.count() <= 0) {
    // No time to wait: one try, as the blocking form does (a deadline that
    // already passed would cancel even a free lock's acquisition).
    co_await checkpoint();
    if (!l.core->try_acquire(l.n)) co_return SyncError::Code::timed_out;
  } else if (!co_await move_on_after(limit, acquire_permits(*l.core, l.n))) {
    co_return SyncError::Code::timed_out;
  }
  co_return co_await std::move(held_body);
}

// ---- plain threads ----------------------------------------------------------

template <class F>
void check_blocking_body() {
  static_assert(!body_is_task<F>, "shoal::blocking: the body runs on this thread; it must not return a Task");
}

template <class F>
std::invoke_result_t<F&> blocking_locked(LockSpec l, F& body, const char* call) {
  check_blocking_body<F>();
  require_blocking_allowed(call);
  const std::uintptr_t me = thread_holder_id();
  check_self_deadlock(l, me, call);
  l.core->acquire_blocking(l.n, nullptr);
  Held held(l, me);
  return std::invoke(body);
}

template <class F>
SyncResult<std::invoke_result_t<F&>> blocking_try_locked(LockSpec l, F& body, const char* call) {
  check_blocking_body<F>();
  require_blocking_allowed(call);
  if (!l.core->try_acquire(l.n)) return SyncError::Code::busy;
  return run_plain_held(l, thread_holder_id(), body);
}

template <class F>
SyncResult<std::invoke_result_t<F&>> blocking_timed_locked(LockSpec l, std::chrono::nanoseconds limit, F& body,
                                                           const char* call) {
  check_blocking_body<F>();
  require_blocking_allowed(call);
  const std::uintptr_t me = thread_holder_id();
  check_self_deadlock(l, me, call);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  if (!l.core->acquire_blocking(l.n, &deadline)) return SyncError::Code::timed_out;
  return run_plain_held(l, me, body);
}

}  // namespace shoal::detail
