// The one implementation of the cancellable-wait protocol (task_record.hpp)
// for lock-based primitives, and the waits of a select over several of
// them: docs/sync.md ("The wait queue") tells the protocol and why it holds.
// In short: a waiter is claimed by unlinking it under its primitive's lock,
// by exactly one of a waker and a canceller, and woken after the unlock.
#pragma once

#include <chrono>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/intrusive_list.hpp"
#include "shoal/detail/spin_lock.hpp"
#include "shoal/detail/thread_wake.hpp"

namespace shoal::detail {

class Waiter;
using WaitList = IntrusiveList<Waiter>;

/// One wait, by a task or a plain thread, on one primitive. Lives in the
/// awaiter (or on the waiting thread's stack). `lock` is the primitive's
/// lock, set before the waiter is published.
class Waiter : public WaitHook, public ListHook<> {
 public:
  explicit Waiter(SpinLock& lock) noexcept : lock_(&lock) {}
  /// For a waiter that learns its primitive only when it waits (a blocking
  /// job finds its pool through the awaiting task): bind() before publishing.
  Waiter() noexcept = default;
  void bind(SpinLock& lock) noexcept { lock_ = &lock; }
  /// The primitive's lock.
  SpinLock& lock() const noexcept { return *lock_; }
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  // Who waits: a task (`record`), or a plain thread (`thread`, set through
  // wait_by_thread, which marks it). One word for both: every idle
  // connection's read has a waiter.
 private:
  SpinLock* lock_ = nullptr;  // ahead of the flags: a derived waiter packs its own into their tail

 public:
  union {
    TaskRecord* record = nullptr;
    ThreadWake* thread;
  };
  bool by_thread = false;
  bool cancelled = false;  // a canceller took it out of its list
  bool in_select = false;  // a SelectCase: claimed through its select, woken through its hook

  void wait_by_thread(ThreadWake& wake) noexcept {
    thread = &wake;
    by_thread = true;
  }

  // A claimed (unlinked) waiter's spare link chains a wake list: `prev` is
  // free once unlinked (is_linked() reads `next` only).
  Waiter* wake_next() const noexcept { return static_cast<Waiter*>(prev); }
  void set_wake_next(Waiter* w) noexcept { prev = w; }

  /// Claims the waiter for a canceller: unlinks it if it is still queued.
  bool cancel_wait() noexcept final;

  /// Queues the waiter (under the lock).
  void link_locked(WaitList& l, bool at_front = false) noexcept {
    if (at_front) {
      l.push_front(this);
    } else {
      l.push_back(this);
    }
  }
  /// Takes the waiter out of its list (under the lock), as a waker claims it.
  void unlink_locked() noexcept { WaitList::unlink(this); }

