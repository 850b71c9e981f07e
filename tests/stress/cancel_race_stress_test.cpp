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

// Runs `make(rng)` many times on 4 workers: each run ends one of two ways
// (1 or 0, counted as `one` and `zero`), never stuck, every frame freed.
template <class Make>
void race(const char* name, const char* one, const char* zero, Make make) {
  const std::uint64_t seed = shoal::test::test_seed(name);
  std::mt19937_64 rng(seed);
  shoal::test::FrameCounter frames;
  shoal::test::Watchdog dog(std::chrono::seconds(300), name);
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(4));
  long outcomes[2] = {0, 0};
  const long iterations = shoal::test::scaled(20000, 200);
  for (long i = 0; i < iterations; ++i) {
    const int r = rt.block_on(make(rng));
    ASSERT_TRUE(r == 0 || r == 1) << "the run never finished; iteration " << i << " seed " << seed;
    ++outcomes[r];
    ASSERT_EQ(frames.live(), 0) << "iteration " << i << " seed " << seed;
  }
  std::printf("%s %ld, %s %ld\n", one, outcomes[1], zero, outcomes[0]);
}

int below(std::mt19937_64& rng, int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); }

TEST(CancelRaceStress, EventWakeRacesScopeCancel) {
  race("CancelRaceStress.EventWakeRacesScopeCancel", "woken", "cancelled", [](std::mt19937_64& rng) {
    const int set_after = below(rng, 4);
    return wake_vs_cancel(set_after, below(rng, 4), false);
  });
}
TEST(CancelRaceStress, JoinWakeRacesScopeCancel) {
  race("CancelRaceStress.JoinWakeRacesScopeCancel", "woken", "cancelled", [](std::mt19937_64& rng) {
    const int set_after = below(rng, 4);
    return wake_vs_cancel(set_after, below(rng, 4), true);
  });
}

// JoinHandle::cancel() against the child finishing on another worker: the
// canceller must never use the child's record after it went with the frame
// (ASan, TSan), and the awaiter gets the value or ChildCancelled.
Task<int> handle_cancel_vs_finish(int finish_after, int cancel_after) {
  int result = -1;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    auto h = s.start([finish_after]() -> Task<int> {
      co_await spin(finish_after);
      co_return 1;
    });
    co_await spin(cancel_after);
    h.cancel();
    try {
      result = co_await h;
    } catch (const shoal::ChildCancelled&) {
      result = 0;
    }
  });
  co_return result;
}

TEST(CancelRaceStress, HandleCancelRacesTheChildFinishing) {
  race("CancelRaceStress.HandleCancelRacesTheChildFinishing", "finished first", "cancelled",
       [](std::mt19937_64& rng) {
         const int finish_after = below(rng, 3);
         return handle_cancel_vs_finish(finish_after, below(rng, 3));
       });
}

}  // namespace
