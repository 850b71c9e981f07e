// Broadcast, Watch and Oneshot: every receiver sees every value (or is told
// how many it missed), the latest value with change notification, and one
// value from one sender.
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "shoal/channel/broadcast.hpp"
#include "shoal/channel/oneshot.hpp"
#include "shoal/channel/watch.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;

SHOAL_TEST_SUITE(BroadcastTest);

SHOAL_TEST(BroadcastTest, EightReceiversSeeTheSameSequence) {
  shoal::Broadcast<int> b(16);
  const int n = 2000;
  std::vector<std::vector<int>> seen(8);
  std::vector<std::atomic<int>> read(8);  // values each receiver has read
  shoal::Notify progress;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    std::vector<shoal::Broadcast<int>::Receiver> rxs;
    for (int r = 0; r < 8; ++r) rxs.push_back(b.subscribe());
    for (int r = 0; r < 8; ++r) {
      s.spawn([&, r, rx = std::move(rxs[static_cast<std::size_t>(r)])]() mutable -> Task<void> {
        for (;;) {
          auto v = co_await rx.recv();
          if (v.closed()) co_return;
          EXPECT_FALSE(v.lagged()) << "receiver " << r << " lagged";
          if (v) seen[static_cast<std::size_t>(r)].push_back(*v);
          read[static_cast<std::size_t>(r)].fetch_add(1);
          progress.notify_one();
        }
      });
    }
    // The sender never runs more than the capacity ahead of the slowest
    // receiver, so nobody lags.
    auto slowest = [&] {
      int m = n;
      for (auto& c : read) m = std::min(m, c.load());
      return m;
    };
    for (int i = 0; i < n; ++i) {
      while (i - slowest() >= 16) co_await progress.wait();
      EXPECT_EQ(b.send(i), 8u);
    }
    b.close();
  });
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(seen[static_cast<std::size_t>(r)], seen[0]) << "receiver " << r;
  }
  SHOAL_CO_ASSERT(seen[0].size() == static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) EXPECT_EQ(seen[0][static_cast<std::size_t>(i)], i);
}

SHOAL_TEST(BroadcastTest, ASlowReceiverIsToldHowManyItMissedAndGoesOnFromTheOldestKept) {
  shoal::Broadcast<int> b(4);
  auto rx = b.subscribe();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(b.send(i), 1u);
  auto r = co_await rx.recv();
  EXPECT_TRUE(r.lagged());
  EXPECT_EQ(r.missed(), 6u) << "values 0..5 were overwritten";
  for (int expect = 6; expect < 10; ++expect) {
    auto v = co_await rx.recv();
    SHOAL_CO_ASSERT(v.has_value());
    EXPECT_EQ(*v, expect);
  }
  EXPECT_EQ(rx.try_recv(), std::nullopt);
}

SHOAL_TEST(BroadcastTest, AReceiverThatJoinsLateSeesOnlyLaterValues) {
  shoal::Broadcast<std::string> b(8);
  auto early = b.subscribe();
  EXPECT_EQ(b.send("a"), 1u);
  auto late = b.subscribe();
  EXPECT_EQ(b.send("b"), 2u);
  b.close();
  EXPECT_EQ(*co_await early.recv(), "a");
  EXPECT_EQ(*co_await early.recv(), "b");
  EXPECT_TRUE((co_await early.recv()).closed());
  EXPECT_EQ(*co_await late.recv(), "b");
  EXPECT_TRUE((co_await late.recv()).closed());
}

SHOAL_TEST(BroadcastTest, ReceiversLeaveAtAnyTimeAndASendWithNoneDropsTheValue) {
  shoal::Broadcast<int> b(2);
  EXPECT_EQ(b.send(1), 0u);
  {
    auto rx = b.subscribe();
    EXPECT_EQ(b.receiver_count(), 1u);
  }
  EXPECT_EQ(b.receiver_count(), 0u);
  auto rx = b.subscribe();
  EXPECT_EQ(rx.try_recv(), std::nullopt) << "a value sent before subscribe was seen";
  co_return;
}

SHOAL_TEST(BroadcastTest, AWaitingReceiverIsCancelledWithoutMovingItsPosition) {
  shoal::Broadcast<int> b(4);
  auto rx = b.subscribe();
  bool cancelled = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      try {
        (void)co_await rx.recv();
      } catch (const shoal::Cancelled&) {
        cancelled = true;
        throw;
      }
    });
    co_await shoal::sleep_for(1ms);
    s.cancel();
  });
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(b.send(5), 1u);
  EXPECT_EQ(*co_await rx.recv(), 5);
}

