// Mutex, RwLock and Semaphore: exclusion, release on every way out of a
// body, try/timeout forms, self-deadlock detection, cancellation while
// waiting, fairness, blocking forms for plain threads, fail-closed
// destruction.
#include <atomic>
#include <cstdio>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shoal/sync.hpp"
#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Cell;
using shoal::Mutex;
using shoal::Once;
using shoal::RwLock;
using shoal::Semaphore;
using shoal::SyncError;
using shoal::Task;

SHOAL_TEST_SUITE(MutexTest);
SHOAL_TEST_SUITE(RwLockTest);
SHOAL_TEST_SUITE(SemaphoreTest);
SHOAL_TEST_SUITE(OnceTest);
SHOAL_TEST_SUITE(CellTest);

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
  shoal::Event held, done;
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
  shoal::Event held, release;
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

// Regression (found in the contract review): a limit of zero always timed
// out, even on a free lock (the deadline cancelled the acquisition at once);
// the blocking form tried first. Zero now means "one try", in both forms.
SHOAL_TEST(MutexTest, ALockTimeoutOfZeroTakesAFreeLockAndTimesOutOnAHeldOne) {
  Mutex m;
  int ran = 0;
  for (int i = 0; i < 300; ++i) {  // across budget boundaries too
    auto r = co_await shoal::with_lock_timeout(m, 0ms, [&] { return ++ran; });
    SHOAL_CO_ASSERT(r.has_value());
  }
  EXPECT_EQ(ran, 300);
  shoal::Event held, release;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::with_lock(m, [&]() -> Task<void> {
      held.set();
      co_await release.wait();
    }));
    co_await held.wait();
    auto r = co_await shoal::with_lock_timeout(m, 0ms, [&] { return ++ran; });
    EXPECT_EQ(r.error(), SyncError::Code::timed_out);
    release.set();
  });
  EXPECT_EQ(ran, 300);
}

SHOAL_TEST(MutexTest, ACancelledWaiterLeavesTheQueueAndTheNextOneGetsTheLock) {
  Mutex m;
  shoal::Event held, release;
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

// A call with a plain body is an awaitable, not a coroutine: while the lock
// is free (and once a Once holds its value) it allocates nothing, except a
// waiting frame at the once-per-budget schedule point (a Task per call
// would be 4,000 frames here).
SHOAL_TEST(MutexTest, CallsOnAFreeLockAllocateNoFrameBeyondTheBudgetYield) {
  Mutex m;
  RwLock l;
  Semaphore sem(2);
  Once<int> once;
  (void)co_await shoal::once_do(once, [] { return 5; });
  long sum = 0;
  shoal::test::FrameCounter frames;
  for (int i = 0; i < 1'000; ++i) {
    co_await shoal::with_lock(m, [&] { ++sum; });
    sum += *co_await shoal::with_try_lock(m, [] { return 1; });
    co_await shoal::with_read_lock(l, [&] { ++sum; });
    co_await shoal::with_write_lock(l, [&] { ++sum; });
    co_await shoal::with_permits(sem, 2, [&] { ++sum; });
    sum += co_await shoal::once_do(once, [] { return 0; });
  }
  EXPECT_LE(frames.allocations(), 6'000 / shoal::detail::kBudget + 1);
  EXPECT_EQ(sum, 1'000 * 10);
}

// ... and it goes wherever a Task goes.
SHOAL_TEST(MutexTest, ALockCallGoesWhereATaskGoes) {
  Mutex m("task-like");
  Once<int> once;
  std::atomic<int> ran{0};
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::with_lock(m, [&] { ran.fetch_add(1); }));
    auto h = s.start(shoal::with_lock(m, [] { return 7; }));
    EXPECT_EQ(co_await h, 7);
    co_return;
  });
  const std::optional<int> cut = co_await shoal::move_on_after(10s, shoal::with_lock(m, [] { return 8; }));
  EXPECT_EQ(cut, std::optional<int>(8));
  const auto r = co_await shoal::with_timeout(10s, shoal::with_try_lock(m, [] { return 9; }));
  EXPECT_EQ(*r, 9);
  co_await shoal::shielded(shoal::with_lock(m, [&] { ran.fetch_add(1); }));
  Task<const int&> t = shoal::once_do(once, [] { return 10; });
  EXPECT_EQ(co_await std::move(t), 10);
  EXPECT_EQ(ran.load(), 2);
}

