// A task that meets a lock's holder on another worker moves there
// (Scheduler::migrate). When that worker is stuck in one step (here: its
// thread blocked in poll(2) for a byte), the moved task must still end at
// its deadline or its cancellation. Each test's holder blocks until the
// waiter, having given up, writes the byte: without the watch freeing the
// move, the two wait for each other and the holder's 10 s bound fails the
// test (a deadlock the review showed).
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>

#include "shoal/sync.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Mutex;
using shoal::Scope;
using shoal::Task;

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe(fd) != 0) throw std::runtime_error("pipe");
  }
  ~Pipe() {
    ::close(fd[0]);
    ::close(fd[1]);
  }
  void write_byte() const { (void)!::write(fd[1], "x", 1); }
};

// Holds `m` with its worker's thread blocked (not a task wait) until the
// byte comes: true if it came within 10 s.
Task<bool> hold_blocked(Mutex& m, const Pipe& p, std::atomic<bool>& holding) {
  bool came = false;
  co_await shoal::with_lock(m, [&] {
    holding.store(true);
    pollfd pfd{p.fd[0], POLLIN, 0};
    came = ::poll(&pfd, 1, 10'000) == 1;
  });
  co_return came;
}

// Runs `waiter` (which must give up on `m` by itself) beside a holder that
// blocks until the waiter is done; expects the holder to get its byte.
void expect_waiter_gives_up(const char* form, std::function<Task<void>(Mutex&)> waiter) {
  Mutex m;
  Pipe p;
  std::atomic<bool> holding{false};
  bool came = false;
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               s.spawn([&]() -> Task<void> { came = co_await hold_blocked(m, p, holding); });
               while (!holding.load()) co_await shoal::sleep_for(1ms);  // until a worker is stuck holding m
               co_await waiter(m);
               p.write_byte();
             }),
             shoal::RuntimeOptions::with_workers(2));
  EXPECT_TRUE(came) << form << ": the waiter moved to the stuck holder's worker never gave up";
}

TEST(ContentionMove, ALockTimeoutEndsWhileTheHolderIsStuckInOneStep) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "with_lock_timeout behind a stuck holder");
  bool timed_out = false;
  expect_waiter_gives_up("with_lock_timeout", [&](Mutex& m) -> Task<void> {
    auto r = co_await shoal::with_lock_timeout(m, 50ms, [] {});
    timed_out = !r.has_value();
  });
  EXPECT_TRUE(timed_out);
}

TEST(ContentionMove, AMoveOnAfterAroundALockEndsWhileTheHolderIsStuckInOneStep) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "move_on_after(with_lock) behind a stuck holder");
  bool ran = true;
  expect_waiter_gives_up("move_on_after", [&](Mutex& m) -> Task<void> {
    ran = co_await shoal::move_on_after(50ms, shoal::with_lock(m, [] {}));  // false: cut off
  });
  EXPECT_FALSE(ran);
}

TEST(ContentionMove, AScopeCancelReachesAWaiterWhileTheHolderIsStuckInOneStep) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "scope cancel behind a stuck holder");
  bool got_lock = false;
  expect_waiter_gives_up("scope cancel", [&](Mutex& m) -> Task<void> {
    co_await shoal::scope([&](Scope& inner) -> Task<void> {
      inner.spawn([&]() -> Task<void> {
        co_await shoal::with_lock(m, [] {});
        got_lock = true;
      });
      co_await shoal::sleep_for(50ms);
      inner.cancel();
    });
  });
  EXPECT_FALSE(got_lock);
}

TEST(ContentionMove, AJoinHandleCancelReachesAWaiterWhileTheHolderIsStuckInOneStep) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "JoinHandle::cancel behind a stuck holder");
  bool got_lock = false;
  expect_waiter_gives_up("JoinHandle::cancel", [&](Mutex& m) -> Task<void> {
    co_await shoal::scope([&](Scope& inner) -> Task<void> {
      auto h = inner.start([&]() -> Task<void> {
        co_await shoal::with_lock(m, [] {});
        got_lock = true;
      });
      co_await shoal::sleep_for(50ms);
      h.cancel();
    });
  });
  EXPECT_FALSE(got_lock);
}

}  // namespace
