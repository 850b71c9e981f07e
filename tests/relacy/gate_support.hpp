// A primitive on the one wait queue for the Relacy tests, built as Event
// and Notify are (a lock, a WaitList, a level under the lock), whose state
// and hand-off are rl::vars (data races on them are reported), and a task's
// wait on it through the real wait_step: tests/relacy/wait_queue_relacy_test.cpp
// and cancel_tree_relacy_test.cpp.
#pragma once

#include <coroutine>
#include <new>

#include "harness.hpp"
#include "shoal/detail/wait_queue.hpp"

namespace shoal::relacy {

using detail::SpinLock;
using detail::WaitList;
using detail::WaitSection;
using detail::WaitStep;

// A Notify-like primitive: notify() hands `value` to the first waiter or
// leaves it as the permit, which the next wait takes. Event-like once
// set(): the value stays, and every waiter has it.
struct Gate {
  SpinLock lock;
  WaitList waiters;
  rl::var<int> permit;  // guarded by lock: a value nobody took yet, or 0
  bool level = false;   // set() was called: waits take `permit` without consuming it

  void init() { permit($) = 0; }
  void notify(int value);
  void set(int value);
};

// One task's wait on a Gate (Event's awaiter, with the value slot a
// channel's receive has). It lives in memory the waiting task frees as it
// returns; `probe` is what a canceller's after_cancel touches.
struct GateWait final : detail::Waiter {
  explicit GateWait(Gate& g) : Waiter(g.lock) {
    slot($) = 0;
    probe($) = 0;
  }
  ~GateWait() = default;
  rl::var<int> slot;   // the value handed over (written under the lock)
  rl::var<int> probe;  // touched by the canceller, after it looked

 protected:
  void after_cancel(bool claimed) noexcept override { probe($) = claimed ? 1 : 2; }
};

inline void Gate::notify(int value) {
  WaitSection sec(lock);
  if (detail::Waiter* w = detail::claim_front(waiters)) {
    w->unlink_locked();
    static_cast<GateWait*>(w)->slot($) = value;
    sec.wake(w);  // disarmed and scheduled after the unlock
  } else {
    permit($) = value;
  }
}

inline void Gate::set(int value) {  // as Event::set: every waiter, through its claim
  WaitSection sec(lock);
  level = true;
  permit($) = value;
  while (detail::Waiter* w = detail::claim_front(waiters)) {
    w->unlink_locked();
    static_cast<GateWait*>(w)->slot($) = value;
    sec.wake(w);
  }
}

enum class End { none, took, woken, cancelled };

// A task awaiting `g`, as LevelWaiter::await_suspend does (checkpoint, then
// wait_step), then its await_resume; its waiter is freed on the way out.
// Returns how it ended and the value it got (0: none).
inline End await_gate(Gate& g, Record& f, int& got) {
  set_current_record(&f);
  void* mem = rl::rl_malloc(sizeof(GateWait), RL_INFO);
  auto* w = new (mem) GateWait(g);
  End end = End::none;
  got = 0;
  if (f.cancelled()) {
    end = End::cancelled;
  } else {
    const WaitStep step =
        detail::wait_step(*w, &f, std::coroutine_handle<>{}, g.lock, g.waiters, [&](WaitSection&) {
          const int p = g.permit($);
          if (p == 0) return false;
          if (!g.level) g.permit($) = 0;
          w->slot($) = p;
          return true;
        });
    switch (step) {
      case WaitStep::done:
        end = End::took;
        break;
      case WaitStep::cancelled:
        end = End::cancelled;
        break;
      case WaitStep::suspended:
        f.wait_scheduled();  // by the notify or by a canceller
        end = w->cancelled ? End::cancelled : End::woken;
        break;
    }
    RL_ASSERT(f.wakes.load(std::memory_order_relaxed) == (step == WaitStep::suspended ? 1 : 0));
  }
  RL_ASSERT(f.hook.load(std::memory_order_relaxed) == nullptr);  // disarmed by whoever claimed it
  if (end == End::took || end == End::woken) got = w->slot($);
  RL_ASSERT((got != 0) == (end == End::took || end == End::woken));
  // The waiter's last touch of its memory (its frame is reused from here):
  // a canceller's after_cancel there must happen before it, or it races.
  RL_ASSERT(w->probe($) >= 0);
  w->~GateWait();
  rl::rl_free(mem, RL_INFO);
  set_current_record(nullptr);
  return end;
}

}  // namespace shoal::relacy
