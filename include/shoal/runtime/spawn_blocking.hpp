// Blocking work on an elastic thread pool beside the workers, and the
// cancellation-aware wait a blocking function uses to stay interruptible.
#pragma once

#include <chrono>
#include <coroutine>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal {

namespace detail {

/// A job for the blocking pool: a waiter on the pool's job queue (a pool
/// thread claims it by unlinking, as a canceller does before it starts).
/// Lives in the awaiting coroutine's frame.
class BlockingJob : public Waiter {
 public:
  const char* wait_kind() const noexcept override { return "shoal::spawn_blocking"; }
  TaskRecord* waiter = nullptr;

  /// Runs on a pool thread.
  virtual void run() noexcept = 0;
  /// The awaiting task was cancelled while this runs: wake a wait_readable.
  void signal_cancel() noexcept;
  /// Creates the wake fd on first use (an eventfd on Linux, elsewhere a
  /// pipe's read end); -1 if that failed.
  int wake_fd() noexcept;
  bool cancelled() const noexcept { return waiter != nullptr && waiter->cancelled(); }
  /// Binds the job to `s`'s pool (its lock) before it is published.
  void bind_pool(Scheduler* s) noexcept;

 protected:
  ~BlockingJob();
  /// A canceller's look: a queued job was unlinked (the awaiter throws
  /// Cancelled); a running one's wait_readable is interrupted, and the wake
  /// is left to the pool thread.
  void after_cancel(bool claimed) noexcept override;

 private:
  shim::mutex wake_mu_;
  int wake_fd_ = -1;
  int wake_write_ = -1;  // what signal_cancel writes to: wake_fd_ itself for an eventfd
};

/// Queues `job` unless the waiter is already cancelled. False: not queued.
bool blocking_submit(Scheduler* s, BlockingJob* job) noexcept;

template <class F>
class BlockingAwaiter final : public BlockingJob {
 public:
  using R = std::invoke_result_t<F&>;
  explicit BlockingAwaiter(F& fn) noexcept : fn_(fn) {}

  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    TaskRecord* f = record_of(h);
    waiter = f;
    if (f == nullptr || f->cancelled()) return false;
    bind_pool(f->sched);
    f->resume = h;
    publish_hook(f, this);
    if (blocking_submit(f->sched, this)) return true;  // completion or a canceller resumes us
    disarm_wait(f, this);
    return false;
  }
  R await_resume() {
    if (waiter == nullptr) throw std::logic_error("shoal::spawn_blocking: awaited outside a shoal task");
    if (!ran_) detail::raise_cancelled();  // cancelled before it started
    if (error_) std::rethrow_exception(error_);
    if constexpr (!std::is_void_v<R>) return std::move(*value_);
  }
  void run() noexcept override {
    ran_ = true;
    try {
      if constexpr (std::is_void_v<R>) {
        std::invoke(fn_);
      } else {
        value_.emplace(std::invoke(fn_));
      }
    } catch (...) {
      error_ = std::current_exception();
    }
  }

 private:
  F& fn_;
  bool ran_ = false;
  std::exception_ptr error_;
  std::optional<Stored<R>> value_;
};

}  // namespace detail

/// Runs `fn()` on the blocking pool (elastic threads beside the workers,
/// started on demand up to 512 and gone after 10 s idle; at the cap a job
/// queues) and returns its result. A blocking call there never pins a worker.
/// Checkpoint: yes (a cancelled task throws Cancelled and `fn` never runs);
///   it always suspends, so it needs no budget yield.
/// Cancellation: a job not yet started is dropped and Cancelled is thrown; a
///   running job is never abandoned: `fn` sees
///   `this_task::cancellation_requested()` and `this_task::wait_readable`
///   returns `cancelled`, and the await ends when `fn` returns (so a function
///   that ignores cancellation delays any deadline around it). A value (or
///   fault) produced after a cancellation is still delivered.
/// Thread-safety: from a task. `fn` runs on a pool thread: it may use the
///   blocking forms (shoal::blocking, send_blocking...), not co_await.
/// Throws: Cancelled (not started), what `fn` throws, std::logic_error when
///   awaited outside a shoal task.
template <class F>
auto spawn_blocking(F fn) -> Task<std::invoke_result_t<F&>> {
  co_return co_await detail::BlockingAwaiter<F>(fn);
}

namespace this_task {

/// How wait_readable ended: `readable` (the fd is readable, hung up or in
/// error), `timed_out` (the timeout passed) or `cancelled` (the task awaiting
/// this blocking job was cancelled).
enum class WaitResult { readable, timed_out, cancelled };

/// Blocks the calling thread until `fd` is readable (or hung up / in error),
/// `timeout` passes (negative: no limit), or the task that awaits this
/// blocking job is cancelled.
/// Checkpoint: no (not awaited: it reports cancellation as `cancelled`
///   instead of throwing).
/// Cancellation: under spawn_blocking, returns `cancelled` as soon as the
///   awaiting task is cancelled (at once if it already is, even with `fd`
///   readable).
/// Thread-safety: code running under spawn_blocking, and plain threads
///   (where only the fd and timeout count); never a runtime worker.
/// Throws: std::logic_error on a runtime worker (it would block the
///   worker); std::system_error if poll fails.
WaitResult wait_readable(int fd, std::chrono::milliseconds timeout);

}  // namespace this_task

}  // namespace shoal
