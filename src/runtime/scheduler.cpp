// Workers, work stealing and parking.
//
// Where a ready task goes:
// - woken by a task on a worker of the same runtime: that worker's LIFO slot
//   (runs next, no cross-core trip); the previous occupant moves to the local
//   queue. At most 3 LIFO runs in a row so a ping-pong pair cannot starve the
//   queue.
// - spawned or yielding on a worker: the back of its local queue.
// - from any other thread: the injector.
// - pinned (spawn_local): only ever its own worker. Woken there, like any
//   other task (LIFO slot) but queued on its PinnedLane instead of the
//   stealable queue; woken anywhere else, pushed onto that lane's inbox (the
//   push that makes it non-empty unparks the owner).
// - on the deterministic executor: its one ready list (deterministic.cpp).
// A worker takes, in order: the injector every 61st tick (fairness), its LIFO
// slot, its local queue, a batch from the injector, then (as a searcher)
// half of a random victim's queue. With nothing found it parks.
// Parking: the first worker to park holds the driver and blocks in the
// backend's wait; others block on a futex. See idle.hpp for the wake protocol.
// What the driver wakes, the worker that drove runs: it wakes a sleeper only
// when it woke more than one task (run_woken), and the searcher that finds
// work wakes another only if work is left, so a readiness event costs no
// futex wake and the driver never wakes itself. If that worker then computes,
// the driver watch (watch.cpp) sees the driver untouched and wakes a sleeper
// to take it.
#include "src/runtime/scheduler.hpp"
#include "src/runtime/frame_slabs.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include "shoal/scope/cancel.hpp"
#include "shoal/scope/scope.hpp"

namespace shoal::detail {
namespace {

thread_local Worker* tls_worker = nullptr;
thread_local TaskRecord* tls_record = nullptr;

inline std::uint32_t pin_of(const TaskRecord* f) noexcept { return f->flags >> TaskRecord::kPinShift; }

// 128 awaits (a budget) at ~64 ns each, about a cache line's one-way trip
// between two cores here: see schedule_yield.
constexpr std::int64_t kLongPinnedPoll = 8000;

// A wake from a thread that is none of the workers: the task it wakes may
// finish the root and the runtime be destroyed before the wake has returned
// (it still counts and unparks). ~Scheduler waits until such wakes are gone.
// The count goes up before the task is published, so the destructor, which
// runs after that task's root is done, cannot miss it.
class ForeignWake {
 public:
  explicit ForeignWake(shim::atomic<std::uint32_t>& n) noexcept : n_(n) { n_.fetch_add(1, std::memory_order_relaxed); }
  ~ForeignWake() { n_.fetch_sub(1, std::memory_order_release); }
  ForeignWake(const ForeignWake&) = delete;
  ForeignWake& operator=(const ForeignWake&) = delete;

