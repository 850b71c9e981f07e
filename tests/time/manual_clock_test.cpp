// The manual clock (RuntimeOptions::simulated): time stands still while a
// task can run and jumps to the earliest timer when all wait.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;

template <class T>
T simulate(Task<T> t, std::uint64_t seed = 1) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "ManualClock");
  return shoal::run(std::move(t), shoal::RuntimeOptions::simulated(seed));
}

TEST(ManualClock, AnHourLongSleepAdvancesVirtualTimeByExactlyAnHour) {
  const auto real0 = std::chrono::steady_clock::now();
  auto elapsed = simulate([]() -> Task<shoal::Clock::duration> {
    const auto t0 = shoal::now();
    co_await shoal::sleep_for(1h);
    co_return shoal::now() - t0;
  }());
  EXPECT_EQ(elapsed, std::chrono::duration_cast<shoal::Clock::duration>(1h));
  EXPECT_LT(std::chrono::steady_clock::now() - real0, 10min);  // it did not really sleep
}

TEST(ManualClock, TimeStandsStillWhileTasksCanRun) {
  auto moved = simulate([]() -> Task<bool> {
    const auto t0 = shoal::now();
    for (int i = 0; i < 1000; ++i) co_await shoal::checkpoint();
    co_return shoal::now() != t0;
  }());
  EXPECT_FALSE(moved);
}

TEST(ManualClock, SleepersWakeInDeadlineOrderAtTheirExactDeadline) {
  struct Wake {
    int id;
    shoal::Clock::duration at;
  };
  auto wakes = simulate([]() -> Task<std::vector<Wake>> {
    std::vector<Wake> out;
    const auto t0 = shoal::now();
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      for (int id : {5, 1, 4, 2, 3}) {
        s.spawn([&out, t0, id]() -> Task<void> {
          co_await shoal::sleep_for(std::chrono::milliseconds(id * 10));
          out.push_back({id, shoal::now() - t0});
        });
      }
      co_return;
    });
    co_return out;
  }());
  ASSERT_EQ(wakes.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(wakes[static_cast<std::size_t>(i)].id, i + 1);
    EXPECT_EQ(wakes[static_cast<std::size_t>(i)].at, std::chrono::milliseconds((i + 1) * 10));
  }
}

TEST(ManualClock, DeadlineFiresAtExactlyItsVirtualTime) {
  auto r = simulate([]() -> Task<std::pair<bool, shoal::Clock::duration>> {
    shoal::Channel<int> never(1);
    const auto t0 = shoal::now();
    bool timed_out = false;
    try {
      co_await shoal::with_timeout(250ms, [&]() -> Task<void> { (void)co_await never.recv(); }());
    } catch (const shoal::TimedOut&) {
      timed_out = true;
    }
    co_return std::pair{timed_out, shoal::now() - t0};
  }());
  EXPECT_TRUE(r.first);
  EXPECT_EQ(r.second, std::chrono::duration_cast<shoal::Clock::duration>(250ms));
}

TEST(ManualClock, BlockingWorkInFlightHoldsTheClock) {
  // The job takes real time; a sleeper beside it must not wake "early" just
  // because the executor has nothing else to run.
  auto job_done_when_sleeper_woke = simulate([]() -> Task<bool> {
    std::atomic<bool> job_done{false};
    bool seen = false;
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        co_await shoal::spawn_blocking([&] {
          std::this_thread::sleep_for(20ms);
          job_done.store(true);
        });
      });
      s.spawn([&]() -> Task<void> {
        co_await shoal::sleep_for(1ms);
        seen = job_done.load();
      });
      co_return;
    });
    co_return seen;
  }());
  EXPECT_TRUE(job_done_when_sleeper_woke);
}

std::vector<std::pair<int, long>> trace(std::uint64_t seed) {
  return simulate(
      []() -> Task<std::vector<std::pair<int, long>>> {
        std::vector<std::pair<int, long>> out;
        const auto t0 = shoal::now();
        co_await shoal::scope([&](Scope& s) -> Task<void> {
          for (int id = 0; id < 8; ++id) {
            s.spawn([&out, t0, id]() -> Task<void> {
              for (int k = 0; k < 4; ++k) {
                co_await shoal::sleep_for(std::chrono::microseconds((id * 7 + k * 3) % 5));
                out.emplace_back(id, static_cast<long>((shoal::now() - t0).count()));
              }
            });
          }
          co_return;
        });
        co_return out;
      }(),
      seed);
}

TEST(ManualClock, SameSeedReproducesTimersAndScheduleExactly) {
  for (std::uint64_t seed : {3u, 9u, 12345u}) {
    auto a = trace(seed);
    EXPECT_EQ(a.size(), 32u);
    EXPECT_EQ(a, trace(seed)) << "seed " << seed;
  }
}

TEST(ManualClock, RequiresTheDeterministicExecutor) {
  shoal::RuntimeOptions o;
  o.manual_clock = true;
  try {
    shoal::Runtime rt(std::move(o));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("manual_clock requires deterministic_seed"), std::string::npos) << e.what();
  }
}

TEST(ManualClock, NowIsTheSteadyClockOutsideARuntime) {
  const auto a = std::chrono::steady_clock::now();
  const auto b = shoal::now();
  EXPECT_GE(b, a);
}

}  // namespace
