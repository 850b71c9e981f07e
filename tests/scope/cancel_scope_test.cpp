// Cancel scopes as objects (CancelScope), cancelling one started child
// (JoinHandle::cancel) and taking children's results as they complete
// (Completions).
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "shoal/channel/select.hpp"
#include "shoal/scope/cancel_scope.hpp"
#include "shoal/scope/completions.hpp"
#include "shoal/sync/event.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;

SHOAL_TEST_SUITE(CancelScopeTest);

Task<int> sleep_then(std::chrono::milliseconds d, int v) {
  co_await shoal::sleep_for(d);
  co_return v;
}

SHOAL_TEST(CancelScopeTest, CancelFromAnotherTaskCutsTheRunOffAndIsCaught) {
  shoal::CancelScope cs;
  std::optional<int> r = 5;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> { r = co_await cs.run(sleep_then(1h, 1)); });
    co_await shoal::sleep_for(1ms);
    cs.cancel();
  });
  EXPECT_EQ(r, std::nullopt);
  EXPECT_TRUE(cs.cancel_called());
  EXPECT_TRUE(cs.cancelled_caught());
}

SHOAL_TEST(CancelScopeTest, ACompletedRunIsNotCaught) {
  shoal::CancelScope cs(shoal::now() + 1h);
  EXPECT_EQ(co_await cs.run(sleep_then(1ms, 3)), std::optional<int>(3));
  EXPECT_FALSE(cs.cancel_called());
  EXPECT_FALSE(cs.cancelled_caught());
  cs.cancel();  // after the run: only noted
  EXPECT_TRUE(cs.cancel_called());
  EXPECT_FALSE(cs.cancelled_caught());
}

SHOAL_TEST(CancelScopeTest, CancelledBeforeRunStartsCancelled) {
  shoal::CancelScope cs;
  cs.cancel();
  bool started = false;
  auto r = co_await cs.run([&]() -> Task<void> {
    started = true;
    co_await shoal::checkpoint();
    ADD_FAILURE() << "ran past its first checkpoint";
  }());
  EXPECT_TRUE(started);
  EXPECT_FALSE(r);
  EXPECT_TRUE(cs.cancelled_caught());
}

// On the simulated clock, so the times are exact whatever the load.
TEST(CancelScopeSimulated, TheDeadlineCanBeMovedLaterAndEarlierWhileItRuns) {
  shoal::test::Watchdog dog(std::chrono::seconds(60), "cancel scope deadline");
  shoal::run([]() -> Task<void> {
    shoal::CancelScope cs(shoal::now() + 20ms);
    const auto t0 = shoal::now();
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        co_await shoal::sleep_for(5ms);
        cs.set_deadline(shoal::now() + 1h);  // later: the first deadline no longer applies
        co_await shoal::sleep_for(40ms);
        EXPECT_FALSE(cs.cancel_called()) << "the moved deadline still fired";
        cs.set_deadline(shoal::now() + 10ms);  // earlier again
      });
      auto r = co_await cs.run(sleep_then(1h, 1));
      EXPECT_FALSE(r.has_value());
    });
    EXPECT_EQ(shoal::now() - t0, 55ms);
    EXPECT_TRUE(cs.cancelled_caught());
  }(), shoal::RuntimeOptions::simulated(1));
}

// A shield with a deadline of its own (async cleanup with a time limit):
// the outside's cancellation does not reach it, its own deadline does.
SHOAL_SIMULATED_TEST(CancelScopeSimulated, AShieldsOwnDeadlineCutsItOffAndIsCaught) {
  shoal::CancelScope cs(shoal::CancelScope::kShield, shoal::now() + 30ms);
  const auto t0 = shoal::now();
  auto r = co_await cs.run(sleep_then(1h, 1));
  EXPECT_FALSE(r.has_value());
  EXPECT_EQ(shoal::now() - t0, 30ms);
  EXPECT_TRUE(cs.cancelled_caught());
}

SHOAL_SIMULATED_TEST(CancelScopeSimulated, AShieldKeepsTheOutsidesCancellationOutUntilItEnds) {
  shoal::CancelScope cs(shoal::CancelScope::kShield, shoal::now() + 30ms);
  const auto t0 = shoal::now();
  std::chrono::nanoseconds cut_at{-1};
  bool rethrown = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      try {
        (void)co_await cs.run([&]() -> Task<void> {
          try {
            co_await shoal::sleep_for(1h);
          } catch (const shoal::Cancelled&) {
            cut_at = shoal::now() - t0;
            throw;
          }
        }());
      } catch (const shoal::Cancelled&) {
        rethrown = true;  // the outside is cancelled: not absorbed, passed on
        throw;
      }
    });
    co_await shoal::sleep_for(5ms);
    s.cancel();
  });
  EXPECT_EQ(cut_at, 30ms) << "cut off by the outside's cancel (5 ms), not its own deadline";
  EXPECT_TRUE(rethrown);
  EXPECT_FALSE(cs.cancelled_caught());
}

