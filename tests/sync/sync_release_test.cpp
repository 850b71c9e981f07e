// Every way out of a locked body gives the lock back, and a cancelled waiter
// never keeps what it was handed: throws inside bodies (task and blocking
// forms), cancellation inside bodies, cancelled Once losers, waiters
// cancelled at the moment they are granted (a race against a plain thread,
// and an exact replay of both orders on the simulated executor), cancelled
// writers with readers queued behind them, and waiters that all fit being
// let in together once the holder releases. Each test is bounded by a
// timeout (and the watchdog), so a leaked lock or a lost wakeup fails
// rather than hangs; a lock found held is leaked rather than destroyed, so
// its fail-closed destructor does not take the binary down with it.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "shoal/sync.hpp"
#include "support/manual_event.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Mutex;
using shoal::Once;
using shoal::RwLock;
using shoal::Scope;
using shoal::Semaphore;
using shoal::Task;
using shoal::test::ManualEvent;

SHOAL_TEST_SUITE(SyncRelease);
SHOAL_TEST_SUITE(SyncCancelRelease);
SHOAL_TEST_SUITE(OnceCancel);
SHOAL_TEST_SUITE(GrantCancel);
SHOAL_TEST_SUITE(RwLockCancel);
SHOAL_TEST_SUITE(SyncWake);

struct Boom : std::runtime_error {
  Boom() : std::runtime_error("boom") {}
};

/// Owns a lock and destroys it only once the test has seen it free. A lock a
/// regression leaked is leaked here too, instead of aborting the binary in
/// its fail-closed destructor (which would hide the failure's message and
/// every later test).
template <class T>
class Kept {
 public:
  template <class... A>
  explicit Kept(A&&... a) : p_(new T(std::forward<A>(a)...)) {}
  ~Kept() {
    if (free_) delete p_;
  }
  Kept(const Kept&) = delete;
  Kept& operator=(const Kept&) = delete;
  T& operator*() const noexcept { return *p_; }
  T* operator->() const noexcept { return p_; }
  void seen_free() noexcept { free_ = true; }

 private:
  T* p_;
  bool free_ = false;
};

Task<void> wait_for(ManualEvent& e) { co_await e.wait(); }

/// Raises `peak` to `now` if it is lower. A CAS loop: a load-then-store
/// could put back a slower task's 2 over another's 3.
void raise_peak(std::atomic<int>& peak, int now) {
  for (int seen = peak.load(); now > seen && !peak.compare_exchange_weak(seen, now);) {
  }
}

// The exclusive form of each lock: a Mutex, an RwLock's write lock, every
// permit of a Semaphore.
template <class F>
Task<void> hold(Mutex& m, F body) {
  co_await shoal::with_lock(m, std::move(body));
}
template <class F>
Task<void> hold(RwLock& l, F body) {
  co_await shoal::with_write_lock(l, std::move(body));
}
template <class F>
Task<void> hold(Semaphore& s, F body) {
  co_await shoal::with_permits(s, s.permits(), std::move(body));
}

// Takes `k` permits one at a time with the try form, none of them waiting:
// true if all k were free at once.
Task<bool> try_take_permits(Semaphore& s, std::uint32_t k) {
  if (k == 0) co_return true;
  auto rest = [&s, k]() -> Task<bool> { co_return co_await try_take_permits(s, k - 1); };
  auto r = co_await shoal::with_try_permit(s, rest);
  co_return r.has_value() && *r;
}

// Is the lock free right now? The try forms never wait.
Task<bool> is_free(Mutex& m) {
  auto r = co_await shoal::with_try_lock(m, [] {});
  co_return r.has_value();
}
Task<bool> is_free(RwLock& l) {
  auto r = co_await shoal::with_try_write_lock(l, [] {});
  co_return r.has_value();
}
Task<bool> is_free(Semaphore& s) {
  if (s.available() != s.permits()) co_return false;
  const bool took_all = co_await try_take_permits(s, s.permits());
  co_return took_all;
}

template <class T>
Task<void> expect_free(Kept<T>& lock, const std::string& what) {
  // Bound to a name first: g++ 12 can skip a coroutine whose if-condition
  // is a bare co_await of a Task.
  const bool free = co_await is_free(*lock);
  if (free) {
    lock.seen_free();
  } else {
    ADD_FAILURE() << what << ": left held (a leaked lock)";
  }
}

