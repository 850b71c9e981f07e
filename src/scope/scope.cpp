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
#include "shoal/detail/wait_queue.hpp"
#include "shoal/scope/scope.hpp"

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
  const std::uint64_t w = c->join.exchange(JoinCell::kDone, std::memory_order_acq_rel);
  if ((w & JoinCell::kAbandoned) != 0) {  // the handle went first: nobody will take it
    if (deferred) report_undelivered(*c);
    if (has_value) {
      static_cast<detail::JoinCellValue*>(c)->drop(c);
    } else {
      detail::free_join_cell(static_cast<detail::JoinCellOf<void>*>(c));
    }
  } else if (detail::WordWaiter* jw = detail::WordWaiter::in(w)) {  // we took its mark: the wake is ours
    jw->wake_taken();
  }
}

namespace detail {

bool JoinCaseCore::link(JoinCell* c, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept {
  claim_ = &claim;
  index_ = index;
  waiter = f;
  busy_ = false;
  settled_.store(false, std::memory_order_relaxed);
  std::uint64_t v = c->join.load(std::memory_order_acquire);
  for (;;) {
    if ((v & JoinCell::kDone) != 0) return true;
    if (in(v) != nullptr) {  // an Awaiter's mark: one awaiter at a time
      busy_ = true;
      return true;
    }
    if (c->join.compare_exchange_weak(v, v | reinterpret_cast<std::uintptr_t>(static_cast<WordWaiter*>(this)),
                                      std::memory_order_acq_rel)) {
      cell_ = c;
      return false;
    }
  }
}

void JoinCaseCore::disarm_locked() noexcept {
  JoinCell* c = std::exchange(cell_, nullptr);
  if (c == nullptr) return;
  std::uint64_t v = c->join.load(std::memory_order_acquire);
  while (in(v) == this) {
    if (c->join.compare_exchange_weak(v, v & kLowBits, std::memory_order_acq_rel)) return;
  }
  // The child exchanged the mark away: it claims through this case until it settles.
  SpinWait wait;
  while (!settled_.load(std::memory_order_acquire)) wait.pause();
}

void JoinCaseCore::wake_taken() noexcept {
  SelectClaim* claim = claim_;
  TaskRecord* f = waiter;
  bool wake = false;
  const bool won = claim->try_win(index_, wake);
  // From here the select may finish and the case go; a won, parked select
  // waits for the schedule below, so the claim outlives it.
  settled_.store(true, std::memory_order_release);
  if (won && wake) {
    disarm_wait(f, claim);
    schedule(f);
  }
}

}  // namespace detail

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
