// Scope bookkeeping that sits on the cancellation tree: finishing a spawned
// task and leaving a scope. The tree and the wait protocol are in
// cancel_protocol.cpp.
//
// Faults. The first fault is latched (faulted_, an atomic exchange) by
// whichever task_done or body exit gets there first, on any worker; every
// other fault is reported to on_suppressed_fault exactly once. A later fault
// of a start() child is not reported when the child finishes: its handle may
// still deliver it, and then it is the awaiter's (rethrown, it comes back
// through fault() as an ordinary later fault; handled, it is gone). task_done
// marks such a child kFaultDeferred before the join exchange publishes
// kJoinDone; only leave() reads the mark, after the join (live_ acq_rel), for
// the children whose result was never delivered (still on retained_).
#include <cstddef>
#include <type_traits>

#include "shoal/detail/task_record.hpp"
#include "shoal/scope/scope.hpp"
#include "src/runtime/scheduler.hpp"

namespace shoal {

std::coroutine_handle<> Scope::task_done(detail::TaskRecord& f, detail::PromiseBase& p,
                                          std::coroutine_handle<> frame) noexcept {
  if (child_ended(f, p.error_) == End::fault) {
    if ((f.flags & detail::TaskRecord::kRetained) == 0) {
      fault(p.error_);
    } else if (!latch_first_fault(p.error_) && !faults_.is_first(p.error_)) {
      f.flags |= detail::TaskRecord::kFaultDeferred;  // the handle may deliver it yet
    }
  }
  detail::TaskRecord* body = body_;
  if ((f.flags & detail::TaskRecord::kRetained) != 0) {
    f.resume = frame;  // the frame to free if the result is never delivered
    node_.lock.lock();
    retained_.push_front(&f);
    node_.lock.unlock();
    std::uintptr_t w = f.join.exchange(detail::TaskRecord::kJoinDone, std::memory_order_acq_rel);
    if (w > detail::TaskRecord::kJoinCancelPending) {
      auto* jw = reinterpret_cast<detail::JoinWaiter*>(w);
      detail::TaskRecord* waiter = jw->waiter;
      detail::disarm_wait(waiter, jw);
      detail::schedule(waiter);
    }
  } else {
    frame.destroy();
  }
  // Last touch of *this unless we wake the body, which cannot leave before.
  if (live_.fetch_sub(2, std::memory_order_acq_rel) == 3) detail::schedule(body);
  return std::noop_coroutine();
}

void Scope::release_retained(detail::TaskRecord& f, std::coroutine_handle<> frame) noexcept {
  node_.lock.lock();
  retained_.remove(&f);
  node_.lock.unlock();
  frame.destroy();
}

void Scope::leave() noexcept {
  leave_node();
  while (detail::TaskRecord* f = retained_.pop_front()) {
    if ((f->flags & detail::TaskRecord::kFaultDeferred) != 0) faults_.report_later(node_.sched, f->root->error_);
    f->resume.destroy();
  }
}

}  // namespace shoal
