// IoOp (shoal/detail/io_op.hpp): the one readiness loop every I/O
// operation runs. It tries the syscall while the source's cached readiness
// says it may succeed; on EAGAIN it waits on the source (the reactor,
// reactor.cpp), under an idle limit's timer if one is set, and a woken op
// retries on the task's worker before its coroutine resumes.
#include <algorithm>
#include <cstdint>
#include <new>

#include "shoal/detail/frame_alloc.hpp"
#include "shoal/detail/io_op.hpp"
#include "src/runtime/driver/io/io_source.hpp"
#include "src/runtime/scheduler.hpp"

namespace shoal::detail {

namespace {
std::uint32_t clamp_ms(std::chrono::milliseconds limit) noexcept {
  if (limit.count() <= 0) return 0;
  return static_cast<std::uint32_t>(std::min<std::int64_t>(limit.count(), UINT32_MAX));
}
}  // namespace

const char* IoWaiter::wait_kind() const noexcept {
  switch (interest) {
    case io::readable:
      return "I/O: readable";
    case io::writable:
      return "I/O: writable";
    default:
      return "I/O: readable or writable";
  }
}

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
    const std::uint32_t seen = s->state.load(std::memory_order_relaxed);
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
  if (io_wait_suspend(w_, f, stand_in_.handle())) return true;
  // It did not suspend (ready after all, cancelled, or expired): as after a
  // wake (on_wake), the limit's timer must have stopped before `expired` is
  // read, and be out of the wheel before a next wait queues it again.
  if (idle_ != nullptr) timer_cancel_and_wait(idle_->sched, idle_);
  return false;
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
  // The woken task waits for this store before the entry goes away;
  // release: `expired` and our reads of the waiter happen before it reads
  // or frees them (timer.hpp; tests/relacy/io_source_relacy_test.cpp).
  e->state.store(TimerEntry::done, std::memory_order_release);
}

}  // namespace shoal::detail
