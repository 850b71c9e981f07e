// The elastic blocking pool: threads are started on demand up to a cap, and
// leave after 10 s idle. Every queued job has a thread on its way: a submit
// either claims an idle thread that nobody has claimed yet (and wakes it) or
// starts one, so k jobs behind i idle threads start k - i threads at once.
#pragma once

#include <chrono>
#include <cstddef>

#include "shoal/detail/intrusive_list.hpp"
#include "shoal/detail/sync_shim.hpp"
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

  bool submit(BlockingJob* job, const Fiber* unless_cancelled) noexcept;
  /// Takes `job` off the queue if it has not started. O(1).
  bool remove(BlockingJob* job) noexcept;
  std::size_t threads() const noexcept;

 private:
  void thread_main() noexcept;
  bool wait_for_claim(shim::unique_lock<shim::mutex>& g) noexcept;

  const std::size_t max_threads_;
  const std::chrono::milliseconds keep_alive_;
  mutable shim::mutex mu_;
  shim::condition_variable cv_;       // jobs or shutdown
  shim::condition_variable exit_cv_;  // a thread left
  IntrusiveList<BlockingJob> queue_;  // guarded by mu_
  std::size_t threads_ = 0;
  std::size_t idle_ = 0;      // waiting for work and not claimed by a submit
  std::size_t notified_ = 0;  // wake-ups owed to idle threads a submit claimed
  bool shutdown_ = false;
};

/// The blocking job the calling thread runs, if any.
BlockingJob* current_blocking_job() noexcept;

}  // namespace shoal::detail
