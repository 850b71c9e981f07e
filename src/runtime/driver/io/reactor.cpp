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
//
// Orderings. No lost edge rests on the source's lock and on `state` being
// one atomic word, not on the orders of its accesses: the dispatcher's RMW
// comes before its lock section, and a waiter decides to sleep only under
// the lock, after re-reading `state` there; whichever lock section comes
// second sees the other's work. io_clear fails whenever the word changed
// since `seen` (the tick), which RMW atomicity alone gives. The word
// publishes no memory of its own (the data is the kernel's, ordered by the
// syscalls), so every access to it is relaxed. Checked under Relacy
// (readiness vs a waiter, a cancel, an idle limit), with the accesses
// relaxed: tests/relacy/io_source_relacy_test.cpp,
// without the backend (epoll/poll), IoSlot's registration or the release
// stack, which stay SC/TSan-checked.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <thread>

#include "shoal/detail/frame_alloc.hpp"
#include "shoal/testing/registrations.hpp"
#include "shoal/time/sleep.hpp"
#include "src/runtime/driver/io/async_io.hpp"
#include "src/runtime/injector.hpp"
#include "src/runtime/scheduler.hpp"

namespace shoal::detail {

namespace {
IoSource* register_source(int fd, std::uint32_t ready, bool process) {
  TaskRecord* f = current_record();
  if (f == nullptr) throw std::logic_error("shoal: I/O on a socket or pipe must be awaited from a shoal task");
  if (process && !f->sched->driver().watches_processes()) return nullptr;
  void* mem = frame_allocate(sizeof(IoSource));
  auto* s = ::new (mem) IoSource();
  s->fd = fd;
  s->process = process;
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
}  // namespace

IoSource* io_register(int fd, std::uint32_t ready) { return register_source(fd, ready, false); }

IoSource* io_register_process(int pid) { return register_source(pid, io::readable, true); }

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
    return (s->state.load(std::memory_order_relaxed) & (interest | io::closed(interest))) != 0 || w.expired;
  });
  if (step != WaitStep::suspended) {
    w.cancelled = step == WaitStep::cancelled;
    return false;
  }
  // Nothing may touch w or s from here on.
  if (core->rearm) core->driver->io_rearm(fd, interest, s);
  return true;
}

ReadableCase::ReadableCase(IoSource* s, bool pending) noexcept : SelectCase(s->lock), src_(s), pending_(pending) {
  // A poll backend reports a readiness once, then waits to be armed again:
  // armed now, a report before the case links is seen in its state.
  if (s->core->rearm) s->core->driver->io_rearm(s->fd, io::readable, s);
}

bool ReadableCase::ready() noexcept {
  for (;;) {
    const std::uint32_t v = src_->state.load(std::memory_order_relaxed);
    if ((v & io::closed(io::readable)) != 0) return true;
    if ((v & io::readable) == 0) return false;
    // The bit may be an assumption, or left by a read that took everything
    // (as Stream::wait_readable knows): ask the kernel, consuming nothing.
    pollfd p{src_->fd, POLLIN, 0};
    const int n = ::poll(&p, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != 0) return true;                              // data, the end, or an error the read reports
    if (io_clear(src_, v, io::readable)) return false;  // not readable: the next edge sets it again
  }
}

bool ReadableCase::link_locked(WakeList&, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept {
  enter_select(claim, index);
  record = f;
  src_->waiters.push_back(this);
  return false;
}

void io_dispatch(const io::Event* events, std::size_t n, TaskBatch& batch) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    auto* s = static_cast<IoSource*>(events[i].token);
    const std::uint32_t bits = events[i].ready;  // io::Interest bits, as the source keeps them
    std::uint32_t v = s->state.load(std::memory_order_relaxed);
    while (!s->state.compare_exchange_weak(v, (v + IoSource::kTick) | bits, std::memory_order_relaxed,
                                           std::memory_order_relaxed)) {
    }
    // Claim every waiter the event serves under the lock; wake after it,
    // into the caller's batch (one schedule for a whole poll's wakes).
    Waiter* woken = nullptr;
    s->lock.lock();
    for (Waiter* w = s->waiters.front(); w != nullptr;) {
      Waiter* next = s->waiters.next(w);
      // A select's case on a source is a ReadableCase; a dead one (its
      // select finished another way) is unlinked and not woken.
      const std::uint32_t interest = w->in_select ? std::uint32_t{io::readable} : static_cast<IoWaiter*>(w)->interest;
      if ((interest & bits) != 0) {
        w->unlink_locked();
        if (claim_waiter(w)) {
          w->set_wake_next(woken);
          woken = w;
        }
      }
      w = next;
    }
    s->lock.unlock();
    wake_chain(woken, [&batch](TaskRecord* f) noexcept { batch.push(f); });
  }
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
std::size_t operations_in_flight() noexcept {
  detail::TaskRecord* f = detail::current_record();
  return f == nullptr ? 0 : f->sched->driver().ops_in_flight();
}
}  // namespace shoal::testing
