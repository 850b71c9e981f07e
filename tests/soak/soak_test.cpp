// Soak: one long-lived runtime serving round after round of a mixed
// workload (fan-out with faults, deadlines that hit and miss, channel
// pipelines, sleeps, blocking work, outside cancels). After every round the
// outcome matches what the round was built to do and no frame is left
// alive, so anything that accumulates (leaked frames, stuck timers, lost
// wakeups) shows up as a failed round or a watchdog dump, not a slow drift.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Channel;
using shoal::Scope;
using shoal::Task;

struct Boom : std::runtime_error {
  Boom() : std::runtime_error("boom") {}
};

struct Round {
  int children = 0;
  int faulty = -1;       // index of the child that throws, or -1
  bool deadline = false;  // a with_timeout that must hit
  bool blocking = false;
  int pipeline = 0;       // values through a 3-stage channel pipeline
  int capacity = 0;
};

Task<long> pipeline(int n, int capacity) {
  Channel<long> a(static_cast<std::size_t>(capacity)), b(static_cast<std::size_t>(capacity));
  long sum = 0;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      for (long i = 1; i <= n; ++i) co_await a.send(i);
      a.close();
    });
    s.spawn([&]() -> Task<void> {
      while (auto v = co_await a.recv()) co_await b.send(*v * 3);
      b.close();
    });
    while (auto v = co_await b.recv()) sum += *v;
  });
  co_return sum;
}

Task<void> round_body(Round r, std::atomic<long>& done) {
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (int i = 0; i < r.children; ++i) {
      s.spawn([&done, i, r]() -> Task<void> {
        co_await shoal::sleep_for(std::chrono::microseconds((i * 37) % 200));
        if (i == r.faulty) throw Boom();
        co_await shoal::checkpoint();
        done.fetch_add(1, std::memory_order_relaxed);
      });
    }
    if (r.pipeline > 0) {
      const long sum = co_await pipeline(r.pipeline, r.capacity);
      const long want = 3L * r.pipeline * (r.pipeline + 1) / 2;
      if (sum != want) throw std::logic_error("pipeline lost values: " + std::to_string(sum));
    }
    if (r.blocking) {
      const int v = co_await shoal::spawn_blocking([] { return 41; });
      if (v != 41) throw std::logic_error("blocking result");
    }
    if (r.deadline) {
      Channel<int> never(1);
      bool timed_out = false;
      try {
        co_await shoal::with_timeout(200us, [&]() -> Task<void> { (void)co_await never.recv(); }());
      } catch (const shoal::TimedOut&) {
        timed_out = true;
      }
      if (!timed_out) throw std::logic_error("deadline did not hit");
    }
  });
}

TEST(Soak, MixedWorkloadRoundsOnOneLongLivedRuntime) {
  const long rounds = shoal::test::scaled(1500, 50);
  shoal::test::Watchdog dog(std::chrono::seconds(600), "Soak");
  std::mt19937_64 rng(shoal::test::test_seed("Soak"));
  shoal::test::FrameCounter frames;
  auto rt_owner = std::make_unique<shoal::Runtime>(shoal::RuntimeOptions::with_workers(4));
  shoal::Runtime& rt = *rt_owner;
  long faults = 0, clean = 0, cancels = 0;
  for (long k = 0; k < rounds; ++k) {
    Round r;
    r.children = static_cast<int>(rng() % 64);
    r.faulty = (rng() % 4 == 0 && r.children > 0) ? static_cast<int>(rng() % static_cast<unsigned>(r.children)) : -1;
    r.deadline = rng() % 3 == 0;
    r.blocking = rng() % 5 == 0;
    r.pipeline = static_cast<int>(rng() % 100);
    r.capacity = static_cast<int>(rng() % 3) * 4;
    const bool outside_cancel = rng() % 10 == 0;
    std::atomic<long> done{0};
    std::thread canceller;
    if (outside_cancel) {
      canceller = std::thread([&rt] {
        std::this_thread::sleep_for(50us);
        rt.cancel();
      });
    }
    try {
      rt.block_on(round_body(r, done));
      ASSERT_EQ(r.faulty, -1) << "round " << k << ": the fault was lost";
      ASSERT_EQ(done.load(), r.children) << "round " << k;
      ++clean;
    } catch (const Boom&) {
      ASSERT_NE(r.faulty, -1) << "round " << k;
      ++faults;
    } catch (const shoal::Cancelled&) {
      ASSERT_TRUE(outside_cancel) << "round " << k << ": cancelled without a cancel";
      ++cancels;
    }
    if (canceller.joinable()) canceller.join();
    // Nothing outlives a round (a timer allocates nothing).
    ASSERT_EQ(frames.live(), 0) << "round " << k << ": frames left alive";
  }
  rt_owner.reset();
  EXPECT_EQ(frames.live(), 0);
  std::printf("[soak] %ld rounds: %ld clean, %ld faulted, %ld cancelled from outside\n", rounds, clean, faults,
              cancels);
  EXPECT_GT(clean, 0);
  EXPECT_GT(faults, 0);
}

}  // namespace
