// Sync stress (run under TSan in CI): tasks and plain threads hammer a
// Mutex, an RwLock and a Semaphore with random waiter cancellations, throws
// inside bodies, timeouts and try-forms. Invariants: never more than one
// holder of the mutex (and no reader with a writer), never more than the
// permits inside the semaphore, every permit back at the end, and no lost
// wakeup (a hang, which the watchdog turns into a failure). Randomized:
// prints its seed; rerun with SHOAL_SEED.
#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "shoal/sync.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Task;
using shoal::test::scaled;

struct Boom : std::runtime_error {
  Boom() : std::runtime_error("boom") {}
};

struct Shared {
  shoal::Mutex mutex{"stress mutex"};
  shoal::RwLock rw{"stress rwlock"};
  shoal::Semaphore sem{3, "stress semaphore"};
  std::atomic<int> in_mutex{0}, writers{0}, readers{0}, in_sem{0};
  std::atomic<long> violations{0}, bodies{0}, cancels{0}, throws{0}, timeouts{0}, busy{0};
  long plain_counter = 0;  // guarded by `mutex` only
  long expected_counter = 0;
  std::atomic<long> counted{0};

  void enter(std::atomic<int>& c, int limit) {
    if (c.fetch_add(1) + 1 > limit) violations.fetch_add(1);
  }
};

/// A body that holds the lock for a while (sometimes across a suspension)
/// and sometimes throws.
Task<void> body(Shared& sh, std::atomic<int>& inside, int limit, std::mt19937_64& rng, bool count) {
  sh.enter(inside, limit);
  struct Leave {
    std::atomic<int>& c;
    ~Leave() { c.fetch_sub(1); }
  } leave{inside};
  if (count) {
    ++sh.plain_counter;
    sh.counted.fetch_add(1);
  }
  sh.bodies.fetch_add(1);
  const unsigned r = static_cast<unsigned>(rng() % 16);
  if (r < 3) co_await shoal::sleep_for(std::chrono::microseconds(rng() % 200));
  if (r == 3) co_await shoal::checkpoint();
  if (r == 4) {
    sh.throws.fetch_add(1);
    throw Boom();
  }
}

Task<void> one_op(Shared& sh, std::mt19937_64& rng) {
  const unsigned kind = static_cast<unsigned>(rng() % 7);
  // Every wait may be cut short by a deadline (a cancellation while waiting,
  // or while holding: the lock must be released either way).
  const auto limit = std::chrono::microseconds(rng() % 4 == 0 ? rng() % 300 : 100'000);
  auto run = [&]() -> Task<void> {
    switch (kind) {
      case 0:
      case 1:
        co_await shoal::with_lock(sh.mutex, [&]() -> Task<void> { co_await body(sh, sh.in_mutex, 1, rng, true); });
        break;
      case 2: {
        auto r = co_await shoal::with_try_lock(sh.mutex, [&]() -> Task<void> { co_await body(sh, sh.in_mutex, 1, rng, true); });
        if (!r) sh.busy.fetch_add(1);
        break;
      }
      case 3: {
        auto r = co_await shoal::with_lock_timeout(sh.mutex, std::chrono::microseconds(rng() % 500),
                                                   [&]() -> Task<void> { co_await body(sh, sh.in_mutex, 1, rng, true); });
        if (!r) sh.timeouts.fetch_add(1);
        break;
      }
      case 4:
        co_await shoal::with_read_lock(sh.rw, [&]() -> Task<void> {
          if (sh.writers.load() != 0) sh.violations.fetch_add(1);
          co_await body(sh, sh.readers, 1 << 30, rng, false);
        });
        break;
      case 5:
        co_await shoal::with_write_lock(sh.rw, [&]() -> Task<void> {
          if (sh.readers.load() != 0) sh.violations.fetch_add(1);
          co_await body(sh, sh.writers, 1, rng, false);
        });
        break;
      default:
        co_await shoal::with_permits(sh.sem, 1 + static_cast<std::uint32_t>(rng() % 2),
                                     [&]() -> Task<void> { co_await body(sh, sh.in_sem, 3, rng, false); });
        break;
    }
  };
  try {
    if (!co_await shoal::move_on_after(limit, run())) sh.cancels.fetch_add(1);
  } catch (const Boom&) {
  }
}

TEST(SyncStress, RandomCancellationsThrowsAndTimeoutsKeepTheInvariants) {
  shoal::test::Watchdog dog(std::chrono::seconds(300), "SyncStress");
  const std::uint64_t seed = shoal::test::test_seed("SyncStress");
  Shared sh;
  const long ops = scaled(3'000, 300);
  std::atomic<bool> tasks_done{false};
  // Plain threads in blocking form at the same time.
  std::vector<std::thread> threads;
  std::atomic<long> thread_ops{0};
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + 1000 + static_cast<std::uint64_t>(t));
      while (!tasks_done.load()) {
        switch (rng() % 3) {
          case 0:
            shoal::blocking::with_lock(sh.mutex, [&] {
              sh.enter(sh.in_mutex, 1);
              ++sh.plain_counter;
              sh.counted.fetch_add(1);
              sh.in_mutex.fetch_sub(1);
            });
            break;
          case 1:
            (void)shoal::blocking::with_lock_timeout(sh.mutex, 200us, [&] {
              sh.enter(sh.in_mutex, 1);
              ++sh.plain_counter;
              sh.counted.fetch_add(1);
              sh.in_mutex.fetch_sub(1);
            });
            break;
          default:
            shoal::blocking::with_permit(sh.sem, [&] {
              sh.enter(sh.in_sem, 3);
              sh.in_sem.fetch_sub(1);
            });
            break;
        }
        thread_ops.fetch_add(1);
      }
    });
  }
  shoal::RuntimeOptions opts;
  opts.workers = 4;
  shoal::run(shoal::scope([&](shoal::Scope& s) -> Task<void> {
    for (int t = 0; t < 16; ++t) {
      s.spawn([&, t]() -> Task<void> {
        std::mt19937_64 rng(seed + static_cast<std::uint64_t>(t));
        for (long i = 0; i < ops / 16; ++i) co_await one_op(sh, rng);
      });
    }
    co_return;
  }), opts);
  tasks_done.store(true);
  for (auto& t : threads) t.join();
  std::printf("sync stress: %ld bodies, %ld cancelled, %ld threw, %ld timed out, %ld busy, %ld thread ops\n",
              sh.bodies.load(), sh.cancels.load(), sh.throws.load(), sh.timeouts.load(), sh.busy.load(),
              thread_ops.load());
  EXPECT_EQ(sh.violations.load(), 0) << "exclusion was broken";
  EXPECT_EQ(sh.plain_counter, sh.counted.load()) << "an increment under the mutex was lost";
  EXPECT_EQ(sh.sem.available(), 3u) << "permits were not conserved";
  EXPECT_GT(sh.cancels.load(), 0);
  EXPECT_GT(sh.throws.load(), 0);
  // Every lock is free: the try-forms succeed at once.
  shoal::run([&]() -> Task<void> {
    EXPECT_TRUE(co_await shoal::with_try_lock(sh.mutex, [] {}));
    EXPECT_TRUE(co_await shoal::with_try_write_lock(sh.rw, [] {}));
  }());
}

}  // namespace
