// A one-shot event tasks can wait on: a cancellable wait built on the
// public-to-shoal wait protocol (fiber.hpp), used by tests before channels
// exist and as a reference implementation of that protocol.
#pragma once

#include <coroutine>
#include <mutex>
#include <vector>

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
          ev_->waiters_.push_back(this);
          return true;
        }
        cancelled_ = !ev_->set_;
      }
      detail::disarm_wait(f_, this);  // outside the lock cancel_wait takes
      return false;
    }
    bool cancel_wait() noexcept override {
      std::lock_guard<std::mutex> g(ev_->mu_);
      for (auto it = ev_->waiters_.begin(); it != ev_->waiters_.end(); ++it) {
        if (*it == this) {
          ev_->waiters_.erase(it);
          cancelled_ = true;
          return true;
        }
      }
      return false;
    }
    void await_resume() const {
      if (cancelled_) throw Cancelled{};
    }

   private:
    friend class ManualEvent;
    ManualEvent* ev_;
    detail::Fiber* f_ = nullptr;
    bool cancelled_ = false;
  };

  /// Waits until `set()`. Checkpoint: yes.
  Awaiter wait() noexcept { return Awaiter{this}; }

  void set() {
    std::vector<Awaiter*> woken;
    {
      std::lock_guard<std::mutex> g(mu_);
      set_ = true;
      woken.swap(waiters_);
    }
    for (Awaiter* w : woken) {
      detail::Fiber* f = w->f_;
      detail::disarm_wait(f, w);
      detail::schedule(f);
    }
  }

  bool is_set() {
    std::lock_guard<std::mutex> g(mu_);
    return set_;
  }

 private:
  std::mutex mu_;
  bool set_ = false;
  std::vector<Awaiter*> waiters_;
};

}  // namespace shoal::test