/// CLOCK_MONOTONIC_COARSE's resolution: the lock's fairness clock.
std::chrono::nanoseconds coarse_tick() {
  timespec ts{};
  ::clock_getres(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}
/// Real time after which every waiter queued before it counts as old (the
/// locks hand permits over directly, in FIFO order, to waiters older than
/// about 1 ms): waiting this long picks the fair path instead of the
/// wake-to-retry one. The outcome asserted never depends on which path ran.
std::chrono::nanoseconds old_enough() { return 2 * coarse_tick() + 2ms; }

// ---- a throwing body releases ------------------------------------------------

SHOAL_TEST(SyncRelease, AThrowingReadBodyReleasesTheReadLock) {
  Kept<RwLock> l("read throws");
  co_await shoal::with_timeout(10s, [&]() -> Task<void> {
    EXPECT_THROW(co_await shoal::with_read_lock(*l, []() -> int { throw Boom(); }), Boom);
    auto suspends_then_throws = []() -> Task<void> {
      co_await shoal::checkpoint();
      throw Boom();
    };
    EXPECT_THROW(co_await shoal::with_read_lock(*l, suspends_then_throws), Boom);
  }());
  co_await expect_free(l, "with_read_lock after a throw");
}

SHOAL_TEST(SyncRelease, AThrowingReaderStillLetsTheWriterQueuedBehindItIn) {
  Kept<RwLock> l("reader throws, writer waits");
  ManualEvent both_in, release;
  std::atomic<int> readers_in{0};
  std::atomic<bool> wrote{false}, writer_queued{false};
  co_await shoal::with_timeout(10s, shoal::scope([&](Scope& s) -> Task<void> {
    for (int i = 0; i < 2; ++i) {
      s.spawn([&, i]() -> Task<void> {
        auto body = [&, i]() -> Task<void> {
          if (readers_in.fetch_add(1) + 1 == 2) both_in.set();
          co_await release.wait();
          if (i == 0) throw Boom();
        };
        try {
          co_await shoal::with_read_lock(*l, body);
        } catch (const Boom&) {
        }
      });
    }
    co_await wait_for(both_in);
    auto writer = s.start([&]() -> Task<void> {
      writer_queued = true;
      co_await shoal::with_write_lock(*l, [&] { wrote = true; });
    });
    while (!writer_queued.load()) co_await shoal::checkpoint();
    release.set();
    co_await writer;
  }));
  EXPECT_TRUE(wrote.load());
  co_await expect_free(l, "RwLock after a reader threw with a writer waiting");
}

SHOAL_TEST(SyncRelease, AThrowingWriteBodyReleasesTheWriteLock) {
  Kept<RwLock> l("write throws");
  co_await shoal::with_timeout(10s, [&]() -> Task<void> {
    EXPECT_THROW(co_await shoal::with_write_lock(*l, []() -> int { throw Boom(); }), Boom);
    auto suspends_then_throws = []() -> Task<void> {
      co_await shoal::sleep_for(1ms);
      throw Boom();
    };
    EXPECT_THROW(co_await shoal::with_write_lock(*l, suspends_then_throws), Boom);
    // Readers and a writer after it get in, and readers still share.
    EXPECT_EQ(co_await shoal::with_read_lock(*l, [&]() -> Task<int> {
                co_return co_await shoal::with_read_lock(*l, [] { return 2; });
              }),
              2);
  }());
  co_await expect_free(l, "with_write_lock after a throw");
}

SHOAL_TEST(SyncRelease, AThrowingWriterLetsTheReadersQueuedBehindItIn) {
  Kept<RwLock> l("writer throws, readers wait");
  ManualEvent writing, release;
  std::atomic<int> queued{0}, read{0};
  co_await shoal::with_timeout(10s, shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      auto body = [&]() -> Task<void> {
        writing.set();
        co_await release.wait();
        throw Boom();
      };
      EXPECT_THROW(co_await shoal::with_write_lock(*l, body), Boom);
    });
    co_await wait_for(writing);
    for (int i = 0; i < 3; ++i) {
      s.spawn([&]() -> Task<void> {
        queued.fetch_add(1);
        co_await shoal::with_read_lock(*l, [&] { read.fetch_add(1); });
      });
    }
    while (queued.load() < 3) co_await shoal::checkpoint();
    release.set();
  }));
  EXPECT_EQ(read.load(), 3);
  co_await expect_free(l, "RwLock after a writer threw with readers waiting");
}

SHOAL_TEST(SyncRelease, AThrowingPermitBodyReleasesThePermit) {
  Kept<Semaphore> sem(3u, "permit throws");
  co_await shoal::with_timeout(10s, [&]() -> Task<void> {
    for (int i = 0; i < 5; ++i) {  // more throws than permits: each one came back
      EXPECT_THROW(co_await shoal::with_permit(*sem, []() -> int { throw Boom(); }), Boom);
    }
    auto suspends_then_throws = []() -> Task<void> {
      co_await shoal::checkpoint();
      throw Boom();
    };
    EXPECT_THROW(co_await shoal::with_permit(*sem, suspends_then_throws), Boom);
  }());
  EXPECT_EQ(sem->available(), 3u);
  co_await expect_free(sem, "with_permit after a throw");
}

SHOAL_TEST(SyncRelease, AThrowingPermitsBodyReleasesEveryPermit) {
  Kept<Semaphore> sem(3u, "permits throw");
  co_await shoal::with_timeout(10s, [&]() -> Task<void> {
    EXPECT_THROW(co_await shoal::with_permits(*sem, 3, []() -> int { throw Boom(); }), Boom);
    EXPECT_EQ(sem->available(), 3u);
    auto suspends_then_throws = []() -> Task<void> {
      co_await shoal::sleep_for(1ms);
      throw Boom();
    };
    EXPECT_THROW(co_await shoal::with_permits(*sem, 2, suspends_then_throws), Boom);
    EXPECT_EQ(sem->available(), 3u);
  }());
  co_await expect_free(sem, "with_permits after a throw");
}

SHOAL_TEST(SyncRelease, AThrowingPermitsBodyWakesAWaiterThatNeedsThemAll) {
  Kept<Semaphore> sem(3u, "permits throw, waiter needs all");
  ManualEvent in, release;
  std::atomic<bool> got_all{false}, queued{false};
  co_await shoal::with_timeout(10s, shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      auto body = [&]() -> Task<void> {
        in.set();
        co_await release.wait();
        throw Boom();
      };
      EXPECT_THROW(co_await shoal::with_permits(*sem, 2, body), Boom);
    });
    co_await wait_for(in);
    auto waiter = s.start([&]() -> Task<void> {
      queued = true;
      co_await shoal::with_permits(*sem, 3, [&] { got_all = true; });
    });
    while (!queued.load()) co_await shoal::checkpoint();
    release.set();
    co_await waiter;
  }));
  EXPECT_TRUE(got_all.load());
  co_await expect_free(sem, "Semaphore after a throwing with_permits(2) with a with_permits(3) waiter");
}

