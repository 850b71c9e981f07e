// Event and Notify: wake-ups without a value, for tasks and plain threads,
// on the one wait queue (detail/wait_queue.hpp). Both can be a case of a
// select (channel/select.hpp).
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/thread_wake.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal {

template <class... Cases>
class Select;

namespace detail {

template <class Prim>
class SignalCase;

/// What Event and Notify share: a lock, the waiters, and one awaiter whose
/// condition is the primitive's `take_locked()` (Event: is it set; Notify:
/// take a permit).
template <class Prim>
class SignalCore {
 public:
  SignalCore() = default;
  SignalCore(const SignalCore&) = delete;
  SignalCore& operator=(const SignalCore&) = delete;
  ~SignalCore() {
    if (!waiters_.empty()) {
      std::fprintf(stderr, "shoal: %s at %p destroyed while tasks or threads wait on it\n", Prim::kName,
                   static_cast<void*>(this));
      std::abort();
    }
  }

  class Awaiter final : public Waiter {
   public:
    /// Also usable where a Task is taken (move_on_after, with_timeout, spawn).
    using task_type = Task<void>;
    explicit Awaiter(SignalCore* c) noexcept : Waiter(c->lock_), core_(c) {}
    operator task_type() && { return as_task(core_); }
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
      TaskRecord* f = record_of(h);
      if (f == nullptr) throw std::logic_error(std::string("shoal::") + Prim::kName + "::wait awaited outside a shoal task");
      if (f->cancelled()) {
        cancelled = true;
        return false;
      }
      const WaitStep step = wait_step(*this, f, h, core_->lock_, core_->waiters_,
                                      [this](WaitSection&) { return core_->prim().take_locked(); });
      if (step == WaitStep::suspended) return true;  // nothing may touch *this from here on
      cancelled = step == WaitStep::cancelled;
      if (cancelled || !consume_budget(f)) return false;
      yield_from(f, h, this);  // went on without waiting: a schedule point once per budget
      return true;
    }
    void await_resume() const {
      if (cancelled) throw Cancelled{};
    }

   private:
    static task_type as_task(SignalCore* c) { co_await Awaiter(c); }
    SignalCore* core_;
  };

  /// Blocks a plain thread until the condition holds; false at `deadline`.
  bool wait_blocking_until(std::chrono::steady_clock::time_point deadline, bool timed) {
    if (on_worker_thread()) {
      throw std::logic_error(std::string("shoal::") + Prim::kName +
                             "::wait_blocking: called on a runtime worker (it would block the worker; use co_await)");
    }
    struct ThreadWaiter final : Waiter {
      using Waiter::Waiter;
    } w(lock_);
    ThreadWake wake;
    if (wait_step_thread(w, wake, lock_, waiters_, [this](WaitSection&) { return prim().take_locked(); }) ==
        WaitStep::done) {
      return true;
    }
    if (timed && !wake.wait_until(deadline)) {
      {
        WaitSection sec(lock_);
        if (w.is_linked()) {  // still queued: nobody claimed it, so it leaves with nothing
          w.unlink_locked();
          return false;
        }
      }
      // Claimed as the deadline passed: the wake-up is ours. The waker still
      // has to notify (after its unlock): wait for that before `wake` goes.
      wake.wait();
    } else if (!timed) {
      wake.wait();
    }
    return true;
  }

 protected:
  Prim& prim() noexcept { return static_cast<Prim&>(*this); }

  /// Wakes up to `n` waiters (under the lock, through `sec`); dead select
  /// cases are dropped on the way. Returns how many it woke.
  std::size_t wake_locked(WakeList& sec, std::size_t n) noexcept {
    std::size_t woken = 0;
    while (woken < n) {
      Waiter* w = claim_front(waiters_);
      if (w == nullptr) break;
      w->unlink_locked();
      sec.wake(w);
      ++woken;
    }
    return woken;
  }

  mutable SpinLock lock_;
  WaitList waiters_;

 private:
  friend class SignalCase<Prim>;
};

}  // namespace detail

