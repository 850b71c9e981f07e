// Lost-wakeup stress: hand-offs between tasks on different workers while
// workers park and unpark, hand-offs across the thread<->task bridge, and
// timers that must wake a parked worker. Every total is exact; a lost wake
// shows up as a hang, which the watchdog turns into a failure with a dump.
// Randomized parts print their seed; rerun with SHOAL_SEED.
//
// A wake from a task on a worker goes to that worker's LIFO slot, so a
// ping-pong pair settles on one worker, and a wake crosses workers only after
// a steal. The tests therefore mix random yields (a yield queues the task and
// wakes a parked worker), stretches of work long enough for that worker to
// wake and steal (FanOutFanInStress), more tasks than workers, more workers
// than cores, and plain threads and timers as wakers. Each task-to-task test
// prints roughly how many wakes came from another worker than the one the
// waiter suspended on: a coverage figure, not an assertion (it depends on the
// machine's scheduling; about 1 in 7 in FanOutFanInStress on 2 workers).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "support/frame_counter.hpp"
#include "support/manual_event.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::Channel;
using shoal::Scope;
using shoal::Task;
using shoal::test::scaled;

constexpr std::chrono::seconds kDog{300};

// True one time in `n`, from a per-task generator.
bool one_in(std::mt19937_64& rng, unsigned n) { return rng() % n == 0; }

// Up to `max_iterations` spins (about a nanosecond each) of work that touches
// no memory, so the task is still running when another worker wakes up and
// steals what it queued.
void busy(std::mt19937_64& rng, unsigned max_iterations) {
  const unsigned n = static_cast<unsigned>(rng() % max_iterations);
  for (unsigned i = 0; i < n; ++i) asm volatile("");
}

// Where a waiter last suspended, so its waker can count wakes that cross
// workers (the race a lost wake-up needs). Relaxed and approximate: the
// waker may look before the waiter got there.
struct CrossCounter {
  std::atomic<std::thread::id> waiter{};
  std::atomic<long> cross{0};
  void before_wait() { waiter.store(std::this_thread::get_id(), std::memory_order_relaxed); }
  void before_wake() {
    if (waiter.load(std::memory_order_relaxed) != std::this_thread::get_id()) {
      cross.fetch_add(1, std::memory_order_relaxed);
    }
  }
};

long total_cross(const std::vector<CrossCounter>& v) {
  long n = 0;
  for (const auto& c : v) n += c.cross.load();
  return n;
}

// ---- task <-> task --------------------------------------------------------