// Each blocking form on its own lock (a leak cannot hang the thread: it
// takes every lock once), then the try forms check them from a task.
SHOAL_TEST(SyncRelease, AThrowingBodyInABlockingFormReleasesOnAPlainThread) {
  Kept<Mutex> m("blocking with_lock throws");
  Kept<RwLock> rl("blocking with_read_lock throws");
  Kept<RwLock> wl("blocking with_write_lock throws");
  Kept<Semaphore> one(2u, "blocking with_permit throws");
  Kept<Semaphore> all(3u, "blocking with_permits throws");
  std::atomic<int> caught{0};
  std::atomic<bool> try_after{false};
  std::thread t([&] {
    const auto expect_boom = [&](auto&& call) {
      try {
        call();
      } catch (const Boom&) {
        caught.fetch_add(1);
      }
    };
    expect_boom([&] { shoal::blocking::with_lock(*m, []() -> int { throw Boom(); }); });
    expect_boom([&] { shoal::blocking::with_read_lock(*rl, []() -> int { throw Boom(); }); });
    expect_boom([&] { shoal::blocking::with_write_lock(*wl, []() -> int { throw Boom(); }); });
    expect_boom([&] { shoal::blocking::with_permit(*one, []() -> int { throw Boom(); }); });
    expect_boom([&] { shoal::blocking::with_permits(*all, 3, []() -> int { throw Boom(); }); });
    // The thread itself can take the mutex again without waiting.
    try_after = shoal::blocking::with_try_lock(*m, [] {}).has_value();
  });
  t.join();  // never waits: the thread takes free locks only
  EXPECT_EQ(caught.load(), 5);
  EXPECT_TRUE(try_after.load()) << "blocking::with_try_lock after a throwing blocking::with_lock was busy";
  EXPECT_EQ(one->available(), 2u);
  EXPECT_EQ(all->available(), 3u);
  co_await expect_free(m, "blocking::with_lock after a throw");
  co_await expect_free(rl, "blocking::with_read_lock after a throw");
  co_await expect_free(wl, "blocking::with_write_lock after a throw");
  co_await expect_free(one, "blocking::with_permit after a throw");
  co_await expect_free(all, "blocking::with_permits after a throw");
}

// ---- cancellation inside a body releases -------------------------------------

SHOAL_TEST(SyncCancelRelease, ACancelledReadBodyReleasesTheReadLock) {
  Kept<RwLock> l("read cancelled");
  ManualEvent in, never;
  std::atomic<int> inside{0};
  co_await shoal::with_timeout(10s, shoal::scope([&](Scope& s) -> Task<void> {
    for (int i = 0; i < 3; ++i) {  // three readers share it, all cut off inside
      s.spawn(shoal::with_read_lock(*l, [&]() -> Task<void> {
        if (inside.fetch_add(1) + 1 == 3) in.set();
        co_await never.wait();
      }));
    }
    co_await wait_for(in);
    s.cancel();
  }));
  EXPECT_EQ(inside.load(), 3);
  co_await expect_free(l, "with_read_lock after its body was cancelled");
  // The same cut off by a deadline.
  const bool done = co_await shoal::move_on_after(2ms, shoal::with_read_lock(*l, []() -> Task<void> {
    co_await shoal::sleep_for(1h);
  }));
  EXPECT_FALSE(done);
  co_await expect_free(l, "with_read_lock after a deadline cut its body off");
}

SHOAL_TEST(SyncCancelRelease, ACancelledWriteBodyReleasesTheWriteLock) {
  Kept<RwLock> l("write cancelled");
  const bool done = co_await shoal::move_on_after(2ms, shoal::with_write_lock(*l, []() -> Task<void> {
    co_await shoal::sleep_for(1h);
  }));
  EXPECT_FALSE(done);
  co_await expect_free(l, "with_write_lock after a deadline cut its body off");
  ManualEvent in, never;
  co_await shoal::with_timeout(10s, shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(shoal::with_write_lock(*l, [&]() -> Task<void> {
      in.set();
      co_await never.wait();
    }));
    co_await wait_for(in);
    s.cancel();
  }));
  co_await expect_free(l, "with_write_lock after its scope was cancelled");
}

SHOAL_TEST(SyncCancelRelease, ACancelledPermitsBodyReleasesEveryPermit) {
  Kept<Semaphore> sem(3u, "permits cancelled");
  ManualEvent in, never;
  std::atomic<int> holders{0};
  std::atomic<bool> waiter_queued{false}, waiter_ran{false};
  co_await shoal::with_timeout(10s, shoal::scope([&](Scope& s) -> Task<void> {
    // Two holders (2 + 1 permits) cut off inside, and a waiter for all 3
    // cut off in the queue, by the same cancel.
    s.spawn(shoal::with_permits(*sem, 2, [&]() -> Task<void> {
      if (holders.fetch_add(1) + 1 == 2) in.set();
      co_await never.wait();
    }));
    s.spawn(shoal::with_permit(*sem, [&]() -> Task<void> {
      if (holders.fetch_add(1) + 1 == 2) in.set();
      co_await shoal::sleep_for(1h);
    }));
    co_await wait_for(in);
    s.spawn([&]() -> Task<void> {
      waiter_queued = true;
      co_await shoal::with_permits(*sem, 3, [&] { waiter_ran = true; });
    });
    while (!waiter_queued.load()) co_await shoal::checkpoint();
    s.cancel();
  }));
  EXPECT_FALSE(waiter_ran.load());
  EXPECT_EQ(sem->available(), 3u);
  co_await expect_free(sem, "with_permits after its body was cancelled");
  const bool done = co_await shoal::move_on_after(2ms, shoal::with_permits(*sem, 3, []() -> Task<void> {
    co_await shoal::sleep_for(1h);
  }));
  EXPECT_FALSE(done);
  co_await expect_free(sem, "with_permits(3) after a deadline cut its body off");
}

