// Timers: sleeping, cancellation of sleeps, many concurrent sleepers.
#include <atomic>
#include <chrono>
#include <random>

#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;

SHOAL_TEST_SUITE(SleepTest);

SHOAL_TEST(SleepTest, SleepsAtLeastTheDuration) {
  const auto t0 = shoal::Clock::now();
  co_await shoal::sleep_for(20ms);
  EXPECT_GE(shoal::Clock::now() - t0, 20ms);
}

SHOAL_TEST(SleepTest, PastDeadlineStillYields) {
  std::atomic<int> sibling_ran{0};
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      sibling_ran.fetch_add(1);
      co_return;
    });
    // On one worker the sibling can only run if the sleep yields (if it did
    // not, this loop would spin until the watchdog fails the test). On more
    // workers a thief may hold the sibling while the OS preempts it (2 cores,
    // 4 workers), so no bound on the count: the loop ends when it has run.
    while (sibling_ran.load() == 0) co_await shoal::sleep_until(shoal::Clock::now() - 1s);
    EXPECT_EQ(sibling_ran.load(), 1);
  });
}

SHOAL_TEST(SleepTest, CancelledSleepThrowsPromptly) {
  std::atomic<bool> sleeping{false};
  bool cancelled = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      sleeping.store(true);
      try {
        co_await shoal::sleep_for(1h);
      } catch (const shoal::Cancelled&) {
        cancelled = true;
        throw;
      }
    });
    while (!sleeping.load()) co_await shoal::checkpoint();
    co_await shoal::sleep_for(1ms);  // let it actually block on the timer
    s.cancel();
    co_return;
  });
  EXPECT_TRUE(cancelled);
}

SHOAL_TEST(SleepTest, SleepInACancelledScopeThrowsWithoutWaiting) {
  bool threw = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.cancel();
    try {
      co_await shoal::sleep_for(1h);
    } catch (const shoal::Cancelled&) {
      threw = true;
      throw;
    }
  });
  EXPECT_TRUE(threw);
}

TEST(SleepMany, HundredThousandSleepersAllWakeAndFreeTheirFrames) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "100k sleepers");
  shoal::test::FrameCounter frames;
  const long n = shoal::test::scaled(100'000, 2'000);
  std::atomic<long> woke{0};
  std::mt19937 rng(7);
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
    for (long i = 0; i < n; ++i) {
      const auto d = std::chrono::microseconds(rng() % 50'000);
      s.spawn([&woke, d]() -> Task<void> {
        co_await shoal::sleep_for(d);
        woke.fetch_add(1, std::memory_order_relaxed);
      });
    }
    co_return;
  }));
  EXPECT_EQ(woke.load(), n);
  EXPECT_EQ(frames.live(), 0);
}

TEST(SleepMany, CancellingManySleepersRemovesEveryTimer) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "cancel sleepers");
  const long n = shoal::test::scaled(20'000, 500);
  std::atomic<long> started{0}, cancelled{0};
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
    for (long i = 0; i < n; ++i) {
      s.spawn([&]() -> Task<void> {
        started.fetch_add(1);
        try {
          co_await shoal::sleep_for(1h + std::chrono::microseconds(started.load()));
        } catch (const shoal::Cancelled&) {
          cancelled.fetch_add(1);
          throw;
        }
      });
    }
    while (started.load() < n) co_await shoal::checkpoint();
    s.cancel();
    co_return;
  }), shoal::RuntimeOptions::with_workers(2));
  EXPECT_EQ(cancelled.load(), n);
}

}  // namespace
