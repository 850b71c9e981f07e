// Park/unpark under the model checker: the real Idle (wake protocol), the
// real Parker (futex and driver paths), the real StealQueue and Injector,
// and a copy of the scheduler's glue around them.
// Invariants: every item runs exactly once; no lost wake-up (a worker that
// sleeps while work is queued and nobody is left to run it shows up as a
// deadlock: the producer waits for the items forever); shutdown wakes every
// worker and they all end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "harness.hpp"
#include "src/runtime/idle.hpp"
#include "src/runtime/injector.hpp"
#include "src/runtime/parker.hpp"
#include "src/runtime/steal_queue.hpp"

namespace shoal::model {
namespace {

constexpr std::size_t kWorkers = 2;
constexpr int kMaxItems = 4;

// Stands in for the I/O backend. A wake before drive() makes drive() return
// at once, as the eventfd write it models does.
struct ModelDriver {
  Atomic<bool> busy{false};
  Atomic<std::uint32_t> woken{0};
  bool try_lock_driver() noexcept { return !busy.exchange(true, std::memory_order_acquire); }
  void unlock_driver() noexcept { busy.store(false, std::memory_order_release); }
  void drive() noexcept {
    while (woken.exchange(0) == 0) woken.wait(0);
  }
  void wake_driver() noexcept {
    woken.store(1);
    woken.notify_one();
  }
};

struct MiniWorker {
  std::size_t index = 0;
  detail::StealQueue<detail::TaskRecord*, std::uint8_t, 4> local;
  detail::Parker parker;
  bool searching = false;
};

// The glue below is copied from src/runtime/worker_pool.cpp (push_local,
// notify_parked, inject, from_injector, search, work_pending, park,
// worker_main), minus timers, the LIFO slot, the every-61st-tick injector
// check and the random victim order. Keep it in step with the original.
struct MiniRuntime {
  MiniWorker workers[kWorkers];
  detail::Injector injector;
  detail::Idle idle{kWorkers};
  ModelDriver driver;
  Atomic<bool> shutdown{false};

  TestRecord items[kMaxItems];
  int child_of[kMaxItems] = {-1, -1, -1, -1};  // running item i spawns child_of[i]
  int second_child_of[kMaxItems] = {-1, -1, -1, -1};  // ... then this one, onto a non-empty queue
  int ran[kMaxItems] = {};
  Atomic<int> done{0};

  MiniRuntime() {
    for (std::size_t i = 0; i < kWorkers; ++i) workers[i].index = i;
  }