TEST(BroadcastBridge, APlainThreadReceivesWhatTasksSend) {
  shoal::test::Watchdog dog(std::chrono::seconds(60), "broadcast bridge");
  shoal::Broadcast<int> b(64);
  auto rx = b.subscribe();
  std::vector<int> got;
  std::thread t([&] {
    for (;;) {
      auto r = rx.recv_blocking();
      if (r.closed()) return;
      got.push_back(*r);
    }
  });
  shoal::run([&]() -> Task<void> {
    for (int i = 0; i < 50; ++i) (void)b.send(i);
    b.close();
    co_return;
  }());
  t.join();
  ASSERT_EQ(got.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(got[static_cast<std::size_t>(i)], i);
}

SHOAL_TEST_SUITE(WatchTest);

SHOAL_TEST(WatchTest, ChangedWaitsForANewerValueAndSeesTheLatest) {
  shoal::Watch<int> w(0);
  auto rx = w.subscribe();
  EXPECT_FALSE(rx.has_changed());
  std::vector<int> seen;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      while (co_await rx.changed()) seen.push_back(rx.get());
    });
    co_await shoal::sleep_for(1ms);
    w.send(1);
    w.send(2);  // two sends before the receiver runs count as one change
    co_await shoal::sleep_for(1ms);
    EXPECT_TRUE(w.modify([](int& v) { v += 10; }));
    co_await shoal::sleep_for(1ms);
    w.close();
  });
  SHOAL_CO_ASSERT(!seen.empty());
  EXPECT_EQ(seen.back(), 12) << "the last value seen";
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_LT(seen[i - 1], seen[i]) << "values went back";
  EXPECT_FALSE(w.send(3)) << "a closed watch took a value";
  EXPECT_EQ(w.get(), 12);
}

SHOAL_TEST(WatchTest, ANewReceiverHasSeenTheCurrentValue) {
  shoal::Watch<std::string> w("a");
  w.send("b");
  auto rx = w.subscribe();
  EXPECT_FALSE(rx.has_changed());
  EXPECT_EQ(rx.read([](const std::string& v) { return v.size(); }), 1u);
  w.send("cc");
  EXPECT_TRUE(rx.has_changed());
  EXPECT_TRUE(co_await rx.changed());
  EXPECT_EQ(rx.get(), "cc");
}

SHOAL_TEST(WatchTest, CloseEndsAWaitingChanged) {
  shoal::Watch<int> w(1);
  auto rx = w.subscribe();
  bool result = true;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> { result = co_await rx.changed(); });
    co_await shoal::sleep_for(1ms);
    w.close();
  });
  EXPECT_FALSE(result);
}

SHOAL_TEST_SUITE(OneshotTest);

SHOAL_TEST(OneshotTest, TheValueGoesFromTheSenderToTheReceiver) {
  auto ends = shoal::oneshot<std::unique_ptr<int>>();  // not a structured binding: clang 14 cannot capture one
  auto& tx = ends.first;
  auto& rx = ends.second;
  int got = 0;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> { got = *co_await rx.recv(); });
    co_await shoal::sleep_for(1ms);
    EXPECT_TRUE(tx.send(std::make_unique<int>(7)));
  });
  EXPECT_EQ(got, 7);
}

SHOAL_TEST(OneshotTest, ADroppedSenderGivesTheReceiverAClearError) {
  auto ends = shoal::oneshot<int>();  // not a structured binding: clang 14 cannot capture one
  auto& tx = ends.first;
  auto& rx = ends.second;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      try {
        (void)co_await rx.recv();
        ADD_FAILURE() << "no error";
      } catch (const shoal::SenderDropped& e) {
        EXPECT_NE(std::string(e.what()).find("without sending"), std::string::npos) << e.what();
      }
    });
    co_await shoal::sleep_for(1ms);
    { auto gone = std::move(tx); }
  });
}

SHOAL_TEST(OneshotTest, SendToAGoneReceiverReportsIt) {
  auto ends = shoal::oneshot<int>();  // not a structured binding: clang 14 cannot capture one
  auto& tx = ends.first;
  auto& rx = ends.second;
  { auto gone = std::move(rx); }
  EXPECT_FALSE(tx.send(1));
  EXPECT_THROW(tx.send(2), std::logic_error) << "a second send was taken";
  co_return;
}

SHOAL_TEST(OneshotTest, ReceivingTwiceIsAnError) {
  auto ends = shoal::oneshot<int>();  // not a structured binding: clang 14 cannot capture one
  auto& tx = ends.first;
  auto& rx = ends.second;
  EXPECT_EQ(rx.try_recv(), std::nullopt);
  EXPECT_TRUE(tx.send(3));
  EXPECT_EQ(co_await rx.recv(), 3);
  EXPECT_THROW((void)co_await rx.recv(), std::logic_error);
}

TEST(OneshotBridge, APlainThreadReceivesATasksValue) {
  shoal::test::Watchdog dog(std::chrono::seconds(60), "oneshot bridge");
  auto ends = shoal::oneshot<int>();  // not a structured binding: clang 14 cannot capture one
  auto& tx = ends.first;
  auto& rx = ends.second;
  int got = 0;
  std::thread t([&, rx = std::move(rx)]() mutable { got = rx.recv_blocking(); });
  shoal::run([](shoal::OneshotSender<int> tx) -> Task<void> {
    (void)tx.send(11);
    co_return;
  }(std::move(tx)));
  t.join();
  EXPECT_EQ(got, 11);
}

}  // namespace