// The holder is cut off inside its body while a waiter is queued: the
// release on that way out must wake the waiter.
template <class L>
Task<void> cancelled_holder_hands_over(Kept<L>& lock, const std::string& what) {
  ManualEvent in, never;
  std::atomic<bool> waiter_queued{false}, waiter_ran{false};
  co_await shoal::with_timeout(10s, shoal::scope([&](Scope& s) -> Task<void> {
    auto holder = [&]() -> Task<void> {
      co_await shoal::scope([&](Scope& hs) -> Task<void> {
        auto body = [&]() -> Task<void> {
          in.set();
          co_await never.wait();
        };
        hs.spawn(hold(*lock, body));
        co_await wait_for(in);
        auto queued = [&]() -> Task<void> {
          while (!waiter_queued.load()) co_await shoal::checkpoint();
        };
        co_await queued();
        hs.cancel();
      });
    };
    s.spawn(holder);
    co_await wait_for(in);
    auto waiter = [&]() -> Task<void> {
      waiter_queued = true;
      co_await hold(*lock, [&] { waiter_ran = true; });
    };
    co_await waiter();
  }));
  EXPECT_TRUE(waiter_ran.load()) << what;
  co_await expect_free(lock, what);
}

SHOAL_TEST(SyncCancelRelease, ACancelledHolderHandsTheLockToItsWaiter) {
  Kept<Mutex> m("holder cancelled");
  Kept<RwLock> l("writer cancelled");
  Kept<Semaphore> sem(2u, "permits holder cancelled");
  co_await cancelled_holder_hands_over(m, "Mutex");
  co_await cancelled_holder_hands_over(l, "RwLock (write)");
  co_await cancelled_holder_hands_over(sem, "Semaphore (all permits)");
}

// ---- Once: a cancelled loser --------------------------------------------------

SHOAL_TEST(OnceCancel, ACancelledLoserLeavesAndTheWinnerStillCompletes) {
  Once<int> once("cancelled losers");
  std::atomic<int> runs{0}, losers_waiting{0}, losers_cancelled{0}, loser_values{0};
  ManualEvent winner_in, go;
  auto init = [&]() -> Task<int> {
    runs.fetch_add(1);
    winner_in.set();
    co_await go.wait();
    co_return 42;
  };
  auto loser_init = [&] {
    runs.fetch_add(1);
    return -1;
  };
  int winner_value = 0, patient_value = 0;
  co_await shoal::with_timeout(10s, shoal::scope([&](Scope& s) -> Task<void> {
    auto winner = s.start([&]() -> Task<int> { co_return co_await shoal::once_do(once, init); });
    co_await wait_for(winner_in);
    // A loser that is not cancelled waits beside the cancelled ones.
    auto patient = s.start([&]() -> Task<int> { co_return co_await shoal::once_do(once, loser_init); });
    // Three losers wait in once_do; their scope is cancelled under them.
    co_await shoal::scope([&](Scope& ls) -> Task<void> {
      for (int i = 0; i < 3; ++i) {
        ls.spawn([&]() -> Task<void> {
          losers_waiting.fetch_add(1);
          try {
            (void)co_await shoal::once_do(once, loser_init);
            loser_values.fetch_add(1);
          } catch (const shoal::Cancelled&) {
            losers_cancelled.fetch_add(1);
            throw;
          }
        });
      }
      while (losers_waiting.load() < 3) co_await shoal::checkpoint();
      ls.cancel();
    });
    // And one cut off by a deadline.
    const bool done = co_await shoal::move_on_after(2ms, [&]() -> Task<void> {
      (void)co_await shoal::once_do(once, loser_init);
    }());
    EXPECT_FALSE(done) << "a loser got a value before the winner finished";
    EXPECT_EQ(once.get(), nullptr);
    go.set();
    winner_value = co_await winner;
    patient_value = co_await patient;
  }));
  EXPECT_EQ(losers_cancelled.load(), 3);
  EXPECT_EQ(loser_values.load(), 0);
  EXPECT_EQ(winner_value, 42);
  EXPECT_EQ(patient_value, 42) << "the loser waiting beside the cancelled ones";
  EXPECT_EQ(co_await shoal::once_do(once, loser_init), 42);
  int from_thread = 0;
  std::thread t([&] { from_thread = shoal::blocking::once_do(once, loser_init); });
  t.join();  // the value is there: never waits
  EXPECT_EQ(from_thread, 42);
  EXPECT_EQ(runs.load(), 1) << "init ran more than once";
  SHOAL_CO_ASSERT(once.get() != nullptr);
  EXPECT_EQ(*once.get(), 42);
}

// ---- prompt cancellation at grant -------------------------------------------

