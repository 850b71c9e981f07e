// The runtime: worker threads with work stealing, and the entry points that
// run a root task on them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/detail/child_group.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal {

/// How a Runtime is built: worker count, where suppressed faults go, and the
/// deterministic executor and manual clock for tests. The defaults suit a
/// production server.
struct RuntimeOptions {
  /// Worker threads (at most 1024). 0: `SHOAL_THREADS` if set and not
  /// empty (1..1024), else clamp(online cores, 2, 32).
  std::size_t workers = 0;
  /// Receives faults after the first in a scope (the first is rethrown), a
  /// race loser's late fault and a failed `finally` cleanup's. Default: one
  /// line on stderr. Called on a worker; must not throw (a throw is ignored,
  /// with a line on stderr).
  std::function<void(std::exception_ptr)> on_suppressed_fault;
  /// Test executor: one worker that picks the next ready task at random from
  /// this seed, so a seed reproduces a schedule exactly. Forces workers = 1.
  std::optional<std::uint64_t> deterministic_seed;
  /// Test clock (requires deterministic_seed): `shoal::now()` stands still
  /// while any task can run; when every task waits, it jumps to the earliest
  /// timer (auto-advance), so sleeps and deadlines cost no wall time and a
  /// seed reproduces their order exactly. Blocking work in flight holds the
  /// clock until it finishes.
  bool manual_clock = false;
  /// Keep when each task's current wait began, so Runtime::dump_tasks says
  /// how long it has waited. Costs a coarse clock read (a few ns) per wait,
  /// in every runtime of the process while any runtime keeps them.
  bool track_waits = false;
  /// When nonzero (e.g. SIGUSR1): each delivery of this signal writes
  /// dump_tasks to stderr, from the thread in block_on (which only sleeps
  /// while it waits), so a runtime whose workers are all stuck still answers
  /// and the signal costs no thread. Asked while no thread is in block_on,
  /// the dump is written when one next enters. Implies track_waits. Installs a
  /// process-wide handler for the signal, for good: do not also wait for it
  /// with shoal::signal::wait. The constructor throws std::invalid_argument
  /// for a number that is not a catchable signal.
  int dump_signal = 0;
  /// Off (0) by default. When set, a task step (from a resume to the task's
  /// next suspension) that ran at least this long writes one line to stderr
  /// as it ends: how long, the worker, and the task's name and spawn site.
  /// Such a step holds up every other task on its worker (I/O and timers
  /// included, on one worker). Timed on the coarse clock (ticks of 1-4 ms),
  /// two reads per step while on. The constructor throws
  /// std::invalid_argument for a negative value or one over 24 hours.
  std::chrono::milliseconds long_poll_warning{0};

  // Shorthands (g++ warns about designated initializers that omit members).
  /// Default options with `n` workers (0: the default count, as for `workers`).
  static RuntimeOptions with_workers(std::size_t n) {
    RuntimeOptions o;
    o.workers = n;
    return o;
  }
  /// Default options with the deterministic executor seeded with `seed`
  /// (one worker; real clock).
  static RuntimeOptions deterministic(std::uint64_t seed) {
    RuntimeOptions o;
    o.deterministic_seed = seed;
    return o;
  }
  /// Deterministic executor plus manual clock: a fully reproducible run.
  static RuntimeOptions simulated(std::uint64_t seed) {
    RuntimeOptions o = deterministic(seed);
    o.manual_clock = true;
    return o;
  }
};

/// One worker's counters in a RuntimeMetrics snapshot. Counts run from the
/// runtime's start and only grow.
struct WorkerMetrics {
  std::uint64_t polls = 0;           ///< Task steps run (resumes until the next suspension).
  std::uint64_t spawns = 0;          ///< Tasks spawned from this worker.
  std::uint64_t steals = 0;          ///< Steals from another worker's queue that found work.
  std::uint64_t injector_pulls = 0;  ///< Batches taken from the shared (injector) queue.
  std::uint64_t lifo_hits = 0;       ///< Woken tasks run next, from the LIFO slot.
  std::uint64_t yields = 0;          ///< Yields: a spent budget or a checkpoint.
  std::uint64_t parks = 0;           ///< Times it slept (on a futex or in the I/O driver).
  std::size_t local_queue = 0;       ///< Tasks in its queue at the snapshot.
};

/// A snapshot of a runtime's counters: Runtime::metrics(), or
/// this_task::runtime_metrics() from a task. Taking one reads each worker's
/// counters (written only by that worker, so nothing is counted on a
/// shared cache line) and walks the scope tree; it never stops a worker.
/// Figures taken while tasks run are each exact but not from one instant.
struct RuntimeMetrics {
  std::vector<WorkerMetrics> workers;  ///< One per worker thread.
  std::uint64_t tasks_spawned = 0;     ///< Tasks spawned so far, root tasks included.
  std::uint64_t tasks_live = 0;        ///< Spawned and not finished.
  std::size_t scopes_live = 0;         ///< Scopes, cancel scopes and timeouts open now.
  std::size_t injector_queue = 0;      ///< Tasks in the shared queue.
  std::uint64_t io_events = 0;         ///< Readiness events the reactor handed to tasks.
  std::uint64_t timers_fired = 0;      ///< Timers fired (sleeps, deadlines, idle limits).
  std::size_t timers_pending = 0;      ///< Timers armed now.
  std::size_t blocking_threads = 0;    ///< spawn_blocking threads alive (busy or idle).
  std::size_t blocking_queue = 0;      ///< spawn_blocking jobs waiting for a thread.
};

