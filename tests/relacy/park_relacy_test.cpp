// Park/unpark under Relacy's memory model: the real Idle (the idle word and
// its wake protocol, src/runtime/idle.hpp), the real Parker (futex and
// driver paths, src/runtime/parker.hpp; its futex sleep is the shim's
// atomic wait), the real StealQueue and Injector, and a copy of the worker
// pool's glue around them (park_support.hpp). Relacy adds to the SC model test
// (tests/model/park_protocol_test.cpp) the outcomes that acquire, release,
// relaxed and seq_cst fences allow.
// Invariants: every item runs exactly once (its payload, written before it
// is queued, is read by whoever runs it: a run without a happens-before edge
// from that write is a data race); no lost wake-up (a worker asleep while
// work is queued and nobody is left to run it leaves every thread blocked:
// Relacy reports a deadlock); shutdown wakes every worker (else the same).
#include <gtest/gtest.h>

#include "park_support.hpp"

namespace {

using namespace shoal::relacy::park;  // NOLINT: the test's vocabulary

// Thread 0 produces, threads 1 and 2 are the workers (they start idle).
template <class Derived, std::size_t Workers, int Injected, int Total>
struct ParkSuite : rl::test_suite<Derived, 1 + Workers> {
  MiniRuntime<Workers> rt;
  void before() { rt.before(); }
  void after() { rt.check(Total); }
  void thread(unsigned id) {
    if (id == 0) {
      for (int i = 0; i < Injected; ++i) rt.inject(rt.make(i));
      rt.wait_and_shut_down(Total);
    } else {
      rt.worker_main(rt.workers[id - 1]);
    }
  }
};

struct OneWorkerOneItem : ParkSuite<OneWorkerOneItem, 1, 1, 1> {};
struct OneWorkerTwoItems : ParkSuite<OneWorkerTwoItems, 1, 2, 2> {};
struct OneWorkerShutdown : ParkSuite<OneWorkerShutdown, 1, 0, 0> {};
struct TwoWorkersShutdown : ParkSuite<TwoWorkersShutdown, 2, 0, 0> {};
struct TwoWorkersOneItem : ParkSuite<TwoWorkersOneItem, 2, 1, 1> {};
// Item 0 spawns item 1 on the worker that runs it: the other worker, asleep
// or on its way to sleep, must be woken or find it.
struct SpawnedChild : ParkSuite<SpawnedChild, 2, 1, 2> {
  void before() {
    ParkSuite::before();
    rt.child_of[0] = 1;
  }
};
// Item 0 spawns two children: the second push finds the first still queued
// (unless a thief was quick) and wakes nobody; both still run.
struct SecondSpawnOntoANonEmptyQueue : ParkSuite<SecondSpawnOntoANonEmptyQueue, 2, 1, 3> {
  void before() {
    ParkSuite::before();
    rt.child_of[0] = 1;
    rt.second_child_of[0] = 2;
  }
};

using shoal::relacy::check;
using shoal::relacy::search_or;

// Bounded where a bound fits in seconds (capped at 2 where a third
// preemption takes minutes), random schedules for three threads with work.
TEST(RelacyPark, OneWorkerRunsAnInjectedItem) { EXPECT_TRUE(check<OneWorkerOneItem>(search_or("bound"))); }
TEST(RelacyPark, OneWorkerRunsTwoInjectedItems) {
  EXPECT_TRUE(check<OneWorkerTwoItems>(search_or("bound"), 2));
}
TEST(RelacyPark, ShutdownWakesAWorkerOnItsWayToSleep) { EXPECT_TRUE(check<OneWorkerShutdown>(search_or("bound"))); }
TEST(RelacyPark, ShutdownWakesTwoWorkersOnTheirWayToSleep) {
  EXPECT_TRUE(check<TwoWorkersShutdown>(search_or("bound"), 2));
}
TEST(RelacyPark, TwoWorkersRunAnInjectedItem) { EXPECT_TRUE(check<TwoWorkersOneItem>(search_or("random"))); }
TEST(RelacyPark, ASpawnedChildWakesTheOtherWorkerOrIsFound) {
  EXPECT_TRUE(check<SpawnedChild>(search_or("random")));
}
TEST(RelacyPark, SecondSpawnOntoANonEmptyQueueWakesNobodyAndLosesNothing) {
  EXPECT_TRUE(check<SecondSpawnOntoANonEmptyQueue>(search_or("random")));
}

}  // namespace
