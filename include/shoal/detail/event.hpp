// A one-shot event tasks wait on, on the one wait queue (detail/wait_queue.hpp).
// Used by start_ready, serve's shutdown and by tests.
#pragma once

#include <coroutine>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/wait_queue.hpp"

namespace shoal::detail {

class Event {
 public:
  class Awaiter final : public Waiter {
   public:
    explicit Awaiter(Event* ev) noexcept : Waiter(ev->lock_), ev_(ev) {}
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
      TaskRecord* f = record_of(h);
      if (f->cancelled()) {
        cancelled = true;
        return false;
      }
      const WaitStep step = wait_step(*this, f, h, ev_->lock_, ev_->waiters_, [this](WaitSection&) {
        return ev_->set_;
      });
      if (step == WaitStep::suspended) return true;  // nothing may touch *this from here on
      cancelled = step == WaitStep::cancelled;
      return false;
    }
    void await_resume() const {
      if (cancelled) throw_cancelled();
    }

   private:
    Event* ev_;
  };

  /// Waits until `set()`. Checkpoint: yes.
  Awaiter wait() noexcept { return Awaiter{this}; }

  void set() noexcept {
    WaitSection sec(lock_);
    set_ = true;
    while (Waiter* w = waiters_.pop_front()) sec.wake(w);
  }

  bool is_set() noexcept {
    WaitSection sec(lock_);
    return set_;
  }

 private:
  SpinLock lock_;
  bool set_ = false;  // guarded by lock_
  WaitList waiters_;
};

}  // namespace shoal::detail