// W1 waits for the lock behind a holder, W2 behind W1. The holder's release
// races W1's cancellation, which a plain thread requests (Scope::cancel is
// callable from any thread, so the race is real even on one worker). The
// canceller spins on a flag the holder raises just before its release and
// acknowledges it; the holder releases, waits briefly for that
// acknowledgement (so both are on a CPU at once, when the machine has two
// to spare) and keeps its worker a few microseconds longer (W1, just woken or granted, cannot run
// yet). The canceller cancels W1's scope after a delay that tracks the
// boundary between "W1 got in first" and "W1 was cancelled first". So cancels land while W1 is queued, while it is granted
// (or woken) but has not run, while it runs its retry, and after it got
// in. Whatever the interleaving: W2 gets the lock (no lost wakeup), W1
// never both runs its body and throws Cancelled, and the lock ends free (W1
// never keeps what it was handed).
// How often each window is hit depends on the machine having two cores to
// spare (the test prints how the rounds ended); it cannot fail spuriously.
struct RaceCounts {
  long w1_cancelled = 0, w1_ran = 0;
};

/// Burns about `n` loop iterations (a random offset between two racers).
void spin(int n) {
  for (int i = 0; i < n; ++i) asm volatile("" ::: "memory");
}

/// A plain thread that, once armed, waits for a trigger flag, spins for a
/// delay and cancels a scope. One thread for a whole test, so it is already
/// running (not being created) when the trigger flips.
class Canceller {
 public:
  Canceller() : thread_([this] { loop(); }) {}
  ~Canceller() {
    quit_ = true;
    thread_.join();
  }
  Canceller(const Canceller&) = delete;
  Canceller& operator=(const Canceller&) = delete;

  /// Spins until the canceller has seen the trigger (at most `limit`).
  void wait_seen(std::chrono::microseconds limit) const {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!saw_.load() && std::chrono::steady_clock::now() < until) {
    }
  }

  /// Once `*trigger` is true: spin `delay`, cancel `*scope`, set `*done`.
  void arm(std::atomic<bool>* trigger, int delay, std::atomic<Scope*>* scope, ManualEvent* done) {
    saw_ = false;
    trigger_ = trigger;
    delay_ = delay;
    scope_ = scope;
    done_ = done;
    armed_.store(true, std::memory_order_release);
  }

 private:
  void loop() {
    while (!quit_.load()) {
      if (!armed_.load(std::memory_order_acquire)) {
        std::this_thread::yield();
        continue;
      }
      while (!trigger_->load()) {
      }
      saw_ = true;
      spin(delay_);
      scope_->load()->cancel();
      armed_.store(false);
      done_->set();  // last: the round may end (and its state go) once this is set
    }
  }
  std::atomic<bool> quit_{false}, armed_{false}, saw_{false};
  std::atomic<bool>* trigger_ = nullptr;
  int delay_ = 0;
  std::atomic<Scope*>* scope_ = nullptr;
  ManualEvent* done_ = nullptr;
  std::thread thread_;
};

constexpr int kHolderLingers = 3000;  // spin iterations the holder keeps its worker after releasing

template <class L>
Task<void> grant_cancel_race_once(L& lock, Canceller& canceller, int delay, RaceCounts& counts) {
  ManualEvent held, go, cancel_done;
  std::atomic<bool> w1_queued{false}, w2_queued{false}, releasing{false};
  std::atomic<bool> w1_ran{false}, w1_cancelled{false}, w2_ran{false};
  std::atomic<Scope*> w1_scope{nullptr};
  bool timed_out = false;
  try {
    co_await shoal::with_timeout(5s, shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        auto body = [&]() -> Task<void> {
          held.set();
          co_await go.wait();
          releasing = true;  // the release follows at once, in this step
        };
        co_await hold(lock, body);
        canceller.wait_seen(std::chrono::microseconds(100));  // not longer: the machine may be busy
        spin(kHolderLingers);
      });
      co_await wait_for(held);
      // W1, in a scope of its own that stays alive (shielded) until the
      // canceller is done with it.
      s.spawn([&]() -> Task<void> {
        co_await shoal::scope([&](Scope& ws) -> Task<void> {
          w1_scope = &ws;
          ws.spawn([&]() -> Task<void> {
            w1_queued = true;
            try {
              co_await hold(lock, [&] { w1_ran = true; });
            } catch (const shoal::Cancelled&) {
              w1_cancelled = true;
              throw;
            }
          });
          co_await shoal::shielded(wait_for(cancel_done));
        });
      });
      while (!w1_queued.load()) co_await shoal::checkpoint();
      s.spawn([&]() -> Task<void> {
        w2_queued = true;
        co_await hold(lock, [&] { w2_ran = true; });
      });
      while (!w2_queued.load()) co_await shoal::checkpoint();
      canceller.arm(&releasing, delay, &w1_scope, &cancel_done);
      go.set();
      co_return;
    }));
  } catch (const shoal::TimedOut&) {
    timed_out = true;
  }
  EXPECT_FALSE(timed_out) << "lost wakeup: W2 never got the lock after W1 was cancelled (delay " << delay
                          << ", w1_ran=" << w1_ran.load() << " w1_cancelled=" << w1_cancelled.load() << ")";
  EXPECT_TRUE(w2_ran.load());
  EXPECT_FALSE(w1_ran.load() && w1_cancelled.load()) << "W1 ran its body and then threw Cancelled";
  counts.w1_cancelled += w1_cancelled.load() ? 1 : 0;
  counts.w1_ran += w1_ran.load() ? 1 : 0;
}

