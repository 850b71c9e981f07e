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
#include <variant>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/thread_wake.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal {

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

  class Awaiter final : public LevelWaiter<Awaiter> {
   public:
    /// Also usable where a Task is taken (move_on_after, with_timeout, spawn).
    using task_type = Task<void>;
    explicit Awaiter(SignalCore* c) noexcept : LevelWaiter<Awaiter>(c->lock_, c->waiters_, Prim::kWaitName), core_(c) {}
    operator task_type() && { return as_task(core_); }
    bool ready_locked() noexcept { return core_->prim().take_locked(); }
    void await_resume() const { this->throw_if_cancelled(); }

   private:
    static task_type as_task(SignalCore* c) { co_await Awaiter(c); }
    SignalCore* core_;
  };

  /// Waits.
  /// Checkpoint: yes (a cancelled task throws, whatever the state); a wait
  ///   that need not wait yields once per budget.
  /// Cancellation: nothing was consumed. (Notify: a notification handed to
  ///   the waiter at the moment it is cancelled wins: the wait returns.)
  /// Thread-safety: any task; plain threads use wait_blocking.
  /// Throws: Cancelled; std::logic_error outside a shoal task.
  [[nodiscard]] Awaiter wait() noexcept { return Awaiter{this}; }

  /// Blocks a plain thread until the wait would return.
  /// Checkpoint: not applicable. Cancellation: none.
  /// Thread-safety: plain threads and spawn_blocking functions, not a worker.
  /// Throws: std::logic_error on a runtime worker.
  void wait_blocking() {
    (void)wait_level_blocking(lock_, waiters_, [this] { return prim().take_locked(); }, Prim::kBlockingName);
  }
  /// The same with a limit: false (nothing taken) if `d` passed first.
  template <class Rep, class Period>
  bool wait_blocking_for(std::chrono::duration<Rep, Period> d) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
    return wait_level_blocking(lock_, waiters_, [this] { return prim().take_locked(); }, Prim::kBlockingName, true,
                               deadline);
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
/// ready, a resource loaded. `co_await ev.wait()` (tasks) and
/// `ev.wait_blocking()` / `wait_blocking_for(d)` (threads) wait until set.
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

  /// True once set() was called (a snapshot; never waits).
  bool is_set() const noexcept {
    detail::WaitSection sec(lock_);
    return set_;
  }

 private:
  friend class detail::SignalCore<Event>;
  friend class detail::SignalCase<Event>;
  static constexpr const char* kName = "Event";
  static constexpr const char* kWaitName = "shoal::Event::wait";
  static constexpr const char* kBlockingName = "shoal::Event::wait_blocking";
  bool take_locked() noexcept { return set_; }
  bool set_ = false;  // guarded by lock_
};

/// A wake-up without a value, with Tokio's Notify semantics: notify_one()
/// wakes one waiter, or, if nobody waits, leaves one permit that the next
/// wait takes at once (so a notify that comes before the wait is not lost);
/// permits do not add up. notify_all() wakes everyone waiting now and
/// leaves no permit. `co_await n.wait()` (tasks) and `n.wait_blocking()` /
/// `wait_blocking_for(d)` (threads) take one notification.
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

 private:
  friend class detail::SignalCore<Notify>;
  friend class detail::SignalCase<Notify>;
  static constexpr const char* kName = "Notify";
  static constexpr const char* kWaitName = "shoal::Notify::wait";
  static constexpr const char* kBlockingName = "shoal::Notify::wait_blocking";
  bool take_locked() noexcept { return std::exchange(permit_, false); }
  bool permit_ = false;  // guarded by lock_
};

namespace detail {

/// An Event or Notify case: completes when the event is set, or takes a
/// notification.
template <class Prim>
class SignalCase final : public SelectCase {
 public:
  using outcome_type = std::monostate;
  explicit SignalCase(Prim& p) noexcept : SelectCase(p.lock_), prim_(&p) {}
  SignalCase(SignalCase&& o) noexcept : SelectCase(o.prim_->lock_), prim_(o.prim_) {}

  int poll_fast() noexcept { return -1; }
  SpinLock* lock() noexcept { return &prim_->lock_; }
  bool poll_locked(WakeList&) noexcept { return prim_->take_locked(); }
  bool link_locked(WakeList&, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept {
    enter_select(claim, index);
    record = f;
    prim_->waiters_.push_back(this);
    return false;
  }
  void after_unlock() noexcept {}
  void disarm_locked() noexcept {
    if (is_linked()) unlink_locked();
  }
  bool finish() noexcept { return true; }  // the claim was the notification
  void reset() noexcept { in_select = false; }
  outcome_type take() noexcept { return {}; }

 private:
  Prim* prim_;
};

}  // namespace detail

/// A select case: the event is set (nothing is consumed).
inline detail::SignalCase<Event> on_event(Event& ev) noexcept { return detail::SignalCase<Event>(ev); }

/// A select case: take one notification (a stored permit, or the next
/// notify_one / notify_all).
inline detail::SignalCase<Notify> on_notify(Notify& n) noexcept { return detail::SignalCase<Notify>(n); }

}  // namespace shoal
