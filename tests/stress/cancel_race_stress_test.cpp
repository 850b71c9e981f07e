// Races between a wake and a cancellation of the same wait. Every run must
// finish (watchdog), deliver each wake exactly once, and free every frame.
// (Hand-offs while workers park and unpark: lost_wakeup_stress_test.cpp.)
#include <atomic>
#include <memory>
#include <random>

#include "support/frame_counter.hpp"
#include "support/manual_event.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::Scope;
using shoal::Task;

Task<void> spin(int n) {
  for (int i = 0; i < n; ++i) co_await shoal::checkpoint();
}

// The waiter ends exactly one way: woken (1) or cancelled (0); never stuck.
Task<int> wake_vs_cancel(int set_after, int cancel_after, bool via_handle) {
  auto ev = std::make_shared<shoal::test::ManualEvent>();
  int result = -1;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    if (via_handle) {
      // The waiter joins a child that waits on the event.
      auto h = s.start([ev]() -> Task<int> {
        co_await ev->wait();
        co_return 1;
      });
      s.spawn([&result, h = std::move(h)]() mutable -> Task<void> {
        try {
          result = co_await h;
        } catch (const shoal::Cancelled&) {
          result = 0;
          throw;
        }
      });
    } else {
      s.spawn([ev, &result]() -> Task<void> {
        try {
          co_await ev->wait();
          result = 1;
        } catch (const shoal::Cancelled&) {
          result = 0;
          throw;
        }
      });
    }
    s.spawn([ev, set_after]() -> Task<void> {
      co_await spin(set_after);
      ev->set();
    });
    s.spawn([&s, cancel_after]() -> Task<void> {
      co_await spin(cancel_after);
      s.cancel();
    });
    co_return;
  });
  co_return result;
}

void race(bool via_handle, const char* name) {
  const std::uint64_t seed = shoal::test::test_seed(name);
  std::mt19937_64 rng(seed);
  shoal::test::FrameCounter frames;
  shoal::test::Watchdog dog(std::chrono::seconds(300), name);
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(4));
  long outcomes[2] = {0, 0};
  const long iterations = shoal::test::scaled(20000, 200);
  for (long i = 0; i < iterations; ++i) {
    const int r = rt.block_on(wake_vs_cancel(static_cast<int>(rng() % 4), static_cast<int>(rng() % 4), via_handle));
    ASSERT_TRUE(r == 0 || r == 1) << "waiter never finished; iteration " << i << " seed " << seed;
    ++outcomes[r];
    ASSERT_EQ(frames.live(), 0) << "iteration " << i << " seed " << seed;
  }
  std::printf("woken %ld, cancelled %ld\n", outcomes[1], outcomes[0]);
}

TEST(CancelRaceStress, EventWakeRacesScopeCancel) { race(false, "CancelRaceStress.EventWakeRacesScopeCancel"); }
TEST(CancelRaceStress, JoinWakeRacesScopeCancel) { race(true, "CancelRaceStress.JoinWakeRacesScopeCancel"); }

}  // namespace