 protected:
  ~Waiter() = default;
  /// Bookkeeping a primitive needs when a canceller takes the waiter out
  /// (under the lock): counts of announced waiters, a queue's flags.
  virtual void left_locked() noexcept {}
  /// After a canceller looked, outside the lock: `claimed` if it took the
  /// waiter out; if not, a waker had it first (a blocking job: it runs, and
  /// its wait_readable is interrupted here).
  virtual void after_cancel(bool claimed) noexcept { (void)claimed; }

};

/// The claim word one select's cases share: which case completed, or that
/// the select was cancelled; and whether its task is parked yet (a timer or
/// a canceller, which hold none of its locks, may come before that).
/// Exactly one claim wins because each is one RMW from kOpen: atomicity is
/// all the word needs, so every access is relaxed. No outcome passes
/// through it: a lock-based waker's hand-off is ordered by the primitive's
/// lock (disarm_all retakes it) and the schedule, a timer's by its entry's
/// done store, on_join's by the join word and settled_, a canceller's by
/// the schedule. A case that hands its outcome through the claim must add
/// the orders it needs. Checked under Relacy:
/// tests/relacy/select_relacy_test.cpp.
class SelectClaim final : public WaitHook {
 public:
  const char* wait_kind() const noexcept override { return "shoal::select"; }
  /// Case `i` completes if nothing else did first. True if it is ours;
  /// `wake` then says whether the task is parked (the caller wakes it).
  bool try_win(std::uint32_t i, bool& wake) noexcept {
    std::uint32_t v = word_.load(std::memory_order_relaxed);
    while ((v & kStateMask) == kOpen) {
      if (word_.compare_exchange_weak(v, kWon | i | (v & kParked), std::memory_order_relaxed)) {
        wake = (v & kParked) != 0;
        return true;
      }
    }
    return false;
  }
  /// The canceller's claim (a WaitHook): true only if it cancelled a parked
  /// select, which the caller then schedules; an unparked one sees it at park().
  bool cancel_wait() noexcept override;
  /// The select's task, last thing before it suspends: false if a timer or
  /// a canceller finished the select first (then it must not suspend).
  bool park() noexcept {
    std::uint32_t v = kOpen;
    return word_.compare_exchange_strong(v, kOpen | kParked, std::memory_order_relaxed);
  }
  /// The case that completed, or -1 (open, or cancelled).
  int winner() const noexcept {
    const std::uint32_t v = word_.load(std::memory_order_relaxed);
    return (v & kStateMask) == kWon ? static_cast<int>(v & kIndexMask) : -1;
  }
  bool cancelled() const noexcept { return (word_.load(std::memory_order_relaxed) & kStateMask) == kCancelled; }
  /// Open again for another round; only once no case is linked, no timer
  /// can fire and the hook is disarmed.
  void reset() noexcept { word_.store(kOpen, std::memory_order_relaxed); }

 private:
  static constexpr std::uint32_t kIndexMask = 0xffff, kOpen = 0, kWon = 1u << 16, kCancelled = 2u << 16,
                                 kStateMask = 3u << 16, kParked = 1u << 20;
  shim::atomic<std::uint32_t> word_{kOpen};
};

/// A waiter that can be one case of a select (a primitive whose waiters can
/// be select cases derives its waiters from this). Plain until
/// enter_select().
class SelectCase : public Waiter {
 public:
  explicit SelectCase(SpinLock& lock) noexcept : Waiter(lock) {}
  /// Makes this waiter case `index` of the select that owns `claim`.
  void enter_select(SelectClaim& claim, std::uint32_t index) noexcept {
    claim_ = &claim;
    index_ = index;
    in_select = true;
  }
  SelectClaim* claim() const noexcept { return claim_; }
  /// A waker's claim (under the primitive's lock): the select is parked, so
  /// a won case is always woken.
  bool win() noexcept {
    bool wake = false;
    return claim_->try_win(index_, wake);
  }

 protected:
  ~SelectCase() = default;

 private:
  SelectClaim* claim_ = nullptr;
  std::uint32_t index_ = 0;
};

/// Whether a waker may complete `w`, a linked waiter, now (under its
/// primitive's lock): a plain waiter always; a select's case if it wins its
/// select. False: that select finished another way, the case is dead, and
/// the waker unlinks it and looks at the next.
inline bool claim_waiter(Waiter* w) noexcept { return !w->in_select || static_cast<SelectCase*>(w)->win(); }

/// The first waiter in `l` that a waker may complete, claimed (still
/// linked). Dead select cases met on the way are unlinked, each passed to
/// `drop` for the primitive's bookkeeping.
template <class Drop>
Waiter* claim_front(WaitList& l, Drop&& drop) noexcept {
  while (Waiter* w = l.front()) {
    if (claim_waiter(w)) return w;
    w->unlink_locked();
    drop(w);
  }
  return nullptr;
}
inline Waiter* claim_front(WaitList& l) noexcept {
  return claim_front(l, [](Waiter*) noexcept {});
}

/// Wakes a chain of claimed waiters (linked through wake_next, already
/// unlinked): a thread is notified; a task's wait is disarmed and the task
/// handed to `schedule` (one at a time, or into a batch). The one wake loop:
/// WakeList's, and the reactor's for a whole poll.
template <class Schedule>
void wake_chain(Waiter* w, Schedule&& schedule) noexcept {
  while (w != nullptr) {
    Waiter* next = w->wake_next();  // w may be gone once woken
    if (w->by_thread) {
      w->thread->notify();
    } else {
      TaskRecord* f = w->record;
      disarm_wait(f, w->in_select ? static_cast<WaitHook*>(static_cast<SelectCase*>(w)->claim())
                                  : static_cast<WaitHook*>(w));
      schedule(f);
    }
    w = next;
  }
}

/// Waiters claimed under a lock, woken (the last claimed first) once it is
/// released: never disarm under a lock that cancel_wait takes.
class WakeList {
 public:
  WakeList() noexcept = default;
  WakeList(const WakeList&) = delete;
  WakeList& operator=(const WakeList&) = delete;