template <class L>
Task<void> grant_cancel_race(Kept<L>& lock, const char* what, std::size_t workers) {
  std::mt19937_64 rng(shoal::test::test_seed(what));
  const long rounds = shoal::test::scaled(600, 60);
  RaceCounts counts;
  Canceller canceller;
  // The canceller's delay tracks the boundary between "W1 got in first" and
  // "W1 was cancelled first", where the grant and the cancel meet: shorter
  // after W1 got in, longer after it was cancelled, plus jitter.
  int center = kHolderLingers;
  for (long i = 0; i < rounds && !::testing::Test::HasFailure(); ++i) {
    const int delay = std::max(0, center + static_cast<int>(rng() % 801) - 400);
    const long ran_before = counts.w1_ran;
    co_await grant_cancel_race_once(*lock, canceller, delay, counts);
    center = counts.w1_ran > ran_before ? std::max(0, center - 50) : std::min(4 * kHolderLingers, center + 50);
    const bool free = co_await is_free(*lock);
    if (!free) {
      ADD_FAILURE() << what << ": held after round " << i << " (a cancelled waiter kept what it was granted)";
      co_return;
    }
  }
  std::printf("[grant race] %s, %zu workers: %ld rounds, W1 cancelled %ld, W1 got in %ld (final delay ~%d)\n", what,
              workers, rounds, counts.w1_cancelled, counts.w1_ran, center);
  co_await expect_free(lock, what);
}

SHOAL_TEST(GrantCancel, AWaiterCancelledAsItIsGrantedTheMutexHandsItOn) {
  Kept<Mutex> m("grant race");
  co_await grant_cancel_race(m, "Mutex", workers);
}

SHOAL_TEST(GrantCancel, AWaiterCancelledAsItIsGrantedTheWriteLockHandsItOn) {
  Kept<RwLock> l("grant race");
  co_await grant_cancel_race(l, "RwLock", workers);
}

SHOAL_TEST(GrantCancel, AWaiterCancelledAsItIsGrantedThePermitsHandsThemOn) {
  Kept<Semaphore> sem(2u, "grant race");
  co_await grant_cancel_race(sem, "Semaphore", workers);
}

// The same, made exact on the simulated executor: the holder's own step
// releases and cancels W1 (in either order), so W1 is granted (or woken)
// and cancelled before it runs again. W1 must throw Cancelled without
// running its body, W2 must get the lock, and the lock ends free.
enum class Order { cancel_then_release, release_then_cancel };

struct GrantOutcome {
  bool w1_ran = false, w1_cancelled = false, w2_ran = false, timed_out = false, free_after = false;
};

template <class L>
Task<void> grant_cancel_exact(L& lock, Order order, bool old_waiters, GrantOutcome& o) {
  ManualEvent held, go;
  Scope* w1_scope = nullptr;  // set before w1_queued; read by the holder on the same (one) worker
  std::atomic<bool> w1_queued{false}, w2_queued{false};
  try {
    co_await shoal::with_timeout(60s, shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        auto body = [&]() -> Task<void> {
          held.set();
          co_await go.wait();
          if (order == Order::cancel_then_release) w1_scope->cancel();  // W1 still queued
        };
        co_await hold(lock, body);
        // Same step: the release just woke (or granted) W1, which has not run.
        if (order == Order::release_then_cancel) w1_scope->cancel();
      });
      co_await wait_for(held);
      s.spawn([&]() -> Task<void> {
        co_await shoal::scope([&](Scope& ws) -> Task<void> {
          w1_scope = &ws;
          ws.spawn([&]() -> Task<void> {
            w1_queued = true;
            auto body = [&] { o.w1_ran = true; };
            try {
              co_await hold(lock, body);
            } catch (const shoal::Cancelled&) {
              o.w1_cancelled = true;
              throw;
            }
          });
          co_return;
        });
      });
      while (!w1_queued.load()) co_await shoal::checkpoint();  // one worker: W1 is in the queue
      s.spawn([&]() -> Task<void> {
        w2_queued = true;
        auto body = [&] { o.w2_ran = true; };
        co_await hold(lock, body);
      });
      while (!w2_queued.load()) co_await shoal::checkpoint();
      if (old_waiters) std::this_thread::sleep_for(old_enough());
      go.set();
    }));
  } catch (const shoal::TimedOut&) {
    o.timed_out = true;  // the manual clock jumped: everyone left was asleep
  }
  o.free_after = co_await is_free(lock);
}

