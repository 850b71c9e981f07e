// StealQueue and Injector, the real code, under the model checker.
// Invariant: every item pushed is taken exactly once; the owner's pops and
// the injector keep FIFO order per producer.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "harness.hpp"
#include "src/runtime/injector.hpp"
#include "src/runtime/steal_queue.hpp"

namespace shoal::model {
namespace {

// A uint8_t index started just below 256, so head and tail wrap while
// thieves race the owner. Capacity 4 makes "full" and take_half reachable.
using Queue = detail::StealQueue<int*, std::uint8_t, 4>;

// Bookkeeping is plain memory: only one model thread runs at a time, and it
// must not add scheduling points.
struct Ledger {
  int items[6] = {};
  int taken[6] = {};
  void take(int* p) {
    check(p >= items && p < items + 6, "took a pointer that was never pushed");
    ++taken[p - items];
  }
};

// The owner pushes `pushes` items (moving half out when full, as
// Scheduler::push_local does) and pops some; each thief steals into its own
// queue and drains it; whatever is left is drained after the joins.
void steal_scenario(int pushes, int thieves, std::uint8_t start) {
  Ledger l;
  Queue owner(start);
  Queue stolen[2] = {Queue(static_cast<std::uint8_t>(start - 3)), Queue(static_cast<std::uint8_t>(start + 1))};
  std::vector<Thread> ts;
  for (int t = 0; t < thieves; ++t) {
    ts.push_back(spawn(
        [&, t] {
          if (int* p = owner.steal_into(stolen[t])) l.take(p);
          while (int* p = stolen[t].pop()) l.take(p);
        },
        t == 0 ? "thief0" : "thief1"));
  }
  for (int i = 0; i < pushes; ++i) {
    while (!owner.push(&l.items[i])) owner.take_half([&](int* p) { l.take(p); });
    if (i % 2 == 1) {
      if (int* p = owner.pop()) l.take(p);
    }
  }
  for (Thread& t : ts) t.join();
  while (int* p = owner.pop()) l.take(p);
  for (int i = 0; i < pushes; ++i) check(l.taken[i] == 1, "an item was lost or taken twice");
}

TEST(ModelStealQueue, OneThiefExhaustiveBound2) {
  expect_passes(explore_bound(2, [] { steal_scenario(4, 1, 254); }));
}

TEST(ModelStealQueue, OneThiefFullQueueExhaustiveBound2) {
  // Six pushes into four slots with a pop every other push: push fails once
  // a thief holds its claim back, and take_half races the thief.
  expect_passes(explore_bound(2, [] { steal_scenario(6, 1, 253); }));
}

TEST(ModelStealQueue, TwoThievesExhaustiveBound1) {
  expect_passes(explore_bound(1, [] { steal_scenario(4, 2, 255); }));
}

TEST(ModelStealQueue, TwoThievesRandomSchedules) {
  expect_passes(random_runs(3000, [] { steal_scenario(6, 2, 254); }));
}

// Owner pops race a thief: whatever the owner pops comes out oldest first.
TEST(ModelStealQueue, OwnerPopsStayInOrderExhaustiveBound2) {
  expect_passes(explore_bound(2, [] {
    Ledger l;
    Queue owner(254), stolen(100);
    Thread thief = spawn(
        [&] {
          if (int* p = owner.steal_into(stolen)) l.take(p);
          while (int* p = stolen.pop()) l.take(p);
        },
        "thief");
    for (int i = 0; i < 3; ++i) check(owner.push(&l.items[i]), "push failed below capacity");
    int* last = nullptr;
    while (int* p = owner.pop()) {
      check(last == nullptr || p > last, "owner popped out of order");
      last = p;
      l.take(p);
    }
    thief.join();
    for (int i = 0; i < 3; ++i) check(l.taken[i] == 1, "an item was lost or taken twice");
  }));
}

// Two producers (push, push_batch) race a consumer popping batches.
void injector_scenario() {
  detail::Injector inj;
  TestRecord f[4];
  int seen[4] = {0, 0, 0, 0};
  int order[4];
  int n = 0;
  Thread a = spawn(
      [&] {
        inj.push(&f[0]);
        inj.push(&f[1]);
      },
      "push");
  Thread b = spawn(
      [&] {
        detail::TaskBatch batch;
        batch.push(&f[2]);
        batch.push(&f[3]);
        inj.push_batch(batch);
        check(batch.empty(), "push_batch left the batch non-empty");
      },
      "push_batch");
  while (n < 4) {
    detail::TaskBatch got = inj.pop(2);
    if (got.empty()) spin();  // nothing yet: a producer has to run
    std::size_t count = 0;
    for (detail::TaskRecord* x = got.head; x != nullptr; x = x->next) {
      const auto i = static_cast<int>(static_cast<TestRecord*>(x) - f);
      ++seen[i];
      order[n++] = i;
      ++count;
    }
    check(count == got.count, "batch count does not match its list");
  }
  a.join();
  b.join();
  check(inj.empty() && inj.pop(4).empty(), "items left after all were taken");
  for (int s : seen) check(s == 1, "an item was lost or taken twice");
  int pos[4];
  for (int i = 0; i < 4; ++i) pos[order[i]] = i;
  check(pos[0] < pos[1] && pos[2] < pos[3], "a producer's items came out of order");
}

TEST(ModelInjector, ExhaustiveBound3) { expect_passes(explore_bound(3, injector_scenario)); }

TEST(ModelInjector, RandomSchedules) { expect_passes(random_runs(2000, injector_scenario)); }

}  // namespace
}  // namespace shoal::model