// Pairs of tasks ping-pong through fresh one-shot events on 2 workers, with
// random yields. A pair settles on one worker between steals, so most of
// these wakes stay on one worker (FanOutFanInStress makes them cross); what
// this adds is volume: 10^6 round trips while the idle worker keeps parking
// and being woken by the yields.
// Events are allocated per chunk (10^6 rounds of two events would hold
// ~150 MB); each chunk is a fresh scope, so the pairs start spread out again.
// 10^6 round trips (2 * 10^6 wakes) at scale 1, every one counted.
TEST(LostWakeupStress, HandOffsBetweenWorkersAreNeverLost) {
  const std::uint64_t seed = shoal::test::test_seed("LostWakeupStress.HandOffsBetweenWorkersAreNeverLost");
  shoal::test::Watchdog dog(kDog, "LostWakeupStress.HandOffsBetweenWorkersAreNeverLost");
  shoal::test::FrameCounter frames;
  constexpr long kPairs = 4;
  const long rounds = scaled(1'000'000, 20'000) / kPairs * kPairs;
  const long chunk = 2'500;  // per pair
  std::atomic<long> a_count{0}, b_count{0};
  std::vector<CrossCounter> cross(2 * kPairs);
  auto rt = std::make_unique<shoal::Runtime>(shoal::RuntimeOptions::with_workers(2));
  for (long base = 0; base < rounds / kPairs; base += chunk) {
    const long n = std::min(chunk, rounds / kPairs - base);
    std::vector<std::unique_ptr<shoal::test::ManualEvent>> ping, pong;
    for (long i = 0; i < n * kPairs; ++i) {
      ping.push_back(std::make_unique<shoal::test::ManualEvent>());
      pong.push_back(std::make_unique<shoal::test::ManualEvent>());
    }
    rt->block_on(shoal::scope([&](Scope& s) -> Task<void> {
      for (long k = 0; k < kPairs; ++k) {
        const auto pair_seed = seed + static_cast<std::uint64_t>(base * kPairs + k);
        CrossCounter& to_b = cross[2 * k];
        CrossCounter& to_a = cross[2 * k + 1];
        s.spawn([&, k, n, rng = std::mt19937_64(pair_seed)]() mutable -> Task<void> {
          for (long i = k * n; i < (k + 1) * n; ++i) {
            to_b.before_wake();
            ping[i]->set();
            if (one_in(rng, 8)) co_await shoal::checkpoint();
            busy(rng, 512);
            to_a.before_wait();
            co_await pong[i]->wait();
            a_count.fetch_add(1, std::memory_order_relaxed);
          }
        });
        s.spawn([&, k, n, rng = std::mt19937_64(~pair_seed)]() mutable -> Task<void> {
          for (long i = k * n; i < (k + 1) * n; ++i) {
            to_b.before_wait();
            co_await ping[i]->wait();
            b_count.fetch_add(1, std::memory_order_relaxed);
            if (one_in(rng, 8)) co_await shoal::checkpoint();
            busy(rng, 512);
            to_a.before_wake();
            pong[i]->set();
          }
        });
      }
      co_return;
    }));
  }
  rt.reset();  // what the runtime allocates through the frame allocator goes with it
  EXPECT_EQ(a_count.load(), rounds);
  EXPECT_EQ(b_count.load(), rounds);
  EXPECT_EQ(frames.live(), 0);
  std::printf("%ld round trips, ~%ld wakes crossed workers\n", rounds, total_cross(cross));
}

class FanOutFanInStress : public ::testing::TestWithParam<std::size_t> {};

// A coordinator hands a round number to each of 4 tasks and waits for all
// of them to report back, round after round. The fan-out queues more than
// one task, which wakes parked workers that steal them; the reports then
// come from several workers at once to a coordinator suspended on one of
// them. Between rounds the workers run dry and park. Every report carries
// its round, and the totals are exact: 8 hand-offs a round, 10^6 at scale 1.
TEST_P(FanOutFanInStress, EveryRoundCollectsEveryReport) {
  const std::uint64_t seed = shoal::test::test_seed("FanOutFanInStress.EveryRoundCollectsEveryReport");
  shoal::test::Watchdog dog(kDog, "FanOutFanInStress.EveryRoundCollectsEveryReport");
  shoal::test::FrameCounter frames;
  constexpr std::size_t kTeam = 4;
  const long rounds = scaled(125'000, 2'500);
  std::vector<std::unique_ptr<Channel<long>>> order;
  for (std::size_t k = 0; k < kTeam; ++k) order.push_back(std::make_unique<Channel<long>>(1));
  Channel<long> report(0);
  std::atomic<long> handoffs{0}, bad{0};
  std::vector<CrossCounter> crosses(kTeam + 1);
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               for (std::size_t k = 0; k < kTeam; ++k) {
                 s.spawn([&, k, rng = std::mt19937_64(seed + k)]() mutable -> Task<void> {
                   for (;;) {
                     crosses[k].before_wait();
                     auto r = co_await order[k]->recv();
                     if (!r) break;
                     handoffs.fetch_add(1, std::memory_order_relaxed);
                     // Now and then long enough (tens of us) for a parked worker to wake and steal.
                     busy(rng, one_in(rng, 16) ? 100'000 : 1'024);
                     crosses[kTeam].before_wake();
                     co_await report.send(*r);
                   }
                 });
               }
               for (long r = 0; r < rounds; ++r) {
                 for (std::size_t k = 0; k < kTeam; ++k) {
                   crosses[k].before_wake();
                   co_await order[k]->send(r);
                 }
                 for (std::size_t k = 0; k < kTeam; ++k) {
                   crosses[kTeam].before_wait();
                   auto v = co_await report.recv();
                   handoffs.fetch_add(1, std::memory_order_relaxed);
                   if (!v || *v != r) bad.fetch_add(1);
                 }
               }
               for (auto& c : order) c->close();
             }),
             shoal::RuntimeOptions::with_workers(GetParam()));
  EXPECT_EQ(handoffs.load(), rounds * 2 * static_cast<long>(kTeam));
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(frames.live(), 0);
  std::printf("%ld hand-offs, ~%ld crossed workers\n", handoffs.load(), total_cross(crosses));
}

