// StealQueue against its contract, with a uint8_t index so the indices wrap
// every 256 operations: every item pushed is taken exactly once, by the
// owner or by one thief, and FIFO order holds for the owner.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "src/runtime/steal_queue.hpp"
#include "support/test_support.hpp"

namespace {

using Item = int*;

TEST(StealQueueModel, OwnerFifoAcrossIndexWrapAround) {
  shoal::detail::StealQueue<Item, std::uint8_t, 16> q;
  std::vector<int> storage(5000);
  int next_push = 0, next_pop = 0;
  for (int round = 0; round < 1000; ++round) {
    for (int i = 0; i < 1 + round % 16 && next_push < 5000; ++i) {
      if (!q.push(&storage[next_push])) break;
      ++next_push;
    }
    while (Item p = q.pop()) {
      ASSERT_EQ(p, &storage[next_pop]);
      ++next_pop;
    }
  }
  EXPECT_EQ(next_pop, next_push);
  EXPECT_GT(next_push, 256 * 4);
}

TEST(StealQueueModel, FullQueueRefusesAndTakeHalfMovesTheOlderHalf) {
  shoal::detail::StealQueue<Item, std::uint8_t, 8> q;
  int v[9];
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(q.push(&v[i]));
  EXPECT_FALSE(q.push(&v[8]));
  std::vector<Item> moved;
  EXPECT_EQ(q.take_half([&](Item p) { moved.push_back(p); }), 4u);
  ASSERT_EQ(moved.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(moved[i], &v[i]);
  EXPECT_EQ(q.pop(), &v[4]);
}

// Starts every index a little below the uint32 wrap point, so the indices
// wrap during the run (small index types would also let a preempted thief
// hit ABA, which no CAS-on-index queue can rule out; see steal_queue.hpp).
template <std::size_t Cap>
void run_concurrent(std::uint64_t seed, int items, int thieves) {
  using Q = shoal::detail::StealQueue<Item, std::uint32_t, Cap>;
  const std::uint32_t start = 0xFFFFFFFFu - static_cast<std::uint32_t>(items / 2);
  Q owner_q(start);
  std::vector<std::unique_ptr<Q>> thief_q;
  for (int t = 0; t < thieves; ++t) thief_q.push_back(std::make_unique<Q>(start + 12345u * static_cast<std::uint32_t>(t)));
  std::vector<int> storage(items);
  std::vector<std::atomic<int>> taken(items);
  std::atomic<bool> done{false};
  auto take = [&](Item p) { taken[p - storage.data()].fetch_add(1); };
  std::vector<std::thread> ts;
  for (int t = 0; t < thieves; ++t) {
    ts.emplace_back([&, t] {
      while (!done.load()) {
        if (Item p = owner_q.steal_into(*thief_q[t])) {
          take(p);
          while (Item q = thief_q[t]->pop()) take(q);
        }
      }
    });
  }
  std::uint64_t x = seed | 1;
  for (int i = 0; i < items; ++i) {
    while (!owner_q.push(&storage[i])) {
      if (Item p = owner_q.pop()) take(p);
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if (x % 3 == 0) {
      if (Item p = owner_q.pop()) take(p);
    }
  }
  while (Item p = owner_q.pop()) take(p);
  done.store(true);
  for (auto& t : ts) t.join();
  for (int t = 0; t < thieves; ++t) {
    while (Item p = thief_q[t]->pop()) take(p);
  }
  for (int i = 0; i < items; ++i) ASSERT_EQ(taken[i].load(), 1) << "item " << i << " seed " << seed;
}

TEST(StealQueueModel, ConcurrentStealsTakeEveryItemExactlyOnce) {
  const std::uint64_t seed = shoal::test::test_seed("StealQueueModel.ConcurrentSteals");
  const int items = static_cast<int>(shoal::test::scaled(400'000, 5'000));
  run_concurrent<16>(seed, items, 2);
  run_concurrent<256>(seed, items, 3);
}

}  // namespace
