// The runtime: worker count and SHOAL_THREADS, run/block_on, stealing,
// cancelling the main task.
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "src/runtime/placement.hpp"
#include "src/runtime/scheduler.hpp"
#include "support/manual_event.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::Task;

std::string rejection_message(const char* value) {
  try {
    shoal::parse_thread_count(value);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(ShoalThreads, AcceptsOneToTenTwentyFour) {
  EXPECT_EQ(shoal::parse_thread_count("1"), 1u);
  EXPECT_EQ(shoal::parse_thread_count("4"), 4u);
  EXPECT_EQ(shoal::parse_thread_count("1024"), 1024u);
}

TEST(ShoalThreads, RejectsValuesOutsideTheRangeNamingTheVariable) {
  for (const char* bad : {"0", "abc", "5000", "", "-1", "1025", "4x", " 4", "00000001"}) {
    std::string msg = rejection_message(bad);
    EXPECT_NE(msg.find("SHOAL_THREADS"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("1..1024"), std::string::npos) << bad << ": " << msg;
  }
}

using shoal::test::EnvGuard;

TEST(ShoalThreads, RuntimeUsesTheVariable) {
  EnvGuard env("SHOAL_THREADS", "3");
  shoal::Runtime rt;
  EXPECT_EQ(rt.worker_count(), 3u);
}

TEST(ShoalThreads, RuntimeRejectsABadValueAtCreation) {
  EnvGuard env("SHOAL_THREADS", "5000");
  EXPECT_THROW(shoal::Runtime rt, std::invalid_argument);
}

TEST(ShoalThreads, AnEmptyValueCountsAsUnset) {
  EnvGuard env("SHOAL_THREADS", "");  // as containers set it
  shoal::Runtime rt;
  long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_EQ(rt.worker_count(), static_cast<std::size_t>(std::clamp<long>(cores, 2, 32)));
}

TEST(ShoalThreads, DefaultIsOnlineCoresClampedToTwoThroughThirtyTwo) {
  EnvGuard env("SHOAL_THREADS", "1");
  ::unsetenv("SHOAL_THREADS");
  shoal::Runtime rt;
  long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_EQ(rt.worker_count(), static_cast<std::size_t>(std::clamp<long>(cores, 2, 32)));
}

TEST(Runtime, RunCanBeCalledManyTimes) {
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(shoal::run([](int v) -> Task<int> { co_return v * 2; }(i)), i * 2);
  }
}

TEST(Runtime, BlockOnRunsSeveralRootsInSequence) {
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(2));
  EXPECT_EQ(rt.block_on([]() -> Task<int> { co_return 1; }()), 1);
  EXPECT_EQ(rt.block_on([]() -> Task<int> { co_return 2; }()), 2);
}

TEST(Runtime, BlockOnFromAWorkerIsRejected) {
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(2));
  bool rejected = rt.block_on([&]() -> Task<bool> {
    try {
      rt.block_on([]() -> Task<void> { co_return; }());
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  }());
  EXPECT_TRUE(rejected);
}

TEST(Runtime, ChildrenRunInParallelOnSeveralWorkers) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "parallel children");
  std::atomic<int> running{0};
  std::mutex mu;
  std::set<std::thread::id> threads;
  shoal::run(
      shoal::scope([&](shoal::Scope& s) -> Task<void> {
        for (int i = 0; i < 2; ++i) {
          s.spawn([&]() -> Task<void> {
            {
              std::lock_guard<std::mutex> g(mu);
              threads.insert(std::this_thread::get_id());
            }
            // Spin without yielding: only a second worker can let this end.
            running.fetch_add(1);
            while (running.load() < 2) std::this_thread::yield();
            co_return;
          });
        }
        co_return;
      }),
      shoal::RuntimeOptions::with_workers(4));
  EXPECT_EQ(threads.size(), 2u);
}

