// The work-stealing pool: workers, their queues, stealing and parking.
// (Where a ready task goes, and how workers park: worker_pool.hpp.)
#include "src/runtime/worker_pool.hpp"

#include <algorithm>
#include <thread>

#include "src/runtime/frame_slabs.hpp"
#include "src/runtime/placement.hpp"
#include "src/runtime/scheduler.hpp"

namespace shoal::detail {

WorkerPool::WorkerPool(Scheduler& sched, std::size_t workers) : sched_(sched), idle_(workers) {
  try {
    workers_.reserve(workers);
    for (std::size_t i = 0; i < workers; ++i) {
      auto w = std::make_unique<Worker>();
      w->sched = &sched;
      w->index = i;
      w->slot = i < TaskRecord::kNoWorker ? static_cast<std::uint8_t>(i) : TaskRecord::kNoWorker;
      w->rng.seed(static_cast<unsigned>(i * 7919 + 17));
      workers_.push_back(std::move(w));
    }
    for (auto& w : workers_) {
      Worker* wp = w.get();
      wp->thread = std::thread([this, wp] {
        tls_worker = wp;
        worker_main(*wp);
        tls_worker = nullptr;
      });
    }
  } catch (...) {
    // Out of threads or memory (a PID limit, a huge SHOAL_THREADS): stop and
    // join the workers already running before the members they use go.
    sched_.begin_shutdown();
    stop();
    throw;
  }
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::stop() noexcept {
  for (auto& w : workers_) sched_.unpark(*w);
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  ForeignWake::wait_out(foreign_wakes_);
}

bool WorkerPool::migrate(Worker* w, TaskRecord* f, std::uint8_t slot, bool end_at_long_poll) noexcept {
  if (w == nullptr || slot >= workers_.size() || slot == w->index ||
      (placement::pin(f) != 0 && !placement::soft_pinned(f))) {
    return false;
  }
  // Not to a worker the watch found stuck in one step: the task would wait
  // there past its deadline, unreachable by its canceller (watch.cpp).
  const Worker& to = *workers_[slot];
  if (const std::uint64_t stalled = to.stalled_at.load(std::memory_order_relaxed);
      stalled != 0 && stalled == to.polls.load(std::memory_order_relaxed) + 1) {
    return false;
  }
  placement::pin_soft(f, slot, end_at_long_poll);
  push_pinned_remote(f);  // the target drains its pinned inbox first
  return true;
}

void WorkerPool::push_pinned_remote(TaskRecord* f) noexcept {
  Worker& owner = *workers_[placement::pin(f) - 1];
  if (owner.pinned.push_remote(f)) sched_.unpark(owner);
}

bool WorkerPool::push_local(Worker& w, TaskRecord* f) noexcept {
  if (const std::uint32_t pin = placement::pin(f); pin != 0) {
    if (pin - 1 != w.index) {
      push_pinned_remote(f);
    } else {
      w.pinned.push(f);
    }
    return false;  // a pinned task is no work for anyone else
  }
  const bool quiet = placement::take_lapsed(f);
  bool overflowed = false;
  std::size_t len;
  while ((len = w.local.push(f)) == 0) {
    TaskBatch overflow;
    TaskRecord* window[kAhead] = {};  // the last kAhead records pushed: each learns who comes kAhead after it
    w.local.take_half([&](TaskRecord* x) {
      TaskRecord*& behind = window[overflow.count % kAhead];
      if (behind != nullptr) behind->ahead = x;
      behind = x;
      overflow.push(x);
    });
    injector_.push_batch(overflow);
    overflowed = true;
  }
  return (len == 1 && !quiet) || overflowed;
}

void WorkerPool::notify_parked() noexcept {
  // A futex sleeper first: waking the worker in the driver costs a backend
  // wake-up and leaves nobody driving.
  const long idx = idle_.pick_sleeper_to_wake(
      [this](std::size_t i) { return workers_[i]->parker.state() == Parker::kParkedDriver; });
  if (idx >= 0) sched_.unpark(*workers_[static_cast<std::size_t>(idx)]);
}

void WorkerPool::inject(TaskRecord* f) noexcept {
  ForeignWake guard(foreign_wakes_);
  if (placement::pin(f) != 0) {
    push_pinned_remote(f);
    return;
  }
  injector_.push(f);
  notify_parked();
}

void WorkerPool::schedule(Worker* w, TaskRecord* f) noexcept {
  if (w == nullptr) {
    inject(f);
    return;
  }
  if (const std::uint32_t pin = placement::pin(f); pin != 0 && pin - 1 != w->index) {
    push_pinned_remote(f);
    return;
  }
  if (w->driving) {
    w->woke.push(f);
    return;
  }
  TaskRecord* prev = w->lifo;
  w->lifo = f;
  if (prev != nullptr && push_local(*w, prev)) notify_parked();
}

void WorkerPool::push_ready(Worker* w, TaskRecord* f) noexcept {
  if (w == nullptr || w->driving) {
    schedule(w, f);
    return;
  }
  if (push_local(*w, f)) notify_parked();
}

void WorkerPool::schedule_yield(Worker* w, TaskRecord* f) noexcept {
  if (placement::soft_pinned(f)) placement::at_yield(f, w);
  push_ready(w, f);
}

void WorkerPool::schedule_batch(Worker* w, TaskBatch& batch) noexcept {
  if (w != nullptr && w->driving) {
    for (TaskRecord* f = batch.head; f != nullptr;) {
      TaskRecord* next = f->next;
      schedule(w, f);
      f = next;
    }
    batch = TaskBatch{};
    return;
  }
  if (w != nullptr) {
    place_batch(w, batch);
    notify_parked();
    return;
  }
  ForeignWake guard(foreign_wakes_);
  place_batch(nullptr, batch);
  notify_parked();
}

// Local if it fits in half the queue; a big fan-out goes to the injector so
// every worker can take a share. Pinned tasks go home.
void WorkerPool::place_batch(Worker* w, TaskBatch& batch) noexcept {
  if (w != nullptr && batch.count <= w->local.capacity() / 2) {
    for (TaskRecord* f = batch.head; f != nullptr;) {
      TaskRecord* next = f->next;
      push_local(*w, f);
      f = next;
    }
    batch = TaskBatch{};
  } else {
    TaskBatch shared;
    for (TaskRecord* f = batch.head; f != nullptr;) {
      TaskRecord* next = f->next;
      if (placement::pin(f) != 0) {
        push_pinned_remote(f);
      } else {
        shared.push(f);
      }
      f = next;
    }
    batch = TaskBatch{};
    injector_.push_batch(shared);
  }
}

TaskBatch WorkerPool::pull_injector(Worker& w, std::size_t want) noexcept {
  TaskBatch b = injector_.pop(want);
  if (b.empty()) return b;
  bump(w.injector_pulls);
  if (!injector_.empty()) notify_parked();  // what pop put back may have looked gone to a worker going to sleep
  return b;
}

TaskRecord* WorkerPool::from_injector(Worker& w) noexcept {
  if (injector_.empty()) return nullptr;
  const std::size_t n = workers_.size();
  std::size_t want = std::min<std::size_t>(injector_.size() / n + 1, w.local.capacity() / 2);
  TaskBatch b = pull_injector(w, want);
  if (b.empty()) return nullptr;
  TaskRecord* first = b.head;
  prefetch_rest(first);
  for (TaskRecord* f = first->next; f != nullptr;) {
    prefetch_rest(f);
    TaskRecord* next = f->next;
    push_local(w, f);
    f = next;
  }
  return first;
}

TaskRecord* WorkerPool::next_local(Worker& w) noexcept {
  ++w.tick;
  w.pinned.drain_remote();
  if (w.tick % kDriverPollTicks == 0) {
    sched_.driver().fire_timers();  // busy workers keep timers firing while nobody drives
    sched_.driver().poll_io_now();  // ... and I/O events flowing
    if (TaskBatch b = pull_injector(w, 1); !b.empty()) return b.head;
  }
  if (w.lifo != nullptr) {
    TaskRecord* f = w.lifo;
    w.lifo = nullptr;
    if (w.lifo_streak < 3) {
      ++w.lifo_streak;
      bump(w.lifo_hits);
      return f;
    }
    push_local(w, f);
  }
  w.lifo_streak = 0;
  // Pinned and stealable tasks take turns, so neither starves the other.
  if (!w.pinned.empty() && (w.tick & 1) != 0) return w.pinned.pop();
  if (TaskRecord* f = w.local.pop()) return f;
  if (TaskRecord* f = w.pinned.pop()) return f;
  return from_injector(w);
}

TaskRecord* WorkerPool::search(Worker& w) noexcept {
  if (!w.searching) {
    if (!idle_.try_begin_search()) return nullptr;
    w.searching = true;
    w.activity.store(1, std::memory_order_relaxed);
  }
  const std::size_t n = workers_.size();
  const std::size_t start = w.rng() % n;
  for (std::size_t i = 0; i < n; ++i) {
    Worker& victim = *workers_[(start + i) % n];
    if (&victim == &w) continue;
    if (TaskRecord* f = victim.local.steal_into(w.local)) {
      bump(w.steals);
      return f;
    }
  }
  return from_injector(w);
}

bool WorkerPool::work_pending() const noexcept {
  if (!injector_.empty()) return true;
  for (auto& w : workers_) {
    if (!w->local.empty()) return true;
  }
  return false;
}

void WorkerPool::park(Worker& w) noexcept {
  if (sched_.driver().fire_timers()) return;  // due timers made work; run it first
  // Nothing to run: a burst's free slabs go back now, a batch at a time,
  // before this worker counts as parked (so no wake waits on it) and
  // until work turns up.
  while (frame_cache_trim_batch()) {
    if (work_pending()) return;
  }
  frame_cache_flush_remote();  // others' blocks freed here go home before we sleep
  const bool was_searching = w.searching;
  w.searching = false;
  w.activity.store(2, std::memory_order_relaxed);
  const bool last = idle_.park(w.index, was_searching);
  // The re-check pairs with a producer's "publish work; seq_cst fence; read
  // the idle state" (Idle::pick_sleeper_to_wake). The seq_cst RMW in park()
  // alone does not keep the queues' acquire loads after it (C++ lets a later
  // load to another location pass it; so do ARMv8.3 RCpc loads), so the
  // re-check could read the queues from before the RMW while the producer
  // reads the idle state from before it too: both miss. With a fence on each
  // side, one of the two sees the other.
  if (last) SHOAL_FENCE_SEQ_CST();
  if ((last && work_pending()) || sched_.shutting_down(std::memory_order_seq_cst)) {
    w.searching = idle_.unpark(w.index);
    w.activity.store(0, std::memory_order_relaxed);
    sched_.left_park();
    return;
  }
  w.driving = true;  // if this park turns into a drive, what it wakes gathers in w.woke
  bump(w.parks);
  w.parker.park(sched_.driver());
  w.driving = false;
  w.searching = idle_.unpark(w.index);
  w.activity.store(w.searching ? 1 : 0, std::memory_order_relaxed);
  sched_.left_park();
  run_woken(w);
}

// What the driver woke: this worker runs the first itself, so a batch of
// one wakes nobody (no futex wake, and never the driver waking itself);
// more than one is work for a sleeper.
void WorkerPool::run_woken(Worker& w) noexcept {
  if (w.woke.empty()) return;
  TaskBatch batch = w.woke;
  w.woke = TaskBatch{};
  const bool more = batch.count > 1;
  place_batch(&w, batch);
  if (more) notify_parked();
}

void WorkerPool::worker_main(Worker& w) noexcept {
  for (;;) {
    TaskRecord* f = next_local(w);
    if (f == nullptr) {
      f = search(w);
      if (f == nullptr) {
        if (sched_.shutting_down()) break;
        park(w);
        continue;
      }
    }
    if (w.searching) {
      w.searching = false;
      w.activity.store(0, std::memory_order_relaxed);
      // The last searcher to find work hands the search on, but only if
      // work is left to find: a producer that saw us searching woke nobody.
      // The fence pairs with the producer's (Idle::pick_sleeper_to_wake),
      // as in park().
      if (idle_.end_search()) {
        SHOAL_FENCE_SEQ_CST();
        if (work_pending()) notify_parked();
      }
    }
    sched_.run_task(w, f);
  }
}

}  // namespace shoal::detail