SHOAL_TEST(CancelScopeTest, ASecondRunIsAnError) {
  shoal::CancelScope cs;
  (void)co_await cs.run(sleep_then(0ms, 1));
  EXPECT_THROW((void)co_await cs.run(sleep_then(0ms, 1)), std::logic_error);
}

SHOAL_TEST(CancelScopeTest, AnOuterCancellationIsNeverAbsorbed) {
  shoal::CancelScope cs;
  bool outer_cancelled = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      try {
        (void)co_await cs.run(sleep_then(1h, 1));
      } catch (const shoal::Cancelled&) {
        outer_cancelled = true;
        throw;
      }
    });
    co_await shoal::sleep_for(1ms);
    cs.cancel();  // both at once: the outer one wins
    s.cancel();
  });
  EXPECT_TRUE(outer_cancelled);
}

TEST(CancelScopeThread, APlainThreadCancelsARunningScope) {
  shoal::test::Watchdog dog(std::chrono::seconds(60), "cancel scope thread");
  shoal::CancelScope cs;
  shoal::Event running;
  std::thread t([&] {
    running.wait_blocking();
    cs.cancel();
  });
  auto r = shoal::run([&]() -> Task<std::optional<int>> {
    co_return co_await cs.run([&]() -> Task<int> {
      running.set();
      co_await shoal::sleep_for(1h);
      co_return 1;
    }());
  }());
  t.join();
  EXPECT_EQ(r, std::nullopt);
}

SHOAL_TEST_SUITE(JoinHandleCancelTest);

SHOAL_TEST(JoinHandleCancelTest, CancellingOneChildLeavesItsSiblingsAndTheScopeRunning) {
  std::atomic<int> finished{0};
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    auto victim = s.start(sleep_then(1h, 1));
    auto sibling = s.start([&]() -> Task<int> {
      co_await shoal::sleep_for(5ms);
      finished.fetch_add(1);
      co_return 2;
    });
    victim.cancel();
    EXPECT_THROW((void)co_await victim, shoal::ChildCancelled);
    EXPECT_EQ(co_await sibling, 2);
    EXPECT_FALSE(s.cancellation_requested());
  });
  EXPECT_EQ(finished.load(), 1);
}

SHOAL_TEST(JoinHandleCancelTest, TheCancelReachesScopesTheChildEntered) {
  bool inner_cancelled = false;
  shoal::Event inside;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    auto h = s.start([&]() -> Task<void> {
      co_await shoal::scope([&](Scope& inner) -> Task<void> {
        inner.spawn([&]() -> Task<void> {
          try {
            inside.set();
            co_await shoal::sleep_for(1h);
          } catch (const shoal::Cancelled&) {
            inner_cancelled = true;
            throw;
          }
        });
        co_await shoal::sleep_for(1h);
      });
    });
    co_await inside.wait();  // the child is in its inner scope
    h.cancel();
    EXPECT_THROW(co_await h, shoal::ChildCancelled);
  });
  EXPECT_TRUE(inner_cancelled);
}

SHOAL_TEST(JoinHandleCancelTest, AChildThatCompletedFirstKeepsItsValue) {
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    auto h = s.start(sleep_then(0ms, 7));
    while (!h.done()) co_await shoal::checkpoint();
    h.cancel();
    EXPECT_EQ(co_await h, 7);
  });
}

SHOAL_TEST_SUITE(CompletionsTest);

SHOAL_TEST(CompletionsTest, ResultsComeInTheOrderTheChildrenFinish) {
  std::vector<int> order;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    shoal::Completions<int> done(s);
    shoal::Notify go[3];
    for (int i = 0; i < 3; ++i) {
      done.start([&go, i]() -> Task<int> {
        co_await go[i].wait();
        co_return i;
      });
    }
    EXPECT_EQ(done.pending(), 3u);
    for (int i : {2, 0, 1}) {
      go[i].notify_one();
      order.push_back(*co_await done.next());
    }
    EXPECT_FALSE((co_await done.next()).has_value());
  });
  EXPECT_EQ(order, (std::vector<int>{2, 0, 1}));
}

SHOAL_TEST(CompletionsTest, AFaultCancelsTheScopeAsAnyChildsFaultDoes) {
  int sum = 0;
  bool others_cancelled = true;
  try {
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      shoal::Completions<int> done(s);
      for (int i = 0; i < 8; ++i) {
        done.start([i, &others_cancelled]() -> Task<int> {
          if (i < 4) co_return i;
          if (i == 4) {
            co_await shoal::sleep_for(5ms);
            throw std::runtime_error("child 4 failed");
          }
          co_await shoal::sleep_for(1h);
          others_cancelled = false;
          co_return i;
        });
      }
      for (int k = 0; k < 4; ++k) sum += *co_await done.next();
      (void)co_await done.next();  // the fault cancels the scope, this wait included
      ADD_FAILURE() << "next() returned after the fault";
    });
    ADD_FAILURE() << "the scope did not rethrow the fault";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "child 4 failed");
  }
  EXPECT_EQ(sum, 0 + 1 + 2 + 3);
  EXPECT_TRUE(others_cancelled);
}