  bool push_local(MiniWorker& w, detail::TaskRecord* f) noexcept {
    bool overflowed = false;
    std::size_t len;
    while ((len = w.local.push(f)) == 0) {
      detail::TaskBatch overflow;
      w.local.take_half([&](detail::TaskRecord* x) { overflow.push(x); });
      injector.push_batch(overflow);
      overflowed = true;
    }
    return len == 1 || overflowed;
  }
  void notify_parked() noexcept {
    long idx = idle.pick_sleeper_to_wake();
    if (idx >= 0) workers[static_cast<std::size_t>(idx)].parker.unpark(driver);
  }
  void inject(detail::TaskRecord* f) noexcept {
    injector.push(f);
    notify_parked();
  }
  detail::TaskRecord* from_injector(MiniWorker& w) noexcept {
    if (injector.empty()) return nullptr;
    std::size_t want = std::min<std::size_t>(injector.size() / kWorkers + 1, w.local.capacity() / 2);
    detail::TaskBatch b = injector.pop(want);
    if (b.empty()) return nullptr;
    if (!injector.empty()) notify_parked();
    detail::TaskRecord* first = b.head;
    for (detail::TaskRecord* f = first->next; f != nullptr;) {
      detail::TaskRecord* next = f->next;
      push_local(w, f);
      f = next;
    }
    return first;
  }
  detail::TaskRecord* next_local(MiniWorker& w) noexcept {
    if (detail::TaskRecord* f = w.local.pop()) return f;
    return from_injector(w);
  }
  detail::TaskRecord* search(MiniWorker& w) noexcept {
    if (!w.searching) {
      if (!idle.try_begin_search()) return nullptr;
      w.searching = true;
    }
    for (MiniWorker& victim : workers) {
      if (&victim == &w) continue;
      if (detail::TaskRecord* f = victim.local.steal_into(w.local)) return f;
    }
    return from_injector(w);
  }
  bool work_pending() noexcept {
    if (!injector.empty()) return true;
    for (MiniWorker& w : workers) {
      if (!w.local.empty()) return true;
    }
    return false;
  }
  void park(MiniWorker& w) noexcept {
    const bool was_searching = w.searching;
    w.searching = false;
    const bool last = idle.park(w.index, was_searching);
    if (last) SHOAL_FENCE_SEQ_CST();  // pairs with a producer's (Idle::pick_sleeper_to_wake)
    if ((last && work_pending()) || shutdown.load(std::memory_order_seq_cst)) {
      w.searching = idle.unpark(w.index);
      return;
    }
    w.parker.park(driver);
    w.searching = idle.unpark(w.index);
  }
  void worker_main(MiniWorker& w) noexcept {
    for (;;) {
      detail::TaskRecord* f = next_local(w);
      if (f == nullptr) {
        f = search(w);
        if (f == nullptr) {
          if (shutdown.load(std::memory_order_acquire)) break;
          park(w);
          continue;
        }
      }
      if (w.searching) {
        w.searching = false;
        if (idle.end_search()) {
          SHOAL_FENCE_SEQ_CST();
          if (work_pending()) notify_parked();
        }
      }
      run(w, f);
    }
  }
  // "Running" an item: count it, and spawn its child on this worker (as
  // Scheduler::schedule_spawn does: local queue, then notify_parked).
  void run(MiniWorker& w, detail::TaskRecord* f) noexcept {
    const auto i = static_cast<int>(static_cast<TestRecord*>(f) - items);
    ++ran[i];
    if (child_of[i] >= 0 && push_local(w, &items[child_of[i]])) notify_parked();
    if (second_child_of[i] >= 0 && push_local(w, &items[second_child_of[i]])) notify_parked();
    done.fetch_add(1);
    done.notify_all();
  }
};

// Workers start idle; the producer (main) injects `injected` items, of which
// the first `with_children` spawn one child each; main waits for every item,
// then shuts down as ~Scheduler does.
void park_scenario(int injected, int with_children) {
  MiniRuntime rt;
  const int total = injected + with_children;
  for (int i = 0; i < with_children; ++i) rt.child_of[i] = injected + i;
  Thread w0 = spawn([&] { rt.worker_main(rt.workers[0]); }, "worker0");
  Thread w1 = spawn([&] { rt.worker_main(rt.workers[1]); }, "worker1");
  for (int i = 0; i < injected; ++i) rt.inject(&rt.items[i]);
  for (int d = rt.done.load(); d != total; d = rt.done.load()) rt.done.wait(d);
  rt.shutdown.store(true, std::memory_order_seq_cst);
  for (MiniWorker& w : rt.workers) w.parker.unpark(rt.driver);
  w0.join();
  w1.join();
  // (A worker may leave while still counted as searching: worker_main
  // breaks out of a search at shutdown, which is fine as Idle dies with it.)
  for (int i = 0; i < total; ++i) check(rt.ran[i] == 1, "an item was lost or ran twice");
}

TEST(ModelPark, OneItemExhaustiveBound2) {
  expect_passes(explore_bound(2, [] { park_scenario(1, 0); }));
}

TEST(ModelPark, TwoItemsExhaustiveBound1) {
  expect_passes(explore_bound(1, [] { park_scenario(2, 0); }));
}

TEST(ModelPark, SpawnedChildExhaustiveBound1) {
  expect_passes(explore_bound(1, [] { park_scenario(1, 1); }));
}

// Shutdown races workers on their way to sleep: none may sleep through it.
TEST(ModelPark, ShutdownWhileParkingExhaustiveBound2) {
  expect_passes(explore_bound(2, [] { park_scenario(0, 0); }));
}

// One item spawns two children: the second push finds the first child
// still queued (unless a thief was quick) and wakes nobody; both still run.
TEST(ModelPark, SecondSpawnOntoANonEmptyQueueWakesNobodyAndLosesNothingExhaustiveBound1) {
  expect_passes(explore_bound(1, [] {
    MiniRuntime rt;
    rt.child_of[0] = 1;
    rt.second_child_of[0] = 2;
    Thread w0 = spawn([&] { rt.worker_main(rt.workers[0]); }, "worker0");
    Thread w1 = spawn([&] { rt.worker_main(rt.workers[1]); }, "worker1");
    rt.inject(&rt.items[0]);
    for (int d = rt.done.load(); d != 3; d = rt.done.load()) rt.done.wait(d);
    rt.shutdown.store(true, std::memory_order_seq_cst);
    for (MiniWorker& w : rt.workers) w.parker.unpark(rt.driver);
    w0.join();
    w1.join();
    for (int i = 0; i < 3; ++i) check(rt.ran[i] == 1, "an item was lost or ran twice");
  }));
}

TEST(ModelPark, RandomSchedules) {
  expect_passes(random_runs(2000, [] { park_scenario(2, 2); }));
}

}  // namespace
}  // namespace shoal::model
