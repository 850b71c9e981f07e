// The wait queue's out-of-line parts (shoal/detail/wait_queue.hpp): the
// cancel paths and the plain thread's wait, none of them on a wake's path.
#include "shoal/detail/wait_queue.hpp"

namespace shoal::detail {

bool Waiter::cancel_wait() noexcept {
  lock_->lock();
  const bool mine = is_linked();
  if (mine) {
    WaitList::unlink(this);
    cancelled = true;
    left_locked();
  }
  lock_->unlock();
  after_cancel(mine);
  return mine;
}

bool SelectClaim::cancel_wait() noexcept {
  std::uint32_t v = word_.load(std::memory_order_relaxed);
  while ((v & kStateMask) == kOpen) {
    if (word_.compare_exchange_weak(v, kCancelled | (v & kParked), std::memory_order_relaxed)) {
      return (v & kParked) != 0;
    }
  }
  return false;
}

MultiSection::MultiSection(SpinLock* const* locks, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {  // insertion sort, without duplicates: n is small
    SpinLock* l = locks[i];
    std::size_t j = n_;
    while (j > 0 && locks_[j - 1] > l) --j;
    if (j > 0 && locks_[j - 1] == l) continue;
    for (std::size_t k = n_; k > j; --k) locks_[k] = locks_[k - 1];
    locks_[j] = l;
    ++n_;
  }
  for (std::size_t i = 0; i < n_; ++i) locks_[i]->lock();
}

bool block_until_level(SpinLock& lock, WaitList& list, bool (*ready_locked)(void* ctx), void* ctx, const char* what,
                       bool timed, std::chrono::steady_clock::time_point deadline) {
  if (on_worker_thread()) {
    throw std::logic_error(std::string(what) + ": called on a runtime worker (it would block the worker; use co_await)");
  }
  struct ThreadWaiter final : Waiter {
    using Waiter::Waiter;
  } w(lock);
  ThreadWake wake;
  if (wait_step_thread(w, wake, lock, list, [&](WaitSection&) { return ready_locked(ctx); }) == WaitStep::done) {
    return true;
  }
  if (timed && !wake.wait_until(deadline)) {
    {
      WaitSection sec(lock);
      if (w.is_linked()) {  // still queued: nobody claimed it, so it leaves with nothing
        w.unlink_locked();
        return false;
      }
    }
    // Claimed as the deadline passed: the wake-up is ours. The waker still
    // has to notify (after its unlock): wait for that before `wake` goes.
  }
  wake.wait();
  return true;
}

}  // namespace shoal::detail
