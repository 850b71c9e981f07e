// Channel<T> with a T whose move and copy throw: the lock is never left held
// and a throw loses no value (issue 14.1). Every value ends in exactly one
// place: received once, or reported back to its sender (the send threw). The
// one move a channel cannot protect is the receiver's own return of the
// value (a by-value return, as for any function); a value lost there is
// allowed only if the receiver's recv threw for that very value.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "support/test_support.hpp"

namespace {

using shoal::Channel;
using shoal::Scope;
using shoal::Task;

/// What a Flaky move or copy throws: the id of the value that stayed put.
struct FlakyMove {
  long id;
};

// Every g_period-th move or copy of any Flaky throws (0: none), before it
// touches the source, so the source keeps its value.
std::atomic<long> g_period{0};
std::atomic<long> g_moves{0};

struct Flaky {
  long id;
  explicit Flaky(long i) noexcept : id(i) {}
  Flaky(Flaky&& o) : id(o.id) {  // NOLINT: deliberately not noexcept
    maybe_throw(o.id);
    o.id = -1;
  }
  Flaky(const Flaky& o) : id(o.id) { maybe_throw(o.id); }
  Flaky& operator=(Flaky&& o) {
    maybe_throw(o.id);
    id = o.id;
    o.id = -1;
    return *this;
  }
  Flaky& operator=(const Flaky& o) {
    maybe_throw(o.id);
    id = o.id;
    return *this;
  }
  static void maybe_throw(long id) {
    const long p = g_period.load(std::memory_order_relaxed);
    if (p != 0 && g_moves.fetch_add(1, std::memory_order_relaxed) % p == p - 1) throw FlakyMove{id};
  }
};
static_assert(!std::is_nothrow_move_constructible_v<Flaky>, "must take the channel's lock path");

/// Turns throwing on for its lifetime.
struct Throwing {
  explicit Throwing(long period) {
    g_moves.store(0);
    g_period.store(period);
  }
  ~Throwing() { g_period.store(0); }
};

/// Where each value ended.
class Ledger {
 public:
  void received(long id) { add(received_, id); }
  void reported(long id) { add(reported_, id); }
  void recv_threw(long id) { add(recv_threw_, id); }

  /// Every id in [0, n) once, received or reported; a value neither received
  /// nor reported only where the receiver's recv threw for that same value.
  void check(long n, const char* what) const {
    std::lock_guard<std::mutex> g(mu_);
    std::multiset<long> got(received_.begin(), received_.end());
    std::set<long> back(reported_.begin(), reported_.end());
    std::set<long> threw(recv_threw_.begin(), recv_threw_.end());
    long lost_in_return = 0;
    for (long id = 0; id < n; ++id) {
      const auto r = got.count(id);
      ASSERT_LE(r, 1u) << what << ": value " << id << " received " << r << " times";
      ASSERT_FALSE(r == 1 && back.count(id) != 0) << what << ": value " << id << " received and reported back";
      if (r == 0 && back.count(id) == 0) {
        ASSERT_TRUE(threw.count(id) != 0) << what << ": value " << id << " was lost (neither received nor reported)";
        ++lost_in_return;
      }
    }
    ASSERT_EQ(got.size() + back.size() + static_cast<std::size_t>(lost_in_return), static_cast<std::size_t>(n))
        << what;
    std::printf("[throw] %-34s %5zu received, %4zu reported back, %4zu recv throws, %ld lost in the receiver's return\n",
                what, got.size(), back.size(), recv_threw_.size(), lost_in_return);
  }
  std::size_t reported_count() const {
    std::lock_guard<std::mutex> g(mu_);
    return reported_.size();
  }
  std::size_t recv_throw_count() const {
    std::lock_guard<std::mutex> g(mu_);
    return recv_threw_.size();
  }

 private:
  void add(std::vector<long>& v, long id) {
    std::lock_guard<std::mutex> g(mu_);
    v.push_back(id);
  }
  mutable std::mutex mu_;
  std::vector<long> received_, reported_, recv_threw_;
};

// ---- try forms (no waiting) -------------------------------------------------

TEST(ChannelThrow, TryFormsKeepTheLockAndTheValueWhenAMoveThrows) {
  shoal::test::Watchdog dog(std::chrono::seconds(60), "ChannelThrow try forms");
  for (std::size_t cap : {1u, 4u}) {
    Channel<Flaky> ch(cap);
    Ledger ledger;
    const long n = 2'000;
    {
      Throwing on(cap == 1 ? 4 : 3);  // a period that lands on sends and on receives
      long next = 0;
      std::optional<Flaky> pending;  // a value whose try_send threw or found the channel full
      while (next < n || pending) {
        if (!pending) pending.emplace(next++);
        try {
          if (ch.try_send(std::move(*pending)) == shoal::SendStatus::sent) pending.reset();
        } catch (const FlakyMove& e) {
          ASSERT_EQ(e.id, pending->id) << "the value that threw stays with the sender";
        }
        // Drain every other round so the channel is sometimes full.
        if (next % 2 == 0) {
          for (;;) {
            try {
              auto v = ch.try_recv();
              if (!v) break;
              ledger.received(v->id);
            } catch (const FlakyMove& e) {
              ledger.recv_threw(e.id);
            }
          }
        }
      }
      for (;;) {
        try {
          auto v = ch.try_recv();
          if (!v) break;
          ledger.received(v->id);
        } catch (const FlakyMove& e) {
          ledger.recv_threw(e.id);
        }
      }
    }
    EXPECT_GT(ledger.recv_throw_count(), 0u) << "no try_recv saw a throw: the test proves nothing";
    ledger.check(n, cap == 1 ? "try forms, capacity 1" : "try forms, capacity 4");
    // try_recv builds its result in place: nothing may be lost there at all.
    auto copy = ch.try_recv();
    EXPECT_FALSE(copy.has_value());
  }
}

TEST(ChannelThrow, TrySendOfACopyThatThrowsLeavesTheChannelUsable) {
  Channel<Flaky> ch(1);
  const Flaky v(7);
  {
    Throwing on(1);  // every copy throws
    EXPECT_THROW((void)ch.try_send(v), FlakyMove);
  }
  EXPECT_EQ(ch.try_send(v), shoal::SendStatus::sent);
  auto got = ch.try_recv();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->id, 7);
}

