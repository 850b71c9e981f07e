// The deterministic executor: one worker, ready queue shuffled by a seed.
#include <mutex>
#include <vector>

#include "support/test_support.hpp"

namespace {

using shoal::Task;

std::vector<int> trace_for(std::uint64_t seed) {
  std::vector<int> trace;
  shoal::run(shoal::scope([&](shoal::Scope& s) -> Task<void> {
               for (int i = 0; i < 16; ++i) {
                 s.spawn([&trace, i]() -> Task<void> {
                   for (int step = 0; step < 4; ++step) {
                     trace.push_back(i * 10 + step);
                     co_await shoal::checkpoint();
                   }
                 });
               }
               co_return;
             }),
             shoal::RuntimeOptions::deterministic(seed));
  return trace;
}

TEST(DeterministicExecutor, SameSeedGivesTheSameTrace) {
  for (std::uint64_t seed : {1u, 2u, 77u}) {
    auto a = trace_for(seed);
    auto b = trace_for(seed);
    EXPECT_EQ(a.size(), 64u);
    EXPECT_EQ(a, b) << "seed " << seed;
  }
}

TEST(DeterministicExecutor, DifferentSeedsShuffleTheSchedule) {
  auto a = trace_for(1);
  int differing = 0;
  for (std::uint64_t seed = 2; seed < 6; ++seed) differing += trace_for(seed) != a ? 1 : 0;
  EXPECT_GT(differing, 0);
}

TEST(DeterministicExecutor, UsesOneWorker) {
  shoal::Runtime rt([] { auto o = shoal::RuntimeOptions::deterministic(3); o.workers = 8; return o; }());
  EXPECT_EQ(rt.worker_count(), 1u);
}

}  // namespace