template <class L, class... A>
void grant_cancel_exact_sweep(const char* what, A... args) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, what);
  const std::uint64_t base = shoal::test::test_seed(what);
  const std::uint64_t seeds = static_cast<std::uint64_t>(shoal::test::scaled(40, 8));
  for (Order order : {Order::cancel_then_release, Order::release_then_cancel}) {
    for (bool old_waiters : {false, true}) {
      // Old waiters cost real time: fewer seeds.
      const std::uint64_t n = old_waiters ? 3 : seeds;
      for (std::uint64_t seed = base; seed < base + n; ++seed) {
        Kept<L> lock(args...);
        GrantOutcome o;
        shoal::run(grant_cancel_exact(*lock, order, old_waiters, o), shoal::RuntimeOptions::simulated(seed));
        const std::string where = std::string(what) +
                                  (order == Order::cancel_then_release ? ", cancel then release" : ", release then cancel") +
                                  (old_waiters ? ", old waiters" : ", young waiters") + ", SHOAL_SEED=" + std::to_string(seed);
        EXPECT_FALSE(o.timed_out) << where << ": lost wakeup (W2 never got the lock)";
        EXPECT_TRUE(o.w1_cancelled) << where << ": W1 did not throw Cancelled";
        EXPECT_FALSE(o.w1_ran) << where << ": W1 ran its body though cancelled before it ran again";
        EXPECT_TRUE(o.w2_ran) << where << ": W2 never got the lock";
        EXPECT_TRUE(o.free_after) << where << ": the lock was left held";
        if (o.free_after) lock.seen_free();
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

TEST(GrantCancelExact, AMutexWaiterCancelledInTheStepThatGrantsItHandsItOn) {
  grant_cancel_exact_sweep<Mutex>("Mutex exact grant race", std::string("exact"));
}

TEST(GrantCancelExact, AWriteWaiterCancelledInTheStepThatGrantsItHandsItOn) {
  grant_cancel_exact_sweep<RwLock>("RwLock exact grant race", std::string("exact"));
}

TEST(GrantCancelExact, APermitsWaiterCancelledInTheStepThatGrantsThemHandsThemOn) {
  grant_cancel_exact_sweep<Semaphore>("Semaphore exact grant race", 2u, std::string("exact"));
}

// ---- RwLock: a cancelled waiting writer -------------------------------------

// A writer holds the lock; a second writer queues, then readers queue behind
// it. The second writer is cancelled; once the first releases, every queued
// reader gets in (here: one after another is enough).
SHOAL_TEST(RwLockCancel, ReadersQueuedBehindACancelledWriterGetIn) {
  Kept<RwLock> l("readers behind a cancelled writer");
  ManualEvent writing, release;
  std::atomic<bool> writer_queued{false}, writer_ran{false}, writer_cancelled{false};
  std::atomic<int> readers_queued{0}, read{0};
  co_await shoal::with_timeout(10s, shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(shoal::with_write_lock(*l, [&]() -> Task<void> {
      writing.set();
      co_await release.wait();
    }));
    co_await wait_for(writing);
    co_await shoal::scope([&](Scope& ws) -> Task<void> {
      ws.spawn([&]() -> Task<void> {
        writer_queued = true;
        try {
          co_await shoal::with_write_lock(*l, [&] { writer_ran = true; });
        } catch (const shoal::Cancelled&) {
          writer_cancelled = true;
          throw;
        }
      });
      while (!writer_queued.load()) co_await shoal::checkpoint();
      for (int i = 0; i < 3; ++i) {
        s.spawn([&]() -> Task<void> {
          readers_queued.fetch_add(1);
          co_await shoal::with_read_lock(*l, [&] { read.fetch_add(1); });
        });
      }
      while (readers_queued.load() < 3) co_await shoal::checkpoint();
      ws.cancel();
    });
    EXPECT_TRUE(writer_cancelled.load());
    EXPECT_EQ(read.load(), 0) << "a reader got in beside the writer";
    release.set();
  }));
  EXPECT_FALSE(writer_ran.load());
  EXPECT_EQ(read.load(), 3);
  co_await expect_free(l, "RwLock after a cancelled waiting writer");
}

// The same, but the readers must be inside together: a reader waits in its
// body until all three are in. Readers share: once no writer holds or
// waits, a queued reader must not sit asleep while others read.
SHOAL_TEST(RwLockCancel, ReadersQueuedBehindACancelledWriterShareTheLock) {
  Kept<RwLock> l("readers share after a cancelled writer");
  ManualEvent writing, release, all_in;
  std::atomic<bool> writer_queued{false};
  std::atomic<int> readers_queued{0}, inside{0}, peak{0};
  bool timed_out = false;
  try {
    co_await shoal::with_timeout(3s, shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn(shoal::with_write_lock(*l, [&]() -> Task<void> {
        writing.set();
        co_await release.wait();
      }));
      co_await wait_for(writing);
      co_await shoal::scope([&](Scope& ws) -> Task<void> {
        ws.spawn([&]() -> Task<void> {
          writer_queued = true;
          co_await shoal::with_write_lock(*l, [] {});
        });
        while (!writer_queued.load()) co_await shoal::checkpoint();
        for (int i = 0; i < 3; ++i) {
          s.spawn([&]() -> Task<void> {
            readers_queued.fetch_add(1);
            co_await shoal::with_read_lock(*l, [&]() -> Task<void> {
              const int now = inside.fetch_add(1) + 1;
              raise_peak(peak, now);
              if (now == 3) all_in.set();
              co_await all_in.wait();
              inside.fetch_sub(1);
            });
          });
        }
        while (readers_queued.load() < 3) co_await shoal::checkpoint();
        ws.cancel();
      });
      release.set();
    }));
  } catch (const shoal::TimedOut&) {
    timed_out = true;
  }
  EXPECT_FALSE(timed_out) << "readers queued behind the cancelled writer were admitted one at a time: " << peak.load()
                          << " of 3 inside at most, the rest asleep while the lock was only read-held";
  EXPECT_EQ(peak.load(), 3);
  co_await expect_free(l, "RwLock after readers shared it");
}

