// The steal queue (src/runtime/steal_queue.hpp) under Relacy's memory model:
// the owner's push, pop and overflow (take_half) racing one or two thieves'
// steal_into. Each item carries a plain payload (an rl::var) that the owner
// writes before the push: a taker that reads it without a happens-before
// edge from that write is a data race, which Relacy reports. Invariant: every
// item is taken exactly once, by the owner or a thief, and none is lost.
#include <gtest/gtest.h>

#include <cstdint>

#include "relacy_support.hpp"
#include "runtime/steal_queue.hpp"

namespace {

struct Item {
  rl::var<int> payload;
  rl::var<int> taken;
};

using Queue = shoal::detail::StealQueue<Item*, std::uint8_t, 4>;

template <int N>
using Items = shoal::relacy::Handed<Item, N>;

// The owner: pushes `n` items, then pops until its queue is empty.
template <int N>
void owner(Queue& q, Items<N>& items, int n) {
  for (int i = 0; i < n; ++i) RL_ASSERT(q.push(items.make(i)) != 0);
  while (Item* it = q.pop()) items.take(it);
}

// A thief: steals into its own queue, runs what it got.
template <int N>
void thief(Queue& victim, Queue& mine, Items<N>& items) {
  if (Item* got = victim.steal_into(mine)) items.take(got);
  while (Item* more = mine.pop()) items.take(more);
}

// Owner pushes three and pops until empty; one thief steals.
struct PushPopVsSteal : rl::test_suite<PushPopVsSteal, 2> {
  Queue q, stolen;
  Items<3> items;
  void before() { items.before(); }
  void after() { items.check(); }
  void thread(unsigned id) {
    if (id == 0) {
      owner(q, items, 3);
    } else {
      thief(q, stolen, items);
    }
  }
};

// Owner fills the queue, finds it full, moves the older half out (as it
// does to the injector), pushes again and pops the rest; one thief steals.
struct OverflowVsSteal : rl::test_suite<OverflowVsSteal, 2> {
  Queue q, stolen;
  Items<5> items;
  void before() { items.before(); }
  void after() { items.check(); }
  void thread(unsigned id) {
    if (id == 0) {
      for (int i = 0; i < 5; ++i) {
        Item* it = items.make(i);
        while (q.push(it) == 0) q.take_half([&](Item* old) { items.take(old); });  // to the injector, run at once
      }
      while (Item* it = q.pop()) items.take(it);
    } else {
      thief(q, stolen, items);
    }
  }
};

// Two thieves and the owner at once.
struct TwoThieves : rl::test_suite<TwoThieves, 3> {
  Queue q, stolen1, stolen2;
  Items<3> items;
  void before() { items.before(); }
  void after() { items.check(); }
  void thread(unsigned id) {
    if (id == 0) {
      owner(q, items, 3);
    } else {
      thief(q, id == 1 ? stolen1 : stolen2, items);
    }
  }
};

// A thief's own queue is a victim too: what it stole is published to the
// next thief by its own tail store (steal_into's release into `dst`).
struct StolenItemsStolenAgain : rl::test_suite<StolenItemsStolenAgain, 3> {
  Queue q, mine, theirs;
  Items<3> items;
  void before() { items.before(); }
  void after() { items.check(); }
  void thread(unsigned id) {
    if (id == 0) {
      owner(q, items, 3);
    } else if (id == 1) {
      thief(q, mine, items);
    } else {
      thief(mine, theirs, items);
    }
  }
};

TEST(RelacyStealQueue, PushAndPopRacingASteal) { EXPECT_TRUE(shoal::relacy::check<PushPopVsSteal>("bound")); }
TEST(RelacyStealQueue, OverflowRacingASteal) { EXPECT_TRUE(shoal::relacy::check<OverflowVsSteal>("bound")); }
TEST(RelacyStealQueue, TwoThievesAndTheOwner) { EXPECT_TRUE(shoal::relacy::check<TwoThieves>("bound")); }
TEST(RelacyStealQueue, StolenItemsStolenAgain) { EXPECT_TRUE(shoal::relacy::check<StolenItemsStolenAgain>("bound")); }

}  // namespace
