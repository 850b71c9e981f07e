// The timer entry's fire vs cancel under Relacy's memory model: the real
// timer queue (src/runtime/driver/time/timer_queue.cpp, its wheel, and
// timer_cancel_and_wait), the real sleep (SleepAwaiter, sleep.cpp) and the
// real deadline case of a select (DeadlineCase), with a driver thread
// firing due timers while the task that owns the entry is cancelled or its
// select ends another way. The driver is the stand-in's
// (tests/relacy/src/runtime/scheduler.hpp): the backend's timerfd and the
// driver's sleep handshake with add_timer stay SC/TSan-checked.
// Invariants: a task that suspended is scheduled exactly once, one that did
// not never; a sleep that suspends is woken by a cancel even with no driver
// (no lost cancel); the entry lives in memory the task frees once its wait
// is over, so a firer that touches it later is reported (timer_cancel_and_wait
// must wait out a firing in progress); the entry is off the wheel at the end;
// the select's outcome is the case that won its claim.
#include <gtest/gtest.h>

#include <chrono>
#include <coroutine>
#include <new>

#include "driver_relacy_support.hpp"
#include "shoal/time/sleep.hpp"

namespace {

using shoal::detail::Clock;
using shoal::detail::DeadlineCase;
using shoal::detail::SelectClaim;
using shoal::detail::SleepAwaiter;
using shoal::relacy::DriverWorld;

const Clock::time_point kDeadline = Clock::time_point{} + std::chrono::milliseconds(1);

// A task sleeping until kDeadline (SleepAwaiter::await_suspend, then its
// wake), its awaiter in memory it frees when the sleep is over, as a
// coroutine frame goes.
void sleep_once(DriverWorld& w) {
  shoal::relacy::set_current_record(&w.f);
  void* mem = rl::rl_malloc(sizeof(SleepAwaiter), RL_INFO);
  auto* aw = new (mem) SleepAwaiter(kDeadline);
  const bool suspended = aw->await_suspend(std::coroutine_handle<>{});
  if (suspended) w.f.wait_scheduled();  // by the timer or the canceller
  RL_ASSERT(w.f.wakes.load(std::memory_order_relaxed) == (suspended ? 1 : 0));
  aw->~SleepAwaiter();
  rl::rl_free(mem, RL_INFO);
  w.leave();
}

// A sleep whose timer fires while a cancel of its scope comes.
struct SleepFireVsCancel : rl::test_suite<SleepFireVsCancel, 3>, DriverWorld {
  void before() { build(); }
  void after() {
    RL_ASSERT(timers->size() == 0);  // fired, or taken off by the cancel
    drop();
  }
  void thread(unsigned id) {
    if (id == 0) {
      shoal::relacy::fire_timers(*timers, over);
    } else if (id == 1) {
      sleep_once(*this);
    } else {
      node.cancel(true);
    }
  }
};

// No driver: a sleep that suspends must be woken by the cancel (a cancel
// that came before its timer was queued is seen by timer_insert).
struct SleepCancelled : rl::test_suite<SleepCancelled, 2>, DriverWorld {
  void before() { build(); }
  void after() {
    RL_ASSERT(timers->size() == 0);  // the cancel took it off the wheel (or it never went on)
    drop();
  }
  void thread(unsigned id) {
    if (id == 0) {
      sleep_once(*this);
    } else {
      node.cancel(true);
    }
  }
};

// A select over a deadline case and one other case (index 1), as
// Select::arm and on_wake run them, without the coroutine. The claim and the
// deadline case live in memory the select frees when it is over, as they
// live in its coroutine frame: a timer callback that runs on after the
// select disarmed it touches the claim's freed word. The other case stands
// for a channel's: linked under its primitive's lock, which its waker and
// the select's disarm both take.
struct SelectFrame {
  SelectClaim claim;
  DeadlineCase deadline{kDeadline};
};

struct DeadlineSelect : DriverWorld {
  shoal::detail::SpinLock other_lock;
  // Guarded by other_lock: the other case's primitive has its value, the
  // case is linked (in `frame`).
  rl::var<bool> other_ready;
  rl::var<bool> other_linked;
  SelectFrame* frame = nullptr;