// Readers queue behind a writer that has waited long enough to turn barging
// off (a reader still holds the lock); the writer is then cancelled: the
// readers queued behind it get in, together.
SHOAL_TEST(RwLockCancel, ReadersQueuedBehindAnOldCancelledWriterGetInTogether) {
  Kept<RwLock> l("readers behind an old cancelled writer");
  ManualEvent reading, first_done, release_last, all_in;
  std::atomic<bool> writer_queued{false}, writer_ran{false}, first_left{false};
  std::atomic<int> readers_holding{0}, readers_queued{0}, inside{0};
  bool timed_out = false;
  try {
    co_await shoal::with_timeout(10s, shoal::scope([&](Scope& s) -> Task<void> {
      // Two readers hold it; one leaves after the writer is old (turning
      // barging off), the other stays until the end.
      s.spawn([&]() -> Task<void> {
        co_await shoal::with_read_lock(*l, [&]() -> Task<void> {
          if (readers_holding.fetch_add(1) + 1 == 2) reading.set();
          co_await first_done.wait();
        });
        first_left = true;
      });
      s.spawn(shoal::with_read_lock(*l, [&]() -> Task<void> {
        if (readers_holding.fetch_add(1) + 1 == 2) reading.set();
        co_await release_last.wait();
      }));
      co_await wait_for(reading);
      co_await shoal::scope([&](Scope& ws) -> Task<void> {
        ws.spawn([&]() -> Task<void> {
          writer_queued = true;
          co_await shoal::with_write_lock(*l, [&] { writer_ran = true; });
        });
        while (!writer_queued.load()) co_await shoal::checkpoint();
        co_await shoal::sleep_for(old_enough());
        first_done.set();  // its release finds an old writer at the head: barging off
        while (!first_left.load()) co_await shoal::checkpoint();
        for (int i = 0; i < 3; ++i) {
          s.spawn([&]() -> Task<void> {
            readers_queued.fetch_add(1);
            co_await shoal::with_read_lock(*l, [&]() -> Task<void> {
              if (inside.fetch_add(1) + 1 == 3) all_in.set();
              co_await all_in.wait();
            });
          });
        }
        while (readers_queued.load() < 3) co_await shoal::checkpoint();
        ws.cancel();
      });
      co_await wait_for(all_in);
      release_last.set();
    }));
  } catch (const shoal::TimedOut&) {
    timed_out = true;
  }
  EXPECT_FALSE(timed_out) << "readers behind the cancelled writer were left asleep (" << inside.load()
                          << " of 3 got in)";
  EXPECT_FALSE(writer_ran.load());
  EXPECT_EQ(inside.load(), 3);
  co_await expect_free(l, "RwLock after an old cancelled writer");
}

// ---- every waiter the released permits allow is let in ----------------------

// Minimal forms of what ReadersQueuedBehindACancelledWriterShareTheLock
// finds, without any cancellation: three waiters queue behind an exclusive
// holder, each needing a share that fits beside the others; once the holder
// releases, all three must be able to be inside together (each waits in its
// body until all three are in).
struct ShareOutcome {
  bool timed_out = false;
  int peak = 0;
};

template <class L, class Exclusive, class Shared>
Task<void> waiters_share_after_release(L& lock, Exclusive exclusive, Shared shared, ShareOutcome& o) {
  ManualEvent holding, release, all_in;
  std::atomic<int> queued{0}, inside{0}, peak{0};
  try {
    co_await shoal::with_timeout(3s, shoal::scope([&](Scope& s) -> Task<void> {
      auto holder_body = [&]() -> Task<void> {
        holding.set();
        co_await release.wait();
      };
      s.spawn(exclusive(lock, holder_body));
      co_await wait_for(holding);
      for (int i = 0; i < 3; ++i) {
        s.spawn([&]() -> Task<void> {
          auto body = [&]() -> Task<void> {
            const int now = inside.fetch_add(1) + 1;
            raise_peak(peak, now);
            if (now == 3) all_in.set();
            co_await all_in.wait();
          };
          queued.fetch_add(1);
          co_await shared(lock, body);
        });
      }
      while (queued.load() < 3) co_await shoal::checkpoint();
      release.set();
    }));
  } catch (const shoal::TimedOut&) {
    o.timed_out = true;
  }
  o.peak = peak.load();
}

SHOAL_TEST(SyncWake, ReadersQueuedBehindAWriterAllGetInTogetherWhenItReleases) {
  Kept<RwLock> l("readers behind a writer");
  ShareOutcome o;
  const auto write = [](RwLock& lock, auto body) -> Task<void> { co_await shoal::with_write_lock(lock, body); };
  const auto read = [](RwLock& lock, auto body) -> Task<void> { co_await shoal::with_read_lock(lock, body); };
  co_await waiters_share_after_release(*l, write, read, o);
  EXPECT_FALSE(o.timed_out) << "after the writer released, " << o.peak
                            << " of 3 queued readers got in; the rest slept while the lock was only read-held";
  EXPECT_EQ(o.peak, 3);
  co_await expect_free(l, "RwLock after readers shared it");
}

SHOAL_TEST(SyncWake, PermitWaitersAllGetInTogetherWhenEveryPermitIsReleased) {
  Kept<Semaphore> sem(3u, "permit waiters behind a full holder");
  ShareOutcome o;
  const auto all = [](Semaphore& s, auto body) -> Task<void> { co_await shoal::with_permits(s, 3, body); };
  const auto one = [](Semaphore& s, auto body) -> Task<void> { co_await shoal::with_permit(s, body); };
  co_await waiters_share_after_release(*sem, all, one, o);
  EXPECT_FALSE(o.timed_out) << "after all 3 permits were released, " << o.peak
                            << " of 3 queued with_permit waiters got in; the rest slept with permits free";
  EXPECT_EQ(o.peak, 3);
  co_await expect_free(sem, "Semaphore after its waiters shared it");
}

}  // namespace
