// The reactor: readiness events from the backend to waiting tasks.
//
// - An fd is registered once, edge-triggered for both directions, when its
//   owner first needs to wait, and stays registered until the owner closes.
// - `state` caches readiness: an event ORs its bits in and bumps the tick.
//   Operations run the one loop, IoOp (shoal/detail/io_op.hpp): it tries
//   the syscall while the bit is set, and on EAGAIN clears the bit only if
//   the state is unchanged (io_clear); if an event came in between, it
//   retries the syscall instead of waiting for an edge that already
//   happened. A woken op retries on the task's worker before its coroutine
//   is resumed, so a wake that finds EAGAIN again never reaches the frame.
// - Waiters are on the one wait queue (detail/wait_queue.hpp) under the
//   source's lock: a waiter re-checks readiness there before it links. The
//   dispatcher unlinks matching waiters under the lock, then disarms and
//   schedules them as one batch; a canceller unlinks under the same lock, so
//   exactly one of them owns the wake.
// - Events are dispatched only by the thread holding the driver (a parked
//   worker blocking in the backend, or a busy worker polling it every 61
//   ticks without blocking): src/runtime/driver/. A deregistered source is
//   pushed onto a release stack that the driver holder frees before its next
//   backend wait: by then no harvested event can still point at it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <thread>

#include "shoal/detail/frame_alloc.hpp"
#include "shoal/testing/registrations.hpp"
#include "shoal/time/sleep.hpp"
#include "src/io/async_io.hpp"
#include "src/runtime/scheduler.hpp"

