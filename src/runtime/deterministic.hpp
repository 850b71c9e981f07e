// The deterministic executor (RuntimeOptions::deterministic/simulated): one
// worker, one ready list, the next task picked at random from a seed, so a
// seed reproduces a whole run. With a manual clock, virtual time stands
// still while a task can run and jumps to the earliest timer when none can
// (unless blocking work is in flight: its completion might come "earlier").
// Due timers and ready I/O are also taken every 61st step while tasks run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "src/runtime/injector.hpp"

namespace shoal::detail {

struct Worker;

class DeterministicExecutor {
 public:
  explicit DeterministicExecutor(std::uint64_t seed) noexcept : rng_(seed) {}

  /// Ready to run (any thread).
  void push(TaskRecord* f) noexcept;
  void push_batch(TaskBatch& batch) noexcept;
  /// The single worker's loop, until shutdown.
  void run(Scheduler& s, Worker& w) noexcept;

  // Blocking jobs queued or running: a manual clock does not advance past
  // them (counted only with a manual clock).
  void blocking_started() noexcept { in_flight_.fetch_add(1, std::memory_order_seq_cst); }
  /// True if it was the last one (the worker should look again).
  bool blocking_finished() noexcept { return in_flight_.fetch_sub(1, std::memory_order_seq_cst) == 1; }

 private:
  TaskRecord* pick() noexcept;
  void push_locked(TaskRecord* f) noexcept;

  shim::mutex mu_;
  std::vector<TaskRecord*> ready_;  // guarded by mu_
  TaskBatch overflow_;        // ready tasks ready_ had no memory for
  std::mt19937_64 rng_;        // guarded by mu_
  shim::atomic<std::size_t> in_flight_{0};
};

}  // namespace shoal::detail
