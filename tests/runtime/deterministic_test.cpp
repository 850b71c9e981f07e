// The deterministic executor: one worker, ready queue shuffled by a seed.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Task;

std::vector<int> trace_for(std::uint64_t seed) {
  std::vector<int> trace;
  shoal::run(shoal::scope([&](shoal::Scope& s) -> Task<void> {
               for (int i = 0; i < 16; ++i) {
                 s.spawn([&trace, i]() -> Task<void> {
                   for (int step = 0; step < 4; ++step) {
                     trace.push_back(i * 10 + step);
                     co_await shoal::checkpoint();
                   }
                 });
               }
               co_return;
             }),
             shoal::RuntimeOptions::deterministic(seed));
  return trace;
}

TEST(DeterministicExecutor, SameSeedGivesTheSameTrace) {
  for (std::uint64_t seed : {1u, 2u, 77u}) {
    auto a = trace_for(seed);
    auto b = trace_for(seed);
    EXPECT_EQ(a.size(), 64u);
    EXPECT_EQ(a, b) << "seed " << seed;
  }
}

TEST(DeterministicExecutor, DifferentSeedsShuffleTheSchedule) {
  auto a = trace_for(1);
  int differing = 0;
  for (std::uint64_t seed = 2; seed < 6; ++seed) differing += trace_for(seed) != a ? 1 : 0;
  EXPECT_GT(differing, 0);
}

// Spins over checkpoints until `done` or a bound far past any deadline the
// caller set; true if it was stopped by `done`.
Task<bool> spin_until(const std::atomic<bool>& done) {
  const auto bound = std::chrono::steady_clock::now() + 10s;
  while (!done.load()) {
    if (std::chrono::steady_clock::now() > bound) co_return false;
    co_await shoal::checkpoint();
  }
  co_return true;
}

TEST(DeterministicExecutor, ADeadlineFiresWhileItsTaskKeepsRunningOnTheRealClock) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const std::atomic<bool> never{false};
    bool timed_out = false;
    bool bound_reached = false;
    shoal::run(
        [&]() -> Task<void> {
          try {
            bound_reached = !(co_await shoal::with_timeout(20ms, spin_until(never)));
          } catch (const shoal::TimedOut&) {
            timed_out = true;
          }
        }(),
        shoal::RuntimeOptions::deterministic(seed));
    EXPECT_TRUE(timed_out) << "seed " << seed << ": the 20 ms deadline never fired while the task ran";
    EXPECT_FALSE(bound_reached) << "seed " << seed;
  }
}

TEST(DeterministicExecutor, ReadyIoWakesItsWaiterWhileAnotherTaskKeepsRunning) {
  for (std::uint64_t seed : {1u, 2u, 3u, 4u}) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    shoal::net::Stream in(sv[0]);
    const int out = sv[1];
    std::atomic<bool> got{false};
    bool woke = false;
    shoal::run(shoal::scope([&](shoal::Scope& s) -> Task<void> {
                 s.spawn([&]() -> Task<void> {
                   std::byte b[1];
                   (void)co_await in.read_some(b);
                   got.store(true);
                 });
                 s.spawn([&]() -> Task<void> {
                   EXPECT_EQ(::write(out, "x", 1), 1);
                   woke = co_await spin_until(got);
                 });
                 co_return;
               }),
               shoal::RuntimeOptions::deterministic(seed));
    ::close(out);
    EXPECT_TRUE(woke) << "seed " << seed << ": the reader never saw its byte while the other task ran";
  }
}

TEST(DeterministicExecutor, UsesOneWorker) {
  shoal::Runtime rt([] { auto o = shoal::RuntimeOptions::deterministic(3); o.workers = 8; return o; }());
  EXPECT_EQ(rt.worker_count(), 1u);
}

}  // namespace