namespace shoal::detail {

IoSource* io_register(int fd, std::uint32_t ready) {
  TaskRecord* f = current_record();
  if (f == nullptr) throw std::logic_error("shoal: I/O on a socket or pipe must be awaited from a shoal task");
  void* mem = frame_allocate(sizeof(IoSource));
  auto* s = ::new (mem) IoSource();
  s->fd = fd;
  s->core = f->sched->driver().io_core();
  s->state.store(ready, std::memory_order_relaxed);
  try {
    f->sched->driver().io_add(s);
  } catch (...) {
    s->~IoSource();
    frame_deallocate(mem, sizeof(IoSource));
    throw;
  }
  return s;
}

void io_deregister(IoSource* s) noexcept {
  s->lock.lock();
  const bool waited_on = !s->waiters.empty();
  s->lock.unlock();
  if (waited_on) {
    std::fputs("shoal: a socket or pipe was closed while a task was waiting on it; cancel the task first\n", stderr);
    std::abort();
  }
  IoCore* core = s->core;
  if (core->dead.load(std::memory_order_acquire)) {  // the runtime is gone: nothing can refer to s
    s->~IoSource();
    frame_deallocate(s, sizeof(IoSource));
    if (core->live.fetch_sub(1, std::memory_order_acq_rel) == 1) delete core;
    return;
  }
  core->driver->io_release(s);
}

IoSource* IoSlot::get_slow(int fd, std::uint32_t ready, bool* registered) {
  SpinWait wait;
  for (;;) {
    std::uintptr_t v = v_.load(std::memory_order_acquire);
    if (v > kRegistering) return reinterpret_cast<IoSource*>(v);
    if (v == 0 && v_.compare_exchange_strong(v, kRegistering, std::memory_order_acq_rel)) {
      IoSource* s = nullptr;
      try {
        s = io_register(fd, ready);
      } catch (...) {
        v_.store(0, std::memory_order_release);  // a waiting sibling tries (and reports) itself
        throw;
      }
      v_.store(reinterpret_cast<std::uintptr_t>(s), std::memory_order_release);
      if (registered != nullptr) *registered = true;
      return s;
    }
    wait.pause();  // the other side is inside io_register: microseconds
  }
}

void IoSlot::release() noexcept {
  const std::uintptr_t v = v_.exchange(0, std::memory_order_acq_rel);
  if (v > kRegistering) io_deregister(reinterpret_cast<IoSource*>(v));
}


bool io_wait_suspend(IoWaiter& w, TaskRecord* f, std::coroutine_handle<> h) noexcept {
  IoSource* s = w.src;
  if (f->cancelled()) {
    w.cancelled = true;
    return false;
  }
  const std::uint32_t interest = w.interest;
  IoCore* core = nullptr;
  int fd = -1;
  const WaitStep step = wait_step(w, f, h, s->lock, s->waiters, [&](WaitSection&) {
    // Read all that is needed now: once unlocked, an event may wake the
    // task, which may close the stream, and the driver may free s.
    core = s->core;
    fd = s->fd;
    // Ready after all (retry the syscall), or the idle limit already passed.
    return (s->state.load(std::memory_order_acquire) & (interest | io::closed(interest))) != 0 || w.expired;
  });
  if (step != WaitStep::suspended) {
    w.cancelled = step == WaitStep::cancelled;
    return false;
  }
  // Nothing may touch w or s from here on.
  if (core->rearm) core->driver->io_rearm(fd, interest, s);
  return true;
}

// ---- IoOp: the readiness loop ---------------------------------------------

namespace {
std::uint32_t clamp_ms(std::chrono::milliseconds limit) noexcept {
  if (limit.count() <= 0) return 0;
  return static_cast<std::uint32_t>(std::min<std::int64_t>(limit.count(), UINT32_MAX));
}
}  // namespace

IoOp::IoOp(IoSource* s, std::uint8_t interest, AttemptFn attempt, std::chrono::milliseconds limit) noexcept
    : w_(s, s->lock, interest), attempt_(attempt), limit_ms_(clamp_ms(limit)) {}

IoOp::IoOp(IoOp&& o) noexcept
    : w_(o.w_.src, o.w_.src->lock, o.w_.interest), attempt_(o.attempt_), limit_ms_(o.limit_ms_) {}

int IoOp::fd() const noexcept { return w_.src->fd; }

bool IoOp::start(TaskRecord* f, std::coroutine_handle<> h) noexcept {
  cont_ = h;
  if (f->cancelled()) {  // before the first side effect
    end_ = End::cancelled;
    return false;
  }
  if (attempt_ == nullptr) return false;  // nothing to move
  if (!run(f)) return true;               // waiting: nothing may touch *this
  // Over without waiting: the effect is kept even if the yield is cancelled.
  if (end_ == End::done && consume_budget(f)) {
    yield_from(f, h, this);
    return true;
  }
  return false;
}

bool IoOp::run(TaskRecord* f) noexcept {
  IoSource* s = w_.src;
  const std::uint32_t interest = w_.interest;
  for (;;) {
    const std::uint32_t seen = s->state.load(std::memory_order_acquire);
    // Cached readiness is trusted: a clear bit means an attempt found
    // nothing (EAGAIN, or a short read) and no event came since, so the
    // syscall would only say EAGAIN. A source starts out ready (io_register);
    // once its direction is closed, every attempt is made.
    if ((seen & (interest | io::closed(interest))) != 0) {
      drained_ = false;
      if (attempt_(*this)) {
        if (drained_) io_clear(s, seen, interest);
        end_ = End::done;
        break;
      }
      woken_ = false;
      if (!io_clear(s, seen, interest)) continue;  // an event came in meanwhile: try again
    }
    if (wait(f)) return false;
    if (wait_ended()) break;
  }
  release_limit();
  return true;
}

bool IoOp::wait_ended() noexcept {
  if (w_.cancelled) {
    end_ = End::cancelled;
  } else if (w_.expired) {
    end_ = End::idle_expired;
  }
  return end_ != End::done;  // or no_memory, set by wait()
}

void IoOp::release_limit() noexcept {
  if (idle_ == nullptr) return;
  timer_cancel_and_wait(idle_->sched, idle_);
  frame_deallocate(idle_, sizeof(IoIdleEntry));
  idle_ = nullptr;
}

bool IoOp::wait(TaskRecord* f) noexcept {
  if (limit_ms_ != 0 && !f->cancelled()) {
    if (idle_ == nullptr) {
      try {
        idle_ = ::new (frame_allocate(sizeof(IoIdleEntry))) IoIdleEntry;
      } catch (const std::bad_alloc&) {
        end_ = End::no_memory;
        return false;
      }
      idle_->owner = &w_;
      idle_->fire = &io_idle_fire;
      idle_->sched = f->sched;
      timer_bind(f->sched, idle_);
    }
    // Queued before the wait, so it may fire before the waiter is linked:
    // it then marks the waiter expired under the source's lock, which the
    // wait's re-check reads.
    w_.expired = false;
    idle_->state.store(TimerEntry::idle, std::memory_order_relaxed);
    idle_->deadline = to_ns(clock_now() + limit());
    (void)timer_insert(f->sched, idle_);  // no cancel check: the wait makes it
  }
  return io_wait_suspend(w_, f, stand_in_.handle());
}

void IoOp::on_wake(void* frame) noexcept {
  IoOp& op = StandIn::owner_of<IoOp>(frame);
  TaskRecord* f = op.w_.record;
  // The limit's timer either woke us or must not fire any more; once it has
  // finished, `expired` is settled (its write is ordered before `done`).
  if (op.idle_ != nullptr) timer_cancel_and_wait(op.idle_->sched, op.idle_);
  op.woken_ = true;
  if (op.wait_ended()) {
    op.release_limit();
  } else if (!op.run(f)) {
    return;  // waiting again; the coroutine never saw the wake
  }
  const std::coroutine_handle<> c = op.cont_;  // *this may be gone once c runs
  c.resume();
}

void io_idle_fire(TimerEntry* e) noexcept {
  IoWaiter& w = IoIdleEntry::owner_of(e);
  {
    WaitSection sec(w.src->lock);
    w.expired = true;
    if (w.is_linked()) {  // still waiting: the timer claims the wake
      w.unlink_locked();
      sec.wake(&w);
    }
  }
  // The woken task waits for this store before the entry goes away.
  e->state.store(TimerEntry::done, std::memory_order_release);
}

Task<void> io_back_off(std::uint8_t& times) {
  const auto pause = std::chrono::milliseconds(5) * (1u << std::min<unsigned>(times, 7));  // 5 ms doubling to 640 ms
  if (times < 7) ++times;
  co_await sleep_for(pause);
}

}  // namespace shoal::detail

namespace shoal::testing {
std::size_t io_registrations() noexcept {
  detail::TaskRecord* f = detail::current_record();
  return f == nullptr ? 0 : f->sched->driver().io_core()->live.load(std::memory_order_relaxed);
}
}  // namespace shoal::testing
