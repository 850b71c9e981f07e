// A file descriptor registered with a runtime's reactor (private): cached
// readiness plus the tasks waiting for it. I/O operations try the syscall
// first and wait only after EAGAIN (see src/io/reactor.cpp for the protocol).
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/io_slot.hpp"
#include "shoal/detail/spin_lock.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/timer.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"
#include "src/io/backend.hpp"

namespace shoal::detail {

struct IoSource;
class Driver;

/// What an IoSource needs of its runtime. Separate from the driver so a
/// socket that outlives its runtime (bound before `run`, destroyed after)
/// can still be closed: a dead core just frees the source.
struct IoCore {
  Driver* driver = nullptr;
  shim::atomic<std::size_t> live{0};  // registered sources
  shim::atomic<bool> dead{false};     // the runtime is gone
  bool rearm = false;                 // the backend needs re-arming after each report (poll)
};

struct IoSource {
  // Readiness: io::Interest and closed bits (src/io/backend.hpp).
  static constexpr std::uint32_t kTick = 1u << 8;  // bumped by every readiness event

  int fd = -1;
  IoCore* core = nullptr;
  // Readiness bits | event tick. A clear after EAGAIN only succeeds if no
  // event arrived since the caller read the state, so an edge is never lost.
  shim::atomic<std::uint32_t> state{0};
  SpinLock lock;
  WaitList waiters;  // IoWaiters, guarded by lock
  IoSource* next_release = nullptr;
};

/// One task waiting on an IoSource. Lives in the awaiting frame.
struct IoWaiter final : Waiter {
  IoWaiter(IoSource* s, std::uint32_t bits) noexcept : Waiter(s->lock), src(s), interest(bits) {}
  IoSource* src;
  std::uint32_t interest;
  bool expired = false;  // the wait's idle timer fired (under src->lock)
};

/// Registers `fd` (non-blocking, edge-triggered, both directions, for its
/// lifetime) with the calling task's runtime, assuming `ready` (io::readable |
/// io::writable: try the syscall first; 0: wait for the first event, as a
/// connect in progress must). Throws std::logic_error outside a task,
/// std::system_error if the backend refuses.
IoSource* io_register(int fd, std::uint32_t ready);
/// Deregisters `s` (the fd stays open). Aborts if a task still waits on it:
/// closing a stream another task is using is a bug (cancel that task).
/// The memory is reclaimed by the reactor once no event can refer to it.
void io_deregister(IoSource* s) noexcept;

/// A cancellation point before an I/O operation's first side effect.
inline void io_check_cancelled() {
  if (TaskRecord* f = current_record(); f != nullptr && f->cancelled()) throw Cancelled{};
}

/// Yields once the task's budget is spent, without a cancellation check:
/// the operation already had its effect, which must not be lost.
struct YieldIfOutOfBudget {
  TaskRecord* f = current_record();
  bool await_ready() const noexcept { return f == nullptr || !consume_budget(f); }
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    yield_from(f, h, this);  // not schedule_yield: see yield_from (llvm#56301)
    return true;
  }
  void await_resume() const noexcept {}
};

/// After EAGAIN: drops `bit` from the cached readiness, unless an event
/// arrived since `seen` was read (then the caller just tries again).
inline bool io_clear(IoSource* s, std::uint32_t seen, std::uint32_t bit) noexcept {
  return s->state.compare_exchange_strong(seen, seen & ~bit, std::memory_order_acq_rel, std::memory_order_acquire);
}

bool io_wait_suspend(IoWaiter& w, TaskRecord* f, std::coroutine_handle<> h) noexcept;

/// Waits until `interest` is (or may be) ready. Checkpoint: yes.
struct IoReadyAwaiter {
  IoWaiter w;
  IoReadyAwaiter(IoSource* s, std::uint32_t interest) noexcept : w(s, interest) {}
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    return io_wait_suspend(w, record_of(h), h);
  }
  void await_resume() const {
    if (w.cancelled) throw Cancelled{};
  }
};

/// The same, or until `limit` passes first. The limit is a timer entry in
/// the awaiter (no cancel scope, no frame), paid only by waits that have one.
class IoReadyWithinAwaiter {
 public:
  IoReadyWithinAwaiter(IoSource* s, std::uint32_t interest, std::chrono::milliseconds limit) noexcept
      : w_(s, interest), limit_(limit) {}
  IoReadyWithinAwaiter(const IoReadyWithinAwaiter&) = delete;
  IoReadyWithinAwaiter& operator=(const IoReadyWithinAwaiter&) = delete;
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    return suspend(record_of(h), h);
  }
  /// False if the limit passed with no event. Throws Cancelled, and
  /// std::bad_alloc if the limit's timer could not be queued.
  bool await_resume();

 private:
  struct IdleEntry : TimerEntry {
    IoWaiter* waiter = nullptr;
  };
  bool suspend(TaskRecord* f, std::coroutine_handle<> h) noexcept;
  static void on_idle(TimerEntry* e) noexcept;

  IoWaiter w_;
  std::chrono::milliseconds limit_;
  Scheduler* sched_ = nullptr;  // set once the limit's timer is queued
  IdleEntry entry_;
};

}  // namespace shoal::detail
