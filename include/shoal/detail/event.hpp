// A one-shot event tasks wait on: the reference lock-based implementation
// of the cancellable-wait protocol (detail/fiber.hpp). Used by start_ready
// and by tests.
#pragma once

#include <coroutine>
#include <mutex>

#include "shoal/detail/fiber.hpp"
#include "shoal/runtime/errors.hpp"

namespace shoal::detail {

class Event {
 public:
  class Awaiter final : public WaitHook {
   public:
    explicit Awaiter(Event* ev) noexcept : ev_(ev) {}
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
      f_ = fiber_of(h);
      if (f_->cancelled()) {
        cancelled_ = true;
        return false;
      }
      f_->resume = h;
      publish_hook(f_, this);
      {
        shim::lock_guard<shim::mutex> g(ev_->mu_);
        if (!ev_->set_ && !f_->cancelled()) {
          ev_->link(this);
          return true;
        }
        cancelled_ = !ev_->set_;
      }
      disarm_wait(f_, this);  // outside the lock cancel_wait takes
      return false;
    }
    bool cancel_wait() noexcept override {
      shim::lock_guard<shim::mutex> g(ev_->mu_);
      if (!linked_) return false;
      ev_->unlink(this);
      cancelled_ = true;
      return true;
    }
    void await_resume() const {
      if (cancelled_) throw Cancelled{};
    }

   private:
    friend class Event;
    Event* ev_;
    Fiber* f_ = nullptr;
    bool cancelled_ = false;
    bool linked_ = false;
    Awaiter* prev_ = nullptr;
    Awaiter* next_ = nullptr;
  };

  /// Waits until `set()`. Checkpoint: yes.
  Awaiter wait() noexcept { return Awaiter{this}; }

  void set() {
    Awaiter* woken;
    {
      shim::lock_guard<shim::mutex> g(mu_);
      set_ = true;
      woken = head_;
      for (Awaiter* w = head_; w != nullptr; w = w->next_) w->linked_ = false;
      head_ = nullptr;
    }
    while (woken != nullptr) {
      Awaiter* w = woken;
      woken = w->next_;
      Fiber* f = w->f_;
      disarm_wait(f, w);
      schedule(f);  // w may be gone from here on
    }
  }

  bool is_set() {
    shim::lock_guard<shim::mutex> g(mu_);
    return set_;
  }

 private:
  void link(Awaiter* w) noexcept {
    w->linked_ = true;
    w->prev_ = nullptr;
    w->next_ = head_;
    if (head_ != nullptr) head_->prev_ = w;
    head_ = w;
  }
  void unlink(Awaiter* w) noexcept {
    w->linked_ = false;
    if (w->prev_ != nullptr) {
      w->prev_->next_ = w->next_;
    } else {
      head_ = w->next_;
    }
    if (w->next_ != nullptr) w->next_->prev_ = w->prev_;
  }

  shim::mutex mu_;
  bool set_ = false;
  Awaiter* head_ = nullptr;  // intrusive list of waiters, guarded by mu_
};

}  // namespace shoal::detail
