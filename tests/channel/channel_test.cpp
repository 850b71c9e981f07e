// Channel<T>: capacities, close/drain, failed sends, cancellation of
// waiters, and the thread bridge.
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Channel;
using shoal::Scope;
using shoal::Task;

SHOAL_TEST_SUITE(ChannelTest);

SHOAL_TEST(ChannelTest, BufferedValuesArriveInOrder) {
  Channel<int> ch(4);
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      for (int i = 0; i < 100; ++i) co_await ch.send(i);
      ch.close();
    });
    int expect = 0;
    while (auto v = co_await ch.recv()) EXPECT_EQ(*v, expect++);
    EXPECT_EQ(expect, 100);
  });
}

SHOAL_TEST(ChannelTest, RendezvousHandsEachValueToAReceiver) {
  Channel<std::string> ch(0);
  std::vector<std::string> got;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await ch.send("a");
      co_await ch.send("b");
      ch.close();
    });
    while (auto v = co_await ch.recv()) got.push_back(*v);
  });
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b"}));
}

SHOAL_TEST(ChannelTest, CloseLetsReceiversDrainThenYieldsNullopt) {
  Channel<int> ch(8);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ch.try_send(int{i}), shoal::SendStatus::sent);
  ch.close();
  EXPECT_EQ(*co_await ch.recv(), 0);
  EXPECT_EQ(*co_await ch.recv(), 1);
  EXPECT_EQ(*co_await ch.recv(), 2);
  EXPECT_FALSE((co_await ch.recv()).has_value());
}

SHOAL_TEST(ChannelTest, SendOnAClosedChannelGivesTheValueBack) {
  Channel<std::unique_ptr<int>> ch(1);
  ch.close();
  auto p = std::make_unique<int>(9);
  int* raw = p.get();
  try {
    co_await ch.send(std::move(p));
    ADD_FAILURE() << "no throw";
  } catch (shoal::ChannelClosedError<std::unique_ptr<int>>& e) {
    EXPECT_EQ(e.value.get(), raw);
  }
  std::unique_ptr<int> q = std::make_unique<int>(1);
  EXPECT_EQ(ch.try_send(std::move(q)), shoal::SendStatus::closed);
  EXPECT_TRUE(q) << "try_send consumed the value it did not send";
}

SHOAL_TEST(ChannelTest, WaitingSenderFailsWhenClosedAndKeepsItsValue) {
  Channel<std::unique_ptr<int>> ch(0);
  bool got_back = false;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      try {
        co_await ch.send(std::make_unique<int>(5));
      } catch (shoal::ChannelClosedError<std::unique_ptr<int>>& e) {
        got_back = e.value && *e.value == 5;
      }
    });
    co_await shoal::sleep_for(2ms);
    ch.close();
    co_return;
  });
  EXPECT_TRUE(got_back);
}

SHOAL_TEST(ChannelTest, TrySendRefusedWhenFull) {
  Channel<int> ch(1);
  EXPECT_EQ(ch.try_send(1), shoal::SendStatus::sent);
  EXPECT_EQ(ch.try_send(2), shoal::SendStatus::full);
  EXPECT_EQ(ch.try_recv(), std::optional<int>(1));
  EXPECT_EQ(ch.try_recv(), std::nullopt);
  co_return;
}

SHOAL_TEST(ChannelTest, BlockedRecvAndSendWakeWithCancelled) {
  Channel<int> empty(1), full(1);
  EXPECT_EQ(full.try_send(0), shoal::SendStatus::sent);
  std::atomic<int> cancelled{0}, blocked{0};
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      try {
        blocked.fetch_add(1);
        (void)co_await empty.recv();
      } catch (const shoal::Cancelled&) {
        cancelled.fetch_add(1);
        throw;
      }
    });
    s.spawn([&]() -> Task<void> {
      try {
        blocked.fetch_add(1);
        co_await full.send(1);
      } catch (const shoal::Cancelled&) {
        cancelled.fetch_add(1);
        throw;
      }
    });
    while (blocked.load() < 2) co_await shoal::checkpoint();
    co_await shoal::sleep_for(1ms);
    s.cancel();
    co_return;
  });
  EXPECT_EQ(cancelled.load(), 2);
  EXPECT_EQ(full.try_recv(), std::optional<int>(0)) << "the cancelled send must not have enqueued";
  EXPECT_EQ(full.try_recv(), std::nullopt);
}