TEST(Runtime, CancelUnwindsTheMainTaskAndRunRethrows) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "cancel main");
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(4));
  std::atomic<int> waiting{0};
  std::atomic<int> unwound{0};
  shoal::test::ManualEvent never;
  struct Unwind {
    std::atomic<int>* n;
    ~Unwind() { n->fetch_add(1); }
  };
  std::thread canceller([&] {
    while (waiting.load() < 4) std::this_thread::yield();
    rt.cancel();
  });
  EXPECT_THROW(rt.block_on(shoal::scope([&](shoal::Scope& s) -> Task<void> {
                 s.spawn([&]() -> Task<void> {  // waits on an event
                   Unwind u{&unwound};
                   waiting.fetch_add(1);
                   co_await never.wait();
                 });
                 s.spawn([&]() -> Task<void> {  // spins at checkpoints
                   Unwind u{&unwound};
                   waiting.fetch_add(1);
                   for (;;) co_await shoal::checkpoint();
                 });
                 s.spawn([&]() -> Task<void> {  // joins a child that never ends
                   Unwind u{&unwound};
                   co_await shoal::scope([&](shoal::Scope& inner) -> Task<void> {
                     auto h = inner.start([&]() -> Task<int> {
                       Unwind u2{&unwound};
                       waiting.fetch_add(1);
                       co_await never.wait();
                       co_return 1;
                     });
                     co_await h;
                   });
                 });
                 Unwind u{&unwound};
                 waiting.fetch_add(1);
                 co_await never.wait();
               })),
               shoal::Cancelled);
  canceller.join();
  EXPECT_EQ(unwound.load(), 5);
}

}  // namespace

namespace {

// Regression (issue 14.8): spin-waits on another thread (a hook under
// inspection, a timer firing, a spin lock) paused without end, so when the
// other thread was preempted on the same core the waiter burned its whole
// time slice (tens of thousands of pauses) before that thread could run.
// Here both threads share one CPU; the waiter must give it up within a few
// hundred pauses. The count, not the time, is what is checked.
TEST(SpinWait, YieldsTheCoreToAPreemptedPartyWithinAFewHundredPauses) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(static_cast<int>(::sched_getcpu()), &one);
  std::vector<unsigned> counts;
  for (int trial = 0; trial < 20; ++trial) {
    std::atomic<bool> go{false}, done{false};
    std::thread other([&] {
      ::pthread_setaffinity_np(::pthread_self(), sizeof one, &one);
      while (!go.load(std::memory_order_acquire)) shoal::detail::shim::spin_pause();
      done.store(true, std::memory_order_release);
    });
    cpu_set_t saved;
    ::pthread_getaffinity_np(::pthread_self(), sizeof saved, &saved);
    ::pthread_setaffinity_np(::pthread_self(), sizeof one, &one);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // let `other` reach its loop (no correctness depends on it)
    go.store(true, std::memory_order_release);
    shoal::detail::SpinWait wait;
    while (!done.load(std::memory_order_acquire)) wait.pause();
    counts.push_back(wait.count());
    ::pthread_setaffinity_np(::pthread_self(), sizeof saved, &saved);
    other.join();
  }
  const unsigned worst = *std::max_element(counts.begin(), counts.end());
  std::printf("[spin] pauses until the other thread on this core ran: worst %u of %zu trials\n", worst, counts.size());
  EXPECT_LT(worst, 1000u);
}

}  // namespace

namespace {

// A contention move by hand: the channel's (end_at_long_poll) or the lock's.
struct MoveTo {
  std::uint8_t to;
  bool end_at_long_poll;
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    return shoal::detail::migrate_from(shoal::detail::record_of(h), h, to, end_at_long_poll, this);
  }
  void await_resume() const noexcept {}
};

bool soft_pinned() { return shoal::detail::placement::soft_pinned(shoal::detail::current_record()); }

