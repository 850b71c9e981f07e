// Event and Notify: level-triggered "it happened" and Tokio's permit
// semantics, from tasks and plain threads.
#include <atomic>
#include <thread>
#include <vector>

#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;

SHOAL_TEST_SUITE(EventTest);

SHOAL_TEST(EventTest, SetWakesEveryWaiterAndLaterWaitsPassAtOnce) {
  shoal::Event ev;
  std::atomic<int> woke{0};
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (int i = 0; i < 5; ++i) {
      s.spawn([&]() -> Task<void> {
        co_await ev.wait();
        woke.fetch_add(1);
      });
    }
    co_await shoal::sleep_for(1ms);
    EXPECT_FALSE(ev.is_set());
    ev.set();
    ev.set();  // idempotent
  });
  EXPECT_EQ(woke.load(), 5);
  EXPECT_TRUE(ev.is_set());
  co_await ev.wait();
}

SHOAL_TEST(EventTest, AWaitInACancelledScopeThrowsEvenWhenSet) {
  shoal::Event ev;
  ev.set();
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.cancel();
    EXPECT_THROW(co_await ev.wait(), shoal::Cancelled);
    co_return;
  });
}

TEST(EventBridge, APlainThreadWaitsForATaskToSetIt) {
  shoal::test::Watchdog dog(std::chrono::seconds(60), "event bridge");
  shoal::Event ev;
  EXPECT_FALSE(ev.wait_blocking_for(1ms));
  std::thread t([&] { ev.wait_blocking(); });
  shoal::run([&]() -> Task<void> {
    ev.set();
    co_return;
  }());
  t.join();
  EXPECT_TRUE(ev.wait_blocking_for(0ms));
}

SHOAL_TEST_SUITE(NotifyTest);

SHOAL_TEST(NotifyTest, ANotifyBeforeTheWaitIsNotLost) {
  shoal::Notify n;
  n.notify_one();
  n.notify_one();  // permits do not add up
  co_await n.wait();
  auto r = co_await shoal::move_on_after(5ms, n.wait());
  EXPECT_FALSE(r) << "a second permit was stored";
}

// On the simulated runtime a sleep ends only once every other task waits,
// so "the three are parked" is a fact here, not a hope.
TEST(NotifySimulated, NotifyOneWakesOneWaiterAndNotifyAllWakesTheRest) {
  shoal::test::Watchdog dog(std::chrono::seconds(60), "notify simulated");
  shoal::run([]() -> Task<void> {
    shoal::Notify n;
    int woke = 0;
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      for (int i = 0; i < 3; ++i) {
        s.spawn([&]() -> Task<void> {
          co_await n.wait();
          ++woke;
        });
      }
      co_await shoal::sleep_for(1ms);  // all three are parked
      n.notify_one();
      co_await shoal::sleep_for(1ms);
      EXPECT_EQ(woke, 1);
      n.notify_all();
    });
    EXPECT_EQ(woke, 3);
    // notify_all stored no permit.
    auto r = co_await shoal::move_on_after(5ms, n.wait());
    EXPECT_FALSE(r);
  }(), shoal::RuntimeOptions::simulated(1));
}

SHOAL_TEST(NotifyTest, ACancelledWaitTakesNoPermit) {
  shoal::Notify n;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> { co_await n.wait(); });
    co_await shoal::sleep_for(1ms);
    s.cancel();
  });
  n.notify_one();  // nobody waits: the permit is kept
  co_await n.wait();
}

TEST(NotifyBridge, ThreadsAndTasksNotifyEachOther) {
  shoal::test::Watchdog dog(std::chrono::seconds(60), "notify bridge");
  shoal::Notify to_thread, to_task;
  int rounds = 0;
  std::thread t([&] {
    for (int i = 0; i < 100; ++i) {
      to_thread.wait_blocking();
      to_task.notify_one();
    }
  });
  shoal::run([&]() -> Task<void> {
    for (int i = 0; i < 100; ++i) {
      to_thread.notify_one();
      co_await to_task.wait();
      ++rounds;
    }
  }());
  t.join();
  EXPECT_EQ(rounds, 100);
  EXPECT_FALSE(to_task.wait_blocking_for(1ms));
}

}  // namespace
