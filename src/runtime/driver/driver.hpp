// The driver: the one place a runtime blocks for I/O readiness and timers,
// and its one clock. A parked worker that takes the driver lock blocks in the
// backend until an event, a wake or the earliest timer, then hands what woke
// to the scheduler; a busy worker turns it without blocking every 61 ticks,
// and the driver watch (src/runtime/watch.cpp) hands it to a sleeper when
// nobody has turned it for a tick.
// The reactor (src/runtime/driver/io/reactor.cpp) and the timer queue live behind it; the
// scheduler only parks on it and runs what it wakes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "shoal/detail/task_record.hpp"
#include "src/runtime/driver/io/io_source.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/timer.hpp"
#include "src/runtime/driver/io/backend.hpp"
#include "src/runtime/push_stack.hpp"
#include "src/runtime/driver/time/timer_queue.hpp"

namespace shoal::detail {

class Driver {
 public:
  /// Woken tasks go to `sched` (Scheduler::schedule_batch). A manual clock
  /// stands still until advance_manual_clock(). `timer_shards`: one timer
  /// wheel per worker plus one for other threads.
  Driver(Scheduler& sched, bool manual_clock, std::size_t timer_shards);
  /// Frees released sources; sockets that outlive the runtime free
  /// themselves through the dead core.
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // The driver lock (the Parker's Driver interface): whoever holds it may
  // block in the backend; wake_driver() makes that block return.
  // Test, then set: a parking worker that finds it held takes no cache line.
  bool try_lock_driver() noexcept {
    if (busy_.load(std::memory_order_relaxed) || busy_.exchange(true, std::memory_order_acquire)) return false;
    turns_.store(turns_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // only the holder writes
    return true;
  }
  void unlock_driver() noexcept { busy_.store(false, std::memory_order_release); }
  void wake_driver() noexcept {
    wakes_.fetch_add(1, std::memory_order_relaxed);
    backend_->wake();
  }
  /// How often the driver lock was taken (the watch's sign of life) and
  /// whether somebody holds it now. Approximate: read without the lock.
  std::uint64_t turns() const noexcept { return turns_.load(std::memory_order_relaxed); }
  bool held() const noexcept { return busy_.load(std::memory_order_relaxed); }
  /// Backend wake-ups (eventfd writes on epoll) made so far.
  std::uint64_t wakes() const noexcept { return wakes_.load(std::memory_order_relaxed); }
  /// Lock holder: blocks until I/O, a wake or the earliest timer; hands the
  /// woken tasks on and fires due timers.
  void drive() noexcept;
  /// A busy worker's non-blocking turn of the reactor (if nobody drives).
  /// True if any event came in.
  bool poll_io_now() noexcept;

  // The reactor.
  IoCore* io_core() noexcept { return io_core_; }
  void io_add(IoSource* s);
  void io_release(IoSource* s) noexcept;
  /// Poll backend: arms `interest` again for `fd` if it is still registered
  /// with `token` (which is only compared, never followed).
  void io_rearm(int fd, std::uint32_t interest, const IoSource* token) noexcept;
  const char* backend_name() const noexcept { return backend_->name(); }

  // The completion path (io_uring): operations the kernel runs.
  bool runs_operations() const noexcept { return backend_->runs_operations(); }
  /// Hands `op` to the backend (Backend::submit); `cancel_unless` is the
  /// task whose cancellation, seen by then, cancels it at once (null:
  /// never). False if the backend could not queue it.
  bool submit_op(CompletionOp& op, const TaskRecord* cancel_unless) noexcept {
    ops_in_flight_.fetch_add(1, std::memory_order_relaxed);
    if (backend_->submit(op, cancel_unless)) return true;
    ops_in_flight_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  void cancel_op(const CompletionOp& op) noexcept { backend_->cancel(op); }
  /// Operations submitted and not yet completed (approximate off the lock).
  std::size_t ops_in_flight() const noexcept { return ops_in_flight_.load(std::memory_order_relaxed); }
  bool watches_processes() const noexcept { return backend_->watches_processes(); }

  // Timers.
  TimerInsert add_timer(TimerEntry* e, const TaskRecord* unless) noexcept;
  bool remove_timer(TimerEntry* e) noexcept { return timers_.remove(e); }
  /// Fires due timers; true if any fired.
  bool fire_timers() noexcept;
  std::int64_t next_deadline() const noexcept { return timers_.next_deadline(); }
  std::size_t timer_count() const noexcept { return timers_.size(); }
  /// For metrics: readiness events handed on, and timers fired, so far.
  std::uint64_t io_events() const noexcept { return io_events_.load(std::memory_order_relaxed); }
  std::uint64_t timers_fired() const noexcept { return timers_fired_.load(std::memory_order_relaxed); }

  // The clock: the runtime's time in ns (the manual clock's, if it has one).
  std::int64_t now_ns() const noexcept {
    return manual_clock_ ? manual_now_.load(std::memory_order_acquire) : to_ns(Clock::now());
  }
  bool manual_clock() const noexcept { return manual_clock_; }
  /// Manual clock: jumps to the earliest timer and fires what is due.
  /// False if there is no timer.
  bool advance_manual_clock() noexcept;

 private:
  /// Lock holder only: frees released sources, hands events to waiters.
  void reclaim_io() noexcept;
  /// Completions to their tasks, readiness to the reactor (io_dispatch);
  /// compacts `events`.
  void dispatch_io(io::Event* events, std::size_t n) noexcept;
  /// Whether a wait might report anything: sources, or operations in flight.
  bool io_waits() const noexcept {
    return io_core_->live.load(std::memory_order_relaxed) != 0 || ops_in_flight_.load(std::memory_order_relaxed) != 0;
  }
  /// The backend's wait; aborts with a message if the backend cannot wait.
  std::size_t backend_wait(std::chrono::nanoseconds timeout, std::span<io::Event> out) noexcept;

  Scheduler& sched_;
  const bool manual_clock_;
  shim::atomic<std::int64_t> manual_now_;
  std::unique_ptr<io::Backend> backend_;
  IoCore* io_core_;
  PushStack<IoSource, &IoSource::next_release> io_released_;
  shim::atomic<bool> busy_{false};
  shim::atomic<std::uint64_t> turns_{0};
  shim::atomic<std::uint64_t> wakes_{0};
  shim::atomic<std::uint64_t> io_events_{0};     // written under the driver's lock only
  shim::atomic<std::size_t> ops_in_flight_{0};
  shim::atomic<std::uint64_t> timers_fired_{0};
  // -1: nobody sleeps in the driver; else the deadline it sleeps until.
  shim::atomic<std::int64_t> sleep_until_{-1};
  TimerQueue timers_;
};

}  // namespace shoal::detail
