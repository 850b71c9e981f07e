// The deterministic executor (RuntimeOptions::deterministic/simulated): one
// worker, one ready list, the next task picked at random from a seed, so a
// seed reproduces a whole run. With a manual clock, virtual time stands
// still while a task can run and jumps to the earliest timer when none can
// (unless blocking work is in flight: its completion might come "earlier").
// Due timers and ready I/O are also taken every 61st step while tasks run.
// One of the runtime's two executors (the other is worker_pool.hpp): it
// knows nothing of pins or moves, as one worker has nowhere else to run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/task_record.hpp"
#include "src/runtime/injector.hpp"
#include "src/runtime/worker.hpp"

namespace shoal::detail {

class DeterministicExecutor {
 public:
  /// Starts the one worker. Throws std::system_error if it cannot start.
  DeterministicExecutor(Scheduler& sched, std::uint64_t seed);
  /// stop()s.
  ~DeterministicExecutor();
  DeterministicExecutor(const DeterministicExecutor&) = delete;
  DeterministicExecutor& operator=(const DeterministicExecutor&) = delete;

  /// Ready to run (any thread).
  void schedule(TaskRecord* f) noexcept;
  /// Ready to run; `own` when called on the worker.
  void schedule_batch(bool own, TaskBatch& batch) noexcept;
  /// After Scheduler::begin_shutdown: wakes and joins the worker, and waits
  /// out wakes still running on other threads. Idempotent.
  void stop() noexcept;
  const std::vector<std::unique_ptr<Worker>>& workers() const noexcept { return workers_; }

  // Blocking jobs queued or running: a manual clock does not advance past
  // them (counted only with a manual clock).
  void blocking_started() noexcept { in_flight_.fetch_add(1, std::memory_order_seq_cst); }
  /// The last one wakes the worker to look again.
  void blocking_finished() noexcept;

 private:
  /// The worker's loop, until shutdown.
  void run(Worker& w) noexcept;
  TaskRecord* pick() noexcept;
  void push(TaskRecord* f) noexcept;
  void push_all(TaskBatch& batch) noexcept;
  void push_locked(TaskRecord* f) noexcept;

  Scheduler& sched_;
  std::vector<std::unique_ptr<Worker>> workers_;  // one
  shim::atomic<std::uint32_t> foreign_wakes_{0};  // see ForeignWake

  shim::mutex mu_;
  std::vector<TaskRecord*> ready_;  // guarded by mu_
  TaskBatch overflow_;        // ready tasks ready_ had no memory for
  std::mt19937_64 rng_;        // guarded by mu_
  shim::atomic<std::size_t> in_flight_{0};
};

}  // namespace shoal::detail
