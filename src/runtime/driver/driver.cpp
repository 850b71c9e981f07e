// The driver: blocking for I/O and timers, the reactor's dispatch, the clock.
//
// Timer wake-up protocol: the driver announces it sleeps (seq_cst store of
// kNever), then reads the earliest deadline (seq_cst) and announces that; an
// inserter publishes its deadline (seq_cst, in the queue) and then reads the
// announcement. Either the driver sees the new timer or the inserter sees the
// driver and wakes it if it would sleep past the new deadline.
//
// Released sources: a deregistered source is pushed onto io_released_ and
// freed by the lock holder before its next backend wait, when no harvested
// event can still point at it.
#include "src/runtime/driver/driver.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>

#include "shoal/detail/frame_alloc.hpp"
#include "src/runtime/driver/io/completion.hpp"
#include "src/runtime/injector.hpp"

namespace shoal::detail {

Driver::Driver(Scheduler& sched, bool manual_clock, std::size_t timer_shards)
    : sched_(sched),
      manual_clock_(manual_clock),
      manual_now_(to_ns(Clock::now())),
      backend_(io::make_backend()),
      io_core_(new IoCore()),
      timers_(timer_shards, manual_now_.load(std::memory_order_relaxed)) {
  io_core_->driver = this;
  io_core_->rearm = backend_->needs_rearm();
}

Driver::~Driver() {
  reclaim_io();
  // Sockets still open (bound before run, closed after) free themselves
  // through the dead core; the last one frees it.
  io_core_->dead.store(true, std::memory_order_release);
  if (io_core_->live.load(std::memory_order_acquire) == 0) delete io_core_;
}

void Driver::drive() noexcept {
  sleep_until_.store(TimerQueue::kNever, std::memory_order_seq_cst);
  const std::int64_t next = timers_.next_deadline();
  sleep_until_.store(next, std::memory_order_seq_cst);
  std::chrono::nanoseconds timeout(-1);
  // A manual clock only moves by auto-advance (the deterministic executor),
  // never while the driver sleeps.
  if (next != TimerQueue::kNever && !manual_clock_) {
    timeout = std::chrono::nanoseconds(std::max<std::int64_t>(0, next - to_ns(Clock::now())));
  }
  reclaim_io();
  io::Event events[64];
  std::size_t n = 0;
  if (timeout.count() != 0 || io_waits()) n = backend_wait(timeout, events);
  sleep_until_.store(-1, std::memory_order_seq_cst);
  dispatch_io(events, n);
  fire_timers();
}

// A backend that cannot wait (epoll_wait failing with EBADF or EINVAL: its
// fd was closed or replaced under us) will fail the same way on every call;
// looping on it would spin a core and starve every socket, timer and parked
// worker silently. Fail closed instead. Out of memory (the poll backend's
// snapshot) may pass: wait a moment and report no events.
std::size_t Driver::backend_wait(std::chrono::nanoseconds timeout, std::span<io::Event> out) noexcept {
  try {
    return backend_->wait(timeout, out);
  } catch (const std::bad_alloc&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shoal: the I/O backend (%s) cannot wait for events: %s; the runtime cannot go on\n",
                 backend_->name(), e.what());
  } catch (...) {
    std::fprintf(stderr, "shoal: the I/O backend (%s) cannot wait for events; the runtime cannot go on\n",
                 backend_->name());
  }
  std::abort();
}

bool Driver::poll_io_now() noexcept {
  if (!io_waits() && io_released_.empty()) return false;
  if (!try_lock_driver()) return false;
  reclaim_io();
  io::Event events[64];
  const std::size_t n = backend_wait(std::chrono::nanoseconds(0), events);
  dispatch_io(events, n);  // under the driver: no source in `events` can be reclaimed meanwhile
  unlock_driver();
  return n != 0;
}

// ---- the reactor's half -------------------------------------------------

void Driver::io_add(IoSource* s) {
  if (s->process) {
    backend_->add_process(s->fd, s);
  } else {
    backend_->add(s->fd, io::readable | io::writable, s);
  }
  io_core_->live.fetch_add(1, std::memory_order_relaxed);
}

void Driver::io_rearm(int fd, std::uint32_t interest, const IoSource* token) noexcept {
  try {
    // `token` may be freed (or reused) by now: the backend only compares it.
    backend_->rearm(fd, interest, const_cast<IoSource*>(token));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shoal: I/O backend rearm failed: %s\n", e.what());
  }
}

void Driver::io_release(IoSource* s) noexcept {
  if (s->process) {
    backend_->remove_process(s->fd);
  } else {
    backend_->remove(s->fd);
  }
  (void)io_released_.push(s);
  io_core_->live.fetch_sub(1, std::memory_order_relaxed);
}

void Driver::reclaim_io() noexcept {
  if (io_released_.empty()) return;
  IoSource* s = io_released_.take_all();
  while (s != nullptr) {
    IoSource* next = s->next_release;
    s->~IoSource();
    frame_deallocate(s, sizeof(IoSource));
    s = next;
  }
}

void Driver::dispatch_io(io::Event* events, std::size_t n) noexcept {
  io_events_.store(io_events_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);  // lock holder only
  TaskBatch batch;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if ((events[i].ready & io::completed) != 0) {
      batch.push(static_cast<CompletionOp*>(events[i].token)->finish());
    } else {
      events[kept++] = events[i];
    }
  }
  if (kept != n) ops_in_flight_.fetch_sub(n - kept, std::memory_order_relaxed);
  io_dispatch(events, kept, batch);
  schedule_batch(&sched_, batch);
}

// ---- timers and the clock ------------------------------------------------

TimerInsert Driver::add_timer(TimerEntry* e, const TaskRecord* unless) noexcept {
  // Once queued, `e` may fire or be cancelled at once and its owner's frame
  // resume and move on: never touch it after insert.
  const std::int64_t deadline = e->deadline;
  const TimerInsert r = timers_.insert(e, unless);
  if (r != TimerInsert::queued) return r;
  const std::int64_t sleeping_until = sleep_until_.load(std::memory_order_seq_cst);
  if (sleeping_until != -1 && deadline < sleeping_until) wake_driver();
  return r;
}

bool Driver::fire_timers() noexcept {
  if (timers_.next_deadline() == TimerQueue::kNever) return false;
  const std::size_t fired = timers_.fire_due(now_ns());
  if (fired == 0) return false;
  timers_fired_.fetch_add(fired, std::memory_order_relaxed);
  return true;
}

bool Driver::advance_manual_clock() noexcept {
  // The wheels may answer with the start of a deadline's tick first; firing
  // at that time finds the exact deadline, and the next round jumps there.
  for (;;) {
    const std::int64_t next = timers_.next_deadline();
    if (next == TimerQueue::kNever) return false;
    if (next > manual_now_.load(std::memory_order_relaxed)) manual_now_.store(next, std::memory_order_release);
    if (fire_timers()) return true;
  }
}

}  // namespace shoal::detail
