// Task-set admission, child completion and the set's result.
//
// One word, state_, holds the live-children count and the body's wait:
// only the body takes slots, and it is the only task that can wait on the
// set, so "a slot is free" stays true once seen and a single waiter bit is
// enough. The body's wait is a WordWaiter's (detail/task_record.hpp):
// whoever clears kAdmitWait or kIdleWait (a finishing child, close(), or a
// canceller through cancel_wait) owns the body's wake.
//
// Orderings (checked under Relacy: tests/relacy/task_set_relacy_test.cpp):
// - A child's end (task_done's CAS) releases what the child did (its
//   result, cut_off_, its fault) to the body that sees the count drop: the
//   join's CAS, idle_or_wait's and live()'s loads acquire. It acquires what
//   the body wrote before it set its wait bit with a release CAS: the
//   waker reads admit_hook_, and the scheduler the body's resume point.
// - close()'s CAS is acq_rel for the same two reasons: what the closer
//   wrote before close() is visible to a body refused as closed (every
//   read that refuses for kClosed acquires, try_admit's too), and the
//   closer reads admit_hook_ when it takes the body's wake.
// - The join's CAS that sets kJoinWait releases body_->resume to the last
//   child; the one that finds no child live acquires their ends (the load
//   before it need not: the CAS reads the same or a later value).
// - A slot carries no data: try_admit's CAS only acquires (a refusal must)
//   and release_slot is relaxed. close()'s and the join's first
//   loads are relaxed: the CAS that follows reads the same or a later
//   value, and it acquires.
#include "shoal/scope/task_set.hpp"

#include <new>

#include "src/scope/word_wait.hpp"

namespace shoal {

TaskSet::TaskSet(detail::TaskRecord* body, std::pmr::memory_resource* resource, std::size_t limit) noexcept
    : ChildGroup(body), resource_(resource), serialized_(resource), limit_(limit == 0 ? 1 : limit) {}

void TaskSet::check_spawner(detail::TaskRecord* f) const {
  if (f == nullptr) throw std::logic_error("shoal::TaskSet::spawn: called outside a shoal task");
  if (f != body_) {
    throw std::logic_error(
        "shoal::TaskSet::spawn: called from a task other than the set's body; only the body (and the functions "
        "it awaits) may spawn into a set, children must not capture the TaskSet handle");
  }
}

bool TaskSet::try_admit() noexcept {
  // acquire, on the load and a failed CAS: a refusal for kClosed is ordered
  // after the close() that set it, as closed() and register_wait's are. A
  // slot carries no data, so the admission needs no release (its acquire
  // stays: a failure order may not be stronger than the success order in
  // C++11, which Relacy follows).
  std::uint64_t v = state_.load(std::memory_order_acquire);
  for (;;) {
    if ((v & kClosed) != 0 || (v >> kCountShift) >= limit_) return false;
    if (state_.compare_exchange_weak(v, v + kOne, std::memory_order_acquire)) return true;
  }
}

void TaskSet::release_slot() noexcept {
  // The body holds the slot, so nobody waits on the set (the join starts
  // only after the body returned): a plain decrement, relaxed (a slot
  // carries no data).
  state_.fetch_sub(kOne, std::memory_order_relaxed);
}

TaskSet::Outcome TaskSet::admit_or_wait(detail::TaskRecord* f, detail::WordWaiter* hook,
                                        std::coroutine_handle<> h) noexcept {
  if (f != body_) return Outcome::misuse;
  if (f->cancelled()) return Outcome::cancelled;
  if (try_admit()) return Outcome::admitted;
  if (closed()) return Outcome::closed;
  return register_wait(f, hook, h, false);
}

TaskSet::Outcome TaskSet::idle_or_wait(detail::TaskRecord* f, detail::WordWaiter* hook,
                                       std::coroutine_handle<> h) noexcept {
  if (f != body_) return Outcome::misuse;
  if (f->cancelled()) return Outcome::cancelled;
  if ((state_.load(std::memory_order_acquire) >> kCountShift) == 0) return Outcome::admitted;
  return register_wait(f, hook, h, true);
}

// The body's wait for a free slot (kAdmitWait) or for no live child
// (kIdleWait, `idle`). `admitted` means the condition held after all (for
// kAdmitWait the slot is then taken).
TaskSet::Outcome TaskSet::register_wait(detail::TaskRecord* f, detail::WordWaiter* hook, std::coroutine_handle<> h,
                                        bool idle) noexcept {
  f->resume = h;
  admit_hook_ = hook;
  Outcome done = Outcome::admitted;
  const auto r = hook->register_wait(state_, f, [&](std::uint64_t& v) noexcept {
    if (idle) return (v >> kCountShift) == 0 ? 1 : 0;
    if ((v & kClosed) != 0) {
      done = Outcome::closed;
      return 1;
    }
    if ((v >> kCountShift) >= limit_) return 0;
    return state_.compare_exchange_weak(v, v + kOne, std::memory_order_acq_rel) ? 1 : -1;
  });
  switch (r) {
    case detail::WordWaiter::Registered::waiting:
      return Outcome::waiting;  // nothing may touch the awaiter from here on
    case detail::WordWaiter::Registered::cancelled:
      return Outcome::cancelled;
    case detail::WordWaiter::Registered::not_needed:
      break;
  }
  return done;
}

void TaskSet::close() noexcept {
  std::uint64_t v = state_.load(std::memory_order_relaxed);  // the CAS acquires
  for (;;) {
    if ((v & kClosed) != 0) return;
    if (state_.compare_exchange_weak(v, (v | kClosed) & ~kAdmitWait, std::memory_order_acq_rel)) break;
  }
  if ((v & kAdmitWait) != 0) {  // we own the waiting body's wake
    detail::disarm_wait(body_, admit_hook_);
    detail::schedule(body_);
  }
}

void TaskSet::launch(detail::PromiseBase& p, std::coroutine_handle<> h, bool local) noexcept {
  ChildGroup::launch(*p.record_, h, 0, local);  // a RootFrame's, or root_record's
}

SpawnStatus TaskSet::start_failed(std::exception_ptr e) noexcept {
  release_slot();
  bool oom = false;
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    oom = true;
  } catch (...) {
  }
  if (oom) {
    out_of_memory_ = true;
    return SpawnStatus::out_of_memory;
  }
  // The factory itself threw: that is the child's fault (it never ran).
  child_fault(std::move(e));
  return SpawnStatus::started;
}