  void setup() {
    build();
    other_ready($) = false;
    other_linked($) = false;
  }
  // The winner: 0 the deadline, 1 the other case, -1 cancelled. Without
  // `other`, the select has the deadline case only.
  int select(bool other) {
    shoal::relacy::set_current_record(&f);
    void* mem = rl::rl_malloc(sizeof(SelectFrame), RL_INFO);
    auto* s = new (mem) SelectFrame;
    DeadlineCase* dc = &s->deadline;
    int won = -1;
    bool parked = false;
    {
      // arm(): every case's lock held (MultiSection) across poll, link,
      // hook and park.
      shoal::detail::MultiSection sec(nullptr, 0);  // the deadline case has no lock
      if (other) other_lock.lock();
      if (other && other_ready($)) {
        won = 1;  // completed at once: nothing linked
      } else {
        RL_ASSERT(!dc->poll_locked(sec));
        RL_ASSERT(!dc->link_locked(sec, s->claim, 0, &f));
        if (other) {
          frame = s;
          other_linked($) = true;
        }
        shoal::detail::publish_hook(&f, &s->claim);
        parked = !f.cancelled(std::memory_order_seq_cst) && s->claim.park();
        if (!parked) {
          dc->disarm_locked();  // waits out a firing timer
          if (other) other_linked($) = false;
        }
      }
      if (other) other_lock.unlock();
    }
    if (won < 0) {
      if (parked) {
        f.wait_scheduled();  // by the timer, the other case's waker or a canceller
        // on_wake's disarm_all: every case under its lock.
        if (other) other_lock.lock();
        dc->disarm_locked();  // waits out a firing timer
        if (other) {
          other_linked($) = false;
          other_lock.unlock();
        }
      } else {
        shoal::detail::disarm_wait(&f, &s->claim);
      }
      won = s->claim.winner();
    }
    RL_ASSERT(f.wakes.load(std::memory_order_relaxed) == (parked ? 1 : 0));
    s->~SelectFrame();
    rl::rl_free(mem, RL_INFO);
    leave();
    return won;
  }
  // The other case's waker (a channel's send): under the primitive's lock,
  // the value goes in, and a linked case claims the select; the task is
  // woken after the lock if it parked.
  void complete_other() {
    bool wake = false;
    other_lock.lock();
    other_ready($) = true;
    SelectClaim* claim = other_linked($) ? &frame->claim : nullptr;
    const bool won = claim != nullptr && claim->try_win(1, wake);
    if (claim != nullptr) other_linked($) = false;  // unlinked, won or dead
    other_lock.unlock();
    if (won && wake) {
      shoal::detail::disarm_wait(&f, claim);  // compares the hook, never reads the claim
      shoal::detail::schedule(&f);
    }
  }
};

struct DeadlineFireVsOtherCase : rl::test_suite<DeadlineFireVsOtherCase, 3>, DeadlineSelect {
  void before() { setup(); }
  void after() {
    RL_ASSERT(timers->size() == 0);  // fired, or taken off by the select's disarm
    drop();
  }
  void thread(unsigned id) {
    if (id == 0) {
      shoal::relacy::fire_timers(*timers, over);
    } else if (id == 1) {
      RL_ASSERT(select(true) >= 0);  // nothing cancels it
    } else {
      complete_other();
    }
  }
};

struct DeadlineFireVsCancel : rl::test_suite<DeadlineFireVsCancel, 3>, DeadlineSelect {
  void before() { setup(); }
  void after() {
    RL_ASSERT(timers->size() == 0);
    drop();
  }
  void thread(unsigned id) {
    if (id == 0) {
      shoal::relacy::fire_timers(*timers, over);
    } else if (id == 1) {
      RL_ASSERT(select(false) != 1);
    } else {
      node.cancel(true);
    }
  }
};

TEST(RelacyTimer, ASleepsTimerFiresAsItsScopeIsCancelled) {
  EXPECT_TRUE(shoal::relacy::check<SleepFireVsCancel>(shoal::relacy::search_or("random")));
}
TEST(RelacyTimer, ACancelWakesASleepWhateverPointItReached) {
  EXPECT_TRUE(shoal::relacy::check<SleepCancelled>(shoal::relacy::search_or("bound")));
}
TEST(RelacyTimer, ADeadlineCaseFiresAsAnotherCaseWins) {
  EXPECT_TRUE(shoal::relacy::check<DeadlineFireVsOtherCase>(shoal::relacy::search_or("random")));
}
TEST(RelacyTimer, ADeadlineCaseFiresAsItsSelectIsCancelled) {
  EXPECT_TRUE(shoal::relacy::check<DeadlineFireVsCancel>(shoal::relacy::search_or("random")));
}

}  // namespace