  /// Wakes `w` once the lock is released. `w` must be unlinked already.
  void wake(Waiter* w) noexcept {
    w->set_wake_next(woken_);
    woken_ = w;
  }

 protected:
  ~WakeList() {
    wake_chain(woken_, [](TaskRecord* f) noexcept { schedule(f); });
  }

 private:
  Waiter* woken_ = nullptr;
};

/// Wakes every waiter of `l` (a primitive that wakes all at once, as a
/// Broadcast's send): select cases through their claim, a dead one dropped.
inline void wake_all(WaitList& l, WakeList& sec) noexcept {
  while (Waiter* w = l.pop_front()) {
    if (claim_waiter(w)) sec.wake(w);
  }
}

/// Wakes the first waiter of `l` that a waker may complete (dead select
/// cases are dropped on the way): one value, one taker.
inline void wake_one(WaitList& l, WakeList& sec) noexcept {
  if (Waiter* w = claim_front(l)) {
    w->unlink_locked();
    sec.wake(w);
  }
}

/// A primitive's lock held for one step: released on every way out (a
/// throwing move of a user's value included), then every waiter the step
/// claimed is woken.
class WaitSection : public WakeList {
 public:
  explicit WaitSection(SpinLock& lock) noexcept : lock_(lock) { lock_.lock(); }
  ~WaitSection() { lock_.unlock(); }

 private:
  SpinLock& lock_;
};

/// Several primitives' locks held at once (a select's): taken in address
/// order, each once, so two selects over the same primitives cannot
/// deadlock; released together, then the claimed waiters are woken.
class MultiSection : public WakeList {
 public:
  static constexpr std::size_t kMax = 64;
  /// `locks` may repeat; at most kMax.
  MultiSection(SpinLock* const* locks, std::size_t n) noexcept;
  ~MultiSection() {
    for (std::size_t i = n_; i > 0; --i) locks_[i - 1]->unlock();
  }