void spin_for(std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

// A task moved to its channel's home stays there only while it trades: one
// poll spent computing (here 1 ms, far past the 8 us bound) frees it at its
// next yield, so stages that compute spread over the workers again. A task
// moved to its lock's holder keeps its pin through such a poll (64 yields).
TEST(SchedulerPin, AChannelMoveEndsAtTheYieldAfterALongPollALockMoveDoesNot) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "soft pins");
  for (const bool channel : {true, false}) {
    bool moved = false, pinned_after_move = false, pinned_after_long_poll = false;
    shoal::run(
        [&]() -> Task<void> {
          const std::uint8_t here = shoal::detail::current_record()->worker;
          co_await MoveTo{static_cast<std::uint8_t>(1 - here), channel};
          moved = shoal::detail::current_record()->worker != here;
          pinned_after_move = soft_pinned();
          spin_for(std::chrono::milliseconds(1));
          co_await shoal::checkpoint();  // a budget yield's path (schedule_yield)
          pinned_after_long_poll = soft_pinned();
        }(),
        shoal::RuntimeOptions::with_workers(2));
    EXPECT_TRUE(moved) << (channel ? "channel" : "lock");
    EXPECT_TRUE(pinned_after_move) << (channel ? "channel" : "lock");
    EXPECT_EQ(pinned_after_long_poll, !channel) << (channel ? "channel" : "lock");
  }
}

// A channel's move is joined by its peers, and they are what wakes it: its
// pin lasts through a wait (on the worker it moved to), where a lock's ends.
// A preempted poll ends a pin as long, so the channel gets a few trials.
// Under a sanitizer the first poll after the move (its clock reads, the
// sleep's set-up) takes longer than the long-poll rule's 1 us floor, so
// the channel's half holds only in an uninstrumented build.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kPollsRunSlow = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr bool kPollsRunSlow = true;
#else
constexpr bool kPollsRunSlow = false;
#endif
#else
constexpr bool kPollsRunSlow = false;
#endif

TEST(SchedulerPin, AChannelMoveLastsThroughAWaitALockMoveDoesNot) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "soft pins");
  for (const bool channel : {true, false}) {
    // Emulated, a poll is as slow as under a sanitizer.
    if (channel && (kPollsRunSlow || shoal::test::under_emulation())) continue;
    int pinned_after_wait = 0, resumed_elsewhere = 0;
    for (int trial = 0; trial < 20 && !(channel && pinned_after_wait > 0); ++trial) {
      shoal::run(
          [&]() -> Task<void> {
            const std::uint8_t here = shoal::detail::current_record()->worker;
            co_await MoveTo{static_cast<std::uint8_t>(1 - here), channel};
            const std::uint8_t moved_to = shoal::detail::current_record()->worker;
            co_await shoal::sleep_for(std::chrono::milliseconds(1));
            if (soft_pinned()) {
              ++pinned_after_wait;
              if (shoal::detail::current_record()->worker != moved_to) ++resumed_elsewhere;
            }
          }(),
          shoal::RuntimeOptions::with_workers(2));
    }
    EXPECT_EQ(pinned_after_wait > 0, channel) << (channel ? "channel" : "lock");
    EXPECT_EQ(resumed_elsewhere, 0) << "the wake ran the pinned task on another worker";
  }
}

// A move to a worker stuck in one step (its thread blocked in poll(2)) is
// freed by the driver watch: the task runs on another worker within a couple
// of ticks, where it writes the byte the stuck one waits for. Without that,
// both wait for each other until the 10 s bound.
TEST(SchedulerPin, AMoveToAWorkerStuckInOneStepRunsElsewhere) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "a move to a stuck worker");
  for (const bool channel : {true, false}) {
    int fd[2];
    ASSERT_EQ(::pipe(fd), 0);
    std::atomic<int> stuck_on{-1};
    bool came = false, ran_elsewhere = false;
    shoal::run(shoal::scope([&](shoal::Scope& s) -> Task<void> {
                 s.spawn([&]() -> Task<void> {
                   stuck_on.store(shoal::detail::current_record()->worker);
                   pollfd pfd{fd[0], POLLIN, 0};
                   came = ::poll(&pfd, 1, 10'000) == 1;
                   co_return;
                 });
                 while (stuck_on.load() < 0) co_await shoal::sleep_for(std::chrono::milliseconds(1));
                 const auto to = static_cast<std::uint8_t>(stuck_on.load());
                 co_await MoveTo{to, channel};
                 ran_elsewhere = shoal::detail::current_record()->worker != to;
                 EXPECT_EQ(::write(fd[1], "x", 1), 1);
               }),
               shoal::RuntimeOptions::with_workers(2));
    ::close(fd[0]);
    ::close(fd[1]);
    EXPECT_TRUE(came) << (channel ? "channel" : "lock") << ": the moved task never left the stuck worker";
    EXPECT_TRUE(ran_elsewhere) << (channel ? "channel" : "lock");
  }
}

