// Cooperative cancellation: checkpoints, the non-suspending query,
// level-triggered delivery, and which scope absorbs what.
#include <atomic>
#include <stdexcept>
#include <thread>

#include "support/manual_event.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::Scope;
using shoal::Task;

SHOAL_TEST_SUITE(CancelTest);

static_assert(!std::is_base_of_v<std::exception, shoal::Cancelled>);

// Needs a second worker: the loop never yields, so on one worker the
// faulting sibling could not run until the loop ended.
TEST(CancelQuery, ComputeLoopPollingTheFlagStopsAfterASiblingFaults) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "compute loop");
  constexpr long kEnd = 1'000'000'000'000L;
  std::atomic<long> iterations{0};
  std::atomic<bool> started{false};
  EXPECT_THROW(shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
                            s.spawn([&]() -> Task<void> {
                              started.store(true);
                              long i = 0;
                              while (i < kEnd && !shoal::this_task::cancellation_requested()) ++i;
                              iterations.store(i);
                              co_return;
                            });
                            s.spawn([&]() -> Task<void> {
                              while (!started.load()) co_await shoal::checkpoint();
                              throw std::runtime_error("sibling");
                            });
                            co_return;
                          }),
                          shoal::RuntimeOptions::with_workers(4)),
               std::runtime_error);
  EXPECT_LT(iterations.load(), kEnd);
}

SHOAL_TEST(CancelTest, StdExceptionHandlerDoesNotCatchCancelled) {
  bool std_handler_ran = false;
  bool cancelled_seen = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.cancel();
    try {
      co_await shoal::checkpoint();
    } catch (const std::exception&) {
      std_handler_ran = true;
    } catch (const shoal::Cancelled&) {
      cancelled_seen = true;
      throw;
    }
  });
  EXPECT_FALSE(std_handler_ran);
  EXPECT_TRUE(cancelled_seen);
}

SHOAL_TEST(CancelTest, SwallowedCancelIsDeliveredAgainAtTheNextCheckpoint) {
  int delivered = 0;
  shoal::test::ManualEvent never;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.cancel();
    try {
      co_await shoal::checkpoint();
    } catch (...) {
      ++delivered;  // swallowed
    }
    try {
      co_await never.wait();
    } catch (...) {
      ++delivered;
      EXPECT_TRUE(shoal::is_cancellation(std::current_exception()));
      throw;
    }
  });
  EXPECT_EQ(delivered, 2);
}

SHOAL_TEST(CancelTest, InnerScopeCancelDoesNotCancelTheOuter) {
  co_await shoal::scope([&](Scope& outer) -> Task<void> {
    co_await shoal::scope([&](Scope& inner) -> Task<void> {
      inner.cancel();
      co_await shoal::checkpoint();
    });
    EXPECT_FALSE(outer.cancellation_requested());
    EXPECT_FALSE(shoal::this_task::cancellation_requested());
    co_await shoal::checkpoint();  // must not throw
  });
}

SHOAL_TEST(CancelTest, ForeignCancelPassesThroughAnInnerScope) {
  bool inner_saw_cancel = false;
  co_await shoal::scope([&](Scope& outer) -> Task<void> {
    try {
      co_await shoal::scope([&](Scope&) -> Task<void> {
        outer.cancel();
        co_await shoal::checkpoint();
      });
    } catch (const shoal::Cancelled&) {
      inner_saw_cancel = true;  // the inner scope did not absorb it
      throw;
    }
  });
  EXPECT_TRUE(inner_saw_cancel);
}

SHOAL_TEST(CancelTest, ScopeWhoseChildrenAnOutsideCancelCutOffExitsWithCancelled) {
  // The inner body finishes without a checkpoint; only its child is cut off.
  // Returning normally would let the caller take that for completion.
  bool child_finished = false, inner_exit_threw = false;
  shoal::test::ManualEvent child_waiting;
  co_await shoal::scope([&](Scope& outer) -> Task<void> {
    try {
      co_await shoal::scope([&](Scope& inner) -> Task<void> {
        inner.spawn([&]() -> Task<void> {
          shoal::Channel<int> never(1);
          child_waiting.set();
          (void)co_await never.recv();
          child_finished = true;
        });
        co_await child_waiting.wait();
        outer.cancel();
      });
    } catch (const shoal::Cancelled&) {
      inner_exit_threw = true;
      throw;
    }
  });
  EXPECT_FALSE(child_finished);
  EXPECT_TRUE(inner_exit_threw);
}

SHOAL_TEST(CancelTest, EnteringAScopeInACancelledContextThrows) {
  bool body_ran = false;
  co_await shoal::scope([&](Scope& outer) -> Task<void> {
    outer.cancel();
    co_await shoal::scope([&](Scope&) -> Task<void> {
      body_ran = true;
      co_return;
    });
  });
  EXPECT_FALSE(body_ran);
}

SHOAL_TEST(CancelTest, ChildSpawnedIntoACancelledScopeThrowsAtItsFirstCheckpoint) {
  bool after_checkpoint = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.cancel();
    s.spawn([&]() -> Task<void> {
      co_await shoal::checkpoint();
      after_checkpoint = true;
    });
    co_return;
  });
  EXPECT_FALSE(after_checkpoint);
}

SHOAL_TEST(CancelTest, AwaitingAHandleInACancelledScopeThrows) {
  bool threw = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    auto h = s.start([]() -> Task<int> { co_return 1; });
    s.cancel();
    try {
      (void)co_await h;
    } catch (const shoal::Cancelled&) {
      threw = true;
      throw;
    }
  });
  EXPECT_TRUE(threw);
}

SHOAL_TEST(CancelTest, HandleWaiterIsWokenByCancellation) {
  shoal::test::ManualEvent never;
  std::atomic<bool> waiting{false};
  bool threw = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    auto h = s.start([&]() -> Task<int> {
      co_await never.wait();
      co_return 1;
    });
    s.spawn([&]() -> Task<void> {
      while (!waiting.load()) co_await shoal::checkpoint();
      s.cancel();
    });
    waiting.store(true);
    try {
      (void)co_await h;
    } catch (const shoal::Cancelled&) {
      threw = true;
      throw;
    }
  });
  EXPECT_TRUE(threw);
}

TEST(CancelQuery, IsFalseOutsideATask) { EXPECT_FALSE(shoal::this_task::cancellation_requested()); }

TEST(CancelQuery, IsCancellationRecognizesOnlyCancelled) {
  EXPECT_TRUE(shoal::is_cancellation(std::make_exception_ptr(shoal::Cancelled{})));
  EXPECT_FALSE(shoal::is_cancellation(std::make_exception_ptr(std::runtime_error("x"))));
  EXPECT_FALSE(shoal::is_cancellation(std::exception_ptr{}));
}

}  // namespace
