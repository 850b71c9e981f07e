// The runtime's handle (private): what a task's record points at
// (TaskRecord::sched). It owns the runtime's parts: the driver (I/O and
// timers), the blocking pool, the root scopes, and one of two executors
// behind one seam, as Tokio's scheduler Handle is one of CurrentThread or
// MultiThread: the work-stealing pool (worker_pool.hpp) or the
// deterministic executor (deterministic.hpp). The runtime ABI's calls
// (detail/runtime_abi.hpp) land here and go to whichever it is.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <ostream>
#include <vector>

#include "shoal/detail/task_record.hpp"
#include "shoal/runtime/run.hpp"
#include "src/runtime/blocking_pool.hpp"
#include "src/runtime/driver/driver.hpp"
#include "src/runtime/futex.hpp"
#include "src/runtime/worker.hpp"

namespace shoal::detail {

class WorkerPool;
class DeterministicExecutor;

/// Wake-ups the runtime has made, for tests and dumps (relaxed counts).
struct WakeCounts {
  std::uint64_t futex_wakes = 0;   // a futex-parked worker or a block_on thread woken
  std::uint64_t driver_wakes = 0;  // backend wake-ups (eventfd writes)
};

class Scheduler {
 public:
  explicit Scheduler(RuntimeOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // ---- the executor seam (scheduler.cpp): the runtime ABI's calls --------
  void schedule(TaskRecord* f) noexcept;
  void schedule_spawn(TaskRecord* f) noexcept;
  void schedule_yield(TaskRecord* f) noexcept;
  void schedule_batch(TaskBatch& batch) noexcept;
  /// A contention move of `f` (suspended, not queued anywhere) to the worker
  /// whose slot is `slot`. False (nothing done) where the executor cannot.
  bool migrate(TaskRecord* f, std::uint8_t slot, bool end_at_long_poll) noexcept;
  void pin_to_current_worker(TaskRecord* f) noexcept;
  /// A spawned task finished (counted on the finishing worker).
  void task_finished() noexcept;

  /// The calling thread's worker if it is one of this runtime's, else null.
  Worker* own_worker() const noexcept {
    Worker* w = tls_worker;
    return w != nullptr && w->sched == this ? w : nullptr;
  }
  bool on_own_worker() const noexcept { return own_worker() != nullptr; }
  /// The timer wheel for the calling thread: its worker's, or the shared
  /// one after the workers' (any other thread).
  std::size_t timer_shard() const noexcept {
    const Worker* w = own_worker();
    return w != nullptr ? w->index : options_.workers;
  }
  std::size_t worker_count() const noexcept { return options_.workers; }
  const std::vector<std::unique_ptr<Worker>>& workers() const noexcept;

  void add_root(CancelNode* n);
  void remove_root(CancelNode* n) noexcept;
  void cancel_roots() noexcept;

  /// A block_on thread's wait for its root (`done` set by root_done). One
  /// such thread at a time also watches the driver (watch.cpp).
  void wait_root(const shim::atomic<bool>& done) noexcept;
  void root_done(shim::atomic<bool>& done) noexcept;
  /// A worker left park: wakes the watcher if it sleeps for good (watch.cpp).
  void left_park() noexcept {
    if (watch_deep_.load(std::memory_order_seq_cst)) wake_watcher();
  }
  /// Workers not parked now (the calling one included): a test seam.
  std::uint32_t unparked_workers() const noexcept;
  WakeCounts wake_counts() const noexcept {
    return {futex_wakes_.load(std::memory_order_relaxed), driver_.wakes()};
  }

  void report_suppressed(const std::exception_ptr& e) noexcept;
  void dump(std::ostream& out) const;
  void dump_tasks(std::ostream& out) const;
  RuntimeMetrics metrics() const;
  int dump_signal() const noexcept { return options_.dump_signal; }
  /// The dump signal arrived: a block_on thread writes dump_tasks to stderr
  /// (dump.cpp). Async-signal-safe.
  void dump_asked() noexcept;

  Driver& driver() noexcept { return driver_; }
  BlockingPool& blocking() noexcept { return blocking_; }
  // Blocking jobs queued or running, for the manual clock (no shared RMW
  // per job otherwise).
  void blocking_started() noexcept;
  void blocking_finished() noexcept;

  // ---- for the executors -------------------------------------------------
  /// Runs `f` on `w` until it suspends, timed if long_poll_warning is on.
  void run_task(Worker& w, TaskRecord* f) noexcept { run_step(w, f, long_poll_ms_); }
  /// Wakes `w` if it sleeps (counted).
  void unpark(Worker& w) noexcept {
    if (w.parker.unpark(driver_) == Parker::kParked) futex_wakes_.fetch_add(1, std::memory_order_relaxed);
  }
  bool shutting_down(std::memory_order mo = std::memory_order_acquire) const noexcept { return shutdown_.load(mo); }
  /// Tells the workers to stop (they leave at their next look for work).
  void begin_shutdown() noexcept { shutdown_.store(true, std::memory_order_seq_cst); }

 private:
  struct WatchState;
  void watch_tick(WatchState& st) noexcept;
  void wake_watcher() noexcept;
  void wake_block_on_threads() noexcept;
  void root_sleep(std::uint32_t gen, const std::chrono::nanoseconds* timeout) noexcept;
  void dump_tree(std::ostream& out) const;
  void dump_node(std::ostream& out, CancelNode* n, int depth) const;
  void answer_dump() noexcept;
  friend struct DumpSignalList;

  // Spawns and finishes off the workers (block_on's root, a foreign thread).
  shim::atomic<std::uint64_t> foreign_spawns_{0}, foreign_finishes_{0};
  RuntimeOptions options_;
  std::uint32_t long_poll_ms_ = 0;  // RuntimeOptions::long_poll_warning; 0: off
  Driver driver_;
  shim::atomic<bool> shutdown_{false};
  shim::atomic<std::uint64_t> futex_wakes_{0};
  // One of the two executors; the other is null.
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<DeterministicExecutor> det_;

  // block_on threads sleep on one word; root_done and the watch bump it.
  shim::atomic<std::uint32_t> root_word_{0};
  shim::atomic<std::uint32_t> root_waiters_{0};
  shim::atomic<bool> watch_taken_{false};
  shim::atomic<bool> watch_deep_{false};  // the watcher sleeps until a worker leaves park
  bool watch_enabled_ = false;
  // The dump signal (dump.cpp): asked by its handler, answered in wait_root;
  // the runtimes that chose a dump signal, listed for the handler.
  std::atomic<bool> dump_asked_{false};
  std::atomic<Scheduler*> dump_next_{nullptr};
#if defined(SHOAL_ROOT_SLEEPS_ON_CONDVAR)
  std::mutex root_mu_;  // see root_sleep
  std::condition_variable root_cv_;
#endif

  mutable shim::mutex roots_mu_;
  std::vector<CancelNode*> roots_;

  // Last: destroyed first, so no blocking job outlives the executor it wakes.
  BlockingPool blocking_;
};

/// The runtime registry, for Runtime::dump_all (a watchdog's view of every
/// live runtime).
void register_runtime(const Scheduler* s);
/// Makes `sig` dump every runtime that chose it (RuntimeOptions::dump_signal):
/// installs its handler, once per signal. Throws std::system_error.
void install_dump_signal(int sig);
/// A runtime with a dump signal joins (leaves) the list its handler walks;
/// leaving waits for a handler that is walking it.
void listen_for_dump_signal(Scheduler* s);
void stop_listening_for_dump_signal(Scheduler* s) noexcept;
void unregister_runtime(const Scheduler* s) noexcept;

}  // namespace shoal::detail
