// Task-set admission racing with child completion, close(), set.cancel()
// and an outside cancellation, on more workers than cores. Every round must
// finish (watchdog), never exceed the limit, account for every spawn
// exactly once and free every frame.
#include <atomic>
#include <memory>
#include <mutex>
#include <random>

#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::SpawnStatus;
using shoal::Task;
using shoal::TaskSet;

Task<void> spin(int n) {
  for (int i = 0; i < n; ++i) co_await shoal::checkpoint();
}

enum class Interrupt { none, close, cancel_set, cancel_outside };

struct Round {
  std::atomic<int> ran{0}, live{0}, peak{0};
  int started = 0, closed = 0, refused = 0, cancelled_spawns = 0;
};

Task<void> child(Round* r, int work) {
  r->ran.fetch_add(1);
  int now = r->live.fetch_add(1) + 1;
  int p = r->peak.load();
  while (now > p && !r->peak.compare_exchange_weak(p, now)) {
  }
  struct Leave {
    Round* r;
    ~Leave() { r->live.fetch_sub(1); }
  } leave{r};
  co_await spin(work);
}

Task<void> run_round(std::uint64_t seed, Round& r, std::size_t& limit_out, int& spawns_out, Interrupt& how) {
  std::mt19937_64 rng(seed);
  const std::size_t limit = 1 + rng() % 4;
  const int spawns = 5 + static_cast<int>(rng() % 30);
  how = static_cast<Interrupt>(rng() % 4);
  const int delay = static_cast<int>(rng() % 12);
  limit_out = limit;
  spawns_out = spawns;
  // The interrupter may act only while the set exists: the body publishes
  // the handle and withdraws it (under the lock) when it ends.
  std::mutex mu;
  TaskSet* set_ptr = nullptr;
  bool body_started = false;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&, seed]() -> Task<void> {
      std::mt19937_64 crng(seed ^ 0x9e3779b97f4a7c15ULL);
      co_await shoal::task_set(limit, [&](TaskSet& set) -> Task<void> {
        {
          std::lock_guard<std::mutex> g(mu);
          set_ptr = &set;
          body_started = true;
        }
        struct Withdraw {
          std::mutex& mu;
          TaskSet*& p;
          ~Withdraw() {
            std::lock_guard<std::mutex> g(mu);
            p = nullptr;
          }
        } withdraw{mu, set_ptr};
        for (int i = 0; i < spawns; ++i) {
          const int work = static_cast<int>(crng() % 6);
          if (crng() % 4 == 0) {
            if (set.try_spawn([&r, work] { return child(&r, work); })) {
              ++r.started;
            } else {
              ++r.refused;
            }
            continue;
          }
          SpawnStatus st;
          try {
            st = co_await set.spawn([&r, work] { return child(&r, work); });
          } catch (const shoal::Cancelled&) {
            ++r.cancelled_spawns;
            throw;
          }
          if (st == SpawnStatus::started) ++r.started;
          if (st == SpawnStatus::closed) ++r.closed;
        }
      });
    });
    s.spawn([&, delay]() -> Task<void> {
      co_await spin(delay);
      for (;;) {
        {
          std::lock_guard<std::mutex> g(mu);
          if (body_started) break;
        }
        co_await shoal::checkpoint();
      }
      if (how == Interrupt::cancel_outside) {
        s.cancel();
        co_return;
      }
      std::lock_guard<std::mutex> g(mu);
      if (set_ptr == nullptr) co_return;  // the body already ended
      if (how == Interrupt::close) set_ptr->close();
      if (how == Interrupt::cancel_set) set_ptr->cancel();
    });
    co_return;
  });
}

class TaskSetStress : public ::testing::TestWithParam<std::size_t> {};

TEST_P(TaskSetStress, AdmissionRacesKeepTheLimitAndAccountForEverySpawn) {
  const std::uint64_t base = shoal::test::test_seed("TaskSetStress");
  const long rounds = shoal::test::scaled(2000, 20);
  shoal::test::FrameCounter frames;
  {
    shoal::test::Watchdog dog(std::chrono::seconds(300), "AdmissionRacesKeepTheLimitAndAccountForEverySpawn");
    shoal::RuntimeOptions opts;
    opts.workers = GetParam();
    shoal::Runtime rt(std::move(opts));
    for (long i = 0; i < rounds; ++i) {
      const std::uint64_t seed = base + static_cast<std::uint64_t>(i);
      Round r;
      std::size_t limit = 0;
      int spawns = 0;
      Interrupt how = Interrupt::none;
      rt.block_on(run_round(seed, r, limit, spawns, how));
      SCOPED_TRACE("SHOAL_SEED=" + std::to_string(base) + " round " + std::to_string(i));
      EXPECT_EQ(r.ran.load(), r.started) << "a started child did not run exactly once";
      EXPECT_EQ(r.live.load(), 0);
      EXPECT_LE(r.peak.load(), static_cast<int>(limit)) << "admitted past the limit";
      const int accounted = r.started + r.closed + r.refused + r.cancelled_spawns;
      if (how == Interrupt::none) {
        EXPECT_EQ(r.closed, 0);
        EXPECT_EQ(r.cancelled_spawns, 0);
        EXPECT_EQ(accounted, spawns);
      } else if (how == Interrupt::close) {
        EXPECT_EQ(r.cancelled_spawns, 0) << "close() cancelled a spawn";
        EXPECT_EQ(accounted, spawns);
      } else {
        EXPECT_LE(accounted, spawns);
        EXPECT_LE(r.cancelled_spawns, 1) << "the body went on spawning after a Cancelled";
      }
      if (::testing::Test::HasFailure()) break;
    }
  }
  EXPECT_EQ(frames.live(), 0) << "frames leaked";
}

INSTANTIATE_TEST_SUITE_P(Workers, TaskSetStress,
                         ::testing::Values(std::size_t{1}, std::size_t{2}, std::size_t{4}, std::size_t{16}),
                         shoal::test::worker_param_name);

}  // namespace
