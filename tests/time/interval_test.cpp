// Interval on the manual clock: ticks one period apart, and what a late tick
// does to the rest (burst, delay, skip).
#include <vector>

#include "shoal/time/interval.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Task;
using Ms = std::chrono::milliseconds;

template <class T>
T simulate(Task<T> t) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "Interval");
  return shoal::run(std::move(t), shoal::RuntimeOptions::simulated(1));
}

Ms since(shoal::Clock::time_point t0, shoal::Clock::time_point t) { return std::chrono::duration_cast<Ms>(t - t0); }

// Ticks, with one 350 ms stall after the first; returns when each tick was
// due and when it was seen, relative to the start.
Task<std::vector<std::pair<Ms, Ms>>> stalled_ticks(shoal::MissedTick missed) {
  const auto t0 = shoal::now();
  shoal::Interval every(100ms, missed);
  std::vector<std::pair<Ms, Ms>> out;
  for (int i = 0; i < 6; ++i) {
    const auto due = co_await every.tick();
    out.emplace_back(since(t0, due), since(t0, shoal::now()));
    if (i == 0) co_await shoal::sleep_for(350ms);
  }
  co_return out;
}

TEST(Interval, TicksArePeriodApartAndTheFirstIsDueAtOnce) {
  auto ticks = simulate([]() -> Task<std::vector<Ms>> {
    const auto t0 = shoal::now();
    shoal::Interval every(25ms);
    std::vector<Ms> out;
    for (int i = 0; i < 4; ++i) out.push_back(since(t0, co_await every.tick()));
    co_return out;
  }());
  EXPECT_EQ(ticks, (std::vector<Ms>{0ms, 25ms, 50ms, 75ms}));
}

TEST(Interval, BurstFiresTheMissedTicksAtOnceThenKeepsTheSchedule) {
  auto t = simulate(stalled_ticks(shoal::MissedTick::burst));
  // due 100, 200, 300 are all seen at 350; then 400 and 500 on time.
  EXPECT_EQ(t[1], std::make_pair(Ms(100), Ms(350)));
  EXPECT_EQ(t[2], std::make_pair(Ms(200), Ms(350)));
  EXPECT_EQ(t[3], std::make_pair(Ms(300), Ms(350)));
  EXPECT_EQ(t[4], std::make_pair(Ms(400), Ms(400)));
  EXPECT_EQ(t[5], std::make_pair(Ms(500), Ms(500)));
}

TEST(Interval, DelayMovesTheScheduleToOnePeriodAfterTheLateTick) {
  auto t = simulate(stalled_ticks(shoal::MissedTick::delay));
  EXPECT_EQ(t[1], std::make_pair(Ms(100), Ms(350)));
  EXPECT_EQ(t[2], std::make_pair(Ms(450), Ms(450)));
  EXPECT_EQ(t[3], std::make_pair(Ms(550), Ms(550)));
}

TEST(Interval, SkipDropsTheMissedTicksAndKeepsTheOriginalSchedule) {
  auto t = simulate(stalled_ticks(shoal::MissedTick::skip));
  EXPECT_EQ(t[1], std::make_pair(Ms(100), Ms(350)));
  EXPECT_EQ(t[2], std::make_pair(Ms(400), Ms(400)));
  EXPECT_EQ(t[3], std::make_pair(Ms(500), Ms(500)));
}

TEST(Interval, ACancelledTickIsNotConsumed) {
  auto due = simulate([]() -> Task<Ms> {
    const auto t0 = shoal::now();
    shoal::Interval every(100ms);
    (void)co_await every.tick();  // 0
    auto r = co_await shoal::move_on_after(50ms, every.tick());
    EXPECT_FALSE(r.has_value());
    co_return since(t0, co_await every.tick());
  }());
  EXPECT_EQ(due, 100ms);
}

}  // namespace