// ---- await forms ------------------------------------------------------------

SHOAL_TEST_SUITE(ChannelThrowTest);

// 3 producers and 3 consumers over one channel, every 5th move throwing.
Task<void> exchange(std::size_t cap, Ledger& ledger, long per_producer) {
  Channel<Flaky> ch(cap);
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (long c = 0; c < 3; ++c) {
      s.spawn([&]() -> Task<void> {
        for (;;) {
          try {
            auto v = co_await ch.recv();
            if (!v) co_return;
            ledger.received(v->id);
          } catch (const FlakyMove& e) {
            ledger.recv_threw(e.id);
          }
        }
      });
    }
    co_await shoal::scope([&](Scope& producers) -> Task<void> {
      for (long p = 0; p < 3; ++p) {
        producers.spawn([&, p]() -> Task<void> {
          for (long i = 0; i < per_producer; ++i) {
            const long id = p * per_producer + i;
            try {
              co_await ch.send(Flaky(id));
            } catch (const FlakyMove&) {
              ledger.reported(id);
            }
          }
        });
      }
      co_return;
    });
    ch.close();
  });
}

SHOAL_TEST(ChannelThrowTest, AwaitFormsLoseNoValueAndKeepWorkingAfterEachThrow) {
  std::size_t recv_throws = 0;  // where the throws land depends on the schedule: counted over all capacities
  for (std::size_t cap : {0u, 1u, 4u}) {
    Ledger ledger;
    const long per_producer = shoal::test::scaled(3'000, 300);
    {
      Throwing on(5);
      co_await exchange(cap, ledger, per_producer);
    }
    EXPECT_GT(ledger.reported_count(), 0u);
    recv_throws += ledger.recv_throw_count();
    ledger.check(3 * per_producer, cap == 0 ? "await forms, capacity 0" : cap == 1 ? "await forms, capacity 1"
                                                                                   : "await forms, capacity 4");
  }
  EXPECT_GT(recv_throws, 0u) << "no recv saw a throw: the test proves nothing";
}

// The refill: a full channel, a sender waiting, and the refill's move of the
// waiting sender's value throws. The receiver gets its value; the waiting
// sender's send throws (its value was not sent); the channel works on. On one
// worker the started child runs at the body's first yield and queues.
TEST(ChannelThrow, AThrowingRefillFailsTheWaitingSenderAndTheReceiverKeepsItsValue) {
  shoal::test::Watchdog dog(std::chrono::seconds(60), "ChannelThrow refill");
  Channel<Flaky> ch(1);
  bool sender_threw = false;
  long got = -1;
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               co_await ch.send(Flaky(1));  // full
               auto sender = [&]() -> Task<void> {
                 try {
                   co_await ch.send(Flaky(2));
                 } catch (const FlakyMove& e) {
                   sender_threw = e.id == 2;
                 }
               };
               auto waiting = s.start(sender());
               co_await shoal::checkpoint();  // the child queues behind the full channel
               std::optional<Flaky> v;
               {
                 // The recv's own move out of the buffer is move 1; the refill is move 2.
                 Throwing on(2);
                 v = ch.try_recv();
               }
               if (v) got = v->id;
               co_await std::move(waiting);
             }),
             shoal::RuntimeOptions::with_workers(1));
  EXPECT_EQ(got, 1);
  EXPECT_TRUE(sender_threw);
  EXPECT_EQ(ch.try_send(Flaky(3)), shoal::SendStatus::sent);
  auto v = ch.try_recv();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->id, 3);
}

// ---- blocking forms ---------------------------------------------------------

TEST(ChannelThrow, BlockingFormsLoseNoValueAndKeepWorkingAfterEachThrow) {
  shoal::test::Watchdog dog(std::chrono::seconds(120), "ChannelThrow blocking forms");
  for (std::size_t cap : {0u, 1u, 4u}) {
    Channel<Flaky> ch(cap);
    Ledger ledger;
    const long n = shoal::test::scaled(3'000, 300);
    {
      Throwing on(7);
      std::thread producer([&] {
        for (long id = 0; id < n; ++id) {
          try {
            ch.send_blocking(Flaky(id));
          } catch (const FlakyMove&) {
            ledger.reported(id);
          }
        }
        ch.close();
      });
      std::thread consumer([&] {
        for (;;) {
          try {
            auto v = ch.recv_blocking();
            if (!v) return;
            ledger.received(v->id);
          } catch (const FlakyMove& e) {
            ledger.recv_threw(e.id);
          }
        }
      });
      producer.join();
      consumer.join();
    }
    EXPECT_GT(ledger.reported_count(), 0u);
    ledger.check(n, cap == 0 ? "blocking forms, capacity 0" : cap == 1 ? "blocking forms, capacity 1"
                                                                       : "blocking forms, capacity 4");
  }
}

}  // namespace
