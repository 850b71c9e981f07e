// Mutex, RwLock and Semaphore: exclusion, release on every way out of a
// body, try/timeout forms, self-deadlock detection, cancellation while
// waiting, fairness, blocking forms for plain threads, fail-closed
// destruction.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shoal/sync.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Mutex;
using shoal::RwLock;
using shoal::Semaphore;
using shoal::SyncError;
using shoal::Task;

SHOAL_TEST_SUITE(MutexTest);
SHOAL_TEST_SUITE(RwLockTest);
SHOAL_TEST_SUITE(SemaphoreTest);

void bump_peak(std::atomic<int>& inside, std::atomic<int>& peak) {
  const int now = inside.fetch_add(1) + 1;
  for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
  }
}

SHOAL_TEST(MutexTest, CounterIsExactUnderTasksAndThreads) {
  Mutex m("counter");
  long counter = 0;  // plain: only the mutex protects it
  const long per_task = shoal::test::scaled(100'000, 2'000);
  const long per_thread = per_task / 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (long i = 0; i < per_thread; ++i) shoal::blocking::with_lock(m, [&] { ++counter; });
    });
  }
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    for (int t = 0; t < 8; ++t) {
      s.spawn([&]() -> Task<void> {
        for (long i = 0; i < per_task; ++i) co_await shoal::with_lock(m, [&] { ++counter; });
      });
    }
    co_return;
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 8 * per_task + 2 * per_thread);
}

SHOAL_TEST(MutexTest, ABodyReturnsItsValueAndATaskBodyIsAwaited) {
  Mutex m;
  const int a = co_await shoal::with_lock(m, [] { return 7; });
  const std::string b = co_await shoal::with_lock(m, []() -> Task<std::string> {
    co_await shoal::sleep_for(1ms);  // held across a suspension
    co_return "async";
  });
  EXPECT_EQ(a, 7);
  EXPECT_EQ(b, "async");
}

SHOAL_TEST(MutexTest, AThrowOrACancellationInsideTheBodyReleasesTheLock) {
  Mutex m("released");
  EXPECT_THROW(co_await shoal::with_lock(m, []() -> int { throw std::runtime_error("body failed"); }),
               std::runtime_error);
  EXPECT_TRUE(co_await shoal::with_try_lock(m, [] {})) << "a throw left the mutex held";
  // No poisoning: the next holder gets an ordinary lock.
  const bool cut = !co_await shoal::move_on_after(5ms, shoal::with_lock(m, []() -> Task<void> {
    co_await shoal::sleep_for(1h);  // cancelled here, holding the lock
  }));
  EXPECT_TRUE(cut);
  EXPECT_TRUE(co_await shoal::with_try_lock(m, [] {})) << "a cancellation left the mutex held";
}

SHOAL_TEST(MutexTest, TryLockWhileHeldIsBusyAndDoesNotRunTheBody) {
  Mutex m;
  int ran = 0;
  shoal::detail::Event held, done;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::with_lock(m, [&]() -> Task<void> {
      held.set();
      co_await done.wait();
    }));
    co_await held.wait();
    auto r = co_await shoal::with_try_lock(m, [&] { return ++ran; });
    EXPECT_FALSE(r.has_value());
    EXPECT_EQ(r.error(), SyncError::Code::busy);
    EXPECT_THROW((void)r.value(), SyncError);
    done.set();
  });
  EXPECT_EQ(ran, 0);
  auto r = co_await shoal::with_try_lock(m, [&] { return ++ran; });
  EXPECT_EQ(*r, 1);
}

SHOAL_TEST(MutexTest, ANestedLockBySameTaskOrThreadIsASelfDeadlockError) {
  Mutex m("accounts");
  try {
    co_await shoal::with_lock(m, [&]() -> Task<void> { co_await shoal::with_lock(m, [] {}); });
    ADD_FAILURE() << "no self-deadlock error";
  } catch (const SyncError& e) {
    EXPECT_EQ(e.code(), SyncError::Code::self_deadlock);
    EXPECT_NE(std::string(e.what()).find("shoal::Mutex \"accounts\""), std::string::npos) << e.what();
  }
  EXPECT_TRUE(co_await shoal::with_try_lock(m, [] {})) << "the outer lock was not released";
  // The same on a plain thread.
  co_await shoal::spawn_blocking([&] {
    try {
      shoal::blocking::with_lock(m, [&] { shoal::blocking::with_lock(m, [] {}); });
      ADD_FAILURE() << "no self-deadlock error on a thread";
    } catch (const SyncError& e) {
      EXPECT_EQ(e.code(), SyncError::Code::self_deadlock);
    }
  });
}

SHOAL_TEST(MutexTest, LockTimeoutTimesOutWhileHeldAndSucceedsWhenReleasedInTime) {
  Mutex m;
  shoal::detail::Event held, release;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::with_lock(m, [&]() -> Task<void> {
      held.set();
      co_await release.wait();
    }));
    co_await held.wait();
    int ran = 0;
    auto r = co_await shoal::with_lock_timeout(m, 10ms, [&] { return ++ran; });
    EXPECT_EQ(r.error(), SyncError::Code::timed_out);
    EXPECT_EQ(ran, 0);
    s.spawn([&]() -> Task<void> {
      co_await shoal::sleep_for(5ms);
      release.set();
    });
    auto ok = co_await shoal::with_lock_timeout(m, 60s, [&] { return ++ran; });
    EXPECT_EQ(*ok, 1);
  });
}

