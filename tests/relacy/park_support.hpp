// The worker pool's park/unpark glue for the Relacy tests of the idle word,
// the Parker and the pinned lane (park_relacy_test.cpp,
// pinned_lane_relacy_test.cpp): the real Idle, Parker, StealQueue, Injector
// and PinnedLane, and a copy of what src/runtime/worker_pool.cpp and
// src/runtime/watch.cpp do around them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "relacy_support.hpp"
#include "runtime/idle.hpp"
#include "runtime/injector.hpp"
#include "runtime/parker.hpp"
#include "runtime/pinned_lane.hpp"
#include "runtime/steal_queue.hpp"

namespace shoal::relacy::park {

using detail::Idle;
using detail::Injector;
using detail::Parker;
using detail::PinnedLane;
using detail::TaskBatch;
using detail::TaskRecord;
template <class T>
using Atomic = detail::shim::atomic<T>;

// Stands in for the I/O backend: drive() blocks until wake_driver(); a wake
// before drive() makes the next drive() return at once, as the eventfd write
// it models does. seq_cst, as the system calls it models are full barriers.
// With `spontaneous` > 0, a drive() may also return that many times without
// a wake (an I/O event or a timer ended it), Relacy choosing when.
struct RlDriver {
  Atomic<bool> busy{false};
  Atomic<std::uint32_t> woken{0};
  int spontaneous = 0;  // under `busy`
  bool try_lock_driver() noexcept { return !busy.exchange(true, std::memory_order_acquire); }
  void unlock_driver() noexcept { busy.store(false, std::memory_order_release); }
  void drive() noexcept {
    if (spontaneous > 0 && rl::rand(2) == 0) {
      --spontaneous;
      return;
    }
    while (woken.exchange(0) == 0) woken.wait(0);
  }
  void wake_driver() noexcept {
    woken.store(1);
    woken.notify_one();
  }
};

struct Item : TaskRecord {
  rl::var<int> payload;  // written before the item is queued, read where it runs
  rl::var<int> ran;
};

struct MiniWorker {
  std::size_t index = 0;
  detail::StealQueue<TaskRecord*, std::uint8_t, 4> local;
  Parker parker;
  PinnedLane pinned;
  Atomic<int> activity{0};  // 0 running, 1 searching, 2 parked (the watch reads it)
  bool searching = false;   // owner only
  unsigned tick = 0;        // owner only
};

constexpr int kMaxItems = 3;

// The glue below is copied from src/runtime/worker_pool.cpp (push_local,
// push_pinned_remote, notify_parked, inject, pull_injector, from_injector,
// next_local, search, work_pending, park, worker_main), Scheduler::unpark,
// ~Scheduler's begin_shutdown and WorkerPool::stop, minus timers, the frame
// cache, the LIFO slot, the driving worker's woken batch, the every-61st-tick
// injector check and the random victim order. With `Pinned` false the
// pinned lanes are left out (a drain per look for work is a lot of
// interleavings for tests that queue no pinned task). The SC model test
// (tests/model/park_protocol_test.cpp) has an older copy. Keep this one in
// step with the original.
template <std::size_t kWorkers, bool Pinned = false>
struct MiniRuntime {
  MiniWorker workers[kWorkers];
  Injector injector;
  Idle idle{kWorkers};
  RlDriver driver;
  Atomic<bool> shutdown{false};
  Item items[kMaxItems];
  int child_of[kMaxItems] = {-1, -1, -1};         // running item i spawns child_of[i]
  int second_child_of[kMaxItems] = {-1, -1, -1};  // ... then this one, onto a non-empty queue
  Atomic<int> done{0};

  void before() {
    for (std::size_t i = 0; i < kWorkers; ++i) workers[i].index = i;
    for (Item& it : items) {
      it.payload($) = 0;
      it.ran($) = 0;
    }
  }
  Item* make(int i) {
    items[i].payload($) = i + 1;
    return &items[i];
  }

