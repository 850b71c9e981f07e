// Starvation: on one worker, a task that never needs to wait cannot starve a
// timer or a sibling; the cooperative budget hands the worker over. Count
// based: the busy task gives up after a fixed number of operations, and the
// assertions are on what the others managed meanwhile.
#include <chrono>

#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Channel;
using shoal::Scope;
using shoal::Task;

TEST(Starvation, BusyTaskCannotStarveATimerOrASibling) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "starvation");
  constexpr int kSleeps = 10;
  const long max_ops = shoal::test::scaled(20'000'000, 2'000'000);
  int sleeps_done = 0;
  long sibling_runs = 0;
  long busy_ops = 0;
  bool stop = false;
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               s.spawn([&]() -> Task<void> {  // never has to wait: the buffer always has room
                 Channel<int> ch(16);
                 while (!stop && busy_ops < max_ops) {
                   co_await ch.send(1);
                   (void)co_await ch.recv();
                   ++busy_ops;
                 }
               });
               s.spawn([&]() -> Task<void> {
                 while (!stop && sibling_runs < max_ops) {
                   ++sibling_runs;
                   co_await shoal::checkpoint();
                 }
               });
               for (int i = 0; i < kSleeps; ++i) {
                 co_await shoal::sleep_for(1ms);
                 ++sleeps_done;
               }
               stop = true;
             }),
             shoal::RuntimeOptions::with_workers(1));
  EXPECT_EQ(sleeps_done, kSleeps);
  EXPECT_LT(busy_ops, max_ops) << "the timers only fired once the busy task gave up";
  EXPECT_GT(sibling_runs, 0);
}

}  // namespace
