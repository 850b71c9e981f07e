// The task-set state word (TaskSet::state_, src/scope/task_set.cpp) under
// Relacy's memory model, with the real TaskSet: children ending
// (task_done) vs the body admitting a child (try_admit, admit_or_wait and
// its wait for a slot), waiting for no live child (the real wait_idle
// awaiter) and joining (JoinAwaiter), vs close() and a cancel of the set
// (CancelNode, WordWaiter::cancel_wait). The body's coroutine machinery is
// not run: the body's wait is Record::wakes, and the spawn's look after a
// wake mirrors SpawnAwaiter::await_resume (its child is not created; the
// admitted slot is ended on the body's thread, as a child that ran there).
// Plain data is rl::var: each child's result, written before it ends and
// read by the body once the set drained; what the body wrote before it
// waited (its resume point, as the waker's scheduler reads it); what a
// closer wrote before close(), read by a body that saw the set closed; and
// the set's admit_hook_ (shim::plain). The set lives in memory the body
// frees once it has joined: a child touching it after its last count would
// be reported. Invariants: a spawn after close() (as the body sees it) is
// refused; every admitted child's end is counted once (the join returns,
// live() is 0); the body is woken exactly once per wait it suspended at and
// never otherwise.
#include <gtest/gtest.h>

#include <coroutine>
#include <cstdlib>
#include <exception>
#include <new>

#include "harness.hpp"
#include "shoal/scope/task_set.hpp"

namespace shoal::detail {

// The TaskSet's friend for this test: its constructor, its state word and
// the body's steps that the coroutine awaiters wrap.
struct TaskSetProbe {
  using Outcome = TaskSet::Outcome;
  static TaskSet* make(void* mem, TaskRecord* body, std::size_t limit) { return new (mem) TaskSet(body, nullptr, limit); }
  static bool try_admit(TaskSet& s) { return s.try_admit(); }
  static std::uint64_t admit_bit() { return TaskSet::kAdmitWait; }
  static void end(TaskSet& s, TaskRecord& f, PromiseBase& p) { (void)s.task_done(f, p, std::noop_coroutine()); }
  // spawn's admission: SpawnAwaiter::await_suspend's admit_or_wait, then
  // (after a wait) await_resume's look again.
  static Outcome admit(TaskSet& s, relacy::Record& f, WordWaiter& hook, int& waits) {
    const Outcome o = admit_or_wait(s, f, hook);
    if (o != Outcome::waiting) return o;
    ++waits;
    while (f.wakes.load(std::memory_order_acquire) < waits) rl::yield(1, RL_INFO);
    return look_again(s, f, hook);
  }
  static Outcome admit_or_wait(TaskSet& s, relacy::Record& f, WordWaiter& hook) {
    return s.admit_or_wait(&f, &hook, std::coroutine_handle<>{});
  }
  static Outcome look_again(TaskSet& s, relacy::Record& f, WordWaiter& hook) {
    hook.clear_pending();
    if (f.cancelled()) return Outcome::cancelled;
    if (s.closed()) return Outcome::closed;
    return s.try_admit() ? Outcome::admitted : Outcome::closed;
  }
  // join_all; true if the body waited.
  static bool join(TaskSet& s) { return TaskSet::JoinAwaiter{&s}.await_suspend(std::coroutine_handle<>{}); }
  static void leave(TaskSet& s) { s.leave(); }
  static void finish(TaskSet& s, std::exception_ptr body_error) { s.finish(std::move(body_error)); }
};

}  // namespace shoal::detail

namespace {

using shoal::detail::CancelNode;
using shoal::TaskSet;
using shoal::detail::WordWaiter;
using Probe = shoal::detail::TaskSetProbe;
using Outcome = Probe::Outcome;
using shoal::relacy::Record;

// The body's hook for its wait for a slot (BodyWait's WordWaiter).
struct AdmitHook final : WordWaiter {
  AdmitHook() : WordWaiter(Probe::admit_bit()) {}
};

std::exception_ptr cancelled_error() { return std::make_exception_ptr(shoal::Cancelled{}); }

// A set whose body runs in an outer scope's node, with up to three
// children: their records and promises, and what each child wrote.
struct SetFixture {
  Record body;
  CancelNode outer;
  shoal::detail::TaskRecord kids[3];
  shoal::detail::PromiseBase promises[3];
  rl::var<int> result[3];
  rl::var<int> body_note;  // what the body wrote before it waits
  void* mem = nullptr;
  TaskSet* set = nullptr;
  int waits = 0;  // the body's suspensions (body thread only)