  bool push_local(MiniWorker& w, TaskRecord* f) noexcept {
    bool overflowed = false;
    std::size_t len;
    while ((len = w.local.push(f)) == 0) {
      TaskBatch overflow;
      w.local.take_half([&](TaskRecord* x) { overflow.push(x); });
      injector.push_batch(overflow);
      overflowed = true;
    }
    return len == 1 || overflowed;
  }
  // Scheduler::unpark.
  void unpark(MiniWorker& w) noexcept { (void)w.parker.unpark(driver); }
  // A task pinned to `owner`, queued from another thread.
  void push_pinned_remote(MiniWorker& owner, TaskRecord* f) noexcept {
    if (owner.pinned.push_remote(f)) unpark(owner);
  }
  void notify_parked() noexcept {
    const long idx = idle.pick_sleeper_to_wake(
        [this](std::size_t i) { return workers[i].parker.state() == Parker::kParkedDriver; });
    if (idx >= 0) unpark(workers[static_cast<std::size_t>(idx)]);
  }
  void inject(TaskRecord* f) noexcept {
    injector.push(f);
    notify_parked();
  }
  TaskBatch pull_injector(std::size_t want) noexcept {
    TaskBatch b = injector.pop(want);
    if (b.empty()) return b;
    if (!injector.empty()) notify_parked();
    return b;
  }
  TaskRecord* from_injector(MiniWorker& w) noexcept {
    if (injector.empty()) return nullptr;
    std::size_t want = std::min<std::size_t>(injector.size() / kWorkers + 1, w.local.capacity() / 2);
    TaskBatch b = pull_injector(want);
    if (b.empty()) return nullptr;
    TaskRecord* first = b.head;
    for (TaskRecord* f = first->next; f != nullptr;) {
      TaskRecord* next = f->next;
      push_local(w, f);
      f = next;
    }
    return first;
  }
  TaskRecord* next_local(MiniWorker& w) noexcept {
    if constexpr (Pinned) {
      ++w.tick;
      w.pinned.drain_remote();
      if (!w.pinned.empty() && (w.tick & 1) != 0) return w.pinned.pop();
    }
    if (TaskRecord* f = w.local.pop()) return f;
    if constexpr (Pinned) {
      if (TaskRecord* f = w.pinned.pop()) return f;
    }
    return from_injector(w);
  }
  TaskRecord* search(MiniWorker& w) noexcept {
    if (!w.searching) {
      if (!idle.try_begin_search()) return nullptr;
      w.searching = true;
      w.activity.store(1, std::memory_order_relaxed);
    }
    for (MiniWorker& victim : workers) {
      if (&victim == &w) continue;
      if (TaskRecord* f = victim.local.steal_into(w.local)) return f;
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
    w.activity.store(2, std::memory_order_relaxed);
    const bool last = idle.park(w.index, was_searching);
    if (last) SHOAL_FENCE_SEQ_CST();
    if ((last && work_pending()) || shutdown.load(std::memory_order_seq_cst)) {
      w.searching = idle.unpark(w.index);
      w.activity.store(0, std::memory_order_relaxed);
      return;
    }
    w.parker.park(driver);
    w.searching = idle.unpark(w.index);
    w.activity.store(w.searching ? 1 : 0, std::memory_order_relaxed);
  }
  void worker_main(MiniWorker& w) noexcept {
    for (;;) {
      TaskRecord* f = next_local(w);
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
        w.activity.store(0, std::memory_order_relaxed);
        if (idle.end_search()) {
          SHOAL_FENCE_SEQ_CST();
          if (work_pending()) notify_parked();
        }
      }
      run(w, f);
    }
  }
  // Running an item: check its payload and count the run, then spawn its
  // children on this worker as Scheduler::schedule_spawn does (local queue,
  // then notify_parked) and report it done.
  void run(MiniWorker& w, TaskRecord* f) noexcept {
    Item* it = static_cast<Item*>(f);
    const auto i = static_cast<int>(it - items);
    RL_ASSERT(it->payload($) == i + 1);
    it->ran($) = it->ran($) + 1;
    if (child_of[i] >= 0 && push_local(w, make(child_of[i]))) notify_parked();
    if (second_child_of[i] >= 0 && push_local(w, make(second_child_of[i]))) notify_parked();
    done.fetch_add(1, std::memory_order_release);
    done.notify_all();
  }

  // A thread that is none of the workers waits for `total` items to have
  // run, then shuts down as ~Scheduler does (begin_shutdown, then
  // WorkerPool::stop's unpark of every worker).
  void wait_and_shut_down(int total) {
    for (int d = done.load(std::memory_order_acquire); d != total; d = done.load(std::memory_order_acquire)) {
      done.wait(d, std::memory_order_acquire);
    }
    shutdown.store(true, std::memory_order_seq_cst);
    for (MiniWorker& w : workers) unpark(w);
  }
  void check(int total) {
    for (int i = 0; i < total; ++i) RL_ASSERT(items[i].ran($) == 1);
  }
};

}  // namespace shoal::relacy::park