// Tasks on one worker never contend (a plain body cannot suspend), so a task
// that loses to a holder on another worker moves there instead of queueing,
// and stays until its next wait: the contenders gather, and later calls find
// the lock free. Counted through the slow path's frame: one per contended
// call, and one per budget yield (every 127 calls) that every run pays.
TEST(MutexPlainTest, ContendersMoveToTheHoldersWorkerSoFewCallsFindItHeld) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "contenders gather");
  constexpr long kTasks = 4, kRounds = 100000;
  Mutex m;
  long counter = 0;
  long frames = 0;
  auto body = [&]() -> Task<void> {
    shoal::test::FrameCounter counted;
    co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
      for (long t = 0; t < kTasks; ++t) {
        s.spawn([&]() -> Task<void> {
          for (long i = 0; i < kRounds; ++i) co_await shoal::with_lock(m, [&] { ++counter; });
        });
      }
      co_return;
    });
    frames = counted.allocations();
  };
  shoal::run(body(), shoal::RuntimeOptions::with_workers(2));
  EXPECT_EQ(counter, kTasks * kRounds);
  const long yields = kTasks * kRounds / 127;
  std::printf("%ld contended increments on 2 workers: %ld slow-path frames (%ld budget yields)\n", kTasks * kRounds,
              frames, yields);
  EXPECT_LT(frames - yields, kTasks * kRounds / 100) << "calls kept finding the lock held on another worker";
}

TEST(MutexPlainTest, ALockCallRunsAsARootTask) {
  Mutex m;
  EXPECT_EQ(shoal::run(shoal::with_lock(m, [] { return 11; })), 11);
  shoal::Runtime rt;
  EXPECT_EQ(rt.block_on(shoal::with_lock(m, [] { return 12; })), 12);
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

SHOAL_TEST(OnceTest, InitRunsOnceAndLaterCallsGetTheStoredValue) {
  Once<std::string> once;
  int runs = 0;
  const std::string& a = co_await shoal::once_do(once, [&] { ++runs; return std::string("value"); });
  const std::string& b = co_await shoal::once_do(once, [&]() -> Task<std::string> { ++runs; co_return "other"; });
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(a, "value");
  EXPECT_EQ(&a, &b) << "every caller sees the one stored value";
  EXPECT_EQ(*once.get(), "value");
}

SHOAL_TEST(OnceTest, ContendedTasksAndThreadsRunInitExactlyOnce) {
  Once<long> once("config");
  std::atomic<int> runs{0};
  std::atomic<int> agree{0};
  auto init = [&] {
    runs.fetch_add(1);
    std::this_thread::sleep_for(2ms);  // long enough for everyone to pile up
    return 42L;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      if (shoal::blocking::once_do(once, init) == 42) agree.fetch_add(1);
    });
  }
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    for (int i = 0; i < 64; ++i) {
      s.spawn([&]() -> Task<void> {
        if (co_await shoal::once_do(once, init) == 42) agree.fetch_add(1);
      });
    }
    co_return;
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(agree.load(), 68);
}

SHOAL_TEST(OnceTest, AThrowingInitFailsTheWinnerAndEveryOtherAndLaterCaller) {
  Once<int> once("flaky");
  std::atomic<int> winner_saw_its_error{0}, init_failed{0}, runs{0};
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    for (int i = 0; i < 16; ++i) {
      s.spawn([&]() -> Task<void> {
        try {
          (void)co_await shoal::once_do(once, [&]() -> Task<int> {
            runs.fetch_add(1);
            co_await shoal::sleep_for(2ms);
            throw std::runtime_error("backend down");
          });
        } catch (const std::runtime_error& e) {
          if (const auto* se = dynamic_cast<const SyncError*>(&e)) {
            if (se->code() == SyncError::Code::init_failed) init_failed.fetch_add(1);
          } else if (std::string(e.what()) == "backend down") {
            winner_saw_its_error.fetch_add(1);
          }
        }
      });
    }
    co_return;
  });
  EXPECT_EQ(runs.load(), 1) << "single-shot: no retry";
  EXPECT_EQ(winner_saw_its_error.load(), 1);
  EXPECT_EQ(init_failed.load(), 15);
  try {
    (void)co_await shoal::once_do(once, [] { return 1; });
    ADD_FAILURE() << "a later caller ran init again";
  } catch (const SyncError& e) {
    EXPECT_EQ(e.code(), SyncError::Code::init_failed);
    EXPECT_NE(std::string(e.what()).find("shoal::Once \"flaky\""), std::string::npos) << e.what();
  }
}

