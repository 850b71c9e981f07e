// The one implementation of the cancellable-wait protocol (detail/task.hpp)
// for lock-based primitives: Event, Once, the permit queue, channel wait
// lists and I/O sources keep their waiters in WaitLists under a SpinLock of
// their own, and every wait and wake goes through the steps below.
//
// The protocol, once:
//  - a task publishes its hook, then under the lock either completes at
//    once (`try_now`), sees its cancellation, or links itself: whoever
//    cancels after the publish takes the same lock, so it either finds the
//    waiter linked (and claims it by unlinking) or finds it gone;
//  - a waker claims a waiter by unlinking it under the lock, records what
//    the waiter needs (a value, a status) and wakes it after the unlock
//    (WaitSection): never disarm under a lock that cancel_wait takes;
//  - exactly one of waker and canceller unlinks a waiter, so exactly one
//    of them owns its wake.
// A plain thread waits the same way with a ThreadWake instead of a task.
#pragma once

#include <coroutine>
#include <cstdint>

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

  void wait_by_thread(ThreadWake& wake) noexcept {
    thread = &wake;
    by_thread = true;
  }

  // A claimed (unlinked) waiter's spare link chains a wake list: `prev` is
  // free once unlinked (is_linked() reads `next` only).
  Waiter* wake_next() const noexcept { return static_cast<Waiter*>(prev); }
  void set_wake_next(Waiter* w) noexcept { prev = w; }

  /// Claims the waiter for a canceller: unlinks it if it is still queued.
  bool cancel_wait() noexcept override {
    lock_->lock();
    const bool mine = is_linked();
    if (mine) {
      WaitList::unlink(this);
      cancelled = true;
      left_locked();
    }
    lock_->unlock();
    return mine;
  }

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

};

/// A primitive's lock held for one step: released on every way out (a
/// throwing move of a user's value included), then every waiter the step
/// claimed is woken (the last claimed first).
class WaitSection {
 public:
  explicit WaitSection(SpinLock& lock) noexcept : lock_(lock) { lock_.lock(); }
  ~WaitSection() {
    lock_.unlock();
    for (Waiter* w = woken_; w != nullptr;) {
      Waiter* next = w->wake_next();  // w may be gone once woken
      if (w->by_thread) {
        w->thread->notify();
      } else {
        TaskRecord* f = w->record;
        disarm_wait(f, w);
        schedule(f);
      }
      w = next;
    }
  }
  WaitSection(const WaitSection&) = delete;
  WaitSection& operator=(const WaitSection&) = delete;

  /// Wakes `w` once the lock is released. `w` must be unlinked already.
  void wake(Waiter* w) noexcept {
    w->set_wake_next(woken_);
    woken_ = w;
  }

 private:
  SpinLock& lock_;
  Waiter* woken_ = nullptr;
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
    } else if (f->cancelled()) {
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

}  // namespace shoal::detail
