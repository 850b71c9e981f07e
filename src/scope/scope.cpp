// Scope bookkeeping that sits on the cancellation tree: finishing a spawned
// task and leaving a scope. The tree and the wait protocol are in
// cancel_protocol.cpp.
//
// Faults. The first fault is latched (faulted_, an atomic exchange) by
// whichever task_done or body exit gets there first, on any worker; every
// other fault is reported to on_suppressed_fault exactly once. A later fault
// of a start() child is not reported when the child finishes: its handle may
// still deliver it, and then it is the awaiter's (rethrown, it comes back
// through fault() as an ordinary later fault; handled, it is gone). Such a
// child's cell goes on the scope's list (under the node lock) before the join
// exchange publishes kDone; the handle takes it off when it delivers or goes
// (reporting it then), and leave() reports whatever is still listed.
//
// A start()ed child's finish touches no lock unless it faulted late or a
// JoinHandle::cancel() marked it: the result moves to the cell, the frame
// and record go, and one exchange on the join word hands the cell over.
#include <cstddef>
#include <type_traits>

#include "shoal/detail/task_record.hpp"
#include "shoal/scope/scope.hpp"
#include "src/scope/join_word.hpp"

namespace shoal {

std::coroutine_handle<> Scope::task_done(detail::TaskRecord& f, detail::PromiseBase& p,
                                          std::coroutine_handle<> frame) noexcept {
  const bool faulted = child_ended(f, p.error_) == End::fault;
  detail::TaskRecord* body = body_;
  if ((f.flags & detail::TaskRecord::kStarted) != 0) {
    finish_started(f, p, frame, faulted);
  } else {
    if (faulted) fault(p.error_);
    frame.destroy();
  }
  // Last touch of *this unless we wake the body, which cannot leave before.
  if (live_.fetch_sub(2, std::memory_order_acq_rel) == 3) detail::schedule(body);
  return std::noop_coroutine();
}

void Scope::finish_started(detail::TaskRecord& f, detail::PromiseBase& p, std::coroutine_handle<> frame,
                           bool faulted) noexcept {
  using detail::JoinCell;
  JoinCell* c = f.cell;
  const bool has_value = (f.flags & detail::TaskRecord::kCellValue) != 0;
  // A later fault waits for its handle; the first cancels the scope now.
  const bool deferred = faulted && !latch_first_fault(p.error_) && !faults_.is_first(p.error_);
  c->error = std::move(p.error_);
  // A JoinHandle::cancel() that marked the record uses it under the node
  // lock: wait it out before the record goes with the frame.
  if ((c->record.exchange(0, std::memory_order_seq_cst) & 1) != 0) {
    node_.lock.lock();
    node_.lock.unlock();
  }
  frame.destroy();  // the child's arguments and locals, and its record (f) with them
  if (deferred) {
    node_.lock.lock();
    c->next = faulted_ != nullptr ? faulted_ : c;
    faulted_ = c;
    node_.lock.unlock();
  }
  if (detail::finish_join(*c)) {  // the handle went first: nobody will take it
    if (deferred) report_undelivered(*c);
    if (has_value) {
      static_cast<detail::JoinCellValue*>(c)->drop(c);
    } else {
      detail::free_join_cell(static_cast<detail::JoinCellOf<void>*>(c));
    }
  }
}

bool Scope::unlist(detail::JoinCell& c) noexcept {
  node_.lock.lock();
  const bool listed = c.next != nullptr;
  if (listed) {
    detail::JoinCell* prev = nullptr;
    for (detail::JoinCell* x = faulted_; x != &c; x = x->next) prev = x;  // short: late faults nobody took yet
    detail::JoinCell* after = c.next != &c ? c.next : nullptr;  // the last cell points to itself
    if (prev == nullptr) {
      faulted_ = after;
    } else {
      prev->next = after != nullptr ? after : prev;
    }
    c.next = nullptr;
  }
  node_.lock.unlock();
  return listed;
}

void Scope::report_undelivered(detail::JoinCell& c) noexcept {
  if (unlist(c)) faults_.report_later(node_.sched, c.error);
}

void Scope::leave() noexcept {
  leave_node();
  // After the join: no child runs, and the body is the only task left that
  // could hold a handle, so no lock.
  for (detail::JoinCell* c = faulted_; c != nullptr;) {
    detail::JoinCell* next = c->next != c ? c->next : nullptr;
    faults_.report_later(node_.sched, c->error);
    c->error = nullptr;  // its handle, if it lives on, holds nothing
    c->next = nullptr;
    c = next;
  }
  faulted_ = nullptr;
}

}  // namespace shoal
