// The select claim (SelectClaim in shoal/detail/wait_queue.hpp: try_win,
// park, cancel_wait, winner) under Relacy's memory model, with two real
// on_notify cases (SignalCase<Notify>, shoal/sync/event.hpp) whose real
// notify_one claims through claim_front/win, and Select::arm and on_wake
// (shoal/channel/select.hpp) replayed without the coroutine: two notifies
// racing for one select, a notify racing the cancel of the select's scope,
// and a notify racing a deadline case's timer (on_fire's claim, and the
// entry's fire-vs-remove handshake that disarm_locked waits on). The
// select's claim and cases live in memory the select frees when it is
// over. Invariants: exactly one case wins (or the cancel); the select is
// scheduled exactly once if it parked, never if not; the losing cases are
// unlinked; no notification is lost (a notify that did not win left its
// permit); a value written before a notify is seen by the select that won
// its case; nothing touches the select's claim or cases after it freed
// them.
#include <gtest/gtest.h>

#include <new>

#include "harness.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/sync/event.hpp"

namespace {

using shoal::Notify;
using shoal::detail::CancelNode;
using shoal::detail::MultiSection;
using shoal::detail::SelectClaim;
using shoal::detail::SpinLock;
using shoal::detail::TaskRecord;
using shoal::detail::WaitSection;
using shoal::relacy::Record;
using Case = shoal::detail::SignalCase<Notify>;

// A deadline case's timer entry, reduced to its fire-vs-remove handshake
// (TimerEntry::state): the timer fires only an idle entry; the select's
// disarm_locked removes an idle one or waits until a firing one is done.
struct Timer {
  enum : int { idle, firing, done, removed };
  shoal::detail::shim::atomic<int> state{idle};
};

// What a select frame holds: the claim and its cases (index 2 is the
// deadline case, when there is one: it has no waiter, only the entry).
struct Frame {
  SelectClaim claim;
  Case c0, c1;
  Frame(Notify& a, Notify& b) : c0(a), c1(b) {}
};

// DeadlineCase::on_fire for case `index` of the select that owns `claim`.
void fire(Timer& t, SelectClaim*& claim, TaskRecord* f, std::uint32_t index) {
  int v = Timer::idle;
  if (!t.state.compare_exchange_strong(v, Timer::firing, std::memory_order_acq_rel)) return;  // removed first
  bool wake = false;
  if (claim->try_win(index, wake) && wake) {
    shoal::detail::disarm_wait(f, claim);
    shoal::detail::schedule(f);
  }
  t.state.store(Timer::done, std::memory_order_release);  // the select waits for this before the case goes
}

// DeadlineCase::disarm_locked: take the entry back, or wait out its firing.
void disarm_timer(Timer& t) {
  int v = Timer::idle;
  if (t.state.compare_exchange_strong(v, Timer::removed, std::memory_order_acq_rel)) return;
  while (t.state.load(std::memory_order_acquire) != Timer::done) rl::yield(1, RL_INFO);
}

// One select over c0, c1 (and the timer's case 2 if `timer`), as
// Select::arm and on_wake do it. Returns the case that won, or -1
// (cancelled). Frees the frame.
int run_select(Frame* s, Record& f, Timer* timer) {
  shoal::relacy::set_current_record(&f);
  SpinLock* locks[2] = {s->c0.lock(), s->c1.lock()};
  int completed = -1;
  bool parked = false;
  if (f.cancelled()) {
    completed = -2;  // the checkpoint: cancelled before any case was tried
  } else {
    MultiSection sec(locks, 2);
    if (s->c0.poll_locked(sec)) {
      completed = 0;
    } else if (s->c1.poll_locked(sec)) {
      completed = 1;
    } else {
      RL_ASSERT(!s->c0.link_locked(sec, s->claim, 0, &f));
      RL_ASSERT(!s->c1.link_locked(sec, s->claim, 1, &f));
      f.resume = std::coroutine_handle<>{};
      shoal::detail::publish_hook(&f, &s->claim);
      if (!f.cancelled(std::memory_order_seq_cst) && s->claim.park()) {
        parked = true;
      } else {
        s->c0.disarm_locked();
        s->c1.disarm_locked();
      }
    }
  }
  int won = -1;
  if (completed >= 0) {
    won = completed;
    if (timer != nullptr) disarm_timer(*timer);  // (never armed, in Select: the test's timer may fire anyway)
  } else if (completed == -2) {
    if (timer != nullptr) disarm_timer(*timer);
  } else {
    if (parked) {
      f.wait_scheduled();  // on_wake, at the stand-in frame
      MultiSection sec(locks, 2);
      s->c0.disarm_locked();
      s->c1.disarm_locked();
    }
    if (timer != nullptr) disarm_timer(*timer);
    if (!parked) shoal::detail::disarm_wait(&f, &s->claim);
    won = s->claim.winner();
    RL_ASSERT(won >= 0 || f.cancelled());  // -1: the cancel (through the claim, or seen at the re-check)
  }
  RL_ASSERT(f.wakes.load(std::memory_order_relaxed) == (parked ? 1 : 0));
  RL_ASSERT(f.hook.load(std::memory_order_relaxed) == nullptr);
  RL_ASSERT(!s->c0.is_linked() && !s->c1.is_linked());  // the losers are unlinked
  s->~Frame();
  shoal::relacy::set_current_record(nullptr);
  return won;
}

// Takes n's stored permit, as a later wait would; true if there was one.
bool take_permit(Notify& n) {
  Case c(n);
  WaitSection sec(*c.lock());
  return c.poll_locked(sec);
}

struct SelectBase {
  Notify a, b;
  Record f;
  CancelNode node;
  rl::var<int> va, vb;  // written before each notify: the select reads the one it won
  void* mem = nullptr;
  Frame* frame = nullptr;
  int won = -9;
  void setup() {
    va($) = 0;
    vb($) = 0;
    f.node.store(&node, std::memory_order_relaxed);
    f.home = &node;
    mem = rl::rl_malloc(sizeof(Frame), RL_INFO);
    frame = new (mem) Frame(a, b);
  }
  void select(Timer* timer = nullptr) {
    won = run_select(frame, f, timer);
    rl::rl_free(mem, RL_INFO);
    if (won == 0) RL_ASSERT(va($) == 1);
    if (won == 1) RL_ASSERT(vb($) == 2);
    if ((f.flags & TaskRecord::kLinked) != 0) node.remove_record(&f);
  }
  void notify_a() {
    va($) = 1;
    a.notify_one();
  }
  void notify_b() {
    vb($) = 2;
    b.notify_one();
  }
  // A notify that did not win left its permit; the one that won did not.
  void check_permits(bool notified_a, bool notified_b) {
    RL_ASSERT(take_permit(a) == (notified_a && won != 0));
    RL_ASSERT(take_permit(b) == (notified_b && won != 1));
  }
};

// Two notifies, each on one case's primitive, race to claim the select.
struct TwoNotifies : rl::test_suite<TwoNotifies, 3>, SelectBase {
  void before() { setup(); }
  void thread(unsigned id) {
    if (id == 0) {
      notify_a();
    } else if (id == 1) {
      notify_b();
    } else {
      select();
      RL_ASSERT(won == 0 || won == 1);
    }
  }
  void after() { check_permits(true, true); }
};

// A notify races the cancel of the select's scope (the canceller claims
// through SelectClaim::cancel_wait).
struct NotifyVsCancel : rl::test_suite<NotifyVsCancel, 3>, SelectBase {
  void before() { setup(); }
  void thread(unsigned id) {
    if (id == 0) {
      notify_a();
    } else if (id == 1) {
      node.cancel(true);
    } else {
      select();
      RL_ASSERT(won == 0 || won == -1);
    }
  }
  void after() { check_permits(true, false); }
};

// A notify races the deadline case's timer (case 2), which claims without
// any of the select's locks, before or after the select parked.
struct NotifyVsTimeout : rl::test_suite<NotifyVsTimeout, 3>, SelectBase {
  Timer timer;
  SelectClaim* claim = nullptr;
  void before() {
    setup();
    claim = &frame->claim;
  }
  void thread(unsigned id) {
    if (id == 0) {
      notify_a();
    } else if (id == 1) {
      fire(timer, claim, &f, 2);
    } else {
      select(&timer);
      RL_ASSERT(won == 0 || won == 2);
    }
  }
  void after() { check_permits(true, false); }
};

TEST(RelacySelect, TwoNotifiesRaceForOneSelect) {
  EXPECT_TRUE(shoal::relacy::check<TwoNotifies>(shoal::relacy::search_or("bound")));
}
TEST(RelacySelect, ANotifyRacesTheCancelOfTheSelect) {
  EXPECT_TRUE(shoal::relacy::check<NotifyVsCancel>(shoal::relacy::search_or("bound")));
}
TEST(RelacySelect, ANotifyRacesTheSelectsTimeout) {
  EXPECT_TRUE(shoal::relacy::check<NotifyVsTimeout>(shoal::relacy::search_or("bound")));
}

}  // namespace
