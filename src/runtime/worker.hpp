// A worker thread and one step of a task on it: what both executors (the
// work-stealing pool and the deterministic executor) run tasks with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>

#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/detail/timer.hpp"
#include "src/runtime/injector.hpp"
#include "src/runtime/parker.hpp"
#include "src/runtime/pinned_lane.hpp"
#include "src/runtime/placement.hpp"
#include "src/runtime/steal_queue.hpp"

namespace shoal::detail {

/// What a dump or a warning says to name a task: a copy, so it can be
/// printed after the task is gone.
struct TaskLabel {
  std::string name;
  const char* origin = nullptr;  // static text (see TaskRecord::origin)
  std::uint32_t line = 0;
  bool root = false;
  static TaskLabel of(const TaskRecord& f);
};
/// `task "name" (spawned at file:line)` and the like (dump.cpp).
void write_label(std::ostream& out, const TaskLabel& l);
/// "12 ms", "3.4 s", "2.0 min", "1.5 h".
void write_duration(std::ostream& out, std::uint32_t ms);

/// A worker that keeps running tasks still fires due timers and polls ready
/// I/O every this many tasks (the deterministic executor too).
inline constexpr std::uint32_t kDriverPollTicks = 61;

struct Worker {
  Scheduler* sched = nullptr;
  std::size_t index = 0;
  std::uint8_t slot = TaskRecord::kNoWorker;  // index as a task records it (kNoWorker past 254)
  StealQueue<TaskRecord*> local;
  TaskRecord* lifo = nullptr;  // owner only
  PinnedLane pinned;      // spawn_local tasks: never stolen
  std::uint32_t tick = 0;
  std::uint32_t lifo_streak = 0;
  std::int64_t pinned_poll_start = 0;  // ns: when the soft-pinned task now running was resumed
  bool searching = false;
  // In the driver (inside park): what its events and timers wake gathers
  // here, so the worker can run one itself and wake a sleeper only for more.
  bool driving = false;
  TaskBatch woke;
  TaskLabel step_label;  // RuntimeOptions::long_poll_warning: the running task's, copied as its step starts
  std::minstd_rand rng;
  Parker parker;
  // Counters for metrics, written only by this worker (bump()), read by
  // any thread; on a line of their own (others write the parker's state).
  // The driver watch (watch.cpp): `polls` at its last look, and polls + 1
  // while it finds this worker stuck in one step (contention moves to it
  // are refused then). Read by movers, written by the watcher only.
  alignas(64) shim::atomic<std::uint64_t> watch_polls{0};
  shim::atomic<std::uint64_t> stalled_at{0};
  alignas(64) shim::atomic<std::uint64_t> polls{0};
  shim::atomic<std::uint64_t> spawns{0}, finishes{0}, steals{0}, injector_pulls{0}, lifo_hits{0}, yields{0},
      parks{0};
  shim::atomic<int> activity{0};  // 0 running, 1 searching, 2 parked (for dumps)
  shim::thread thread;
};

/// The worker the calling thread is (null on any other thread), and the
/// task it is running. constinit: read without a TLS wrapper call.
extern thread_local constinit Worker* tls_worker;
extern thread_local constinit TaskRecord* tls_record;

/// One step of `f` on `w`: from its resume to its next suspension.
inline void step(Worker& w, TaskRecord* f) noexcept;
/// step, timed: a step of `long_poll_ms` or more is reported on stderr
/// (RuntimeOptions::long_poll_warning).
void step_timed(Worker& w, TaskRecord* f, std::uint32_t long_poll_ms) noexcept;
/// step, or (`long_poll_ms` not 0) step_timed.
inline void run_step(Worker& w, TaskRecord* f, std::uint32_t long_poll_ms) noexcept {
  if (long_poll_ms != 0) [[unlikely]] {
    step_timed(w, f, long_poll_ms);
    return;
  }
  step(w, f);
}

/// Adds `n` to a counter only its owner writes (no locked RMW).
inline void bump(shim::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

/// A wake from a thread that is none of the workers: the task it wakes may
/// finish the root and the runtime be destroyed before the wake has returned
/// (it still counts and unparks). An executor's destructor waits until such
/// wakes are gone (wait_out). The count goes up before the task is
/// published, so the destructor, which runs after that task's root is done,
/// cannot miss it.
class ForeignWake {
 public:
  explicit ForeignWake(shim::atomic<std::uint32_t>& n) noexcept : n_(n) { n_.fetch_add(1, std::memory_order_relaxed); }
  ~ForeignWake() { n_.fetch_sub(1, std::memory_order_release); }
  ForeignWake(const ForeignWake&) = delete;
  ForeignWake& operator=(const ForeignWake&) = delete;
  static void wait_out(const shim::atomic<std::uint32_t>& n) noexcept;

 private:
  shim::atomic<std::uint32_t>& n_;
};

inline void step(Worker& w, TaskRecord* f) noexcept {
  tls_record = f;
  f->budget = kBudget;
  f->worker = w.slot;
  if (placement::times_polls(f)) w.pinned_poll_start = to_ns(Clock::now());
  bump(w.polls);
  f->resume.resume();
  tls_record = nullptr;
}

}  // namespace shoal::detail