 private:
  shim::atomic<std::uint32_t>& n_;
};

}  // namespace

Scheduler::Scheduler(RuntimeOptions options)
    : options_(std::move(options)),
      driver_(*this, options_.manual_clock, options_.workers + 1),
      idle_(options_.workers) {
  if (options_.deterministic_seed) det_ = std::make_unique<DeterministicExecutor>(*options_.deterministic_seed);
  long_poll_ms_ = static_cast<std::uint32_t>(options_.long_poll_warning.count());
  // One worker has nobody to hand the driver to (see watch.cpp).
  watch_enabled_ = !det_ && options_.workers > 1;
  try {
    if (options_.dump_signal != 0) install_dump_signal(options_.dump_signal);
    workers_.reserve(options_.workers);
    for (std::size_t i = 0; i < options_.workers; ++i) {
      auto w = std::make_unique<Worker>();
      w->sched = this;
      w->index = i;
      w->slot = i < TaskRecord::kNoWorker ? static_cast<std::uint8_t>(i) : TaskRecord::kNoWorker;
      w->rng.seed(static_cast<unsigned>(i * 7919 + 17));
      workers_.push_back(std::move(w));
    }
    for (auto& w : workers_) {
      Worker* wp = w.get();
      wp->thread = std::thread([this, wp] {
        tls_worker = wp;
        if (det_) {
          det_->run(*this, *wp);
        } else {
          worker_main(*wp);
        }
        tls_worker = nullptr;
      });
    }
    register_runtime(this);
    if (options_.track_waits) track_waits(true);
  } catch (...) {
    // Out of threads or memory (a PID limit, a huge SHOAL_THREADS): stop and
    // join the workers already running before the members they use go.
    shutdown_.store(true, std::memory_order_seq_cst);
    for (auto& w : workers_) unpark(*w);
    for (auto& w : workers_) {
      if (w->thread.joinable()) w->thread.join();
    }
    throw;
  }
}

Scheduler::~Scheduler() {
  if (options_.track_waits) track_waits(false);
  unregister_runtime(this);
  shutdown_.store(true, std::memory_order_seq_cst);
  for (auto& w : workers_) unpark(*w);
  for (auto& w : workers_) w->thread.join();
  SpinWait wait;  // a foreign wake is a few instructions from done
  while (foreign_wakes_.load(std::memory_order_acquire) != 0) wait.pause();
}

bool Scheduler::on_own_worker() const noexcept { return tls_worker != nullptr && tls_worker->sched == this; }

std::size_t Scheduler::timer_shard() const noexcept {
  return on_own_worker() ? tls_worker->index : options_.workers;
}

void Scheduler::blocking_finished() noexcept {
  // A pool thread, after its wake: safe, the pool (a member) joins it first.
  if (det_ && driver_.manual_clock() && det_->blocking_finished()) unpark(*workers_[0]);
}

void Scheduler::pin_to_current_worker(TaskRecord* f) noexcept {
  Worker* w = tls_worker;
  if (det_ || w == nullptr || w->sched != this) return;
  f->flags |= static_cast<std::uint32_t>(w->index + 1) << TaskRecord::kPinShift;
}

bool Scheduler::migrate(TaskRecord* f, std::uint8_t slot, bool end_at_long_poll) noexcept {
  Worker* w = tls_worker;
  const bool soft = (f->flags & TaskRecord::kSoftPin) != 0;
  if (det_ || w == nullptr || w->sched != this || slot >= workers_.size() || slot == w->index ||
      (pin_of(f) != 0 && !soft)) {
    return false;
  }
  // Not to a worker the watch found stuck in one step: the task would wait
  // there past its deadline, unreachable by its canceller (watch.cpp).
  const Worker& to = *workers_[slot];
  if (const std::uint64_t stalled = to.stalled_at.load(std::memory_order_relaxed);
      stalled != 0 && stalled == to.polls.load(std::memory_order_relaxed) + 1) {
    return false;
  }
  // Pinned there for 64 budget yields, until a lock's move waits, or until
  // a channel's move ends a long poll (count_soft_pin; soft_pin_at_wait):
  // stealing the contenders back apart at once would only make them
  // contend again.
  f->flags = (f->flags & ((1u << TaskRecord::kPinShift) - 1 - TaskRecord::kSoftPinPolls - TaskRecord::kSoftPinLapsed)) |
             TaskRecord::kSoftPin | (end_at_long_poll ? TaskRecord::kSoftPinPolls : 0) |
             (static_cast<std::uint32_t>(slot + 1) << TaskRecord::kPinShift);
  push_pinned_remote(f);  // the target drains its pinned inbox first
  return true;
}

void Scheduler::push_pinned_remote(TaskRecord* f) noexcept {
  Worker& owner = *workers_[pin_of(f) - 1];
  if (owner.pinned.push_remote(f)) unpark(owner);
}

bool Scheduler::push_local(Worker& w, TaskRecord* f) noexcept {
  if (const std::uint32_t pin = pin_of(f); pin != 0) {
    if (pin - 1 != w.index) {
      push_pinned_remote(f);
    } else {
      w.pinned.push(f);
    }
    return false;  // a pinned task is no work for anyone else
  }
  const bool quiet = (f->flags & TaskRecord::kSoftPinLapsed) != 0;  // see count_soft_pin
  f->flags &= ~TaskRecord::kSoftPinLapsed;
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

void Scheduler::unpark(Worker& w) noexcept {
  if (w.parker.unpark(driver_) == Parker::kParked) futex_wakes_.fetch_add(1, std::memory_order_relaxed);
}

void Scheduler::notify_parked() noexcept {
  // A futex sleeper first: waking the worker in the driver costs a backend
  // wake-up and leaves nobody driving.
  const long idx = idle_.pick_sleeper_to_wake(
      [this](std::size_t i) { return workers_[i]->parker.state() == Parker::kParkedDriver; });
  if (idx >= 0) unpark(*workers_[static_cast<std::size_t>(idx)]);
}

void Scheduler::inject(TaskRecord* f) noexcept {
  ForeignWake guard(foreign_wakes_);
  if (det_) {
    det_->push(f);
    unpark(*workers_[0]);
    return;
  }
  if (pin_of(f) != 0) {
    push_pinned_remote(f);
    return;
  }
  injector_.push(f);
  notify_parked();
}

void Scheduler::schedule(TaskRecord* f) noexcept {
  Worker* w = tls_worker;
  if (det_ || w == nullptr || w->sched != this) {
    inject(f);
    return;
  }
  if (const std::uint32_t pin = pin_of(f); pin != 0 && pin - 1 != w->index) {
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

void Scheduler::schedule_spawn(TaskRecord* f) noexcept { push_ready(f, true); }

void Scheduler::task_finished() noexcept {
  if (Worker* w = tls_worker; w != nullptr && w->sched == this) {
    bump(w->finishes);
  } else {
    foreign_finishes_.fetch_add(1, std::memory_order_relaxed);
  }
}

void Scheduler::push_ready(TaskRecord* f, bool spawn) noexcept {
  Worker* w = tls_worker;
  if (det_ || w == nullptr || w->sched != this) {
    if (spawn) {
      if (w != nullptr && w->sched == this) {
        bump(w->spawns);  // the deterministic executor's one worker
      } else {
        foreign_spawns_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    schedule(f);
    return;
  }
  if (spawn) bump(w->spawns);
  if (w->driving) {
    schedule(f);
    return;
  }
  if (push_local(*w, f)) notify_parked();
}

// One more budget yield (or, for a channel's move, a wait) pinned through;
// ends the pin at the 64th, or when the poll ending here was long.
// A channel's move that runs out by count was trading, not computing: it
// is free for a worker that is up anyway, but its next push wakes nobody
// (kSoftPinLapsed). Waking the idle worker for it cost a wake, a steal and
// a move back each time: 540 wakes and 10 % of chan_throughput.
void Scheduler::count_soft_pin(TaskRecord* f, unsigned awaits) noexcept {
  const Worker* w = tls_worker;
  const bool channel = (f->flags & TaskRecord::kSoftPinPolls) != 0;
  if (channel && (w == nullptr || (to_ns(Clock::now()) - w->pinned_poll_start) * kBudget >
                                      kLongPinnedPoll * static_cast<std::int64_t>(awaits))) {
    end_soft_pin(f);
  } else if ((f->flags & TaskRecord::kSoftPinYields) == TaskRecord::kSoftPinYields) {
    end_soft_pin(f);
    if (channel) f->flags |= TaskRecord::kSoftPinLapsed;
  } else {
    f->flags += TaskRecord::kSoftPinYield;
  }
}

void Scheduler::schedule_yield(TaskRecord* f) noexcept {
  // A task that moved to where its lock's holder runs is free again after
  // 64 budget yields (~8,000 awaits) even if it never waits: tasks that took
  // a lock together but mostly compute must not stay crowded onto one
  // worker. Sooner costs the contended case: at every yield the idle worker
  // steals a contender and the gathering starts over (8 tasks x 100k
  // increments on 2 workers: 61 M/s pinned until a wait, 59 M/s with 64
  // yields, 49 with 16, 28 with 1).
  // A task that moved to its channel's home (kSoftPinPolls) is also freed
  // by a long poll: 128 awaits in more than kLongPinnedPoll, i.e. more work
  // between its awaits than a cache line's trip between cores costs, so it
  // computes more than it trades and spreading it pays. Numbers in
  // docs/scheduler.md.
  if ((f->flags & TaskRecord::kSoftPin) != 0) count_soft_pin(f, kBudget);
  if (Worker* w = tls_worker; w != nullptr && w->sched == this) bump(w->yields);
  push_ready(f, false);
}

void Scheduler::schedule_batch(TaskBatch& batch) noexcept {
  if (batch.empty()) return;
  Worker* w = tls_worker;
  if (det_) {
    if (w != nullptr && w->sched == this) {
      det_->push_batch(batch);
      return;
    }
    ForeignWake guard(foreign_wakes_);
    det_->push_batch(batch);
    unpark(*workers_[0]);
    return;
  }
  if (w != nullptr && w->sched == this && w->driving) {
    for (TaskRecord* f = batch.head; f != nullptr;) {
      TaskRecord* next = f->next;
      schedule(f);
      f = next;
    }
    batch = TaskBatch{};
    return;
  }
  if (w != nullptr && w->sched == this) {
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
void Scheduler::place_batch(Worker* w, TaskBatch& batch) noexcept {
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
      if (pin_of(f) != 0) {
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

TaskBatch Scheduler::pull_injector(Worker& w, std::size_t want) noexcept {
  TaskBatch b = injector_.pop(want);
  if (b.empty()) return b;
  bump(w.injector_pulls);
  if (!injector_.empty()) notify_parked();  // what pop put back may have looked gone to a worker going to sleep
  return b;
}

TaskRecord* Scheduler::from_injector(Worker& w) noexcept {
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

TaskRecord* Scheduler::next_local(Worker& w) noexcept {
  ++w.tick;
  w.pinned.drain_remote();
  if (w.tick % kDriverPollTicks == 0) {
    driver_.fire_timers();  // busy workers keep timers firing while nobody drives
    driver_.poll_io_now();  // ... and I/O events flowing
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

TaskRecord* Scheduler::search(Worker& w) noexcept {
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

bool Scheduler::work_pending() const noexcept {
  if (!injector_.empty()) return true;
  for (auto& w : workers_) {
    if (!w->local.empty()) return true;
  }
  return false;
}

void Scheduler::park(Worker& w) noexcept {
  if (driver_.fire_timers()) return;  // due timers made work; run it first
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
  if ((last && work_pending()) || shutdown_.load(std::memory_order_seq_cst)) {
    w.searching = idle_.unpark(w.index);
    w.activity.store(0, std::memory_order_relaxed);
    left_park();
    return;
  }
  w.driving = true;  // if this park turns into a drive, what it wakes gathers in w.woke
  bump(w.parks);
  w.parker.park(driver_);
  w.driving = false;
  w.searching = idle_.unpark(w.index);
  w.activity.store(w.searching ? 1 : 0, std::memory_order_relaxed);
  left_park();
  run_woken(w);
}

// What the driver woke: this worker runs the first itself, so a batch of
// one wakes nobody (no futex wake, and never the driver waking itself);
// more than one is work for a sleeper.
void Scheduler::run_woken(Worker& w) noexcept {
  if (w.woke.empty()) return;
  TaskBatch batch = w.woke;
  w.woke = TaskBatch{};
  const bool more = batch.count > 1;
  place_batch(&w, batch);
  if (more) notify_parked();
}

namespace {
/// One step of `f` on `w`: from its resume to its next suspension.
inline void step(Worker& w, TaskRecord* f) noexcept {
  tls_record = f;
  f->budget = kBudget;
  f->worker = w.slot;
  if ((f->flags & TaskRecord::kSoftPinPolls) != 0) w.pinned_poll_start = to_ns(Clock::now());
  bump(w.polls);
  f->resume.resume();
  tls_record = nullptr;
}
}  // namespace

void Scheduler::run_task(Worker& w, TaskRecord* f) noexcept {
  if (long_poll_ms_ != 0) [[unlikely]] {
    run_task_timed(w, f);
    return;
  }
  step(w, f);
}

// The step is timed on the coarse clock (a few ns a read, ticks of 1-4 ms)
// and reported when it ends, by the worker itself, from a label copied as it
// started: once the step is over the task may be gone (finished, or woken
// and finished on another worker), and nothing else reads the copy. A step
// that never ends is what the task dump (dump_signal) is for.
void Scheduler::run_task_timed(Worker& w, TaskRecord* f) noexcept {
  try {
    w.step_label = TaskLabel::of(*f);
  } catch (...) {  // out of memory for the name: report without it
    w.step_label.name.clear();
  }
  const std::uint32_t start = wait_clock_ms();
  step(w, f);
  const std::uint32_t ran = wait_clock_ms() - start;
  if (ran < long_poll_ms_) return;
  try {
    std::ostringstream line;
    line << "shoal: a task step ran ";
    write_duration(line, ran);
    line << " without yielding on worker " << w.index << ": ";
    write_label(line, w.step_label);
    line << "; other tasks on that worker waited meanwhile (RuntimeOptions::long_poll_warning)\n";
    const std::string text = line.str();
    std::fwrite(text.data(), 1, text.size(), stderr);
  } catch (...) {
  }
}

void Scheduler::worker_main(Worker& w) noexcept {
  for (;;) {
    TaskRecord* f = next_local(w);
    if (f == nullptr) {
      f = search(w);
      if (f == nullptr) {
        if (shutdown_.load(std::memory_order_acquire)) break;
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
    run_task(w, f);
  }
}

// ---- free functions from task.hpp and friends ----------------------------

void schedule(TaskRecord* f) noexcept { f->sched->schedule(f); }
void schedule_spawn(TaskRecord* f) noexcept { f->sched->schedule_spawn(f); }
void task_finished(TaskRecord& f) noexcept { f.sched->task_finished(); }
void schedule_yield(TaskRecord* f) noexcept { f->sched->schedule_yield(f); }

void yield_from(TaskRecord* f, std::coroutine_handle<> h, const void* /*awaiter: see the header*/) noexcept {
  f->resume = h;
  f->sched->schedule_yield(f);
}
bool migrate_from(TaskRecord* f, std::coroutine_handle<> h, std::uint8_t to, bool end_at_long_poll,
                  const void* /*awaiter: see yield_from*/) noexcept {
  if (f->sched == nullptr) return false;
  f->resume = h;
  return f->sched->migrate(f, to, end_at_long_poll);
}
void soft_pin_at_wait(TaskRecord* f) noexcept {
  if ((f->flags & TaskRecord::kSoftPin) == 0) return;
  if ((f->flags & TaskRecord::kSoftPinPolls) == 0) {  // a pin implies f->sched: only migrate() sets one
    end_soft_pin(f);
    return;
  }
  // The awaits of the poll that ends here (its budget counts them down), at
  // least 16: a poll under 1 us is never long, as the clock reads and the
  // wait's own set-up are a good part of it.
  const unsigned done = f->budget == 0 ? 1u : static_cast<unsigned>(kBudget - f->budget + 1);
  const unsigned awaits = done < 16 ? 16u : done;
  f->sched->count_soft_pin(f, awaits);
}
void schedule_batch(Scheduler* s, TaskBatch& batch) noexcept { s->schedule_batch(batch); }
void pin_to_current_worker(TaskRecord* f) noexcept { f->sched->pin_to_current_worker(f); }
TaskRecord* current_record() noexcept { return tls_record; }
bool on_worker_thread() noexcept { return tls_worker != nullptr; }

Clock::time_point clock_now() noexcept {
  const Worker* w = tls_worker;
  if (w == nullptr || !w->sched->driver().manual_clock()) return Clock::now();
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(w->sched->driver().now_ns())));
}

void report_suppressed_fault(Scheduler* s, const std::exception_ptr& e) noexcept { s->report_suppressed(e); }

}  // namespace shoal::detail