INSTANTIATE_TEST_SUITE_P(Workers, FanOutFanInStress, ::testing::Values(std::size_t{2}, std::size_t{8}, std::size_t{16}),
                         shoal::test::worker_param_name);

struct PingPongParam {
  std::size_t workers;
  std::size_t pairs;
  std::size_t capacity;
};

class ChannelPingPongStress : public ::testing::TestWithParam<PingPongParam> {};

// `pairs` ping-pong pairs through two channels each; every message carries
// its sequence number, so a lost, duplicated or reordered hand-off is caught
// as well as a lost wake. The 8-worker cases run more workers than the
// machine has cores, so workers are descheduled mid-protocol.
TEST_P(ChannelPingPongStress, EveryMessageArrivesOnceAndInOrder) {
  const PingPongParam p = GetParam();
  const std::uint64_t seed = shoal::test::test_seed("ChannelPingPongStress.EveryMessageArrivesOnceAndInOrder");
  shoal::test::Watchdog dog(kDog, "ChannelPingPongStress");
  shoal::test::FrameCounter frames;
  const long per_pair = scaled(200'000, 4'000) / static_cast<long>(p.pairs);
  std::atomic<long> received{0}, bad{0};
  std::vector<CrossCounter> crosses(2 * p.pairs);
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               for (std::size_t k = 0; k < p.pairs; ++k) {
                 CrossCounter& to_b = crosses[2 * k];
                 CrossCounter& to_a = crosses[2 * k + 1];
                 auto there = std::make_shared<Channel<long>>(p.capacity);
                 auto back = std::make_shared<Channel<long>>(p.capacity);
                 s.spawn([&, there, back, rng = std::mt19937_64(seed * 31 + k)]() mutable -> Task<void> {
                   for (long i = 0; i < per_pair; ++i) {
                     to_b.before_wake();
                     co_await there->send(i);
                     if (one_in(rng, 6)) co_await shoal::checkpoint();
                     busy(rng, 512);
                     to_a.before_wait();
                     auto v = co_await back->recv();
                     if (!v || *v != i) bad.fetch_add(1);
                     received.fetch_add(1, std::memory_order_relaxed);
                   }
                 });
                 s.spawn([&, there, back, rng = std::mt19937_64(seed * 37 + k)]() mutable -> Task<void> {
                   for (long i = 0; i < per_pair; ++i) {
                     to_b.before_wait();
                     auto v = co_await there->recv();
                     if (!v || *v != i) bad.fetch_add(1);
                     received.fetch_add(1, std::memory_order_relaxed);
                     if (one_in(rng, 6)) co_await shoal::checkpoint();
                     busy(rng, 512);
                     to_a.before_wake();
                     co_await back->send(i);
                   }
                 });
               }
               co_return;
             }),
             shoal::RuntimeOptions::with_workers(p.workers));
  EXPECT_EQ(received.load(), 2 * per_pair * static_cast<long>(p.pairs));
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(frames.live(), 0);
  std::printf("%ld hand-offs, ~%ld crossed workers\n", received.load(), total_cross(crosses));
}

INSTANTIATE_TEST_SUITE_P(Shapes, ChannelPingPongStress,
                         ::testing::Values(PingPongParam{2, 1, 0}, PingPongParam{2, 1, 1},
                                           PingPongParam{8, 4, 0}, PingPongParam{8, 4, 1}),
                         [](const ::testing::TestParamInfo<PingPongParam>& i) {
                           return std::to_string(i.param.workers) + "workers_" + std::to_string(i.param.pairs) +
                                  "pairs_capacity" + std::to_string(i.param.capacity);
                         });

struct RingParam {
  std::size_t workers;
  std::size_t tokens;
};

class TokenRingStress : public ::testing::TestWithParam<RingParam> {};

