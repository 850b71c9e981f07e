// The work-stealing pool: one of the runtime's two executors (the other is
// deterministic.hpp). Its workers, their queues, the injector, stealing and
// parking; where a ready task goes is described in worker_pool.cpp. Which
// worker a task may run on is placement's (placement.hpp); blocking for I/O
// and timers is the driver's (src/runtime/driver/).
//
// Every call that takes `Worker* w` is given the calling thread's worker if
// it is one of this pool's, else null (Scheduler::own_worker).
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
//   push that makes it non-empty unparks the owner). A contention move
//   pins the same way, for a while (placement.hpp).
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
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "shoal/detail/task_record.hpp"
#include "src/runtime/idle.hpp"
#include "src/runtime/injector.hpp"
#include "src/runtime/worker.hpp"

namespace shoal::detail {

class WorkerPool {
 public:
  /// Starts `workers` threads. Throws (having stopped those it started)
  /// std::system_error when a thread cannot start.
  WorkerPool(Scheduler& sched, std::size_t workers);
  /// stop()s.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  /// Ready from a wake: `w`'s LIFO slot, or the injector off the workers.
  void schedule(Worker* w, TaskRecord* f) noexcept;
  /// A new child or a yield: the back of `w`'s local queue.
  void push_ready(Worker* w, TaskRecord* f) noexcept;
  void schedule_yield(Worker* w, TaskRecord* f) noexcept;
  void schedule_batch(Worker* w, TaskBatch& batch) noexcept;
  /// Moves `f` (suspended, not pinned, not queued anywhere) to run next on
  /// the worker whose slot is `slot`, from another worker `w`. False
  /// (nothing done) where that cannot be: off a worker, a hard-pinned task,
  /// an unknown slot, a worker the watch found stuck.
  bool migrate(Worker* w, TaskRecord* f, std::uint8_t slot, bool end_at_long_poll) noexcept;

  /// After Scheduler::begin_shutdown: wakes the workers, joins them, and
  /// waits out wakes still running on other threads. Idempotent.
  void stop() noexcept;

  // ---- for the driver watch (watch.cpp) and dumps ------------------------
  /// Wakes a sleeper, unless one is searching already.
  void notify_parked() noexcept;
  /// Frees the contention moves waiting on a worker stuck in one step.
  void free_stalled_moves() noexcept;
  std::uint32_t unparked() const noexcept { return idle_.unparked(); }
  std::uint32_t unparked_seq_cst() const noexcept { return idle_.unparked_seq_cst(); }
  std::uint32_t searching() const noexcept { return idle_.searching(); }
  std::size_t injector_size() const noexcept { return injector_.size(); }
  const std::vector<std::unique_ptr<Worker>>& workers() const noexcept { return workers_; }

 private:
  void worker_main(Worker& w) noexcept;
  TaskRecord* next_local(Worker& w) noexcept;
  TaskRecord* search(Worker& w) noexcept;
  TaskRecord* from_injector(Worker& w) noexcept;
  /// Up to `want` tasks from the injector, counted; wakes a sleeper if some are left.
  TaskBatch pull_injector(Worker& w, std::size_t want) noexcept;
  /// From a thread that is none of the workers.
  void inject(TaskRecord* f) noexcept;
  /// Queues `f` on `w` (a pinned task goes to its worker's lane). True when
  /// a sleeper may be worth waking: `f` made the queue non-empty, or half the
  /// queue overflowed to the injector. A push onto a non-empty queue wakes
  /// nobody: whoever was told of the items already there (a notify at the
  /// empty-to-non-empty push, or a thief that left some behind and woke the
  /// next) will find it, and the owner runs it anyway. One fence and a read
  /// of the idle word, shared with every searcher, per spawn was most of a
  /// spawn loop's cost when the other worker kept searching.
  bool push_local(Worker& w, TaskRecord* f) noexcept;
  void push_pinned_remote(TaskRecord* f) noexcept;
  void place_batch(Worker* w, TaskBatch& batch) noexcept;
  bool work_pending() const noexcept;
  void park(Worker& w) noexcept;
  void run_woken(Worker& w) noexcept;

  Scheduler& sched_;
  std::vector<std::unique_ptr<Worker>> workers_;
  Injector injector_;
  Idle idle_;
  // Wakes in progress on threads that are none of the workers (ForeignWake).
  shim::atomic<std::uint32_t> foreign_wakes_{0};
};

}  // namespace shoal::detail
