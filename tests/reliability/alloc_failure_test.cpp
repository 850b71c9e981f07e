// Allocation failure at every point: for N = 1, 2, 3, ... fail the N-th
// runtime allocation (coroutine frames and the timer heap, which both go
// through detail::frame_allocate) (once, and from then on) until a run no longer reaches N.
// Every run must end in success with the right result or in std::bad_alloc
// (the documented out-of-memory error), never std::terminate or another
// error, and free every frame it allocated. In the task-set scenario a spawn
// whose child frame fails reports out-of-memory and the set goes on; such a
// run must still end in std::bad_alloc.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <utility>

#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Channel;
using shoal::Scope;
using shoal::SpawnStatus;
using shoal::Task;
using shoal::TaskSet;

Task<long> leaf(long v) {
  co_await shoal::checkpoint();
  co_return v;
}

// A chain of nested scopes, each spawning the next level and awaiting a leaf.
Task<long> chain(int depth) {
  if (depth == 0) co_return co_await leaf(1);
  long below = 0;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    auto h = s.start(chain(depth - 1));
    const long mine = co_await leaf(depth);
    below = mine + co_await h;
  });
  co_return below;
}

Task<long> spawn_chain() { co_return co_await chain(6); }  // 1 + 1 + 2 + ... + 6 = 22

Task<long> fan_out() {
  std::atomic<long> sum{0};  // children run on any worker
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (long i = 1; i <= 12; ++i) {
      s.spawn([&sum, i]() -> Task<void> { sum.fetch_add(co_await leaf(i)); });
    }
    auto h = s.start(leaf(100));
    sum.fetch_add(co_await h);
  });
  co_return sum.load();  // 78 + 100
}

Task<long> channels() {
  Channel<long> rendezvous(0), buffered(4);
  long sum = 0;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      for (long i = 1; i <= 10; ++i) co_await rendezvous.send(i);
      rendezvous.close();
    });
    s.spawn([&]() -> Task<void> {
      while (auto v = co_await rendezvous.recv()) co_await buffered.send(*v * 2);
      buffered.close();
    });
    while (auto v = co_await buffered.recv()) sum += *v;
  });
  co_return sum;  // 110
}

Task<long> timers() {
  std::atomic<long> sum{0};
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (long i = 1; i <= 4; ++i) {
      s.spawn([&sum, i]() -> Task<void> {
        co_await shoal::sleep_for(std::chrono::microseconds(50 * i));
        sum.fetch_add(i);
      });
    }
    sum.fetch_add(co_await shoal::with_timeout(1h, leaf(10)));
    const bool finished = co_await shoal::move_on_after(1ms, [&]() -> Task<void> {
      shoal::Channel<int> never(1);
      (void)co_await never.recv();
    }());
    sum.fetch_add(finished ? 1000 : 100);
  });
  co_return sum.load();  // 10 + 10 + 100
}

// What the task-set scenario's spawns returned in the current run.
struct SpawnTally {
  std::atomic<long> started{0}, closed{0}, out_of_memory{0};
  void reset() {
    started.store(0);
    closed.store(0);
    out_of_memory.store(0);
  }
  void count(SpawnStatus s) {
    (s == SpawnStatus::started ? started : s == SpawnStatus::closed ? closed : out_of_memory).fetch_add(1);
  }
};
SpawnTally g_spawns;

// An accept loop: a producer feeds items through a channel to a task set
// whose limit is smaller than the number of items, so the body also waits
// for admission. Each child checkpoints and adds its item (odd items through
// spawn_local); one child, started by try_spawn, awaits a nested task. A
// child frame that cannot be allocated makes that spawn report out-of-memory
// (try_spawn: false) and the set go on; the set then ends in bad_alloc.
Task<long> task_set_accept() {
  std::atomic<long> sum{0};  // children run on any worker
  Channel<long> incoming(2);
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      for (long i = 1; i <= 10; ++i) co_await incoming.send(i);
      incoming.close();
    });
    co_await shoal::task_set(3, [&](TaskSet& set) -> Task<void> {
      // The set is empty and open: only out-of-memory refuses this one.
      const bool nested = set.try_spawn([&sum]() -> Task<void> { sum.fetch_add(co_await leaf(100)); });
      g_spawns.count(nested ? SpawnStatus::started : SpawnStatus::out_of_memory);
      while (auto item = co_await incoming.recv()) {
        auto child = [&sum, v = *item]() -> Task<void> {
          co_await shoal::checkpoint();
          sum.fetch_add(v);
        };
        // Not `count(odd ? co_await a : co_await b)`: g++ 12 runs the
        // await_suspend of both arms there, and the other arm takes a slot.
        if (*item % 2 != 0) {
          g_spawns.count(co_await set.spawn_local(child));
        } else {
          g_spawns.count(co_await set.spawn(child));
        }
      }
    });
  });
  co_return sum.load();  // 55 + 100
}