 private:
  SpinLock* locks_[kMax];
  std::size_t n_ = 0;
};

enum class WaitStep : std::uint8_t { done, cancelled, suspended };

/// What to do under the lock right before linking: returns true to link at
/// the front (a waiter that keeps its place). The default links at the back.
struct LinkAtBack {
  bool operator()() const noexcept { return false; }
};

/// The waiting half for a task `f` suspending at `h`: publish, then under the
/// lock `try_now(section)` (true: it completed without waiting; it may claim
/// other waiters through the section), the cancellation re-check, or link
/// into `list` (`before_link()` runs just before; its result puts the waiter
/// at the front). On `suspended` nothing may touch `w` any more: a waker or a
/// canceller owns it. On the others the hook is disarmed again.
/// `try_now` may throw (a user's move): the hook is disarmed and nothing queued.
/// Orderings: the hook store (publish_hook) and the flag re-check are both
/// seq_cst, the canceller's flag exchange and hook load too (Dekker): one of
/// the two sees the other. The primitive's lock does not order them (a
/// canceller that saw no hook takes no lock), nor does the node's lock (a
/// task already in its node's list takes none); an acquire re-check lets
/// both miss (POWER, or ARMv8.3 LDAPR after the hook's STLR), and the task
/// sleeps through its cancel. The waker's claim is the unlink under the
/// lock (acquire/release), its hand-off the schedule after the unlock.
/// Checked under Relacy: tests/relacy/wait_queue_relacy_test.cpp.
template <class TryNow, class BeforeLink = LinkAtBack>
WaitStep wait_step(Waiter& w, TaskRecord* f, std::coroutine_handle<> h, SpinLock& lock, WaitList& list, TryNow&& try_now,
                   BeforeLink&& before_link = {}) {
  w.record = f;
  f->resume = h;
  publish_hook(f, &w);
  WaitStep step = WaitStep::suspended;
  try {
    WaitSection sec(lock);
    if (try_now(sec)) {
      step = WaitStep::done;
    } else if (f->cancelled(std::memory_order_seq_cst)) {  // Dekker with the canceller: see below
      step = WaitStep::cancelled;
    } else {
      w.link_locked(list, before_link());
    }
  } catch (...) {
    disarm_wait(f, &w);
    throw;
  }
  if (step != WaitStep::suspended) disarm_wait(f, &w);  // outside the lock cancel_wait takes
  return step;
}

/// The same for a plain thread: `done`, or queued (`suspended`) with `wake`
/// to wait on. Never `cancelled` (threads are not in scopes).
template <class TryNow, class BeforeLink = LinkAtBack>
WaitStep wait_step_thread(Waiter& w, ThreadWake& wake, SpinLock& lock, WaitList& list, TryNow&& try_now,
                          BeforeLink&& before_link = {}) {
  w.wait_by_thread(wake);
  WaitSection sec(lock);
  if (try_now(sec)) return WaitStep::done;
  w.link_locked(list, before_link());
  return WaitStep::suspended;
}

/// The awaiter of a wait whose condition is a level kept under the
/// primitive's lock (an event set, a permit stored, a newer version, a value
/// there): `Derived::ready_locked()` says whether it holds. Checkpoint first;
/// then it holds at once (a yield once per budget) or the task waits until a
/// waker claims it. Event, Notify, Watch, Broadcast, Oneshot and Completions
/// wait through it. `what` names the operation in a misuse error.
template <class Derived>
class LevelWaiter : public Waiter {
 public:
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    TaskRecord* f = record_of(h);
    if (f == nullptr) throw std::logic_error(std::string(what_) + " awaited outside a shoal task");
    if (f->cancelled()) {
      cancelled = true;
      return false;
    }
    const WaitStep step = wait_step(*this, f, h, lock(), *list_, [this](WaitSection&) {
      return static_cast<Derived*>(this)->ready_locked();
    });
    if (step == WaitStep::suspended) return true;  // nothing may touch *this from here on
    cancelled = step == WaitStep::cancelled;
    if (cancelled || !consume_budget(f)) return false;
    yield_from(f, h, this);  // it held already: a schedule point once per budget
    return true;
  }

  const char* wait_kind() const noexcept override { return what_; }

 protected:
  LevelWaiter(SpinLock& lock, WaitList& list, const char* what) noexcept : Waiter(lock), list_(&list), what_(what) {}
  ~LevelWaiter() = default;
  /// In await_resume, first: throws Cancelled if the wait was cancelled.
  void throw_if_cancelled() const {
    if (cancelled) raise_cancelled();
  }

 private:
  WaitList* list_;
  const char* what_;
};

/// The same wait for a plain thread: blocks until `ready_locked(ctx)` holds
/// under `lock` (returns true), or, when `timed`, until `deadline` (false,
/// having taken nothing). `what` names the call in the error a worker gets.
/// Throws std::logic_error on a runtime worker (blocking it would stall tasks).
bool block_until_level(SpinLock& lock, WaitList& list, bool (*ready_locked)(void* ctx), void* ctx, const char* what,
                       bool timed, std::chrono::steady_clock::time_point deadline);
