// Deadlines (with_timeout, move_on_after), shielded, finally.
#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "support/manual_event.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;

SHOAL_TEST_SUITE(TimeoutTest);

struct Cleanup {
  std::atomic<int>* n;
  ~Cleanup() { n->fetch_add(1); }
};

Task<int> blocked_forever(shoal::test::ManualEvent& ev, std::atomic<int>& cleaned) {
  Cleanup c{&cleaned};
  co_await ev.wait();
  co_return 1;
}

SHOAL_TEST(TimeoutTest, WithTimeoutThrowsTimedOutAfterTheWorkUnwound) {
  shoal::test::ManualEvent never;
  std::atomic<int> cleaned{0};
  bool timed_out = false;
  try {
    (void)co_await shoal::with_timeout(10ms, blocked_forever(never, cleaned));
  } catch (const shoal::TimedOut& e) {
    timed_out = true;
    EXPECT_EQ(cleaned.load(), 1) << "the cut-off work had not unwound";
    EXPECT_NE(std::string(e.what()).find("10 ms"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(timed_out);
}

SHOAL_TEST(TimeoutTest, WithTimeoutReachesChildrenOfNestedScopes) {
  shoal::test::ManualEvent never;
  std::atomic<int> cleaned{0};
  EXPECT_THROW(co_await shoal::with_timeout(10ms, shoal::scope([&](Scope& s) -> Task<void> {
                 for (int i = 0; i < 8; ++i) s.spawn([&]() -> Task<void> { (void)co_await blocked_forever(never, cleaned); });
                 co_await never.wait();
               })),
               shoal::TimedOut);
  EXPECT_EQ(cleaned.load(), 8);
}

SHOAL_TEST(TimeoutTest, MoveOnAfterReturnsEmptyWhenCutOff) {
  shoal::test::ManualEvent never;
  std::atomic<int> cleaned{0};
  std::optional<int> r = co_await shoal::move_on_after(5ms, blocked_forever(never, cleaned));
  EXPECT_FALSE(r.has_value());
  EXPECT_EQ(cleaned.load(), 1);
}

SHOAL_TEST(TimeoutTest, MoveOnAfterVoidReportsCompletion) {
  bool done = co_await shoal::move_on_after(1s, []() -> Task<void> { co_return; }());
  EXPECT_TRUE(done);
  bool cut = co_await shoal::move_on_after(1ms, []() -> Task<void> { co_await shoal::sleep_for(1h); }());
  EXPECT_FALSE(cut);
}

SHOAL_TEST(TimeoutTest, ValueBeforeTheDeadlineIsReturned) {
  int v = co_await shoal::with_timeout(1s, []() -> Task<int> {
    co_await shoal::sleep_for(1ms);
    co_return 42;
  }());
  EXPECT_EQ(v, 42);
}

SHOAL_TEST(TimeoutTest, CompletionBeatsALateDeadline) {
  // The task ignores cancellation and finishes after its deadline: its value wins.
  int v = co_await shoal::with_timeout(1ms, []() -> Task<int> {
    const auto until = shoal::Clock::now() + 20ms;
    while (shoal::Clock::now() < until) {
    }
    co_return 7;
  }());
  EXPECT_EQ(v, 7);
}

SHOAL_TEST(TimeoutTest, FaultsPassThroughUnchanged) {
  EXPECT_THROW(co_await shoal::with_timeout(1s, []() -> Task<void> {
                 throw std::invalid_argument("bad");
                 co_return;
               }()),
               std::invalid_argument);
}

SHOAL_TEST(TimeoutTest, OuterCancellationIsNotReportedAsATimeout) {
  shoal::test::ManualEvent never;
  std::atomic<int> cleaned{0};
  bool saw_cancelled = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await shoal::sleep_for(2ms);
      s.cancel();
    });
    try {
      (void)co_await shoal::with_timeout(1h, blocked_forever(never, cleaned));
    } catch (const shoal::Cancelled&) {
      saw_cancelled = true;
      throw;
    }
  });
  EXPECT_TRUE(saw_cancelled);
}

SHOAL_TEST(TimeoutTest, NestedDeadlinesTheShorterWins) {
  shoal::test::ManualEvent never;
  std::atomic<int> cleaned{0};
  EXPECT_THROW((void)co_await shoal::move_on_after(1h, shoal::with_timeout(5ms, blocked_forever(never, cleaned))),
               shoal::TimedOut);
  EXPECT_EQ(cleaned.load(), 1);
}

SHOAL_TEST(TimeoutTest, ShieldedWorkIgnoresAnOuterCancel) {
  int after_shield_checkpoint_threw = 0;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.cancel();
    int v = co_await shoal::shielded([]() -> Task<int> {
      co_await shoal::sleep_for(1ms);  // would throw if the cancel reached us
      co_await shoal::checkpoint();
      co_return 3;
    }());
    EXPECT_EQ(v, 3);
    try {
      co_await shoal::checkpoint();
    } catch (const shoal::Cancelled&) {
      ++after_shield_checkpoint_threw;
      throw;
    }
  });
  EXPECT_EQ(after_shield_checkpoint_threw, 1);
}

SHOAL_TEST(TimeoutTest, FinallyRunsCleanupUnderCancellationAndRethrows) {
  shoal::test::ManualEvent never;
  std::atomic<int> cleaned{0};
  bool cleanup_finished = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await shoal::sleep_for(2ms);
      s.cancel();
    });
    (void)co_await shoal::finally(blocked_forever(never, cleaned), [&]() -> Task<void> {
      co_await shoal::sleep_for(1ms);  // an async cleanup step, shielded
      cleanup_finished = true;
    }());
    ADD_FAILURE() << "finally did not rethrow the cancellation";
  });
  EXPECT_TRUE(cleanup_finished);
  EXPECT_EQ(cleaned.load(), 1);
}

SHOAL_TEST(TimeoutTest, FinallyRethrowsTheTaskFault) {
  bool cleaned = false;
  EXPECT_THROW(co_await shoal::finally([]() -> Task<void> {
                 throw std::runtime_error("task");
                 co_return;
               }(),
                                       [&]() -> Task<void> {
                                         cleaned = true;
                                         co_return;
                                       }()),
               std::runtime_error);
  EXPECT_TRUE(cleaned);
}

}  // namespace