// Tokens passed around a ring of 16 tasks through rendezvous channels. With
// one token exactly one task is runnable at any moment, so the other workers
// park between hops, and a random yield wakes one of them to steal the
// holder. With several tokens the workers share real work and steal from one
// another. 8 workers run more workers than the machine has cores. Every
// token makes exactly its number of hops, in order.
TEST_P(TokenRingStress, EveryTokenMakesEveryHop) {
  const RingParam p = GetParam();
  const std::uint64_t seed = shoal::test::test_seed("TokenRingStress.EveryTokenMakesEveryHop");
  shoal::test::Watchdog dog(kDog, "TokenRingStress.EveryTokenMakesEveryHop");
  shoal::test::FrameCounter frames;
  constexpr std::size_t kRing = 16;
  const long hops_per_token = scaled(200'000, 4'000) / static_cast<long>(p.tokens);
  // A token is id * 2^32 + hops made so far.
  constexpr long kId = 1L << 32;
  std::vector<std::unique_ptr<Channel<long>>> link;
  for (std::size_t i = 0; i < kRing; ++i) link.push_back(std::make_unique<Channel<long>>(0));
  std::vector<std::atomic<long>> made(p.tokens);
  std::vector<CrossCounter> crosses(kRing);
  std::atomic<long> finished{0}, bad{0};
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               for (std::size_t k = 0; k < kRing; ++k) {
                 s.spawn([&, k, rng = std::mt19937_64(seed + k)]() mutable -> Task<void> {
                   Channel<long>& in = *link[k];
                   Channel<long>& out = *link[(k + 1) % kRing];
                   for (;;) {
                     crosses[k].before_wait();
                     auto v = co_await in.recv();
                     if (!v) break;
                     const std::size_t id = static_cast<std::size_t>(*v / kId);
                     const long hop = *v % kId;
                     if (id >= p.tokens) {
                       bad.fetch_add(1);  // a corrupt token: the run then fails or hangs (watchdog)
                       continue;
                     }
                     if (made[id].fetch_add(1) != hop) bad.fetch_add(1);
                     if (hop + 1 == hops_per_token) {
                       if (finished.fetch_add(1) + 1 == static_cast<long>(p.tokens)) {
                         for (auto& c : link) c->close();  // no token left, so no send is pending
                       }
                       continue;
                     }
                     if (one_in(rng, 4)) co_await shoal::checkpoint();
                     busy(rng, 1024);
                     crosses[(k + 1) % kRing].before_wake();
                     co_await out.send(*v + 1);
                   }
                 });
               }
               // Tokens enter at evenly spaced tasks; the ring is not full, so it cannot jam.
               for (std::size_t t = 0; t < p.tokens; ++t) {
                 co_await link[t * (kRing / p.tokens)]->send(static_cast<long>(t) * kId);
               }
             }),
             shoal::RuntimeOptions::with_workers(p.workers));
  for (std::size_t t = 0; t < p.tokens; ++t) EXPECT_EQ(made[t].load(), hops_per_token) << "token " << t;
  EXPECT_EQ(finished.load(), static_cast<long>(p.tokens));
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(frames.live(), 0);
  std::printf("%ld hops, ~%ld crossed workers\n", hops_per_token * static_cast<long>(p.tokens),
              total_cross(crosses));
}

INSTANTIATE_TEST_SUITE_P(Shapes, TokenRingStress,
                         ::testing::Values(RingParam{2, 1}, RingParam{8, 1}, RingParam{2, 3}, RingParam{8, 4}),
                         [](const ::testing::TestParamInfo<RingParam>& i) {
                           return std::to_string(i.param.workers) + "workers_" + std::to_string(i.param.tokens) +
                                  "tokens";
                         });

// ---- thread <-> task --------------------------------------------------------

struct BridgeParam {
  std::size_t workers;
  std::size_t capacity;
};

class ThreadBridgeStress : public ::testing::TestWithParam<BridgeParam> {};

