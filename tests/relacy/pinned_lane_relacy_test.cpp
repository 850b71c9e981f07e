// The pinned lane (src/runtime/pinned_lane.hpp) under Relacy's memory model:
// its inbox (a PushStack) filled from other threads while its owner drains,
// searches and parks (the park glue of park_support.hpp, a copy of
// src/runtime/worker_pool.cpp's, with the real Idle and Parker). A pinned
// task is nobody else's work: the owner learns of it only from the push that
// makes its inbox non-empty, which unparks it.
// Invariants: every item runs exactly once, on its owner (its payload,
// written before the push, is read where it runs: without a happens-before
// edge that read is a data race); no lost wake-up (an owner asleep with
// tasks in its inbox that nobody will wake it for leaves every thread
// blocked: Relacy reports a deadlock); shutdown wakes every worker.
#include <gtest/gtest.h>

#include "park_support.hpp"

namespace {

using namespace shoal::relacy::park;  // NOLINT: the test's vocabulary

// A thread that is none of the workers pushes two tasks pinned to worker 0,
// the second (unless the owner drained the first already) onto a non-empty
// inbox, which wakes nobody; then it waits for both and shuts down.
struct RemotePushesToAParkingOwner : rl::test_suite<RemotePushesToAParkingOwner, 2> {
  MiniRuntime<1, true> rt;
  void before() { rt.before(); }
  void after() { rt.check(2); }
  void thread(unsigned id) {
    if (id == 0) {
      rt.push_pinned_remote(rt.workers[0], rt.make(0));
      rt.push_pinned_remote(rt.workers[0], rt.make(1));
      rt.wait_and_shut_down(2);
    } else {
      rt.worker_main(rt.workers[0]);
    }
  }
};

// As above, with a second worker and a driver whose wait may end on its own
// (I/O, a timer): the owner may be in the driver, just out of it, or on its
// futex while the other worker drives, when the push unparks it.
struct RemotePushVsTheOwnersDrive : rl::test_suite<RemotePushVsTheOwnersDrive, 3> {
  MiniRuntime<2, true> rt;
  void before() {
    rt.before();
    rt.driver.spontaneous = 1;
  }
  void after() { rt.check(1); }
  void thread(unsigned id) {
    if (id == 0) {
      rt.push_pinned_remote(rt.workers[0], rt.make(0));
      rt.wait_and_shut_down(1);
    } else {
      rt.worker_main(rt.workers[id - 1]);
    }
  }
};

// The driver watch frees the inbox of a worker it finds stuck in one step
// (WorkerPool::free_stalled_moves, src/runtime/watch.cpp): it takes the
// inbox and pushes the hard-pinned tasks back. Here it runs while the owner
// is between steps (the watch cannot tell: it judges by a relaxed read of the
// owner's activity and step count), with one task pinned to the owner.
// It unparks the owner when its push back makes the inbox non-empty: it
// did not ("the owner is awake (running), nobody to unpark"), and the owner
// that parked meanwhile slept with its task pushed back (a deadlock here
// at bound 2, in 98,349 executions).
struct WatchPushesBackWhileTheOwnerParks : rl::test_suite<WatchPushesBackWhileTheOwnerParks, 3> {
  MiniRuntime<1, true> rt;
  void before() { rt.before(); }
  void after() { rt.check(1); }
  void thread(unsigned id) {
    MiniWorker& w = rt.workers[0];
    if (id == 0) {
      rt.push_pinned_remote(w, rt.make(0));
      rt.wait_and_shut_down(1);
    } else if (id == 1) {
      rt.worker_main(w);
    } else if (w.activity.load(std::memory_order_relaxed) == 0) {
      // The watch's pass over worker 0 (hard-pinned tasks only).
      TaskRecord* f = w.pinned.take_remote();
      while (f != nullptr) {
        TaskRecord* next = f->next;
        rt.push_pinned_remote(w, f);  // push back, and unpark if the inbox was empty
        f = next;
      }
    }
  }
};

using shoal::relacy::check;
using shoal::relacy::search_or;

TEST(RelacyPinnedLane, RemotePushesToAParkingOwnerAreRunOnce) {
  EXPECT_TRUE(check<RemotePushesToAParkingOwner>(search_or("bound"), 2));
}
// Random schedules: bounded, the drive's choice and a third thread make it
// minutes.
TEST(RelacyPinnedLane, RemotePushVsTheOwnersDrive) {
  EXPECT_TRUE(check<RemotePushVsTheOwnersDrive>(search_or("random")));
}
TEST(RelacyPinnedLane, TheWatchPushingBackAParkingOwnersTasksWakesIt) {
  EXPECT_TRUE(check<WatchPushesBackWhileTheOwnerParks>(search_or("bound"), 2));
}

}  // namespace
