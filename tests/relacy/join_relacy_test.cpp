// The join word (detail::JoinCell, src/scope/join_word.hpp) under Relacy's
// memory model, with the real waiter (WordWaiter: register_until,
// cancel_wait, wake_taken) and cancellation (CancelNode, cancel_protocol.cpp):
// the child finishing vs a task awaiting its handle vs a cancel, vs an
// on_join select case whose select a cancel ends, and vs its handle going
// without the result (abandon_join), after a cancelled await or not. The
// child's result is a plain variable written before it finishes: reading
// it without a happens-before edge is a data race. Invariants: a waiter is scheduled
// exactly once if it waited and never if it did not; a result is read only
// once the word says done; a select case goes only after the child is done
// with it (the case lives in memory the select frees: a later touch is
// reported as an access to freed memory); a dropped handle's cell is freed
// by exactly one side, after the other is done with it.
#include <gtest/gtest.h>

#include <new>

#include "harness.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/scope/join_handle.hpp"
#include "scope/join_word.hpp"

namespace {

using shoal::detail::CancelNode;
using shoal::detail::JoinCell;
using shoal::detail::WordWaiter;
using shoal::relacy::Record;

struct Waiter final : WordWaiter {
  Waiter() : WordWaiter(0) {}  // marked by its address, as JoinHandle's awaiter
};

// The child: its result, then the word.
struct Child {
  JoinCell cell;
  rl::var<int> result;
  void finish() {
    result($) = 7;
    RL_ASSERT(!shoal::detail::finish_join(cell));  // the handle is alive
  }
  bool done() { return (cell.join.load(std::memory_order_acquire) & JoinCell::kDone) != 0; }
};

// A task awaiting the handle, as JoinHandle::Awaiter does (`cancellable`:
// a cancel of its node may end the wait). True if it read the result.
bool await_join(Child& child, Record& f, bool cancellable) {
  shoal::relacy::set_current_record(&f);
  Waiter w;
  bool waited = false;
  switch (w.register_until(child.cell.join, &f, JoinCell::kDone)) {
    case WordWaiter::Registered::waiting:
      waited = true;
      f.wait_scheduled();
      break;
    case WordWaiter::Registered::cancelled:
      RL_ASSERT(cancellable);
      break;
    case WordWaiter::Registered::not_needed:
      break;
  }
  RL_ASSERT(f.wakes.load(std::memory_order_relaxed) == (waited ? 1 : 0));
  const bool got = child.done();
  RL_ASSERT(got || cancellable);  // only a cancel ends the wait early
  if (got) RL_ASSERT(child.result($) == 7);
  if ((f.flags & shoal::detail::TaskRecord::kLinked) != 0) f.home->remove_record(&f);
  shoal::relacy::set_current_record(nullptr);
  return got;
}

// A child, and a task in a scope's node (a task always runs in one).
struct InScope {
  Child child;
  Record f;
  CancelNode node;
  void setup() {
    child.result($) = 0;
    f.node.store(&node, std::memory_order_relaxed);
    f.home = &node;
  }
};

struct FinishVsAwait : rl::test_suite<FinishVsAwait, 2>, InScope {
  void before() { setup(); }
  void thread(unsigned id) {
    if (id == 0) {
      child.finish();
    } else {
      RL_ASSERT(await_join(child, f, false));
    }
  }
};

struct FinishVsAwaitVsCancel : rl::test_suite<FinishVsAwaitVsCancel, 3>, InScope {
  void before() { setup(); }
  void thread(unsigned id) {
    if (id == 0) {
      child.finish();
    } else if (id == 1) {
      (void)await_join(child, f, true);
    } else {
      node.cancel(true);
    }
  }
};

// on_join's case in a select that a cancel may end first. The select's
// claim and case live in memory the select thread frees when it is over,
// as a Select in a coroutine frame goes with the frame.
struct Case final : shoal::detail::JoinCaseCore {
  using JoinCaseCore::link;
};
struct SelectFrame {
  shoal::detail::SelectClaim claim;
  Case join_case;
};

struct FinishVsSelectVsCancel : rl::test_suite<FinishVsSelectVsCancel, 3>, InScope {
  JoinCell next;  // the next round's child, finished
  void before() {
    setup();
    next.join.store(JoinCell::kDone, std::memory_order_relaxed);
  }
  // Select::arm and on_wake for one join case, without the coroutine.
  void select() {
    shoal::relacy::set_current_record(&f);
    void* mem = rl::rl_malloc(sizeof(SelectFrame), RL_INFO);
    auto* s = new (mem) SelectFrame;
    int won = -1;
    if (s->join_case.link(&child.cell, s->claim, 0, &f)) {
      won = 0;  // the child finished first
    } else {
      shoal::detail::publish_hook(&f, &s->claim);
      if (!f.cancelled(std::memory_order_seq_cst) && s->claim.park()) {
        f.wait_scheduled();  // by the child (case 0 won) or the canceller
        s->join_case.disarm_locked();
      } else {
        s->join_case.disarm_locked();
        shoal::detail::disarm_wait(&f, &s->claim);
      }
      won = s->claim.winner();
    }
    if (won == 0) {
      RL_ASSERT(child.done());
      RL_ASSERT(child.result($) == 7);
    }
    RL_ASSERT(f.wakes.load(std::memory_order_relaxed) <= 1);
    // The next round of a select loop links the case again (here to a
    // child that finished: link writes the case and returns): the first
    // child must be done with the case by now.
    s->claim.reset();
    RL_ASSERT(s->join_case.link(&next, s->claim, 1, &f));
    s->~SelectFrame();
    rl::rl_free(mem, RL_INFO);
    if ((f.flags & shoal::detail::TaskRecord::kLinked) != 0) node.remove_record(&f);
    shoal::relacy::set_current_record(nullptr);
  }
  void thread(unsigned id) {
    if (id == 0) {
      child.finish();
    } else if (id == 1) {
      select();
    } else {
      node.cancel(true);
    }
  }
};

// A child whose handle goes without its result (JoinHandle's drop,
// abandon_join) as the child finishes (Scope::finish_started, finish_join).
// The cell is memory that whichever side is left with it frees, as
// free_join_cell does, so a touch after the free is reported, and so is a
// second free or none (a leak). `touched` stands for the handle's own use
// of the cell while it held it (a cancel's look at `record`, an await's
// marks: atomics, which Relacy does not check against a free); the free
// writes it and the result, as the memory's reuse would, so it must come
// after whatever the other side did with the cell.
struct OwnedChild : Child {
  rl::var<int> touched;
};

struct OwnedCell {
  OwnedChild* c = nullptr;
  shoal::detail::shim::atomic<int> frees{0};
  void make(std::uint64_t word) {
    c = new (rl::rl_malloc(sizeof(OwnedChild), RL_INFO)) OwnedChild;
    c->result($) = 0;
    c->touched($) = 0;
    c->cell.join.store(word, std::memory_order_relaxed);
  }
  void free_cell() {
    c->result($) = -1;
    c->touched($) = -1;
    frees.fetch_add(1, std::memory_order_relaxed);
    c->~OwnedChild();
    rl::rl_free(c, RL_INFO);
  }
  // The child's end: its result, then the word; the cell is its own to free
  // if the handle went first.
  void child_finishes() {
    c->result($) = 7;
    if (shoal::detail::finish_join(c->cell)) free_cell();
  }
  // The handle goes: a finished child's result is the handle's to destroy
  // (read here) and its cell to free.
  void handle_drops() {
    RL_ASSERT(c->touched($) == 0);
    if (shoal::detail::abandon_join(c->cell)) {
      RL_ASSERT(c->result($) == 7);
      free_cell();
    }
  }
  void check() { RL_ASSERT(frees.load(std::memory_order_relaxed) == 1); }
};

// `Word`: the join word as the handle finds it while the child runs: 0, or
// the kCancelPending a canceller left for an awaiter that is gone.
template <std::uint64_t Word>
struct DropVsFinish : rl::test_suite<DropVsFinish<Word>, 2>, OwnedCell {
  void before() { make(Word); }
  void after() { check(); }
  void thread(unsigned id) {
    if (id == 0) {
      child_finishes();
    } else {
      handle_drops();
    }
  }
};

// The handle's task awaits it first, in a scope a cancel may end the wait
// of (the canceller may leave kCancelPending in the word), then drops it.
struct AwaitCancelledThenDropVsFinish : rl::test_suite<AwaitCancelledThenDropVsFinish, 3>, OwnedCell {
  Record f;
  CancelNode node;
  void before() {
    make(0);
    f.node.store(&node, std::memory_order_relaxed);
    f.home = &node;
  }
  void after() { check(); }
  void thread(unsigned id) {
    if (id == 0) {
      child_finishes();
    } else if (id == 1) {
      (void)await_join(*c, f, true);  // a result it got is then freed as a drop's is
      handle_drops();
    } else {
      node.cancel(true);
    }
  }
};

TEST(RelacyJoin, AChildFinishingRacesItsAwaiter) { EXPECT_TRUE(shoal::relacy::check<FinishVsAwait>("bound")); }
TEST(RelacyJoin, AChildFinishingRacesItsAwaiterAndACancel) {
  EXPECT_TRUE(shoal::relacy::check<FinishVsAwaitVsCancel>("bound"));
}
TEST(RelacyJoin, AChildFinishingRacesAnOnJoinSelectThatACancelEnds) {
  EXPECT_TRUE(shoal::relacy::check<FinishVsSelectVsCancel>(shoal::relacy::search_or("bound")));
}
TEST(RelacyJoin, AHandleDroppedAsItsChildFinishesHasItsCellFreedByExactlyOneSide) {
  EXPECT_TRUE(shoal::relacy::check<DropVsFinish<0>>(shoal::relacy::search_or("bound")));
}
TEST(RelacyJoin, AHandleDroppedOverACancellersPendingMarkHasItsCellFreedByExactlyOneSide) {
  EXPECT_TRUE(shoal::relacy::check<DropVsFinish<WordWaiter::kCancelPending>>(shoal::relacy::search_or("bound")));
}
TEST(RelacyJoin, AHandleDroppedAfterACancelledAwaitHasItsCellFreedByExactlyOneSide) {
  EXPECT_TRUE(shoal::relacy::check<AwaitCancelledThenDropVsFinish>(shoal::relacy::search_or("bound")));
}

}  // namespace
