// Mutex and RwLock as scoped combinators: the only way to hold one is to run
// a body under it, and it is released on return, on a throw and on
// cancellation. There is no lock() or unlock() to leak.
//
// Every with_* call here (and in semaphore.hpp) is `co_await`ed. For a Task
// body it is a Task; for a plain body it is an awaitable that allocates
// nothing while the lock is free and converts to Task<T> where one is
// wanted (Scope::spawn/start, move_on_after, with_timeout, shielded take it
// as it is). A plain body runs inline on the task and cannot be cancelled.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "shoal/sync/detail/sync_ops.hpp"

namespace shoal {

namespace detail {
struct SyncAccess;
}

/// name: how errors and the fail-closed destructor refer to it.
/// `self` is an address (an integer: the object is still being built).
std::string sync_object_name(const char* kind, const std::string& name, std::uintptr_t self);

/// An async mutex for tasks, usable from plain threads through
/// shoal::blocking. Waiting suspends the task, never the worker thread, and
/// is a cancellation point. Barging keeps it fast; a waiter older than about
/// 1 ms gets a direct hand-off, so nobody starves. No poisoning: after a
/// body throws, the next acquirer gets an ordinary lock (what the body
/// mutated before it threw stays mutated). Destroying a Mutex that is held
/// or waited for aborts with a message naming it.
class Mutex {
 public:
  /// `name` is how errors and the abort message refer to this mutex (empty:
  /// by its address).
  explicit Mutex(std::string name = {})
      : core_(1, sync_object_name("Mutex", name, reinterpret_cast<std::uintptr_t>(this))), name_(std::move(name)) {}
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  /// The name given at construction (empty if none), used in error messages.
  const std::string& name() const noexcept { return name_; }

 private:
  friend struct detail::SyncAccess;
  detail::LockSpec spec() noexcept { return {&core_, 1, &core_.holder, &core_.holder}; }
  detail::PermitCore core_;
  std::string name_;
};

/// Readers share, writers exclude. A writer waiting behind readers is not
/// starved by new readers (they queue behind it once it has waited ~1 ms).
/// A task that holds the write lock and asks for either lock gets
/// SyncError{self_deadlock}; one that holds a read lock and asks for the
/// write lock deadlocks undetected (readers are not tracked).
class RwLock {
 public:
  /// How many readers may hold the lock at once (2^30); a writer takes all
  /// of these permits.
  static constexpr std::uint32_t kMaxReaders = 1u << 30;
  /// `name` is how errors and the abort message refer to this lock (empty:
  /// by its address).
  explicit RwLock(std::string name = {})
      : core_(kMaxReaders, sync_object_name("RwLock", name, reinterpret_cast<std::uintptr_t>(this))), name_(std::move(name)) {}
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;
  /// The name given at construction (empty if none), used in error messages.
  const std::string& name() const noexcept { return name_; }

