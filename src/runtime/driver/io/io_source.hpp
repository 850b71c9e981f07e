// A file descriptor registered with a runtime's reactor (private): cached
// readiness plus the tasks waiting for it. I/O operations try the syscall
// first and wait only after EAGAIN (IoOp; src/runtime/driver/io/reactor.cpp has the protocol).
#pragma once

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>

#include "shoal/detail/io_op.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/detail/io_slot.hpp"
#include "shoal/detail/spin_lock.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/timer.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"
#include "src/runtime/driver/io/backend.hpp"

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
  // Readiness: io::Interest and closed bits (src/runtime/driver/io/backend.hpp).
  static constexpr std::uint32_t kTick = 1u << 8;  // bumped by every readiness event

  int fd = -1;  // a pid for a process source
  bool process = false;  // a child's exit (io_register_process), not an fd
  IoCore* core = nullptr;
  // Readiness bits | event tick. A clear after EAGAIN only succeeds if no
  // event arrived since the caller read the state, so an edge is never lost.
  shim::atomic<std::uint32_t> state{0};
  SpinLock lock;
  WaitList waiters;  // IoWaiters, guarded by lock
  IoSource* next_release = nullptr;
};

/// An idle limit's timer on one wait (IoOp), owned by the wait's waiter:
/// fired, it expires the wait.
struct IoIdleEntry : OwnedTimer<IoWaiter> {
  Scheduler* sched = nullptr;
};
/// The entry's `fire`: marks the waiter expired and wakes it if still queued.
void io_idle_fire(TimerEntry* e) noexcept;

namespace io {
struct Event;  // backend.hpp
}
struct TaskBatch;  // src/runtime/injector.hpp

/// The reactor's dispatch, by the driver's holder: each event's readiness
/// goes into its source, and the waiters it serves are claimed and added to
/// `batch`, for one schedule per poll.
void io_dispatch(const io::Event* events, std::size_t n, TaskBatch& batch) noexcept;

/// Registers `fd` (non-blocking, edge-triggered, both directions, for its
/// lifetime) with the calling task's runtime, assuming `ready` (io::readable |
/// io::writable: try the syscall first; 0: wait for the first event, as a
/// connect in progress must). Throws std::logic_error outside a task,
/// std::system_error if the backend refuses.
IoSource* io_register(int fd, std::uint32_t ready);
/// A source that turns readable (and closed) when the child `pid` exits,
/// where the backend watches processes (kqueue); null where it does not
/// (the caller polls). Deregistered as any source. Throws as io_register.
IoSource* io_register_process(int pid);
/// Deregisters `s` (the fd stays open). Aborts if a task still waits on it:
/// closing a stream another task is using is a bug (cancel that task).
/// The memory is reclaimed by the reactor once no event can refer to it.
void io_deregister(IoSource* s) noexcept;

/// A cancellation point before an I/O operation's first side effect.
inline void io_check_cancelled() {
  if (TaskRecord* f = current_record(); f != nullptr && f->cancelled()) detail::raise_cancelled();
}

/// After EAGAIN: drops `bit` from the cached readiness, unless an event
/// arrived since `seen` was read (then the caller just tries again). The
/// event's tick makes the word differ even when its bit was set already;
/// atomicity is all it needs (reactor.cpp, "Orderings").
inline bool io_clear(IoSource* s, std::uint32_t seen, std::uint32_t bit) noexcept {
  return s->state.compare_exchange_strong(seen, seen & ~bit, std::memory_order_relaxed, std::memory_order_relaxed);
}

bool io_wait_suspend(IoWaiter& w, TaskRecord* f, std::coroutine_handle<> h) noexcept;

/// Waits until `interest` is (or may be) ready. Checkpoint: yes.
struct IoReadyAwaiter {
  IoWaiter w;
  IoReadyAwaiter(IoSource* s, std::uint32_t interest) noexcept : w(s, s->lock, static_cast<std::uint8_t>(interest)) {}
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    return io_wait_suspend(w, record_of(h), h);
  }
  void await_resume() const {
    if (w.cancelled) detail::raise_cancelled();
  }
};

}  // namespace shoal::detail