SHOAL_TEST(MutexTest, ACancelledWaiterLeavesTheQueueAndTheNextOneGetsTheLock) {
  Mutex m;
  shoal::detail::Event held, release;
  std::atomic<int> got{0};
  co_await shoal::with_timeout(30s, shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::with_lock(m, [&]() -> Task<void> {
      held.set();
      co_await release.wait();
    }));
    co_await held.wait();
    // B queues, then is cancelled; C queues behind it and must still get in.
    auto b = s.start(shoal::move_on_after(5ms, shoal::with_lock(m, [&] { got.fetch_add(100); })));
    auto c = s.start(shoal::with_lock(m, [&] { got.fetch_add(1); }));
    EXPECT_FALSE(co_await b);
    release.set();
    co_await c;
  }));
  EXPECT_EQ(got.load(), 1);
}

SHOAL_TEST(MutexTest, BlockingFormsRefuseToRunOnAWorker) {
  Mutex m;
  EXPECT_THROW(shoal::blocking::with_lock(m, [] {}), std::logic_error);
  co_return;
}

SHOAL_TEST(RwLockTest, ReadersShareAndAWriterExcludesThem) {
  RwLock l("table");
  std::atomic<int> readers{0}, peak{0}, writers{0};
  bool overlap = false;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    for (int i = 0; i < 8; ++i) {
      s.spawn(shoal::with_read_lock(l, [&]() -> Task<void> {
        bump_peak(readers, peak);
        if (writers.load() != 0) overlap = true;
        co_await shoal::sleep_for(5ms);  // long enough for the others to join
        readers.fetch_sub(1);
      }));
      s.spawn(shoal::with_write_lock(l, [&]() -> Task<void> {
        if (writers.fetch_add(1) != 0 || readers.load() != 0) overlap = true;
        co_await shoal::checkpoint();
        writers.fetch_sub(1);
      }));
    }
    co_return;
  });
  EXPECT_GT(peak.load(), 1) << "readers never shared the lock";
  EXPECT_FALSE(overlap) << "a writer ran alongside another holder";
}

SHOAL_TEST(RwLockTest, AWaitingWriterGetsInWhileNewReadersKeepArriving) {
  RwLock l;
  std::atomic<bool> written{false};
  std::atomic<long> reads{0};
  co_await shoal::with_timeout(30s, shoal::scope([&](shoal::Scope& s) -> Task<void> {
    // Overlapping readers, so the lock is never free of them on its own.
    for (int r = 0; r < 4; ++r) {
      s.spawn([&]() -> Task<void> {
        while (!written.load()) {
          co_await shoal::with_read_lock(l, [&]() -> Task<void> {
            reads.fetch_add(1);
            co_await shoal::sleep_for(200us);
          });
        }
      });
    }
    co_await shoal::sleep_for(2ms);
    co_await shoal::with_write_lock(l, [&] { written = true; });
  }));
  EXPECT_TRUE(written.load());
  EXPECT_GT(reads.load(), 0);
}

SHOAL_TEST(RwLockTest, TheWriterAskingForEitherLockIsASelfDeadlockError) {
  RwLock l;
  for (const bool read : {true, false}) {
    auto inner = [&l, read]() -> Task<void> {
      if (read) {
        co_await shoal::with_read_lock(l, [] {});
      } else {
        co_await shoal::with_write_lock(l, [] {});
      }
    };
    try {
      co_await shoal::with_write_lock(l, inner);
      ADD_FAILURE() << "no self-deadlock error";
    } catch (const SyncError& e) {
      EXPECT_EQ(e.code(), SyncError::Code::self_deadlock);
    }
  }
  EXPECT_TRUE(co_await shoal::with_try_write_lock(l, [] {}));
}

SHOAL_TEST(SemaphoreTest, PeakConcurrencyNeverExceedsThePermits) {
  Semaphore sem(3, "pool");
  std::atomic<int> inside{0}, peak{0};
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    for (int i = 0; i < 40; ++i) {
      const std::uint32_t n = 1 + static_cast<std::uint32_t>(i % 2);
      s.spawn(shoal::with_permits(sem, n, [&, n]() -> Task<void> {
        for (std::uint32_t k = 0; k < n; ++k) bump_peak(inside, peak);
        co_await shoal::sleep_for(100us);
        inside.fetch_sub(static_cast<int>(n));
      }));
    }
    co_return;
  });
  EXPECT_LE(peak.load(), 3);
  EXPECT_GE(peak.load(), 2);
  EXPECT_EQ(sem.available(), 3u) << "permits were not conserved";
}

SHOAL_TEST(SemaphoreTest, AskingForMorePermitsThanExistIsAnErrorAtTheCall) {
  Semaphore sem(2, "pool");
  try {
    co_await shoal::with_permits(sem, 3, [] {});
    ADD_FAILURE() << "no error";
  } catch (const SyncError& e) {
    EXPECT_EQ(e.code(), SyncError::Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("3 permits asked of shoal::Semaphore \"pool\", which has 2"), std::string::npos)
        << e.what();
  }
}

TEST(SyncDeathTest, DestroyingAHeldMutexAbortsNamingIt) {
  EXPECT_DEATH(
      {
        auto* m = new Mutex("doomed");
        shoal::blocking::with_lock(*m, [&] { delete m; });
      },
      "shoal::Mutex \"doomed\" destroyed while held");
}

}  // namespace