template <class Ready>
bool wait_level_blocking(SpinLock& lock, WaitList& list, Ready&& ready_locked, const char* what, bool timed = false,
                         std::chrono::steady_clock::time_point deadline = {}) {
  auto call = [](void* r) { return (*static_cast<std::remove_reference_t<Ready>*>(r))(); };
  return block_until_level(lock, list, call, &ready_locked, what, timed, deadline);
}

/// What a select (channel/select.hpp) asks of each of its cases; each
/// primitive defines its own case next to itself (Channel's on_recv and
/// on_send, Event's on_event, Notify's on_notify, the timer's on_timeout, a
/// JoinHandle's on_join, a stream's net::on_readable).
///   poll_fast()      without any lock: 1 completed, 0 not ready, -1 cannot
///                    tell without the lock
///   lock()           the primitive's lock (null: none)
///   poll_locked(sec) under all the select's locks: complete now if it can
///   link_locked(sec, claim, index, record)
///                    then, if no case could: link its waiter (false), or
///                    complete after all (true: a value came through a
///                    lock-free ring)
///   after_unlock()   work due once the locks are released, after the case
///                    completed under them
///   disarm_locked()  unlink the waiter if it is still linked
///   finish()         the select's claim named this case: is the outcome
///                    there (retrying if need be)?
///   reset()          re-arm for another round
///   take()           the outcome (may throw, e.g. ChannelClosed)
template <class C>
concept SelectableCase = std::is_nothrow_move_constructible_v<C> &&
    requires(C& c, WakeList& sec, SelectClaim& claim, std::uint32_t index, TaskRecord* f) {
      typename C::outcome_type;
      { c.poll_fast() } noexcept -> std::same_as<int>;
      { c.lock() } noexcept -> std::same_as<SpinLock*>;
      { c.poll_locked(sec) } noexcept -> std::same_as<bool>;
      { c.link_locked(sec, claim, index, f) } noexcept -> std::same_as<bool>;
      { c.after_unlock() } noexcept;
      { c.disarm_locked() } noexcept;
      { c.finish() } noexcept -> std::same_as<bool>;
      { c.reset() } noexcept;
      { c.take() } -> std::same_as<typename C::outcome_type>;
    };

/// A select case on a primitive that wakes all its waiters at once
/// (Broadcast, Watch), whose wakers claim through claim_waiter. `Src` says
/// where to wait (`lock()`, `waiters()`), whether the outcome is there
/// (`ready_locked()`, under the lock, no side effect) and takes it
/// (`take()`, taking the lock itself; it may throw). Only the case that won
/// takes anything: a select that completes another way leaves the primitive
/// as it was.
template <class Src>
class LevelCase final : public SelectCase {
 public:
  using outcome_type = typename Src::outcome_type;
  explicit LevelCase(Src src) noexcept : SelectCase(src.lock()), src_(src) {}
  LevelCase(LevelCase&& o) noexcept : SelectCase(o.src_.lock()), src_(o.src_) {}

  int poll_fast() noexcept { return -1; }
  SpinLock* lock() noexcept { return &src_.lock(); }
  bool poll_locked(WakeList&) noexcept { return src_.ready_locked(); }
  bool link_locked(WakeList&, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept {
    enter_select(claim, index);
    record = f;
    src_.waiters().push_back(this);
    return false;
  }
  void after_unlock() noexcept {}
  void disarm_locked() noexcept {
    if (is_linked()) unlink_locked();
  }
  bool finish() noexcept { return true; }  // woken by a change: the outcome is there (it only moves forward)
  void reset() noexcept { in_select = false; }
  outcome_type take() { return src_.take(); }

 private:
  Src src_;
};

}  // namespace shoal::detail