 private:
  friend struct detail::SyncAccess;
  detail::LockSpec read_spec() noexcept { return {&core_, 1, nullptr, &core_.holder}; }
  detail::LockSpec write_spec() noexcept { return {&core_, kMaxReaders, &core_.holder, &core_.holder}; }
  detail::PermitCore core_;
  std::string name_;
};

class Semaphore;

namespace detail {
struct SyncAccess {
  static LockSpec permits(Semaphore& s, std::uint32_t n, const char* call);
  static LockSpec lock(Mutex& m) noexcept { return m.spec(); }
  static LockSpec read(RwLock& l) noexcept { return l.read_spec(); }
  static LockSpec write(RwLock& l) noexcept { return l.write_spec(); }
};
}  // namespace detail

/// Runs `body()` (a callable, or one returning Task<T>) holding `m`; returns
/// its value.
/// Checkpoint: yes; when `m` is free it still yields once per budget
///   (before taking it).
/// Cancellation: if it throws Cancelled, the body did not run and nothing is
///   held (permits granted at that moment are handed on). A Task body
///   cancelled inside unwinds with `m` released.
/// Thread-safety: any task; plain threads use blocking::with_lock.
/// Throws: Cancelled; SyncError{self_deadlock} if this task holds `m`
///   (checked before cancellation); what the body throws; std::bad_alloc
///   (the wait's frame); std::logic_error when awaited outside a shoal task.
template <class F>
auto with_lock(Mutex& m, F body) {
  return detail::lock_call(detail::SyncAccess::lock(m), std::move(body), "with_lock");
}
/// Runs `body` if `m` is free right now and returns SyncResult with its
/// value; else SyncError::Code::busy, body not run (also when this task
/// holds `m`: no self-deadlock check, it never waits).
/// Checkpoint: yes: never waits, but checks cancellation and yields once
///   per budget (a Task body: at every call) before trying.
/// Cancellation: the body did not run and nothing was taken.
/// Thread-safety: any task; plain threads use blocking::with_try_lock.
/// Throws: Cancelled; what the body throws; std::bad_alloc (a Task body's
///   frame); std::logic_error when awaited outside a shoal task.
template <class F>
auto with_try_lock(Mutex& m, F body) {
  return detail::try_lock_call(detail::SyncAccess::lock(m), std::move(body), "with_try_lock");
}
/// Waits at most `limit` for `m` (the body is not limited), then runs `body`
/// holding it; else SyncError::Code::timed_out, body not run. Always a Task.
/// A limit <= 0 does not wait: it takes `m` if it is free (one try, as
/// blocking::with_lock_timeout does), else times out.
/// Checkpoint: yes; when `m` is free it still yields once per budget.
/// Cancellation: the body did not run and nothing is held.
/// Thread-safety: any task; plain threads use blocking::with_lock_timeout.
/// Throws: Cancelled; SyncError{self_deadlock} if this task holds `m`; what
///   the body throws; std::bad_alloc (the body's frame, the timer);
///   std::logic_error when awaited outside a shoal task.
template <class F, class Rep, class Period>
Task<SyncResult<detail::body_value_t<F>>> with_lock_timeout(Mutex& m, std::chrono::duration<Rep, Period> limit,
                                                            F body) {
  return detail::timed_locked(detail::SyncAccess::lock(m), std::chrono::duration_cast<std::chrono::nanoseconds>(limit),
                              std::move(body), "with_lock_timeout");
}

/// Runs `body` holding `l` shared with other readers; returns its value.
/// Checkpoint, Cancellation: as with_lock.
/// Thread-safety: any task; plain threads use blocking::with_read_lock.
/// Throws: as with_lock; self_deadlock only if this task holds the write
///   lock (a read lock held by this task is not tracked).
template <class F>
auto with_read_lock(RwLock& l, F body) {
  return detail::lock_call(detail::SyncAccess::read(l), std::move(body), "with_read_lock");
}
/// Runs `body` holding `l` exclusively; returns its value.
/// Checkpoint, Cancellation: as with_lock.
/// Thread-safety: any task; plain threads use blocking::with_write_lock.
/// Throws: as with_lock; self_deadlock if this task holds the write lock (a
///   task holding a read lock that asks for it waits forever, undetected).
template <class F>
auto with_write_lock(RwLock& l, F body) {
  return detail::lock_call(detail::SyncAccess::write(l), std::move(body), "with_write_lock");
}
/// Runs `body` holding `l` exclusively if it is free right now; else
/// SyncError::Code::busy, body not run.
/// Checkpoint, Cancellation, Thread-safety, Throws: as with_try_lock.
template <class F>
auto with_try_write_lock(RwLock& l, F body) {
  return detail::try_lock_call(detail::SyncAccess::write(l), std::move(body), "with_try_write_lock");
}

/// The sync library's forms for plain threads and spawn_blocking functions:
/// they block the calling thread instead of suspending a task, and throw
/// std::logic_error where they would block a runtime worker.
namespace blocking {
/// The same for plain threads (and spawn_blocking functions): blocks the
/// thread. `body` must not return a Task (a compile error).
/// Checkpoint: not applicable (a thread is in no scope: nothing cancels it).
/// Cancellation: none; with_lock_timeout's limit is the way to bound a wait.
/// Thread-safety: plain threads and spawn_blocking functions, never a
///   runtime worker. A thread and a task holding the same lock exclude
///   each other as two tasks do.
/// Throws: SyncError{self_deadlock} if this thread holds the lock (not for
///   with_try_lock, which reports busy); what the body throws;
///   std::logic_error on a runtime worker.
template <class F>
std::invoke_result_t<F&> with_lock(Mutex& m, F body) {
  return detail::blocking_locked(detail::SyncAccess::lock(m), body, "with_lock");
}
/// Runs `body` if `m` is free right now; else SyncError::Code::busy, body
/// not run (also when this thread holds `m`). Never waits.
template <class F>
SyncResult<std::invoke_result_t<F&>> with_try_lock(Mutex& m, F body) {
  return detail::blocking_try_locked(detail::SyncAccess::lock(m), body, "with_try_lock");
}
/// Waits at most `limit` for `m`, then runs `body` holding it; else
/// SyncError::Code::timed_out, body not run. A free `m` is taken even with a
/// limit <= 0.
template <class F, class Rep, class Period>
SyncResult<std::invoke_result_t<F&>> with_lock_timeout(Mutex& m, std::chrono::duration<Rep, Period> limit, F body) {
  return detail::blocking_timed_locked(detail::SyncAccess::lock(m),
                                       std::chrono::duration_cast<std::chrono::nanoseconds>(limit), body,
                                       "with_lock_timeout");
}
/// Blocks until it can share `l` with other readers, then runs `body`
/// holding it; returns its value.
template <class F>
std::invoke_result_t<F&> with_read_lock(RwLock& l, F body) {
  return detail::blocking_locked(detail::SyncAccess::read(l), body, "with_read_lock");
}
/// Blocks until it holds `l` exclusively, then runs `body`; returns its value.
template <class F>
std::invoke_result_t<F&> with_write_lock(RwLock& l, F body) {
  return detail::blocking_locked(detail::SyncAccess::write(l), body, "with_write_lock");
}
}  // namespace blocking

}  // namespace shoal