// Plain threads send_blocking into `in`, tasks forward from `in` to `out`,
// plain threads recv_blocking from `out`. Both directions cross the bridge;
// every value arrives exactly once.
TEST_P(ThreadBridgeStress, BlockingThreadsAndTasksExchangeExactTotals) {
  const BridgeParam p = GetParam();
  shoal::test::Watchdog dog(kDog, "ThreadBridgeStress.BlockingThreadsAndTasksExchangeExactTotals");
  constexpr int kProducers = 2, kForwarders = 3, kConsumers = 2;
  const long per_producer = scaled(50'000, 1'000);
  const long total = per_producer * kProducers;
  Channel<long> in(p.capacity), out(p.capacity);
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(total));
  std::atomic<long> forwarded{0}, consumed{0}, bad{0};
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(p.workers));

  std::vector<std::thread> producers, consumers;
  for (int t = 0; t < kProducers; ++t) {
    producers.emplace_back([&, t] {
      for (long i = 0; i < per_producer; ++i) in.send_blocking(t * per_producer + i);
    });
  }
  for (int t = 0; t < kConsumers; ++t) {
    consumers.emplace_back([&] {
      while (auto v = out.recv_blocking()) {
        if (*v < 0 || *v >= total) {
          bad.fetch_add(1);
          continue;
        }
        seen[static_cast<std::size_t>(*v)].fetch_add(1, std::memory_order_relaxed);
        consumed.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  std::thread closer([&] {
    for (auto& t : producers) t.join();
    in.close();
  });
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    for (int k = 0; k < kForwarders; ++k) {
      s.spawn([&]() -> Task<void> {
        while (auto v = co_await in.recv()) {
          co_await out.send(*v);
          forwarded.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    co_return;
  }));
  out.close();
  closer.join();
  for (auto& t : consumers) t.join();

  EXPECT_EQ(forwarded.load(), total);
  EXPECT_EQ(consumed.load(), total);
  EXPECT_EQ(bad.load(), 0);
  long wrong = 0;
  for (auto& s : seen) wrong += s.load() != 1;
  EXPECT_EQ(wrong, 0) << "values not received exactly once";
}

INSTANTIATE_TEST_SUITE_P(Shapes, ThreadBridgeStress,
                         ::testing::Values(BridgeParam{1, 0}, BridgeParam{2, 1}, BridgeParam{4, 0},
                                           BridgeParam{4, 8}),
                         [](const ::testing::TestParamInfo<BridgeParam>& i) {
                           return std::to_string(i.param.workers) + "workers_capacity" +
                                  std::to_string(i.param.capacity);
                         });

// One thread and one task ping-pong through two rendezvous channels. While
// the thread works the runtime has nothing to do, so every message to the
// task wakes a parked worker and every reply wakes a blocked thread.
TEST(ThreadBridgeStress, ThreadTaskPingPongWakesAParkedWorkerEachTime) {
  shoal::test::Watchdog dog(kDog, "ThreadBridgeStress.ThreadTaskPingPongWakesAParkedWorkerEachTime");
  const long rounds = scaled(50'000, 1'000);
  Channel<long> to_task(0), to_thread(0);
  std::atomic<long> bad{0};
  long task_count = 0;
  std::thread peer([&] {
    for (long i = 0; i < rounds; ++i) {
      to_task.send_blocking(i);
      auto v = to_thread.recv_blocking();
      if (!v || *v != i + 1) bad.fetch_add(1);
    }
    to_task.close();
  });
  shoal::run(
      [&]() -> Task<void> {
        while (auto v = co_await to_task.recv()) {
          ++task_count;
          co_await to_thread.send(*v + 1);
        }
      }(),
      shoal::RuntimeOptions::with_workers(2));
  peer.join();
  EXPECT_EQ(task_count, rounds);
  EXPECT_EQ(bad.load(), 0);
}

// ---- timers waking parked workers ------------------------------------------

class TimerWakeStress : public ::testing::TestWithParam<std::size_t> {};

// A sleep of 1 us to 1 ms, log-uniform.
std::chrono::microseconds short_random_sleep(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> exp10(0.0, 3.0);
  return std::chrono::microseconds(static_cast<long>(std::pow(10.0, exp10(rng))));
}

// A ring of sleepers passes a few tokens on: each holder sleeps a short
// random time and hands the token to the next. Nothing else runs, so every
// wake-up comes from a timer firing while all workers are parked. Each token
// carries its remaining hops; the total is exact.
TEST_P(TimerWakeStress, SleepersWakeIdleWorkersAndHandTokensOn) {
  const std::uint64_t seed = shoal::test::test_seed("TimerWakeStress.SleepersWakeIdleWorkersAndHandTokensOn");
  shoal::test::Watchdog dog(kDog, "TimerWakeStress.SleepersWakeIdleWorkersAndHandTokensOn");
  shoal::test::FrameCounter frames;
  constexpr std::size_t kRing = 32, kTokens = 8;
  const long hops_per_token = scaled(1'500, 50);
  std::vector<std::unique_ptr<Channel<long>>> inbox;
  for (std::size_t i = 0; i < kRing; ++i) inbox.push_back(std::make_unique<Channel<long>>(1));
  for (std::size_t t = 0; t < kTokens; ++t) {
    ASSERT_EQ(inbox[t * (kRing / kTokens)]->try_send(hops_per_token), shoal::SendStatus::sent);
  }
  std::atomic<long> hops{0}, finished{0};
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               for (std::size_t k = 0; k < kRing; ++k) {
                 s.spawn([&, k, rng = std::mt19937_64(seed + k)]() mutable -> Task<void> {
                   while (auto left = co_await inbox[k]->recv()) {
                     co_await shoal::sleep_for(short_random_sleep(rng));
                     hops.fetch_add(1, std::memory_order_relaxed);
                     if (*left == 1) {
                       if (finished.fetch_add(1) + 1 == static_cast<long>(kTokens)) {
                         for (auto& c : inbox) c->close();  // no token left, so no send is pending
                       }
                       continue;
                     }
                     co_await inbox[(k + 1) % kRing]->send(*left - 1);
                   }
                 });
               }
               co_return;
             }),
             shoal::RuntimeOptions::with_workers(GetParam()));
  EXPECT_EQ(hops.load(), hops_per_token * static_cast<long>(kTokens));
  EXPECT_EQ(finished.load(), static_cast<long>(kTokens));
  EXPECT_EQ(frames.live(), 0);
}

// A sleeper parked for an hour keeps the driver worker in the backend with
// a deadline an hour away. A plain thread then pokes the runtime: the poke
// wakes a worker (the most recently parked, so not the driver when there are
// several), whose task inserts a short timer and goes idle again. The driver
// must be woken for the earlier deadline, or the round waits an hour (and the
// watchdog fails the test). Each round waits for the reply, so every round
// starts with all workers parked.
TEST_P(TimerWakeStress, TimerInsertedWhileTheDriverSleepsLongerWakesIt) {
  const std::uint64_t seed = shoal::test::test_seed("TimerWakeStress.TimerInsertedWhileTheDriverSleepsLongerWakesIt");
  shoal::test::Watchdog dog(kDog, "TimerWakeStress.TimerInsertedWhileTheDriverSleepsLongerWakesIt");
  shoal::test::FrameCounter frames;
  const long rounds = scaled(1'500, 50);
  Channel<long> poke(0), reply(0);
  std::atomic<long> bad{0};
  long woken = 0;
  auto rt = std::make_unique<shoal::Runtime>(shoal::RuntimeOptions::with_workers(GetParam()));
  std::thread peer([&] {
    for (long i = 0; i < rounds; ++i) {
      poke.send_blocking(i);
      auto v = reply.recv_blocking();
      if (!v || *v != i) bad.fetch_add(1);
    }
    poke.close();
  });
  rt->block_on(shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([]() -> Task<void> { co_await shoal::sleep_for(std::chrono::hours(1)); });
    std::mt19937_64 rng(seed);
    co_await s.start([&]() -> Task<void> {
      while (auto v = co_await poke.recv()) {
        co_await shoal::sleep_for(short_random_sleep(rng));
        ++woken;
        co_await reply.send(*v);
      }
    });
    s.cancel();  // the hour-long sleeper
  }));
  peer.join();
  rt.reset();  // what the runtime allocated through the frame allocator goes with it
  EXPECT_EQ(woken, rounds);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(frames.live(), 0);
}

INSTANTIATE_TEST_SUITE_P(Workers, TimerWakeStress,
                         ::testing::Values(std::size_t{1}, std::size_t{2}, std::size_t{4}, std::size_t{16}),
                         shoal::test::worker_param_name);

}  // namespace
