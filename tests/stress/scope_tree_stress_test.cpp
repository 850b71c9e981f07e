// Randomized trees of nested scopes with faults and cancellations, on 1 and N
// workers. Invariants: every child joined before its scope returns; the
// exception a scope rethrows is one its own children or body raised (on one
// worker: exactly the first); live frames back to zero; no hang (watchdog).
// Prints its seed; rerun with SHOAL_SEED.
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <vector>

#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::Scope;
using shoal::Task;

struct Fault : std::runtime_error {
  explicit Fault(int id) : std::runtime_error("fault " + std::to_string(id)), id(id) {}
  int id;
};

struct Ctx {
  std::atomic<int> next_id{0};
  std::atomic<long> scopes{0};
  std::atomic<long> violations{0};
};

// What a node of the tree does, drawn from a per-node seed so the shape is
// a function of the seed alone.
Task<void> node(Ctx& ctx, std::uint64_t seed, int depth, bool single_worker);

Task<void> run_scope(Ctx& ctx, std::uint64_t seed, int depth, bool single_worker) {
  std::mt19937_64 rng(seed);
  auto live = std::make_shared<std::atomic<int>>(0);
  auto faults = std::make_shared<std::pair<std::mutex, std::vector<std::exception_ptr>>>();
  const int children = static_cast<int>(rng() % 5);
  std::exception_ptr rethrown;
  try {
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      for (int i = 0; i < children; ++i) {
        const std::uint64_t child_seed = rng();
        live->fetch_add(1);
        s.spawn([&ctx, child_seed, depth, single_worker, live, faults]() -> Task<void> {
          struct Leave {
            std::shared_ptr<std::atomic<int>> l;
            ~Leave() { l->fetch_sub(1); }
          } leave{live};
          try {
            co_await node(ctx, child_seed, depth + 1, single_worker);
          } catch (const shoal::Cancelled&) {
            throw;
          } catch (...) {
            std::lock_guard<std::mutex> g(faults->first);
            faults->second.push_back(std::current_exception());
            throw;
          }
        });
      }
      switch (rng() % 6) {
        case 0:
          s.cancel();
          break;
        case 1: {
          const int id = ctx.next_id.fetch_add(1);
          for (int k = 0; k < static_cast<int>(rng() % 3); ++k) co_await shoal::checkpoint();
          auto e = std::make_exception_ptr(Fault(id));
          {
            std::lock_guard<std::mutex> g(faults->first);
            faults->second.push_back(e);
          }
          std::rethrow_exception(e);
        }
        default:
          for (int k = 0; k < static_cast<int>(rng() % 4); ++k) co_await shoal::checkpoint();
      }
    });
  } catch (const shoal::Cancelled&) {
    if (live->load() != 0) ctx.violations.fetch_add(1);
    throw;
  } catch (...) {
    rethrown = std::current_exception();
  }
  ctx.scopes.fetch_add(1);
  if (live->load() != 0) ctx.violations.fetch_add(1);  // a child outlived its scope
  std::lock_guard<std::mutex> g(faults->first);
  auto& log = faults->second;
  if (rethrown) {
    bool known = false;
    for (auto& e : log) known = known || e == rethrown;
    if (!known) ctx.violations.fetch_add(1);
    if (single_worker && !log.empty() && log.front() != rethrown) ctx.violations.fetch_add(1);
    std::rethrow_exception(rethrown);
  }
  if (!log.empty()) ctx.violations.fetch_add(1);  // a fault was lost
}

Task<void> node(Ctx& ctx, std::uint64_t seed, int depth, bool single_worker) {
  std::mt19937_64 rng(seed);
  const unsigned kind = rng() % 8;
  if (depth < 5 && kind < 4) co_return co_await run_scope(ctx, rng(), depth, single_worker);
  if (kind == 4) throw Fault(ctx.next_id.fetch_add(1));
  for (int k = 0; k < static_cast<int>(rng() % 8); ++k) co_await shoal::checkpoint();
}

void stress(std::size_t workers, bool deterministic, const char* name) {
  const std::uint64_t base = shoal::test::test_seed(name);
  const long iterations = shoal::test::scaled(20000, 100);
  shoal::test::FrameCounter frames;
  shoal::test::Watchdog dog(std::chrono::seconds(500), name);
  Ctx ctx;
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(workers));
  for (long it = 0; it < iterations; ++it) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(it);
    try {
      if (deterministic) {
        shoal::run(run_scope(ctx, seed, 0, true), shoal::RuntimeOptions::deterministic(seed));
      } else {
        rt.block_on(run_scope(ctx, seed, 0, workers == 1));
      }
    } catch (const Fault&) {
    } catch (const shoal::ScopeCancelled&) {
    }
    ASSERT_EQ(ctx.violations.load(), 0) << "iteration seed " << seed;
    ASSERT_EQ(frames.live(), 0) << "iteration seed " << seed;
  }
  EXPECT_GT(ctx.scopes.load(), iterations);
}

TEST(ScopeTreeStress, OneWorker) { stress(1, false, "ScopeTreeStress.OneWorker"); }
TEST(ScopeTreeStress, FourWorkers) { stress(4, false, "ScopeTreeStress.FourWorkers"); }
// Oversubscribed (16 workers on however many cores): the per-worker timer
// wheels, the watch and the parking paths with many sleepers.
TEST(ScopeTreeStress, SixteenWorkers) { stress(16, false, "ScopeTreeStress.SixteenWorkers"); }
TEST(ScopeTreeStress, DeterministicSchedules) { stress(1, true, "ScopeTreeStress.DeterministicSchedules"); }

}  // namespace