SHOAL_TEST(ChannelTest, OpsInACancelledScopeThrowWithoutSideEffects) {
  Channel<int> ch(4);
  EXPECT_EQ(ch.try_send(1), shoal::SendStatus::sent);
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.cancel();
    EXPECT_THROW(co_await ch.send(2), shoal::Cancelled);
    EXPECT_THROW((void)co_await ch.recv(), shoal::Cancelled);
    co_return;
  });
  EXPECT_EQ(ch.try_recv(), std::optional<int>(1));
  EXPECT_EQ(ch.try_recv(), std::nullopt);
}

// Randomized send/recv/cancel races with a checksum: every value sent is
// received exactly once or its send reported failure.
void checksum_race(std::size_t capacity, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(4));
  const long rounds = shoal::test::scaled(1000, 50);
  for (long round = 0; round < rounds; ++round) {
    Channel<long> ch(capacity);
    std::atomic<long> sent_sum{0}, recv_sum{0}, sent_n{0}, recv_n{0};
    const int producers = 1 + static_cast<int>(rng() % 3), consumers = 1 + static_cast<int>(rng() % 3);
    const int cancel_after = static_cast<int>(rng() % 20);
    rt.block_on(shoal::scope([&](Scope& outer) -> Task<void> {
      co_await shoal::scope([&](Scope& s) -> Task<void> {
        for (int p = 0; p < producers; ++p) {
          s.spawn([&, p]() -> Task<void> {
            for (long i = 0; i < 50; ++i) {
              const long v = p * 1000 + i + 1;
              co_await ch.send(v);  // a Cancelled here means v was not sent
              sent_sum.fetch_add(v);
              sent_n.fetch_add(1);
            }
          });
        }
        for (int c = 0; c < consumers; ++c) {
          s.spawn([&]() -> Task<void> {
            for (;;) {
              auto v = co_await ch.recv();
              if (!v) co_return;
              recv_sum.fetch_add(*v);
              recv_n.fetch_add(1);
            }
          });
        }
        for (int k = 0; k < cancel_after; ++k) co_await shoal::checkpoint();
        s.cancel();
      });
      // Whatever is still buffered was sent and not received.
      while (auto v = ch.try_recv()) {
        recv_sum.fetch_add(*v);
        recv_n.fetch_add(1);
      }
      (void)outer;
    }));
    ASSERT_EQ(sent_n.load(), recv_n.load()) << "capacity " << capacity << " round " << round << " seed " << seed;
    ASSERT_EQ(sent_sum.load(), recv_sum.load()) << "capacity " << capacity << " round " << round << " seed " << seed;
  }
}

TEST(ChannelRace, RandomizedSendRecvCancelConservesValues) {
  shoal::test::Watchdog dog(std::chrono::seconds(300), "channel races");
  const std::uint64_t seed = shoal::test::test_seed("ChannelRace.RandomizedSendRecvCancelConservesValues");
  for (std::size_t cap : {0u, 1u, 2u, 64u}) checksum_race(cap, seed + cap);
}

TEST(ChannelBridge, TwoThreadsAndFourTasksExchangeValues) {
  shoal::test::Watchdog dog(std::chrono::seconds(300), "thread bridge");
  const long n = shoal::test::scaled(100'000, 2'000);
  Channel<long> to_tasks(16), to_threads(16);
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(2));
  std::atomic<long> thread_sum{0}, task_sum{0};
  std::thread producer([&] {
    for (long i = 1; i <= n; ++i) to_tasks.send_blocking(i);
    to_tasks.close();
  });
  std::thread consumer([&] {
    while (auto v = to_threads.recv_blocking()) thread_sum.fetch_add(*v);
  });
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    co_await shoal::scope([&](Scope& relays) -> Task<void> {
      for (int t = 0; t < 4; ++t) {
        relays.spawn([&]() -> Task<void> {
          while (auto v = co_await to_tasks.recv()) {
            task_sum.fetch_add(*v);
            co_await to_threads.send(*v);
          }
        });
      }
      co_return;
    });
    to_threads.close();
    (void)s;
  }));
  producer.join();
  consumer.join();
  const long expect = n * (n + 1) / 2;
  EXPECT_EQ(task_sum.load(), expect);
  EXPECT_EQ(thread_sum.load(), expect);
}

