// CancelScope: the object around one run's cancel node. Lock order: the
// scope's lock before the node locks a cancel takes (cancel and the timer's
// fire both cancel under it). Nothing waits for the timer under the lock:
// leave() waits out a firing after letting go, and set_deadline only tries
// to take the entry back (a firing one is about to cancel anyway).
#include "shoal/scope/cancel_scope.hpp"

namespace shoal {

void CancelScope::enter(detail::CancelNode* node, detail::Scheduler* s) {
  lock_.lock();
  if (used_) {
    lock_.unlock();
    throw std::logic_error("shoal::CancelScope::run: a cancel scope runs once (make a new one)");
  }
  used_ = true;
  node_ = node;
  sched_ = s;
  if (cancel_called_) {
    node->cancel(true);
  } else {
    arm_locked();
  }
  lock_.unlock();
}

void CancelScope::leave() noexcept {
  lock_.lock();
  node_ = nullptr;
  const bool armed = std::exchange(armed_, false);
  lock_.unlock();
  if (armed) detail::timer_cancel_and_wait(sched_, &entry_);
}

void CancelScope::arm_locked() noexcept {
  if (deadline_ == Clock::time_point::max()) return;
  if (deadline_ <= detail::clock_now()) {
    cancel_locked();
    return;
  }
  entry_.owner = this;
  entry_.fire = &CancelScope::on_fire;
  entry_.deadline = detail::to_ns(deadline_);
  entry_.state.store(detail::TimerEntry::idle, std::memory_order_relaxed);
  detail::timer_bind(sched_, &entry_);
  (void)detail::timer_insert(sched_, &entry_);
  armed_ = true;
}

void CancelScope::cancel_locked() noexcept {
  cancel_called_ = true;
  if (node_ != nullptr) node_->cancel(true);
}

void CancelScope::on_fire(detail::TimerEntry* e) noexcept {
  CancelScope& cs = detail::OwnedTimer<CancelScope>::owner_of(e);
  cs.lock_.lock();
  if (cs.node_ != nullptr && !cs.cancel_called_) cs.cancel_locked();
  cs.lock_.unlock();
  e->state.store(detail::TimerEntry::done, std::memory_order_release);  // leave() waits for this
}

void CancelScope::cancel() noexcept {
  lock_.lock();
  if (!cancel_called_) cancel_locked();
  lock_.unlock();
}

void CancelScope::set_deadline(Clock::time_point deadline) noexcept {
  lock_.lock();
  deadline_ = deadline;
  if (node_ != nullptr && !cancel_called_) {
    // Take the old timer back; one that is firing right now cancels anyway.
    if (!armed_ || detail::timer_remove(sched_, &entry_)) {
      armed_ = false;
      arm_locked();
    }
  }
  lock_.unlock();
}

Clock::time_point CancelScope::deadline() const noexcept {
  lock_.lock();
  const Clock::time_point d = deadline_;
  lock_.unlock();
  return d;
}

bool CancelScope::cancel_called() const noexcept {
  lock_.lock();
  const bool c = cancel_called_;
  lock_.unlock();
  return c;
}

bool CancelScope::cancelled_caught() const noexcept {
  lock_.lock();
  const bool c = caught_;
  lock_.unlock();
  return c;
}

}  // namespace shoal
