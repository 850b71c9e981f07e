// A one-shot event tasks can wait on: a cancellable wait built on the
// public-to-shoal wait protocol (fiber.hpp), used by tests before channels
// exist and as a reference implementation of that protocol.
#pragma once

#include <coroutine>
#include <mutex>

#include "shoal/detail/fiber.hpp"
#include "shoal/runtime/errors.hpp"

namespace shoal::test {

class ManualEvent {
 public:
  class Awaiter final : public detail::WaitHook {
   public:
    explicit Awaiter(ManualEvent* ev) noexcept : ev_(ev) {}
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
      f_ = detail::fiber_of(h);
      if (f_->cancelled()) {
        cancelled_ = true;
        return false;
      }
      f_->resume = h;
      detail::publish_hook(f_, this);
      {
        std::lock_guard<std::mutex> g(ev_->mu_);
        if (!ev_->set_ && !f_->cancelled()) {
          ev_->link(this);
          return true;
        }
        cancelled_ = !ev_->set_;
      }
      detail::disarm_wait(f_, this);  // outside the lock cancel_wait takes
      return false;
    }
    bool cancel_wait() noexcept override {
      std::lock_guard<std::mutex> g(ev_->mu_);
      if (!linked_) return false;
      ev_->unlink(this);
      cancelled_ = true;
      return true;
    }
    void await_resume() const {
      if (cancelled_) throw Cancelled{};
    }

   private:
    friend class ManualEvent;
    ManualEvent* ev_;
    detail::Fiber* f_ = nullptr;
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
      std::lock_guard<std::mutex> g(mu_);
      set_ = true;
      woken = head_;
      for (Awaiter* w = head_; w != nullptr; w = w->next_) w->linked_ = false;
      head_ = nullptr;
    }
    while (woken != nullptr) {
      Awaiter* w = woken;
      woken = w->next_;
      detail::Fiber* f = w->f_;
      detail::disarm_wait(f, w);
      detail::schedule(f);  // w may be gone from here on
    }
  }

  bool is_set() {
    std::lock_guard<std::mutex> g(mu_);
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

  std::mutex mu_;
  bool set_ = false;
  Awaiter* head_ = nullptr;  // intrusive list of waiters, guarded by mu_
};

}  // namespace shoal::test
