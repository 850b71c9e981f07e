// parallel, race and start_ready.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <variant>

#include "support/manual_event.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;

SHOAL_TEST_SUITE(CombinatorTest);

Task<int> after(std::chrono::milliseconds d, int v) {
  co_await shoal::sleep_for(d);
  co_return v;
}

Task<void> fail_after(std::chrono::milliseconds d, const char* what) {
  co_await shoal::sleep_for(d);
  throw std::runtime_error(what);
}

struct Counted {
  std::atomic<int>* n;
  ~Counted() { n->fetch_add(1); }
};

SHOAL_TEST(CombinatorTest, ParallelReturnsEveryResultInOrder) {
  auto [a, b, c] = co_await shoal::parallel(after(3ms, 1), []() -> Task<void> { co_return; }(), after(1ms, 3));
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, std::monostate{});
  EXPECT_EQ(c, 3);
}

SHOAL_TEST(CombinatorTest, ParallelOverAVector) {
  std::vector<Task<int>> tasks;
  for (int i = 0; i < 50; ++i) tasks.push_back(after(std::chrono::milliseconds(i % 3), i));
  auto r = co_await shoal::parallel(std::move(tasks));
  SHOAL_CO_ASSERT(r.size() == 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(r[i], i);
}

SHOAL_TEST(CombinatorTest, ParallelRethrowsTheFirstFaultAfterCancellingTheRest) {
  shoal::test::ManualEvent never;
  std::atomic<int> unwound{0};
  auto blocked = [&]() -> Task<int> {
    Counted c{&unwound};
    co_await never.wait();
    co_return 0;
  };
  try {
    (void)co_await shoal::parallel(blocked(), fail_after(1ms, "second"), blocked());
    ADD_FAILURE() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "second");
    EXPECT_EQ(unwound.load(), 2) << "losers not awaited before the rethrow";
  }
}

SHOAL_TEST(CombinatorTest, RaceReturnsTheFirstAndAwaitsTheLosers) {
  shoal::test::ManualEvent never;
  std::atomic<int> unwound{0};
  auto loser = [&]() -> Task<int> {
    Counted c{&unwound};
    co_await never.wait();
    co_return -1;
  };
  int v = co_await shoal::race(loser(), after(2ms, 7), loser());
  EXPECT_EQ(v, 7);
  EXPECT_EQ(unwound.load(), 2);
}

SHOAL_TEST(CombinatorTest, RaceOfDifferentTypesGivesAVariant) {
  shoal::test::ManualEvent never;
  auto slow = [&]() -> Task<std::string> {
    co_await never.wait();
    co_return "slow";
  };
  auto r = co_await shoal::race(slow(), after(1ms, 4));
  SHOAL_CO_ASSERT(r.index() == 1u);
  EXPECT_EQ(std::get<1>(r), 4);
}

SHOAL_TEST(CombinatorTest, RaceSettledByAFaultRethrowsIt) {
  shoal::test::ManualEvent never;
  auto slow = [&]() -> Task<void> { co_await never.wait(); };
  EXPECT_THROW(co_await shoal::race(slow(), fail_after(1ms, "first to settle")), std::runtime_error);
}

SHOAL_TEST(CombinatorTest, StartReadyReturnsTheSignalledValueWhileTheChildRuns) {
  std::atomic<bool> child_still_running{false};
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    int port = co_await s.start_ready<int>([&](shoal::Ready<int>& ready) -> Task<void> {
      co_await shoal::sleep_for(1ms);
      ready(8080);
      child_still_running.store(true);
      co_await shoal::sleep_for(1ms);
    });
    EXPECT_EQ(port, 8080);
  });
  EXPECT_TRUE(child_still_running.load());
}

SHOAL_TEST(CombinatorTest, StartReadyRethrowsAFaultBeforeTheSignal) {
  bool caught = false;
  try {
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      try {
        (void)co_await s.start_ready<int>([](shoal::Ready<int>&) -> Task<void> {
          co_await shoal::sleep_for(1ms);
          throw std::runtime_error("bind failed");
        });
      } catch (const std::runtime_error& e) {
        caught = std::string(e.what()) == "bind failed";
        throw;
      }
    });
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(caught);
}

// The child's fault cancels the scope as it settles start_ready; on several
// workers that cancel can reach the parent before its wait does. Many rounds
// so the child (stolen by another worker) often faults first.
TEST(CombinatorStress, StartReadyRethrowsAFaultThatCancelsTheScopeBeforeTheWait) {
  int caught = 0;
  constexpr int rounds = 3000;
  shoal::run(
      [&]() -> Task<void> {
        for (int i = 0; i < rounds; ++i) {
          try {
            co_await shoal::scope([&](Scope& s) -> Task<void> {
              try {
                (void)co_await s.start_ready<int>([](shoal::Ready<int>&) -> Task<void> {
                  throw std::runtime_error("bind failed");
                  co_return;
                });
              } catch (const std::runtime_error&) {
                ++caught;
                throw;
              }
            });
          } catch (const std::runtime_error&) {
          }
        }
      }(),
      shoal::RuntimeOptions::with_workers(4));
  EXPECT_EQ(caught, rounds);
}

TEST(CombinatorFaults, RethrowingADeliveredFaultIsNotReportedTwice) {
  std::atomic<int> reported{0};
  shoal::RuntimeOptions opts = shoal::RuntimeOptions::with_workers(2);
  opts.on_suppressed_fault = [&](std::exception_ptr) { reported.fetch_add(1); };
  EXPECT_THROW(shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
                            auto h = s.start([]() -> Task<int> {
                              throw std::runtime_error("x");
                              co_return 1;
                            });
                            co_await shoal::sleep_for(5ms);  // let it fault first
                            (void)co_await shoal::shielded([&]() -> Task<int> { co_return co_await h; }());
                          }),
                          opts),
               std::runtime_error);
  EXPECT_EQ(reported.load(), 0);
}

}  // namespace