/// `m` in the Prometheus text format (version 0.0.4), every name starting
/// with `prefix` ("shoal_tasks_live", "shoal_worker_polls_total{worker="0"}"),
/// for an HTTP `/metrics` endpoint. Allocation: the returned string.
std::string to_prometheus(const RuntimeMetrics& m, std::string_view prefix = "shoal");

/// Parses a `SHOAL_THREADS` value. Throws std::invalid_argument naming the
/// variable and the accepted range (1..1024) for anything else.
std::size_t parse_thread_count(const char* value);

namespace detail {

/// The owner of a root task: the one-child policy over the child-group core.
/// Its group's node is the top of the runtime's cancel tree; the plain
/// thread in block_on waits for the child (a fault is the child's result,
/// so nothing is latched).
class RootOwner final : public ChildGroup {
 public:
  RootOwner() noexcept = default;
  /// Heads a cancel tree of `s`; then start() runs the root task `h` (from
  /// a thread that is none of `s`'s workers).
  void attach(Scheduler* s) noexcept;
  void start(PromiseBase& p, std::coroutine_handle<> h) noexcept;
  std::coroutine_handle<> task_done(TaskRecord& f, PromiseBase& p,
                                     std::coroutine_handle<> frame) noexcept override;
  void wait() noexcept;
  CancelNode& node() noexcept { return node_; }

 private:
  Scheduler* sched_ = nullptr;
  detail::shim::atomic<bool> done_{false};
};

}  // namespace detail

/// Owns the worker threads. `~Runtime` joins them (the one destructor in
/// shoal that blocks); by then every task has finished. Constructing one
/// sets SIGPIPE to ignored (process-wide) if it had its default action, so
/// a write to a closed peer is EPIPE, not a signal.
/// Thread-safety: `block_on` may be called from any non-worker thread;
/// `cancel` from any thread.
class Runtime {
 public:
  /// Throws std::invalid_argument for a bad `SHOAL_THREADS` or
  /// `SHOAL_IO_BACKEND`, more than 1024 workers, or manual_clock without
  /// deterministic_seed.
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Runs `task` as the root of a task tree and blocks the calling thread
  /// until it is done; returns its value or rethrows its fault. Several
  /// calls may run at once, from several threads (the thread bridge).
  /// Checkpoint: not applicable (a blocking call for plain threads).
  /// Cancellation: after `cancel()` the root unwinds and this rethrows Cancelled.
  /// Thread-safety: any thread but this runtime's workers (a worker of another
  ///   runtime is not refused: it blocks that worker).
  /// Throws: the task's fault; Cancelled; std::logic_error when called from
  ///   one of this runtime's workers (the task is destroyed unrun).
  template <class T>
  T block_on(Task<T> task) {
    auto h = task.release();
    detail::RootOwner root;
    start_root(root, h.promise(), h);
    root.wait();
    struct Destroy {
      decltype(h) frame;
      ~Destroy() { frame.destroy(); }
    } destroy{h};
    finish_root(root);
    return h.promise().take();
  }

  /// The same for a Task-like awaitable (e.g. `with_lock(m, body)`).
  template <detail::TaskLike A>
  auto block_on(A call) {
    return block_on(typename A::task_type(std::move(call)));
  }

  /// Cancels every root task running on this runtime: every descendant
  /// unwinds at its next checkpoint and `block_on` rethrows Cancelled.
  void cancel() noexcept;

  /// The number of worker threads this runtime runs (fixed at construction).
  std::size_t worker_count() const noexcept;

  /// Writes every task this runtime knows of, as its scope tree: for each
  /// task its name (see shoal::named, this_task::set_name), where it was
  /// spawned, and whether it runs (or is ready to) or waits, on what, and
  /// (with RuntimeOptions::track_waits) for how long. A task that has never
  /// waited is not listed yet. Best effort and safe from any thread at any
  /// time: a scope whose lock is held is reported as such, not waited for.
  void dump_tasks(std::ostream& out) const;
  /// A snapshot of this runtime's counters (see RuntimeMetrics). Any thread.
  RuntimeMetrics metrics() const;

  /// Writes worker state, then dump_tasks (for watchdogs and debugging).
  void dump_state(std::ostream& out) const;
  /// Dumps every live runtime (used by the test watchdog).
  static void dump_all(std::ostream& out);

 private:
  void start_root(detail::RootOwner& root, detail::PromiseBase& p, std::coroutine_handle<> h);
  void finish_root(detail::RootOwner& root) noexcept;
  std::unique_ptr<detail::Scheduler> sched_;
};

/// Runs `task` on a fresh runtime and returns or rethrows its result; the
/// runtime's workers are joined before it returns. Throws what block_on
/// and the Runtime constructor throw.
template <class T>
T run(Task<T> task, RuntimeOptions options = {}) {
  Runtime rt(std::move(options));
  return rt.block_on(std::move(task));
}

/// The same for a Task-like awaitable (e.g. `with_lock(m, body)`).
template <detail::TaskLike A>
auto run(A call, RuntimeOptions options = {}) {
  return run(typename A::task_type(std::move(call)), std::move(options));
}

namespace this_task {
/// Names the calling task for Runtime::dump_tasks (a copy; an empty name
/// clears it), e.g. a connection handler naming itself after its peer.
/// Thread-safety: from a task. Throws: std::logic_error outside a task;
/// std::bad_alloc.
void set_name(std::string_view name);
/// Runtime::metrics() of the runtime the calling task runs on (e.g. for a
/// `/metrics` handler). Throws: std::logic_error outside a task.
RuntimeMetrics runtime_metrics();
}  // namespace this_task

}  // namespace shoal