// ...but not through a wait that ends a poll spent computing: that frees it
// as a long poll ending at a yield does.
TEST(SchedulerPin, AChannelMoveEndsAtAWaitAfterALongPoll) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "soft pins");
  bool pinned_after_move = false, pinned_after_wait = true;
  shoal::run(
      [&]() -> Task<void> {
        const std::uint8_t here = shoal::detail::current_record()->worker;
        co_await MoveTo{static_cast<std::uint8_t>(1 - here), true};
        pinned_after_move = soft_pinned();
        spin_for(std::chrono::milliseconds(1));
        co_await shoal::sleep_for(std::chrono::milliseconds(1));
        pinned_after_wait = soft_pinned();
      }(),
      shoal::RuntimeOptions::with_workers(2));
  EXPECT_TRUE(pinned_after_move);
  EXPECT_FALSE(pinned_after_wait);
}

// A channel's pin that runs out by count (its 64th yield pinned) was
// trading, not computing: the push of that yield must not wake the parked
// worker to steal it (a wake, a steal and a move back cost chan_throughput
// 10 % when it did). Counted only in trials where the other worker was
// parked and the pin had not ended early (a preempted poll ends it as long).
TEST(SchedulerPin, AChannelPinThatRunsOutByCountWakesNoParkedWorker) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "soft pins");
  int eligible = 0, trials = 0;
  std::uint64_t wakes = 0;
  bool lapsed_every_time = true;
  shoal::run(
      [&]() -> Task<void> {
        shoal::detail::Scheduler* sched = shoal::detail::current_record()->sched;
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (eligible < 10 && trials < 400 && std::chrono::steady_clock::now() < give_up) {
          ++trials;
          const std::uint8_t here = shoal::detail::current_record()->worker;
          co_await MoveTo{static_cast<std::uint8_t>(1 - here), true};
          // 63 yields pinned, each poll a few us (under the long-poll bound
          // of 8 us per 128 awaits), time enough for the worker left to park.
          for (int i = 0; i < 63; ++i) {
            spin_for(std::chrono::microseconds(4));
            co_await shoal::checkpoint();
          }
          if (!soft_pinned() || sched->unparked_workers() != 1) continue;
          const shoal::detail::WakeCounts before = sched->wake_counts();
          co_await shoal::checkpoint();  // the 64th: the pin runs out here
          const shoal::detail::WakeCounts after = sched->wake_counts();
          ++eligible;
          wakes += (after.futex_wakes - before.futex_wakes) + (after.driver_wakes - before.driver_wakes);
          if (soft_pinned()) lapsed_every_time = false;
        }
      }(),
      shoal::RuntimeOptions::with_workers(2));
  std::printf("[pin] %d of %d trials had the other worker parked at the 64th yield; %llu wakes there\n", eligible,
              trials, static_cast<unsigned long long>(wakes));
  ASSERT_GE(eligible, 3) << "the other worker was never parked at the 64th yield: nothing was checked";
  EXPECT_TRUE(lapsed_every_time) << "the pin lasted past 64 yields";
  EXPECT_LE(wakes, 1u) << "the yield that ended the pin woke the parked worker";
}

}  // namespace
