// The wait queue's publish/claim (shoal/detail/wait_queue.hpp,
// src/sync/wait_queue.cpp) under Relacy's memory model, with the real
// wait_step, WaitSection/WakeList, claim_front, Waiter::cancel_wait and the
// real cancellation (CancelNode, publish_hook, disarm_wait:
// src/scope/cancel_protocol.cpp). A task waits on a primitive built as
// Event and Notify are (a lock, a WaitList, a level under the lock); a
// notify claims one waiter and hands it a value, racing a cancel of the
// task's scope and a timeout (the cancel of a deadline node inside it, as
// with_timeout's timer does). Invariants: the waiter is claimed exactly
// once, and scheduled exactly once if it suspended, never if not; a value
// handed with the wake (an rl::var the waker writes under the lock) is
// seen by the waiter; a notification is never lost (the waiter has it or
// it is left as the permit); a canceller's look at the waiter happens
// before the waiter goes (the waiter lives in memory it frees as it
// returns: a later touch is reported).
#include <gtest/gtest.h>

#include "gate_support.hpp"

namespace {

using shoal::detail::CancelNode;
using shoal::detail::TaskRecord;
using shoal::relacy::End;
using shoal::relacy::Gate;
using shoal::relacy::Record;

// A task in a scope's node. `linked`: it waited in this scope before, so it
// is in the node's list already and its wait takes no node lock (the
// canceller's walk is then ordered with the wait only through the hook
// and the flag).
struct InScope {
  Gate gate;
  Record f;
  CancelNode scope;
  void setup(bool linked) {
    gate.init();
    f.node.store(&scope, std::memory_order_relaxed);
    f.home = &scope;
    if (linked) {
      scope.add_record(&f);
      f.flags |= TaskRecord::kLinked;
    }
  }
  void leave_scope() {
    if ((f.flags & TaskRecord::kLinked) != 0) scope.remove_record(&f);
  }
  // After the notify: its value went to the waiter or stayed as the permit.
  void check_not_lost(End end, int got) {
    if (end == End::took || end == End::woken) {
      RL_ASSERT(got == 7);
      RL_ASSERT(gate.permit($) == 0);
    } else {
      RL_ASSERT(gate.permit($) == 7);
    }
  }
};

// The waker claims the waiter under the lock and hands it the value;
// nothing else races.
struct NotifyVsWait : rl::test_suite<NotifyVsWait, 2>, InScope {
  End end = End::none;
  int got = 0;
  void before() { setup(false); }
  void thread(unsigned id) {
    if (id == 0) {
      gate.notify(7);
    } else {
      end = await_gate(gate, f, got);
      RL_ASSERT(end == End::took || end == End::woken);
      leave_scope();
    }
  }
  void after() { check_not_lost(end, got); }
};

// A notify, the waiter, and a cancel of its scope: one of the waker and
// the canceller claims it. `Linked`: the task is in its scope's list from
// an earlier wait.
template <bool Linked>
struct NotifyVsCancel : rl::test_suite<NotifyVsCancel<Linked>, 3>, InScope {
  End end = End::none;
  int got = 0;
  void before() { setup(Linked); }
  void thread(unsigned id) {
    if (id == 0) {
      gate.notify(7);
    } else if (id == 1) {
      end = await_gate(gate, f, got);
      RL_ASSERT(end != End::none);
      leave_scope();
    } else {
      scope.cancel(true);
    }
  }
  void after() { check_not_lost(end, got); }
};

// Only a cancel: it always lands (no lost cancel for a task about to sleep).
template <bool Linked>
struct CancelAlone : rl::test_suite<CancelAlone<Linked>, 2>, InScope {
  void before() { setup(Linked); }
  void thread(unsigned id) {
    if (id == 0) {
      scope.cancel(true);
    } else {
      int got = 0;
      RL_ASSERT(await_gate(gate, f, got) == End::cancelled);
      leave_scope();
    }
  }
};

// A timeout: the task waits inside a deadline node (with_timeout's), in
// its scope, and a timer cancels that node. `WithNotify`: a notify races
// the timer; else the cancel of the enclosing scope does (two cancellers:
// one claims, the other finds the hook busy or cleared).
template <bool WithNotify>
struct TimeoutRace : rl::test_suite<TimeoutRace<WithNotify>, 3>, InScope {
  CancelNode deadline;
  End end = End::none;
  int got = 0;
  void before() {
    setup(true);
    deadline.attach(&scope, &f, nullptr);
    f.node.store(&deadline, std::memory_order_relaxed);
  }
  void thread(unsigned id) {
    if (id == 0) {
      if (WithNotify) {
        gate.notify(7);
      } else {
        scope.cancel(true);
      }
    } else if (id == 1) {
      end = await_gate(gate, f, got);
      RL_ASSERT(WithNotify ? end != End::none : end == End::cancelled);
      f.node.store(&scope, std::memory_order_relaxed);
      deadline.detach();
      leave_scope();
    } else {
      deadline.cancel(true);  // the timer fires
    }
  }
  void after() {
    if (WithNotify) check_not_lost(end, got);
  }
};

// Two waiters on an Event-like gate, one of them cancelled: the cancel
// takes only its own waiter (unlinking it beside the other), and the set
// wakes the other; the cancelled one ends either way, with the value only
// if the set claimed it first.
struct TwoWaitersOneCancelled : rl::test_suite<TwoWaitersOneCancelled, 3> {
  Gate gate;
  Record fa, fb;
  CancelNode a, b;
  End ea = End::none, eb = End::none;
  int ga = 0, gb = 0;
  void before() {
    gate.init();
    fa.node.store(&a, std::memory_order_relaxed);
    fa.home = &a;
    fb.node.store(&b, std::memory_order_relaxed);
    fb.home = &b;
  }
  void thread(unsigned id) {
    if (id == 0) {
      ea = await_gate(gate, fa, ga);
      RL_ASSERT(ea != End::none);
      if ((fa.flags & TaskRecord::kLinked) != 0) a.remove_record(&fa);
    } else if (id == 1) {
      eb = await_gate(gate, fb, gb);
      RL_ASSERT(eb == End::took || eb == End::woken);
      RL_ASSERT(gb == 7);
      if ((fb.flags & TaskRecord::kLinked) != 0) b.remove_record(&fb);
    } else {
      a.cancel(true);
      gate.set(7);
    }
  }
};

TEST(RelacyWaitQueue, ANotifyClaimsTheWaiterAndHandsItsValue) {
  EXPECT_TRUE(shoal::relacy::check<NotifyVsWait>(shoal::relacy::search_or("bound")));
}
TEST(RelacyWaitQueue, ANotifyRacesACancelForTheWaiter) {
  EXPECT_TRUE(shoal::relacy::check<NotifyVsCancel<false>>(shoal::relacy::search_or("bound")));
}
TEST(RelacyWaitQueue, ANotifyRacesACancelForAWaiterAlreadyInItsScope) {
  EXPECT_TRUE(shoal::relacy::check<NotifyVsCancel<true>>(shoal::relacy::search_or("bound")));
}
TEST(RelacyWaitQueue, ACancelAloneAlwaysLands) {
  EXPECT_TRUE(shoal::relacy::check<CancelAlone<false>>(shoal::relacy::search_or("bound")));
  EXPECT_TRUE(shoal::relacy::check<CancelAlone<true>>(shoal::relacy::search_or("bound")));
}
TEST(RelacyWaitQueue, ANotifyRacesATimeout) {
  EXPECT_TRUE(shoal::relacy::check<TimeoutRace<true>>(shoal::relacy::search_or("bound")));
}
TEST(RelacyWaitQueue, ATimeoutRacesTheCancelOfItsScope) {
  EXPECT_TRUE(shoal::relacy::check<TimeoutRace<false>>(shoal::relacy::search_or("bound")));
}
TEST(RelacyWaitQueue, TwoWaitersOneCancelled) {
  EXPECT_TRUE(shoal::relacy::check<TwoWaitersOneCancelled>(shoal::relacy::search_or("random")));
}

}  // namespace
