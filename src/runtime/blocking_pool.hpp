// The elastic blocking pool: threads are started on demand up to a cap, and
// leave after 10 s idle. Both its queues are on the one wait queue: jobs wait
// for a thread, idle threads wait for a job. Every queued job has a thread
// on its way: a submit claims an idle thread by unlinking it (and wakes it)
// or starts one, so k jobs behind i idle threads start k - i threads at once.
#pragma once

#include <chrono>
#include <cstddef>

#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/spawn_blocking.hpp"

namespace shoal::detail {

class BlockingPool {
 public:
  explicit BlockingPool(std::size_t max_threads = 512,
                        std::chrono::milliseconds keep_alive = std::chrono::seconds(10)) noexcept
      : max_threads_(max_threads), keep_alive_(keep_alive) {}
  /// Waits for every pool thread to leave. Jobs are done by then (every
  /// job is awaited by a task, and tasks finish before the runtime ends).
  ~BlockingPool();

  /// Queues `job` (bound to this pool's lock) unless `unless` is cancelled.
  bool submit(BlockingJob* job, const TaskRecord* unless) noexcept;
  SpinLock& lock() noexcept { return lock_; }
  std::size_t threads() const noexcept;
  /// Jobs waiting for a thread (walks the queue: for metrics).
  std::size_t queued() const noexcept;

 private:
  void thread_main() noexcept;
  /// Idle until a submit claims this thread (true) or keep_alive passes.
  bool wait_idle() noexcept;

  const std::size_t max_threads_;
  const std::chrono::milliseconds keep_alive_;
  mutable SpinLock lock_;
  WaitList jobs_;  // BlockingJobs not started, guarded by lock_
  WaitList idle_;  // idle threads (thread Waiters): a submit claims one by unlinking it
  std::size_t threads_ = 0;  // guarded by lock_
  bool shutdown_ = false;    // guarded by lock_
  shim::atomic<std::size_t> live_threads_{0};  // for the destructor's wait
};

/// The blocking job the calling thread runs, if any.
BlockingJob* current_blocking_job() noexcept;

}  // namespace shoal::detail
