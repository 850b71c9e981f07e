// The work-stealing scheduler behind shoal::Runtime (private): workers, the
// placement rules for ready tasks, stealing and parking. Blocking for I/O
// and timers is the driver's (src/runtime/driver/); the deterministic
// executor is its own class (src/runtime/deterministic.hpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "shoal/detail/task_record.hpp"
#include "shoal/runtime/run.hpp"
#include "src/runtime/blocking_pool.hpp"
#include "src/runtime/deterministic.hpp"
#include "src/runtime/driver/driver.hpp"
#include "src/runtime/idle.hpp"
#include "src/runtime/injector.hpp"
#include "src/runtime/parker.hpp"
#include "src/runtime/pinned_lane.hpp"
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

/// Adds `n` to a counter only its owner writes (no locked RMW).
inline void bump(shim::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

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

  void schedule(TaskRecord* f) noexcept;
  void schedule_spawn(TaskRecord* f) noexcept;
  void schedule_yield(TaskRecord* f) noexcept;
  /// A soft-pinned task yields or (a channel's move) waits after `awaits`
  /// awaits: counts it, and ends the pin at the limit or after a long poll.
  void count_soft_pin(TaskRecord* f, unsigned awaits) noexcept;
  void schedule_batch(TaskBatch& batch) noexcept;
  void inject(TaskRecord* f) noexcept;

  bool on_own_worker() const noexcept;
  /// The timer wheel for the calling thread: its worker's, or the shared
  /// one after the workers' (any other thread).
  std::size_t timer_shard() const noexcept;
  void pin_to_current_worker(TaskRecord* f) noexcept;
  /// Moves `f` (suspended, not pinned, not queued anywhere) to run next on
  /// the worker whose slot is `slot`, from another worker of this runtime.
  /// False (nothing done) where that cannot be: off a worker, on the
  /// deterministic executor, a pinned task, an unknown slot.
  bool migrate(TaskRecord* f, std::uint8_t slot, bool end_at_long_poll = false) noexcept;
  std::size_t worker_count() const noexcept { return workers_.size(); }

  void add_root(CancelNode* n);
  void remove_root(CancelNode* n) noexcept;
  void cancel_roots() noexcept;

  /// A block_on thread's wait for its root (`done` set by root_done). One
  /// such thread at a time also watches the driver (watch.cpp).
  void wait_root(const shim::atomic<bool>& done) noexcept;
  void root_done(shim::atomic<bool>& done) noexcept;
  /// Workers not parked now (the calling one included): a test seam.
  std::uint32_t unparked_workers() const noexcept { return idle_.unparked(); }
  WakeCounts wake_counts() const noexcept {
    return {futex_wakes_.load(std::memory_order_relaxed), driver_.wakes()};
  }

  void report_suppressed(const std::exception_ptr& e) noexcept;
  void dump(std::ostream& out) const;
  void dump_tasks(std::ostream& out) const;
  RuntimeMetrics metrics() const;
  /// A spawned task finished (counted on the finishing worker).
  void task_finished() noexcept;
  int dump_signal() const noexcept { return options_.dump_signal; }

  Driver& driver() noexcept { return driver_; }
  BlockingPool& blocking() noexcept { return blocking_; }
  // Blocking jobs queued or running, for the manual clock (no shared RMW
  // per job otherwise).
  void blocking_started() noexcept {
    if (det_ && driver_.manual_clock()) det_->blocking_started();
  }
  void blocking_finished() noexcept;

  /// Runs `f` on `w` until it suspends (the deterministic executor too).
  void run_task(Worker& w, TaskRecord* f) noexcept;
  /// run_task with the long-poll warning's timing around the step.
  void run_task_timed(Worker& w, TaskRecord* f) noexcept;
  bool shutting_down() const noexcept { return shutdown_.load(std::memory_order_acquire); }

 private:
  void worker_main(Worker& w) noexcept;
  TaskRecord* next_local(Worker& w) noexcept;
  TaskRecord* search(Worker& w) noexcept;
  TaskRecord* from_injector(Worker& w) noexcept;
  /// Up to `want` tasks from the injector, counted; wakes a sleeper if some are left.
  TaskBatch pull_injector(Worker& w, std::size_t want) noexcept;
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
  void notify_parked() noexcept;
  void unpark(Worker& w) noexcept;
  bool work_pending() const noexcept;
  void park(Worker& w) noexcept;
  void run_woken(Worker& w) noexcept;
  struct WatchState;
  void watch_tick(WatchState& st) noexcept;
  /// The watch's look at workers stuck in one step: their contention moves
  /// run elsewhere (watch.cpp).
  void free_stalled_moves() noexcept;
  void wake_block_on_threads() noexcept;
  void root_sleep(std::uint32_t gen, const std::chrono::nanoseconds* timeout) noexcept;
  void left_park() noexcept;
  void dump_tree(std::ostream& out) const;
  void push_ready(TaskRecord* f, bool spawn) noexcept;
  void dump_node(std::ostream& out, CancelNode* n, int depth) const;

  // Spawns and finishes off the workers (block_on's root, a foreign thread).
  shim::atomic<std::uint64_t> foreign_spawns_{0}, foreign_finishes_{0};
  RuntimeOptions options_;
  std::uint32_t long_poll_ms_ = 0;  // RuntimeOptions::long_poll_warning; 0: off
  Driver driver_;
  std::unique_ptr<DeterministicExecutor> det_;  // null: the work-stealing pool
  std::vector<std::unique_ptr<Worker>> workers_;
  Injector injector_;
  Idle idle_;
  shim::atomic<bool> shutdown_{false};
  shim::atomic<std::uint64_t> futex_wakes_{0};
  // Wakes in progress on threads that are none of the workers (see inject).
  shim::atomic<std::uint32_t> foreign_wakes_{0};

  // block_on threads sleep on one word; root_done and the watch bump it.
  shim::atomic<std::uint32_t> root_word_{0};
  shim::atomic<std::uint32_t> root_waiters_{0};
  shim::atomic<bool> watch_taken_{false};
  shim::atomic<bool> watch_deep_{false};  // the watcher sleeps until a worker leaves park
  bool watch_enabled_ = false;
#if defined(SHOAL_TSAN)
  std::mutex root_mu_;  // see root_sleep
  std::condition_variable root_cv_;
#endif

  mutable shim::mutex roots_mu_;
  std::vector<CancelNode*> roots_;

  BlockingPool blocking_;
};

/// The runtime registry, for Runtime::dump_all (a watchdog's view of every
/// live runtime).
void register_runtime(const Scheduler* s);
/// Makes `sig` dump every runtime that chose it (RuntimeOptions::dump_signal).
/// Throws std::system_error.
void install_dump_signal(int sig);
void unregister_runtime(const Scheduler* s) noexcept;

}  // namespace shoal::detail