  void setup(std::size_t limit, int live) {
    // The body runs in `outer` but is not listed there (home null): only
    // the set's own cancel reaches it here, through the set's node, and the
    // node locks of listing it would only multiply the schedules.
    body.node.store(&outer, std::memory_order_relaxed);
    for (auto& r : result) r($) = 0;
    body_note($) = 0;
    mem = rl::rl_malloc(sizeof(TaskSet), RL_INFO);
    set = Probe::make(mem, &body, limit);
    for (int i = 0; i < live; ++i) RL_ASSERT(Probe::try_admit(*set));
  }
  // Child `i` finishes (with `error`, if any): its result, then the word.
  void end_child(int i, std::exception_ptr error = nullptr, bool look = true) {
    result[i]($) = i + 1;
    promises[i].error_ = std::move(error);
    Probe::end(*set, kids[i], promises[i]);
    if (look) seen_woken();
  }
  // A thread that sees the body woken (its own wake or another's): what
  // the body wrote before it waited is visible, as the woken task's
  // resume point is to whoever runs it.
  void seen_woken() {
    if (body.wakes.load(std::memory_order_acquire) != 0) RL_ASSERT(body_note($) == 1);
  }
  void body_starts() {
    shoal::relacy::set_current_record(&body);
    body_note($) = 1;
  }
  void wait_woken() {
    ++waits;
    while (body.wakes.load(std::memory_order_acquire) < waits) rl::yield(1, RL_INFO);
  }
  // The body joins (the set closes and every child has ended), checks the
  // children's results, leaves, and frees the set: `cut_off` if finish()
  // must report a child cut off by an outside cancellation.
  void join_and_free(int children, std::exception_ptr body_error, bool cut_off) {
    if (Probe::join(*set)) wait_woken();
    for (int i = 0; i < children; ++i) RL_ASSERT(result[i]($) == i + 1);  // before any other acquire
    RL_ASSERT(set->live() == 0);
    RL_ASSERT(set->closed());
    Probe::leave(*set);
    bool threw = false;
    try {
      Probe::finish(*set, std::move(body_error));
    } catch (const shoal::Cancelled&) {
      threw = true;
    }
    RL_ASSERT(threw == cut_off);
    set->~TaskSet();
    rl::rl_free(mem, RL_INFO);
    set = nullptr;
    if ((body.flags & shoal::detail::TaskRecord::kLinked) != 0) outer.remove_record(&body);
    shoal::relacy::set_current_record(nullptr);
  }
  // Every wait woken exactly once; no wake without a wait.
  void check() { RL_ASSERT(body.wakes.load(std::memory_order_relaxed) == waits); }
  // After every thread, for a test whose body spawned into a set of one
  // child and did not join: the spawn's child (`admitted`) runs and ends;
  // every admitted child's end was counted (the join finds none live);
  // the set goes.
  void join_after(bool admitted, std::exception_ptr body_error) {
    shoal::relacy::set_current_record(&body);
    if (admitted) end_child(1);
    RL_ASSERT(!Probe::join(*set));
    join_and_free(admitted ? 2 : 1, std::move(body_error), false);
    check();
  }
};

// Two children end, one of them cut off by a cancellation from outside,
// while the body joins: the last one wakes it; the body sees both results
// and the cut-off child (finish reports Cancelled).
struct ChildrenEndVsJoin : rl::test_suite<ChildrenEndVsJoin, 3>, SetFixture {
  void before() { setup(2, 2); }
  void after() { check(); }
  void thread(unsigned id) {
    if (id == 0) {
      end_child(0);
    } else if (id == 1) {
      end_child(1, cancelled_error());
    } else {
      body_starts();
      join_and_free(2, nullptr, true);
    }
  }
};

// The body spawns into a full set (limit 1) while another task closes it
// and the child ends: the spawn is admitted (the slot came free first),
// refused (closed), or waits and is woken once, by the child's end or by
// close(). A spawn after the body saw close() done is refused, and a
// refused one sees what the closer wrote before close(). The closer is
// not a child, so the set goes after every thread is done (after()).
struct SpawnVsChildEndVsClose : rl::test_suite<SpawnVsChildEndVsClose, 3>, SetFixture {
  AdmitHook hook;
  rl::var<int> reason;
  shoal::detail::shim::atomic<bool> close_done{false};
  Outcome o = Outcome::misuse;
  void before() {
    setup(1, 1);
    reason($) = 0;
  }
  void after() { join_after(o == Outcome::admitted, nullptr); }
  void thread(unsigned id) {
    if (id == 0) {
      reason($) = 7;
      set->close();
      close_done.store(true, std::memory_order_release);
      seen_woken();
    } else if (id == 1) {
      end_child(0);
    } else {
      body_starts();
      const bool after_close = close_done.load(std::memory_order_acquire);
      o = Probe::admit(*set, body, hook, waits);
      RL_ASSERT(o == Outcome::admitted || o == Outcome::closed);
      if (after_close) RL_ASSERT(o == Outcome::closed);
      if (o == Outcome::closed) RL_ASSERT(reason($) == 7);
      shoal::relacy::set_current_record(nullptr);
    }
  }
};

// The body spawns into a full set (limit 1) while another task cancels
// the set and the child ends: the spawn is admitted, cancelled (before it
// waited, by the pending mark, or by the canceller taking its wake), or
// woken by the child's end; woken once either way.
struct SpawnVsChildEndVsCancel : rl::test_suite<SpawnVsChildEndVsCancel, 3>, SetFixture {
  AdmitHook hook;
  Outcome o = Outcome::misuse;
  void before() { setup(1, 1); }
  // A cancelled spawn throws Cancelled out of the body; the set's own
  // cancel is absorbed by finish().
  void after() {
    if (o == Outcome::waiting) {
      ++waits;  // the wake came while the others ran: it is there now
      RL_ASSERT(body.wakes.load(std::memory_order_relaxed) == waits);
      o = Probe::look_again(*set, body, hook);
    }
    RL_ASSERT(o != Outcome::misuse && o != Outcome::waiting && o != Outcome::closed);
    join_after(o == Outcome::admitted, o == Outcome::cancelled ? cancelled_error() : nullptr);
  }
  void thread(unsigned id) {
    if (id == 0) {
      set->cancel();
    } else if (id == 1) {
      end_child(0, nullptr, false);
    } else {
      body_starts();
      o = Probe::admit_or_wait(*set, body, hook);
      shoal::relacy::set_current_record(nullptr);
    }
  }
};

// The body waits for no live child (the real wait_idle awaiter) while two
// children end: the last one wakes it; it sees both results.
struct IdleVsChildrenEnd : rl::test_suite<IdleVsChildrenEnd, 3>, SetFixture {
  void before() { setup(2, 2); }
  void after() { check(); }
  void thread(unsigned id) {
    if (id < 2) {
      end_child(static_cast<int>(id));
    } else {
      body_starts();
      auto idle = set->wait_idle();
      if (idle.await_suspend(std::coroutine_handle<>{})) wait_woken();
      idle.await_resume();  // no cancel here: it must not throw
      for (int i = 0; i < 2; ++i) RL_ASSERT(result[i]($) == i + 1);  // before any other acquire
      RL_ASSERT(set->live() == 0);
      join_and_free(2, nullptr, false);
    }
  }
};

// wait_idle vs the one child, which cancels the set and then ends: the
// body is woken once, by the cancel or by the end; it returns if it finds
// no child live then (and sees its result), else throws Cancelled. (The
// cancel racing a child's end on the word is SpawnVsChildEndVsCancel's.)
struct IdleVsCancelAndEnd : rl::test_suite<IdleVsCancelAndEnd, 2>, SetFixture {
  std::exception_ptr error;
  void before() { setup(1, 1); }
  void after() { join_after(false, error); }
  void thread(unsigned id) {
    if (id == 0) {
      set->cancel();
      end_child(0, nullptr, false);
    } else {
      body_starts();
      auto idle = set->wait_idle();
      if (idle.await_suspend(std::coroutine_handle<>{})) wait_woken();
      try {
        idle.await_resume();
        RL_ASSERT(result[0]($) == 1);  // before any other acquire
        RL_ASSERT(set->live() == 0);
      } catch (const shoal::Cancelled&) {
        error = std::current_exception();
      }
      shoal::relacy::set_current_record(nullptr);
    }
  }
};

TEST(RelacyTaskSet, ChildrenEndingRaceTheJoin) {
  EXPECT_TRUE(shoal::relacy::check<ChildrenEndVsJoin>(shoal::relacy::search_or("bound")));
}
TEST(RelacyTaskSet, ASpawnWaitingForASlotRacesAChildEndAndClose) {
  EXPECT_TRUE(shoal::relacy::check<SpawnVsChildEndVsClose>(shoal::relacy::search_or("bound")));
}
TEST(RelacyTaskSet, ASpawnWaitingForASlotRacesAChildEndAndACancel) {
  EXPECT_TRUE(shoal::relacy::check<SpawnVsChildEndVsCancel>(shoal::relacy::search_or("bound")));
}
TEST(RelacyTaskSet, WaitIdleRacesTheChildrenEnding) {
  EXPECT_TRUE(shoal::relacy::check<IdleVsChildrenEnd>(shoal::relacy::search_or("bound")));
}
TEST(RelacyTaskSet, WaitIdleRacesAChildThatCancelsTheSetAndEnds) {
  EXPECT_TRUE(shoal::relacy::check<IdleVsCancelAndEnd>(shoal::relacy::search_or("bound")));
}

}  // namespace