/// A one-shot event: once set, it stays set, and every wait, present or
/// later, goes on. For "it happened" signals: shutdown requested, a server
/// ready, a resource loaded.
/// Thread-safety: every member, any task or thread.
class Event : public detail::SignalCore<Event> {
 public:
  Event() = default;

  /// Sets the event and wakes every waiter. Idempotent; never waits.
  void set() noexcept {
    detail::WaitSection sec(lock_);
    set_ = true;
    (void)wake_locked(sec, SIZE_MAX);
  }

  bool is_set() const noexcept {
    detail::WaitSection sec(lock_);
    return set_;
  }

  /// Waits until the event is set.
  /// Checkpoint: yes (a cancelled task throws even if the event is set); a
  ///   set event yields once per budget.
  /// Cancellation: nothing changes (the event is level: nothing is consumed).
  /// Thread-safety: any task; plain threads use wait_blocking.
  /// Throws: Cancelled; std::logic_error outside a shoal task.
  [[nodiscard]] Awaiter wait() noexcept { return Awaiter{this}; }

  /// Blocks a plain thread until the event is set.
  /// Checkpoint: not applicable. Cancellation: none.
  /// Thread-safety: plain threads and spawn_blocking functions, not a worker.
  /// Throws: std::logic_error on a runtime worker.
  void wait_blocking() { (void)wait_blocking_until({}, false); }
  /// The same with a limit: false if the event was not set within `d`.
  template <class Rep, class Period>
  bool wait_blocking_for(std::chrono::duration<Rep, Period> d) {
    return wait_blocking_until(std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d), true);
  }

 private:
  friend class detail::SignalCore<Event>;
  friend class detail::SignalCase<Event>;
  static constexpr const char* kName = "Event";
  bool take_locked() noexcept { return set_; }
  bool set_ = false;  // guarded by lock_
};

/// A wake-up without a value, with Tokio's Notify semantics: notify_one()
/// wakes one waiter, or, if nobody waits, leaves one permit that the next
/// wait takes at once (so a notify that comes before the wait is not lost);
/// permits do not add up. notify_all() wakes everyone waiting now and
/// leaves no permit.
/// Thread-safety: every member, any task or thread.
class Notify : public detail::SignalCore<Notify> {
 public:
  Notify() = default;

  /// Wakes the longest-waiting waiter, or stores the permit. Never waits.
  void notify_one() noexcept {
    detail::WaitSection sec(lock_);
    if (wake_locked(sec, 1) == 0) permit_ = true;
  }

  /// Wakes every waiter waiting now. Stores no permit. Never waits.
  void notify_all() noexcept {
    detail::WaitSection sec(lock_);
    (void)wake_locked(sec, SIZE_MAX);
  }

  /// Waits for a notification: takes the permit if there is one.
  /// Checkpoint: yes (a cancelled task throws and leaves the permit); taking
  ///   a permit yields once per budget.
  /// Cancellation: no notification was taken. A notification handed to the
  ///   waiter at the moment it is cancelled wins: the wait returns normally.
  /// Thread-safety: any task; plain threads use wait_blocking.
  /// Throws: Cancelled; std::logic_error outside a shoal task.
  [[nodiscard]] Awaiter wait() noexcept { return Awaiter{this}; }

  /// Blocks a plain thread until notified.
  /// Checkpoint: not applicable. Cancellation: none.
  /// Thread-safety: plain threads and spawn_blocking functions, not a worker.
  /// Throws: std::logic_error on a runtime worker.
  void wait_blocking() { (void)wait_blocking_until({}, false); }
  /// The same with a limit: false if no notification came within `d`
  /// (nothing was taken).
  template <class Rep, class Period>
  bool wait_blocking_for(std::chrono::duration<Rep, Period> d) {
    return wait_blocking_until(std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d), true);
  }

 private:
  friend class detail::SignalCore<Notify>;
  friend class detail::SignalCase<Notify>;
  static constexpr const char* kName = "Notify";
  bool take_locked() noexcept { return std::exchange(permit_, false); }
  bool permit_ = false;  // guarded by lock_
};

}  // namespace shoal
