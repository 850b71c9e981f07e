// The permit core (detail::PermitCore, include/shoal/sync/detail/permits.hpp,
// src/sync/permits.cpp: Mutex, RwLock and Semaphore) under Relacy's memory
// model: the lock-free fast path (try_acquire's CAS, release's fetch_add)
// racing a task that queues through the real PermitCore::Awaiter (its
// take_or_mark_locked under the core's lock, and the dispatch that wakes it
// to retry), and a release that hands the permit straight to a queued waiter
// (fair mode) racing that waiter's cancellation. The awaiters are driven by
// hand, as tests/model does: await_suspend, then (if it suspended) wait until
// scheduled, then await_resume.
// Each holder adds one to a plain counter (an rl::var) inside its critical
// section: two holders at once, or a holder that does not see the previous
// one's write (no happens-before edge through the permit), is a data race.
// Invariants: the counter ends at the number of acquisitions (none lost),
// every permit is back once all are done and barging is on again (kFair
// clear: a core left fair with an empty queue would make every later
// acquire queue), and a waiter is scheduled exactly once per suspension (a
// lost wake-up leaves it blocked: Relacy reports a deadlock).
#include <gtest/gtest.h>

#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "harness.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/sync/detail/permits.hpp"

namespace {

using shoal::detail::CancelNode;
using shoal::detail::PermitCore;
using shoal::relacy::Record;

// A waiter's age at its first attempt (the Awaiter's `since`): the
// dispatch compares it with the clock, so the tests fix it to keep every
// execution deterministic. Young: never fair (a release wakes the waiter to
// retry by barging). Old: fair at once (a release grants it the permit).
constexpr std::int64_t kYoung = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kOld = 1;

// How often the executions of a search took the paths a suite is about
// (its test expects each at least once: a suite that stopped reaching them
// would pass without checking anything).
struct Seen {
  long queued = 0;     // the contender parked in the queue
  long requeued = 0;   // ... woken, lost to a barger, parked again
  long granted = 0;    // a parked waiter was handed the permit
  long cancelled = 0;  // a parked waiter was cancelled
};
Seen g_seen;

// A task in its scope's node (a task always runs in one).
struct Task {
  Record f;
  CancelNode node;
  shoal::detail::shim::atomic<bool> done{false};  // its acquisition ended, either way
  int suspensions = 0;
  // Opened once the task first parks (it is queued) or its acquisition
  // ends without parking. A Relacy semaphore: a thread that waits on it
  // blocks, spinning nowhere (every spinning step is a scheduling point).
  rl::semaphore<struct ParkedTag> parked;
  bool opened = false;
  void setup() {
    f.node.store(&node, std::memory_order_relaxed);
    f.home = &node;
    parked.init(false, 0, 2, $);
  }
  void teardown() { parked.deinit($); }
  void open() {  // for up to two threads that wait_parked()
    if (opened) return;
    opened = true;
    unsigned prev = 0;
    parked.post(2, prev, $);
  }
  // Waits (as a holder would take its time) until this task has given up
  // spinning for the permit and reached the queue (its hook published), or
  // finished trying: a spinning task's yields let the holder run, so without
  // this a holder always leaves before its contender queues. Relaxed: it
  // orders nothing. The holder's release then races the queueing.
  void wait_queued() {
    while (f.hook.load(std::memory_order_relaxed) == nullptr && !done.load(std::memory_order_relaxed)) {
      rl::yield(1, RL_INFO);
    }
  }
  // Blocks until this task has parked in the queue, or is done. Cheaper
  // than wait_queued (nothing spins), for suites about what follows the
  // queueing; the semaphore orders the task's queueing before the caller.
  void wait_parked() { parked.wait(false, false, $); }
  // Waits until scheduled once more (a parked task resumed).
  void wait_scheduled() {
    ++suspensions;
    open();
    // Blocks (the harness's schedule() notifies): a wake nobody sends is a
    // Relacy deadlock report.
    for (int w; (w = f.wakes.load(std::memory_order_acquire)) < suspensions;)
      f.wakes.wait(w, std::memory_order_acquire);
  }
  void finished() {
    done.store(true, std::memory_order_relaxed);
    open();
  }
  void leave() {                                                        // as Scope::task_done
    RL_ASSERT(f.wakes.load(std::memory_order_relaxed) == suspensions);  // once per suspension, never twice
    RL_ASSERT(f.hook.load(std::memory_order_relaxed) == nullptr);
    if ((f.flags & shoal::detail::TaskRecord::kLinked) != 0) node.remove_record(&f);
  }
};

// acquire_permits without the coroutine: Awaiters until one grants. False:
// cancelled (having handed on anything it was given).
bool acquire(PermitCore& core, Task& t, std::int64_t since) {
  shoal::relacy::set_current_record(&t.f);
  bool woken = false;
  bool got = false;
  try {
    while (!got) {
      PermitCore::Awaiter a(core, 1, since, woken);
      if (a.await_suspend(std::noop_coroutine())) t.wait_scheduled();
      got = a.await_resume();
    }
  } catch (const shoal::Cancelled&) {
  }
  t.finished();
  shoal::relacy::set_current_record(nullptr);
  return got;
}

// What every suite shares: the core, and the data its permits guard.
template <std::uint32_t Permits>
struct Guarded {
  PermitCore core{Permits, "relacy"};
  rl::var<int> data;       // one permit: written by each holder (a mutex's data)
  rl::atomic<int> inside;  // more: holders right now
  int acquired[4] = {};    // by thread (read once all are done)
  void setup() {
    data($) = 0;
    inside($) = 0;
  }
  // The critical section of one holder.
  void hold(unsigned id) {
    if (Permits == 1) {
      data($) = data($) + 1;
    } else {
      RL_ASSERT(inside($).fetch_add(1, rl::mo_relaxed) < static_cast<int>(Permits));
      inside($).fetch_sub(1, rl::mo_relaxed);
    }
    ++acquired[id];
  }
  // The fast path, else the queue, as Mutex::lock does.
  bool lock(Task& t, std::int64_t since) {
    if (core.try_acquire(1)) {
      t.finished();
      return true;
    }
    return acquire(core, t, since);
  }
  // Everyone is done: every permit is back, and barging is on again.
  void check(int expected) {
    int total = 0;
    for (int a : acquired) total += a;
    if (expected >= 0) RL_ASSERT(total == expected);
    RL_ASSERT(core.available() == Permits);
    if (Permits == 1) RL_ASSERT(data($) == total);
    RL_ASSERT(core.try_acquire(Permits));  // fails while kFair is stuck
    core.release(Permits);
  }
};

// One permit; two tasks. Each takes it by the fast path if it is free, else
// queues (young: a release wakes it to retry, and it may lose to the
// other's barging and queue again, at the head). The first, once it holds
// the permit, keeps it until the second has queued (or is done), then
// releases it and takes it again by the fast path, racing the second's
// wake-up and retry, and keeps it again until the second, if it lost that
// race, has queued again.
struct FastPathVsQueue : rl::test_suite<FastPathVsQueue, 2>, Guarded<1> {
  Task tasks[2];
  void before() {
    setup();
    for (Task& t : tasks) t.setup();
  }
  void after() {
    check(3);
    if (tasks[1].suspensions > 0) ++g_seen.queued;
    if (tasks[1].suspensions > 1) ++g_seen.requeued;
    for (Task& t : tasks) t.teardown();
  }
  void thread(unsigned id) {
    Task& t = tasks[id];
    RL_ASSERT(lock(t, kYoung));  // nobody cancels: it always gets it
    if (id == 0) tasks[1].wait_queued();
    hold(id);
    core.release(1);
    if (id == 0) {
      RL_ASSERT(lock(t, kYoung));
      tasks[1].wait_queued();  // if it lost to this barging, it queues again
      hold(id);
      core.release(1);
    }
    t.leave();
  }
};

// The permit is held when the run starts; its holder releases it once an
// old waiter has queued for it (fair: the release grants it the permit
// directly), and cancels the waiter's scope before the release, after it,
// or not at all. Exactly one owner: the waiter holds the permit (and
// releases it), or it was cancelled and whatever it was granted went back
// to the core.
struct HandOffVsCancel : rl::test_suite<HandOffVsCancel, 2>, Guarded<1> {
  Task waiter;
  void before() {
    setup();
    waiter.setup();
    RL_ASSERT(core.try_acquire(1));  // thread 0 holds it
  }
  void after() {
    check(-1);
    if (waiter.suspensions > 0) ++(acquired[1] != 0 ? g_seen.granted : g_seen.cancelled);
    waiter.teardown();
  }
  void thread(unsigned id) {
    if (id == 0) {
      waiter.wait_queued();
      hold(id);
      const unsigned order = rl::rand(3);
      if (order == 0) waiter.node.cancel(true);
      core.release(1);
      if (order == 1) waiter.node.cancel(true);
    } else {
      if (lock(waiter, kOld)) {
        hold(id);
        core.release(1);
      }
      waiter.leave();
    }
  }
};

// Two old waiters queue behind the holder, which cancels the first one's
// scope either before its critical section or after its release. Cancelled
// first, the waiter leaves the queue and kicks it: that kick's dispatch may
// grant the second waiter the permit the holder has just released, before
// the holder's own kick takes the lock, and nothing but that dispatch's
// acquire of the release orders the holder's critical section before the
// second's (the cancel's wake-up came before it). Cancelled last, the first
// waiter was granted the permit and hands it on. Either way the second
// always gets the permit, and a cancelled head leaves nobody asleep.
struct HandOffPassesOnPastACancelledWaiter : rl::test_suite<HandOffPassesOnPastACancelledWaiter, 3>, Guarded<1> {
  Task first, second;
  void before() {
    setup();
    first.setup();
    second.setup();
    RL_ASSERT(core.try_acquire(1));  // thread 0 holds it
  }
  void after() {
    check(-1);
    if (first.suspensions > 0) ++g_seen.cancelled;
    if (second.suspensions > 0) ++g_seen.granted;
    first.teardown();
    second.teardown();
  }
  void thread(unsigned id) {
    if (id == 0) {
      second.wait_parked();  // both queued (or the first already done)
      const bool cancel_first = rl::rand(2) == 0;
      if (cancel_first) first.node.cancel(true);
      hold(id);
      core.release(1);
      if (!cancel_first) first.node.cancel(true);
    } else if (id == 1) {
      if (lock(first, kOld)) {
        hold(id);
        core.release(1);
      }
      first.leave();
    } else {
      first.wait_parked();  // queued behind the first
      RL_ASSERT(lock(second, kOld));
      hold(id);
      core.release(1);
      second.leave();
    }
  }
};

// A semaphore's two permits, three tasks taking one each; the first two
// keep theirs until the third (old: served in order) has queued. Never more
// than two inside, and nobody left waiting.
struct SemaphoreThreeTasks : rl::test_suite<SemaphoreThreeTasks, 3>, Guarded<2> {
  Task tasks[3];
  void before() {
    setup();
    for (Task& t : tasks) t.setup();
  }
  void after() {
    check(3);
    if (tasks[2].suspensions > 0) ++g_seen.queued;
    for (Task& t : tasks) t.teardown();
  }
  void thread(unsigned id) {
    Task& t = tasks[id];
    RL_ASSERT(lock(t, id == 2 ? kOld : kYoung));
    if (id != 2) tasks[2].wait_parked();
    hold(id);
    core.release(1);
    t.leave();
  }
};

// The search: SHOAL_RELACY_SEARCH, else "bound" with at most two
// preemptions whatever SHOAL_RELACY_BOUND asks: every spin of the permit
// path (spin_acquire's look before queueing, the holders' wait for a
// contender to queue) is a yield Relacy schedules around, and a third
// preemption costs each suite 30 to 40 times the executions (a minute or
// more).
template <class Suite>
bool check_permits() {
  g_seen = Seen{};
  const bool ok = shoal::relacy::check<Suite>(shoal::relacy::search_or("bound"), 2);
  std::printf("relacy: seen queued %ld, requeued %ld, granted %ld, cancelled %ld\n", g_seen.queued, g_seen.requeued,
              g_seen.granted, g_seen.cancelled);
  return ok;
}

TEST(RelacyPermits, TheFastPathRacesATaskThatQueues) {
  EXPECT_TRUE(check_permits<FastPathVsQueue>());
  EXPECT_GT(g_seen.queued, 0);
  EXPECT_GT(g_seen.requeued, 0);
}
TEST(RelacyPermits, AHandOffRacesTheWaitersCancel) {
  EXPECT_TRUE(check_permits<HandOffVsCancel>());
  EXPECT_GT(g_seen.granted, 0);
  EXPECT_GT(g_seen.cancelled, 0);
}
TEST(RelacyPermits, AHandOffPassesOnPastACancelledWaiter) {
  EXPECT_TRUE(check_permits<HandOffPassesOnPastACancelledWaiter>());
  EXPECT_GT(g_seen.granted, 0);
  EXPECT_GT(g_seen.cancelled, 0);
}
TEST(RelacyPermits, ASemaphoresPermitsAreConserved) {
  EXPECT_TRUE(check_permits<SemaphoreThreeTasks>());
  EXPECT_GT(g_seen.queued, 0);
}

}  // namespace
