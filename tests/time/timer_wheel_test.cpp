// The timing wheel against a reference: random deadlines from a nanosecond
// to years ahead, random cancels and random steps of time. At every step the
// wheel hands over exactly the entries whose deadline has passed (none
// early, none left behind), and its next deadline is never later than the
// earliest entry it holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "src/runtime/driver/time/timer_wheel.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::detail::TimerEntry;
using shoal::detail::TimerWheel;

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kStart = 1'000'000 * kMs;  // an arbitrary steady-clock reading

std::int64_t earliest(const std::vector<TimerEntry>& entries, const std::vector<bool>& live) {
  std::int64_t m = TimerWheel::kNever;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (live[i]) m = std::min(m, entries[i].deadline);
  }
  return m;
}

TEST(TimerWheel, HandsOverExactlyTheDueEntriesAtEveryStep) {
  const std::uint64_t seed = shoal::test::test_seed("TimerWheel.HandsOverExactlyTheDueEntriesAtEveryStep");
  std::mt19937_64 rng(seed);
  constexpr std::size_t kEntries = 4000;
  std::vector<TimerEntry> entries(kEntries);
  std::vector<bool> live(kEntries, false);
  TimerWheel wheel(kStart);
  std::int64_t now = kStart;
  std::size_t filed = 0, fired = 0, cancelled = 0;
  // Spans: within a tick, a few ticks, seconds, hours, years (past the wheel's range).
  const std::int64_t spans[] = {kMs / 3, 5 * kMs, 3000 * kMs, 3'600'000 * kMs, std::int64_t{1} << 62};
  auto file_one = [&](std::size_t i) {
    const std::int64_t span = spans[rng() % std::size(spans)];
    entries[i].deadline = now - kMs + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(span));
    wheel.insert(&entries[i]);
    live[i] = true;
    ++filed;
  };
  for (std::size_t i = 0; i < kEntries / 2; ++i) file_one(i);
  std::size_t next_new = kEntries / 2;
  for (int step = 0; step < 20000 && (wheel.size() != 0 || next_new < kEntries); ++step) {
    ASSERT_LE(wheel.next_deadline(), earliest(entries, live)) << "seed " << seed << ", step " << step;
    const int what = static_cast<int>(rng() % 10);
    if (what < 2 && next_new < kEntries) {
      file_one(next_new++);
    } else if (what < 3) {
      const std::size_t i = rng() % kEntries;
      if (live[i]) {
        wheel.remove(&entries[i]);
        live[i] = false;
        ++cancelled;
      }
    } else {
      // Move time on: to the wheel's next deadline, a little, or a lot.
      const std::int64_t next = wheel.next_deadline();
      const int how = static_cast<int>(rng() % 4);
      if (how == 0 && next != TimerWheel::kNever) {
        now = std::max(now, next);
      } else if (how == 3) {
        now += static_cast<std::int64_t>(rng() % (std::uint64_t{1} << 50));
      } else {
        now += static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(3 * kMs));
      }
      TimerEntry* out[16];
      for (;;) {
        const std::size_t n = wheel.take_due(now, out, std::size(out));
        for (std::size_t k = 0; k < n; ++k) {
          const auto i = static_cast<std::size_t>(out[k] - entries.data());
          ASSERT_TRUE(live[i]) << "an entry was handed over twice or after its cancel; seed " << seed;
          ASSERT_LE(out[k]->deadline, now) << "handed over early; seed " << seed;
          live[i] = false;
          ++fired;
        }
        if (n < std::size(out)) break;
      }
      for (std::size_t i = 0; i < kEntries; ++i) {
        ASSERT_FALSE(live[i] && entries[i].deadline <= now) << "a due entry was left behind; seed " << seed;
      }
    }
  }
  EXPECT_EQ(filed, fired + cancelled + wheel.size());
  EXPECT_GT(fired, kEntries / 4);
}

TEST(TimerWheel, NextDeadlineIsExactOnceItsTickHasBegun) {
  TimerWheel wheel(kStart);
  TimerEntry a, b;
  a.deadline = kStart + 40 * kMs + 123;
  b.deadline = kStart + 40 * kMs + 456;
  wheel.insert(&a);
  wheel.insert(&b);
  const std::int64_t first = wheel.next_deadline();
  EXPECT_LE(first, a.deadline);
  TimerEntry* out[4];
  EXPECT_EQ(wheel.take_due(first, out, 4), first >= a.deadline ? 1u : 0u);
  if (first < a.deadline) {
    EXPECT_EQ(wheel.next_deadline(), a.deadline) << "the manual clock would not land on the deadline";
    ASSERT_EQ(wheel.take_due(a.deadline, out, 4), 1u);
    EXPECT_EQ(out[0], &a);
  }
  EXPECT_EQ(wheel.next_deadline(), b.deadline);
  ASSERT_EQ(wheel.take_due(b.deadline, out, 4), 1u);
  EXPECT_EQ(out[0], &b);
  EXPECT_EQ(wheel.next_deadline(), TimerWheel::kNever);
}

TEST(TimerWheel, EqualDeadlinesFireInTheOrderTheyWereFiled) {
  TimerWheel wheel(kStart);
  std::vector<TimerEntry> entries(10);
  for (auto& e : entries) {
    e.deadline = kStart + 7 * kMs;
    wheel.insert(&e);
  }
  TimerEntry* out[16];
  ASSERT_EQ(wheel.take_due(kStart + 7 * kMs, out, 16), entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) EXPECT_EQ(out[i], &entries[i]);
}

TEST(TimerWheel, ADeadlineAlreadyPastIsDueAtTheNextLook) {
  TimerWheel wheel(kStart);
  TimerEntry* out[4];
  EXPECT_EQ(wheel.take_due(kStart + 100 * kMs, out, 4), 0u);  // time moves on with nothing filed
  TimerEntry late;
  late.deadline = kStart;  // before the wheel's present
  wheel.insert(&late);
  EXPECT_LE(wheel.next_deadline(), kStart + 100 * kMs);
  ASSERT_EQ(wheel.take_due(kStart + 100 * kMs, out, 4), 1u);
  EXPECT_EQ(out[0], &late);
}

}  // namespace
