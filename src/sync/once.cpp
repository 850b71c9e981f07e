// Once's core: the state word and its waiters (tasks and threads), on the
// one wait queue. The value and the init protocol are in sync/once.hpp.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "shoal/sync/detail/once_core.hpp"
#include "shoal/sync/sync_error.hpp"

namespace shoal::detail {

OnceCore::~OnceCore() {
  if (!waiters_.empty()) {
    std::fprintf(stderr, "shoal: %s destroyed while tasks or threads wait for it\n", what_.c_str());
    std::abort();
  }
}

void OnceCore::throw_failed() const {
  throw SyncError(SyncError::Code::init_failed,
                  "shoal::once_do: the init of " + what_ + " threw (its caller got that exception); it runs once only");
}

void OnceCore::finish(State to) noexcept {
  WaitSection sec(lock_);
  state_.store(to, std::memory_order_release);
  while (Waiter* w = waiters_.pop_front()) sec.wake(w);
}

bool OnceCore::Awaiter::suspend(TaskRecord* f, std::coroutine_handle<> h) noexcept {
  if (f == nullptr) return false;  // outside a task: the caller loops (only via misuse)
  if (f->cancelled()) {
    cancelled = true;
    return false;
  }
  const WaitStep step = wait_step(*this, f, h, core_.lock_, core_.waiters_,
                                  [this](WaitSection&) { return core_.state() != running; });
  if (step == WaitStep::suspended) return true;  // nothing may touch *this from here on
  cancelled = step == WaitStep::cancelled;
  return false;
}

void OnceCore::wait_blocking() noexcept {
  struct ThreadWaiter final : Waiter {
    using Waiter::Waiter;
  } w(lock_);
  ThreadWake wake;
  if (wait_step_thread(w, wake, lock_, waiters_, [this](WaitSection&) { return state() != running; }) ==
      WaitStep::suspended) {
    wake.wait();
  }
}

}  // namespace shoal::detail