// A child's fault does not cancel its siblings: the first is kept, later
// ones are reported.
void TaskSet::child_fault(std::exception_ptr e) noexcept {
  if (!faults_.latch(e)) faults_.report_later(node_.sched, e);
}

std::coroutine_handle<> TaskSet::task_done(detail::TaskRecord& f, detail::PromiseBase& p,
                                            std::coroutine_handle<> frame) noexcept {
  if (child_ended(f, p.error_) == End::fault) child_fault(p.error_);
  frame.destroy();  // reaped at once: memory does not grow with children ever started
  detail::TaskRecord* body = body_;
  std::uint64_t v = state_.load(std::memory_order_relaxed);
  std::uint64_t next;
  bool wake_admit, wake_idle, wake_join;
  do {
    next = v - kOne;
    const bool empty = (next >> kCountShift) == 0;
    wake_admit = (v & kAdmitWait) != 0;
    wake_idle = (v & kIdleWait) != 0 && empty;
    wake_join = (v & kJoinWait) != 0 && empty;
    if (wake_admit) next &= ~kAdmitWait;
    if (wake_idle) next &= ~kIdleWait;
    if (wake_join) next &= ~kJoinWait;
  } while (!state_.compare_exchange_weak(v, next, std::memory_order_acq_rel, std::memory_order_relaxed));
  // Last touch of *this unless we wake the body, which cannot leave before.
  if (wake_admit || wake_idle) detail::disarm_wait(body, admit_hook_);
  if (wake_admit || wake_idle || wake_join) detail::schedule(body);
  return std::noop_coroutine();
}

bool TaskSet::JoinAwaiter::await_suspend(std::coroutine_handle<> h) noexcept {
  s->body_->resume = h;
  std::uint64_t v = s->state_.load(std::memory_order_relaxed);  // the CAS acquires
  for (;;) {
    if ((v >> kCountShift) == 0) {
      if (s->state_.compare_exchange_weak(v, v | kClosed, std::memory_order_acq_rel)) return false;
    } else if (s->state_.compare_exchange_weak(v, v | kClosed | kJoinWait, std::memory_order_acq_rel)) {
      return true;
    }
  }
}

void TaskSet::leave() noexcept { leave_node(); }

void TaskSet::finish(std::exception_ptr body_error) {
  const bool body_cancelled = body_error && detail::is_cancelled_exception(body_error);
  if (body_error && !body_cancelled) {
    // The body's fault wins; a child fault it displaced is reported, not lost.
    if (faults_.first()) faults_.report_later(node_.sched, faults_.first());
    std::rethrow_exception(body_error);
  }
  if (faults_.first()) std::rethrow_exception(faults_.first());
  const bool absorbed = node_.self_cancelled.load(std::memory_order_acquire);
  // A cancellation from outside surfaces as Cancelled (an enclosing
  // with_timeout turns it into TimedOut), whether it reached the body or
  // only cut a child off.
  if (!absorbed && (body_cancelled || cut_off_.load(std::memory_order_relaxed))) std::rethrow_exception(
      body_cancelled ? body_error : std::make_exception_ptr(Cancelled{}));
  if (out_of_memory_) throw std::bad_alloc();
}

}  // namespace shoal