SHOAL_TEST(CompletionsTest, ACancelledNextTakesNothing) {
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    shoal::Completions<void> done(s);
    shoal::Notify go;
    done.start([&]() -> Task<void> { co_await go.wait(); });
    auto r = co_await shoal::move_on_after(2ms, done.next());
    EXPECT_FALSE(r.has_value()) << "next returned before the child finished";
    go.notify_one();
    EXPECT_EQ(co_await done.next(), true);
    EXPECT_EQ(co_await done.next(), false);
  });
}

// on_next: "the next result, or the shutdown, whichever first" in one
// select. A select that another case won takes nothing.
SHOAL_TEST(CompletionsTest, IsASelectCaseThatTakesNothingWhenItLoses) {
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    shoal::Completions<int> done(s);
    shoal::Event shutdown;
    shoal::Notify go;
    done.start([&]() -> Task<int> {
      co_await go.wait();
      co_return 7;
    });
    shutdown.set();
    auto lost = co_await shoal::select(shoal::on_next(done), shoal::on_event(shutdown));
    EXPECT_EQ(lost.index(), 1u);
    EXPECT_EQ(done.pending(), 1u);
    shoal::Event never;
    s.spawn([&]() -> Task<void> {
      go.notify_one();
      co_return;
    });
    auto got = co_await shoal::select(shoal::on_next(done), shoal::on_event(never));
    SHOAL_CO_ASSERT(got.index() == 0u);
    EXPECT_EQ(std::get<0>(got), std::optional<int>(7));
    EXPECT_EQ(done.pending(), 0u);
    auto end = co_await shoal::select(shoal::on_next(done), shoal::on_event(never));
    SHOAL_CO_ASSERT(end.index() == 0u);
    EXPECT_FALSE(std::get<0>(end).has_value()) << "none pending: the end, at once";
  });
}

// A child queues itself as its body ends; its result reaches its handle a
// few steps later, after its frame (the callable and what it captured) is
// destroyed. A select that wins on it meanwhile must wait for the result,
// not read the cell while the child still writes it and free it under it.
// The child's callable lingers in its destructor until the result is taken
// or 100 ms pass: taken meanwhile is the race. Its wake of another task
// pushes the woken selector out of the worker's LIFO slot, so an idle worker
// can steal it and run it during the linger.
struct LingersUntilTaken {
  std::atomic<bool>* taken;
  std::atomic<int>* taken_while_finishing;
  shoal::Notify* poke;
  LingersUntilTaken(std::atomic<bool>* t, std::atomic<int>* w, shoal::Notify* p) noexcept
      : taken(t), taken_while_finishing(w), poke(p) {}
  LingersUntilTaken(LingersUntilTaken&& o) noexcept
      : taken(std::exchange(o.taken, nullptr)), taken_while_finishing(o.taken_while_finishing), poke(o.poke) {}
  LingersUntilTaken(const LingersUntilTaken&) = delete;
  ~LingersUntilTaken() {
    if (taken == nullptr) return;
    poke->notify_one();
    const auto until = std::chrono::steady_clock::now() + 100ms;
    while (!taken->load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    if (taken->load()) taken_while_finishing->fetch_add(1);
  }
};

SHOAL_TEST(CompletionsTest, OnNextWaitsForAResultTheChildIsStillHandingOver) {
  std::atomic<int> taken_while_finishing{0};
  for (int round = 0; round < 3; ++round) {
    std::atomic<bool> taken{false};
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      shoal::Completions<int> done(s);
      shoal::Notify go, poke;
      s.spawn([&poke]() -> Task<void> { co_await poke.wait(); });
      done.start([&go, linger = LingersUntilTaken(&taken, &taken_while_finishing, &poke)]() -> Task<int> {
        co_await go.wait();
        co_return 7;
      });
      shoal::Event never;
      go.notify_one();
      auto got = co_await shoal::select(shoal::on_next(done), shoal::on_event(never));
      taken.store(true);
      SHOAL_CO_ASSERT(got.index() == 0u);
      EXPECT_EQ(std::get<0>(got), std::optional<int>(7));
      EXPECT_EQ(done.pending(), 0u);
    });
  }
  EXPECT_EQ(taken_while_finishing.load(), 0) << "a result was taken before the child handed it over";
}

SHOAL_TEST(CompletionsTest, ManyChildrenReuseTheirSlots) {
  long total = 0;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    shoal::Completions<long> done(s);
    for (long i = 0; i < 2000; ++i) {
      done.start([i]() -> Task<long> { co_return i; });
      if (done.pending() > 8) total += *co_await done.next();
    }
    while (auto v = co_await done.next()) total += *v;
  });
  EXPECT_EQ(total, 1999L * 2000 / 2);
}

}  // namespace