SHOAL_TEST(OnceTest, ACancelledInitLeavesItEmptyForTheNextCaller) {
  Once<int> once;
  const bool cut = !co_await shoal::move_on_after(5ms, [&]() -> Task<void> {
    (void)co_await shoal::once_do(once, []() -> Task<int> {
      co_await shoal::sleep_for(1h);
      co_return 1;
    });
  }());
  EXPECT_TRUE(cut);
  EXPECT_EQ(once.get(), nullptr);
  EXPECT_EQ(co_await shoal::once_do(once, [] { return 2; }), 2);
}

SHOAL_TEST(CellTest, UpdatesAreExclusiveAndAThrowLeavesTheValue) {
  Cell<std::vector<int>> cell({}, "log");
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    for (int t = 0; t < 8; ++t) {
      s.spawn([&, t]() -> Task<void> {
        for (int i = 0; i < 500; ++i) {
          co_await shoal::with_cell(cell, [t](std::vector<int> v) {
            v.push_back(t);
            return v;
          });
        }
      });
    }
    co_return;
  });
  std::size_t size = 0;
  co_await shoal::with_cell(cell, [&](std::vector<int> v) {
    size = v.size();
    return v;
  });
  EXPECT_EQ(size, 4000u);
  EXPECT_THROW(co_await shoal::with_cell(cell, [](std::vector<int>) -> std::vector<int> { throw std::runtime_error("no"); }),
               std::runtime_error);
  co_await shoal::with_cell(cell, [&](std::vector<int> v) -> Task<std::vector<int>> {
    size = v.size();
    co_return v;
  });
  EXPECT_EQ(size, 4000u) << "a throwing fn changed the value";
}

SHOAL_TEST(RwLockTest, ACancelledWriterLeavesTheQueueAndTheReadersBehindItGetIn) {
  RwLock l;
  shoal::Event reading, done;
  std::atomic<int> got{0};
  co_await shoal::with_timeout(30s, shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::with_read_lock(l, [&]() -> Task<void> {
      reading.set();
      co_await done.wait();
    }));
    co_await reading.wait();
    // A writer queues behind the reader and is cancelled there.
    auto w = s.start(shoal::move_on_after(5ms, shoal::with_write_lock(l, [&] { got.fetch_add(100); })));
    EXPECT_FALSE(co_await w);
    // A reader that arrives now is not stuck behind the writer that left.
    co_await shoal::with_read_lock(l, [&] { got.fetch_add(1); });
    done.set();
  }));
  EXPECT_EQ(got.load(), 1);
}

SHOAL_TEST(SemaphoreTest, ACancelledWaiterNeverHoldsPermitsAndTheNextOneGetsThem) {
  Semaphore sem(1);
  shoal::Event held, release;
  std::atomic<int> got{0};
  co_await shoal::with_timeout(30s, shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::with_permit(sem, [&]() -> Task<void> {
      held.set();
      co_await release.wait();
    }));
    co_await held.wait();
    auto b = s.start(shoal::move_on_after(5ms, shoal::with_permit(sem, [&] { got.fetch_add(100); })));
    auto c = s.start(shoal::with_permit(sem, [&] { got.fetch_add(1); }));
    EXPECT_FALSE(co_await b);
    release.set();
    co_await c;
  }));
  EXPECT_EQ(got.load(), 1);
  EXPECT_EQ(sem.available(), 1u);
}

TEST(SyncDeathTest, DestroyingAHeldMutexAbortsNamingIt) {
  EXPECT_DEATH(
      {
        auto* m = new Mutex("doomed");
        shoal::blocking::with_lock(*m, [&] { delete m; });
      },
      "shoal::Mutex \"doomed\" destroyed while held");
}

TEST(SyncDeathTest, DestroyingAHeldRwLockOrSemaphoreAbortsNamingIt) {
  EXPECT_DEATH(
      {
        auto* l = new RwLock("table");
        shoal::blocking::with_read_lock(*l, [&] { delete l; });
      },
      "shoal::RwLock \"table\" destroyed while held");
  EXPECT_DEATH(
      {
        auto* sem = new Semaphore(2, "pool");
        shoal::blocking::with_permit(*sem, [&] { delete sem; });
      },
      "shoal::Semaphore \"pool\" destroyed while held");
}

}  // namespace