struct Scenario {
  const char* name;
  Task<long> (*make)();
  long expected;
  SpawnTally* spawns;  // the scenario's task-set spawns, if it has any
};

const Scenario kScenarios[] = {
    {"spawn_chain", &spawn_chain, 22, nullptr},
    {"fan_out", &fan_out, 178, nullptr},
    {"channels", &channels, 110, nullptr},
    {"timers", &timers, 120, nullptr},
    {"task_set", &task_set_accept, 155, &g_spawns},
};

enum class Outcome { success, out_of_memory };

// Runs `sc` once with the N-th allocation failing; returns how it ended.
// `reached` tells whether the failure point was reached at all.
Outcome run_failing_at(const Scenario& sc, long n, bool forever, const shoal::RuntimeOptions& opts, bool& reached,
                       std::string& error) {
  if (sc.spawns != nullptr) sc.spawns->reset();
  shoal::test::FrameCounter frames;
  frames.fail_at(n, forever);
  Outcome out = Outcome::success;
  try {
    const long v = shoal::run(sc.make(), opts);
    if (v != sc.expected) error = "wrong result " + std::to_string(v);
  } catch (const std::bad_alloc&) {
    out = Outcome::out_of_memory;
  } catch (const std::exception& e) {
    error = std::string("unexpected error: ") + e.what();
  } catch (...) {
    error = "unexpected non-std error";
  }
  reached = frames.failures() > 0;
  if (out == Outcome::out_of_memory && !reached) error = "bad_alloc without an injected failure";
  if (sc.spawns != nullptr) {
    // A spawn that reported out-of-memory makes the whole set out-of-memory.
    if (sc.spawns->out_of_memory.load() > 0 && out != Outcome::out_of_memory && error.empty()) {
      error = std::to_string(sc.spawns->out_of_memory.load()) + " spawns reported out-of-memory, yet the run succeeded";
    }
    if (sc.spawns->closed.load() > 0) {
      error += std::string(error.empty() ? "" : "; ") + "a spawn into a set nobody closed reported closed";
    }
  }
  if (frames.live() != 0) error += " (" + std::to_string(frames.live()) + " frames leaked)";
  return out;
}

void sweep(shoal::RuntimeOptions opts, const char* mode) {
  opts.on_suppressed_fault = [](std::exception_ptr) {};  // later bad_allocs in a failing scope are expected
  for (const Scenario& sc : kScenarios) {
    for (bool forever : {false, true}) {
      long n = 1, ooms = 0, survived = 0, oom_spawn_runs = 0;
      for (;; ++n) {
        bool reached = false;
        std::string error;
        const Outcome o = run_failing_at(sc, n, forever, opts, reached, error);
        ASSERT_TRUE(error.empty()) << sc.name << " (" << mode << (forever ? ", fail-forever" : ", fail-once")
                                   << ") failing allocation " << n << ": " << error;
        if (!reached) break;  // past the last allocation: a clean run
        (o == Outcome::out_of_memory ? ooms : survived) += 1;
        if (sc.spawns != nullptr && sc.spawns->out_of_memory.load() > 0) ++oom_spawn_runs;
        ASSERT_LT(n, 5000) << sc.name << ": allocation count does not converge";
      }
      std::printf("[alloc] %-12s %-13s %-12s %3ld failure points: %ld out-of-memory, %ld absorbed\n", sc.name, mode,
                  forever ? "fail-forever" : "fail-once", n - 1, ooms, survived);
      if (sc.spawns != nullptr) {
        // Not vacuous: some failures hit a child frame, so a spawn itself
        // reported out-of-memory (rather than the set's own frame failing).
        std::printf("[alloc] %-12s %-13s %-12s %3ld runs had a spawn report out-of-memory\n", sc.name, mode,
                    forever ? "fail-forever" : "fail-once", oom_spawn_runs);
        EXPECT_GT(oom_spawn_runs, 0) << sc.name << ": no failure reached a child frame";
      }
      // Several points even where clang elides frames it can prove local.
      EXPECT_GE(n - 1, 3) << sc.name << ": the scenario should allocate several frames";
      // Every injected failure surfaced: none was swallowed or retried away.
      EXPECT_EQ(survived, 0) << sc.name;
    }
  }
}

TEST(AllocationFailure, EveryFramePointOnTheSimulatedExecutor) {
  shoal::test::Watchdog dog(std::chrono::seconds(240), "AllocationFailure");
  sweep(shoal::RuntimeOptions::simulated(shoal::test::test_seed("AllocationFailure")), "simulated");
}

TEST(AllocationFailure, EveryFramePointOnTwoWorkers) {
  shoal::test::Watchdog dog(std::chrono::seconds(240), "AllocationFailure");
  sweep(shoal::RuntimeOptions::with_workers(2), "2 workers");
}

}  // namespace