TEST(ChannelBridge, BlockingFormsAreRejectedOnAWorker) {
  Channel<int> ch(1);
  bool rejected = shoal::run([&]() -> Task<bool> {
    try {
      ch.send_blocking(1);
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  }());
  EXPECT_TRUE(rejected);
}

TEST(ChannelBridge, PlainThreadSubmitsATaskToARunningRuntime) {
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(2));
  Channel<int> gate(0);
  std::thread other([&] {
    // A second root, submitted from another thread while the first runs.
    int v = rt.block_on([&]() -> Task<int> {
      co_await gate.send(1);
      co_return 5;
    }());
    EXPECT_EQ(v, 5);
  });
  int got = rt.block_on([&]() -> Task<int> { co_return *co_await gate.recv(); }());
  other.join();
  EXPECT_EQ(got, 1);
}

}  // namespace

namespace {

SHOAL_TEST(ChannelTest, DeadlinesCutOffABlockedChannelOpAfterItsCleanupRan) {
  Channel<int> empty(0);
  std::atomic<int> cleaned{0};
  struct Cleanup {
    std::atomic<int>* n;
    ~Cleanup() { n->fetch_add(1); }
  };
  auto blocked_recv = [&]() -> Task<int> {
    Cleanup c{&cleaned};
    auto v = co_await empty.recv();
    co_return v.value_or(-1);
  };
  EXPECT_THROW((void)co_await shoal::with_timeout(2ms, blocked_recv()), shoal::TimedOut);
  EXPECT_EQ(cleaned.load(), 1);
  auto r = co_await shoal::move_on_after(2ms, blocked_recv());
  EXPECT_FALSE(r.has_value());
  EXPECT_EQ(cleaned.load(), 2);
  bool sent = co_await shoal::move_on_after(2ms, [&]() -> Task<void> {
    Cleanup c{&cleaned};
    co_await empty.send(1);
  }());
  EXPECT_FALSE(sent);
  EXPECT_EQ(cleaned.load(), 3);
  EXPECT_EQ(empty.try_recv(), std::nullopt) << "a cut-off send must not have delivered";
}

}  // namespace

namespace {

// Sends racing with close(): every send that returned normally is received
// exactly once; every other send got its value back.
TEST(ChannelRace, CloseRacingSendsLosesNothing) {
  shoal::test::Watchdog dog(std::chrono::seconds(300), "close races");
  const std::uint64_t seed = shoal::test::test_seed("ChannelRace.CloseRacingSendsLosesNothing");
  std::mt19937_64 rng(seed);
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(4));
  const long rounds = shoal::test::scaled(500, 30);
  for (long round = 0; round < rounds; ++round) {
    const std::size_t cap = (round % 3 == 0) ? 0 : (round % 3 == 1 ? 2 : 8);
    Channel<long> ch(cap);
    std::atomic<long> sent{0}, received{0}, returned{0};
    const int close_after = static_cast<int>(rng() % 30);
    rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
      for (int p = 0; p < 3; ++p) {
        s.spawn([&, p]() -> Task<void> {
          for (long i = 1;; ++i) {
            const long v = p * 100000 + i;
            try {
              co_await ch.send(v);
              sent.fetch_add(v);
            } catch (shoal::ChannelClosedError<long>& e) {
              returned.fetch_add(e.value == v ? 1 : 1000000);
              co_return;
            }
          }
        });
      }
      for (int c = 0; c < 3; ++c) {
        s.spawn([&]() -> Task<void> {
          while (auto v = co_await ch.recv()) received.fetch_add(*v);
        });
      }
      for (int k = 0; k < close_after; ++k) co_await shoal::checkpoint();
      ch.close();
      co_return;
    }));
    ASSERT_EQ(sent.load(), received.load()) << "capacity " << cap << " round " << round << " seed " << seed;
    ASSERT_EQ(returned.load(), 3) << "capacity " << cap << " round " << round << " seed " << seed;
  }
}

}  // namespace
