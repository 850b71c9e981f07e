// The permit queue behind Mutex, RwLock and Semaphore (see
// include/shoal/detail/permits.hpp for the protocol).
#include "shoal/detail/permits.hpp"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "shoal/detail/once_core.hpp"
#include "shoal/detail/sync_ops.hpp"
#include "shoal/detail/thread_wake.hpp"

namespace shoal::detail {

PermitCore::PermitCore(std::uint32_t permits, std::string what)
    : state_(permits), permits_(permits), what_(std::move(what)) {}

PermitCore::~PermitCore() {
  std::uint64_t s = state_.load(std::memory_order_acquire);
  if ((s & kCountMask) != permits_ || head_ != nullptr) {
    std::fprintf(stderr, "shoal: %s destroyed while %s; a lock must outlive every with_* call on it\n",
                 what_.c_str(), head_ != nullptr ? "tasks or threads wait for it" : "held");
    std::abort();
  }
}

std::int64_t PermitCore::coarse_now() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool PermitCore::spin_acquire(std::uint32_t n) noexcept {
  for (int i = 0; i < kSpins; ++i) {
    shim::spin_pause();
    const std::uint64_t s = state_.load(std::memory_order_relaxed);
    if ((s & (kFair | kWaiters)) != 0) return false;
    if ((s & kCountMask) >= n && try_acquire(n)) return true;
  }
  return false;
}

bool PermitCore::take_or_mark_locked(std::uint32_t n) noexcept {
  state_.fetch_or(kWaiters, std::memory_order_acq_rel);
  if (try_acquire(n)) {
    clear_if_empty_locked();
    return true;
  }
  return false;
}

void PermitCore::clear_if_empty_locked() noexcept {
  if (head_ == nullptr) state_.fetch_and(~(kWaiters | kFair), std::memory_order_acq_rel);
}

void PermitCore::link_locked(PermitWaiter* w, bool at_head) noexcept {
  w->state = PermitWaiter::State::queued;
  if (at_head) {
    w->prev = nullptr;
    w->next = head_;
    if (head_ != nullptr) head_->prev = w;
    head_ = w;
    if (tail_ == nullptr) tail_ = w;
  } else {
    w->next = nullptr;
    w->prev = tail_;
    if (tail_ != nullptr) tail_->next = w;
    tail_ = w;
    if (head_ == nullptr) head_ = w;
  }
}

void PermitCore::unlink_locked(PermitWaiter* w) noexcept {
  if (w->prev != nullptr) {
    w->prev->next = w->next;
  } else {
    head_ = w->next;
  }
  if (w->next != nullptr) {
    w->next->prev = w->prev;
  } else {
    tail_ = w->prev;
  }
  w->prev = w->next = nullptr;
}

PermitWaiter* PermitCore::dispatch_locked() noexcept {
  PermitWaiter* woken = nullptr;
  if (head_ == nullptr) {
    clear_if_empty_locked();
    return nullptr;
  }
  const std::int64_t now = coarse_now();
  // Woken (not granted) waiters retry by barging: wake as many as the free
  // permits could serve (one for a mutex, a run of readers for a RwLock),
  // else readers queued behind one woken reader would sleep beside a lock
  // that has room for them.
  std::uint64_t wake_room = state_.load(std::memory_order_acquire) & kCountMask;
  while (head_ != nullptr) {
    std::uint64_t s = state_.load(std::memory_order_acquire);
    const bool fair = (s & kFair) != 0 || now - head_->since > kFairAfterNs;
    PermitWaiter* w = head_;
    if (fair) {
      // Barging off: permits go to the queue in order. Once kFair is set no
      // fast path can take any, so the subtraction below cannot race.
      if ((s & kFair) == 0) s = state_.fetch_or(kFair, std::memory_order_acq_rel) | kFair;
      if ((s & kCountMask) < w->n) break;
      state_.fetch_sub(w->n, std::memory_order_acq_rel);
      unlink_locked(w);
      w->state = PermitWaiter::State::granted;
    } else {
      if (wake_room < w->n) break;
      wake_room -= w->n;
      unlink_locked(w);
      w->state = PermitWaiter::State::woken;  // to retry: it may lose to a barger
    }
    if (w->fiber == nullptr) {
      w->cv->notify_one();  // a thread: it re-checks its state under the lock
    } else {
      w->next = woken;
      woken = w;
    }
  }
  if (head_ == nullptr) {
    clear_if_empty_locked();
  } else if (now - head_->since <= kFairAfterNs && (state_.load(std::memory_order_relaxed) & kFair) != 0) {
    state_.fetch_and(~kFair, std::memory_order_acq_rel);  // the old ones are served: barging again
  }
  return woken;
}

void PermitCore::wake(PermitWaiter* list) noexcept {
  while (list != nullptr) {
    PermitWaiter* w = list;
    list = w->next;  // before the fiber runs and its frame (holding w) goes
    Fiber* f = w->fiber;
    disarm_wait(f, w->hook);
    schedule(f);
  }
}

void PermitCore::kick() noexcept {
  PermitWaiter* woken;
  {
    std::lock_guard<SpinLock> g(mu_);
    woken = dispatch_locked();
  }
  wake(woken);
}

bool PermitCore::Awaiter::suspend(Fiber* f, std::coroutine_handle<> h) {
  if (f == nullptr) throw std::logic_error("shoal: " + core_.what_ + " awaited outside a shoal task");
  if (f->cancelled()) {
    cancelled_ = true;
    return false;
  }
  w_.fiber = f;
  w_.hook = this;
  if (consume_budget(f)) {
    // Out of budget: a schedule point even uncontended, taken before the
    // permits (yielding while holding them would stall the others).
    f->resume = h;
    schedule_yield(f);
    return true;  // resumes idle: the caller tries again
  }
  if (core_.try_acquire(w_.n) || core_.spin_acquire(w_.n)) {
    w_.state = PermitWaiter::State::granted;
    return false;
  }
  if (since_ == 0) since_ = coarse_now();
  w_.since = since_;
  f->resume = h;
  publish_hook(f, this);
  {
    std::lock_guard<SpinLock> g(core_.mu_);
    if (core_.take_or_mark_locked(w_.n)) {
      w_.state = PermitWaiter::State::granted;
    } else if (f->cancelled()) {
      cancelled_ = true;
      core_.clear_if_empty_locked();
    } else {
      const bool at_head = woken_;  // lost to a barger: keep its place
      woken_ = false;  // queued again, the wake-up is paid back: a release will wake it
      core_.link_locked(&w_, at_head);
      return true;  // nothing may touch *this from here on
    }
  }
  disarm_wait(f, this);  // outside the lock cancel_wait takes
  return false;
}

bool PermitCore::Awaiter::cancel_wait() noexcept {
  std::lock_guard<SpinLock> g(core_.mu_);
  if (w_.state != PermitWaiter::State::queued) return false;  // not in the queue (yet, or any more)
  core_.unlink_locked(&w_);
  w_.state = PermitWaiter::State::left;
  core_.clear_if_empty_locked();
  cancelled_ = true;
  left_queue_ = true;
  return true;
}

bool PermitCore::Awaiter::resume() {
  if (w_.state == PermitWaiter::State::woken) woken_ = true;
  if (cancelled_) {
    // It may have been the head a release was waiting on (a writer ahead of
    // readers), or hold a wake-up meant for it: whoever is next must not be
    // left asleep.
    if (left_queue_ || woken_) core_.kick();
    throw Cancelled{};
  }
  const bool granted = w_.state == PermitWaiter::State::granted;
  if (w_.fiber->cancelled()) {
    // Cancelled as it was granted (or woken): hand on before throwing.
    if (granted) {
      core_.release(w_.n);
    } else if (woken_) {
      core_.kick();
    }
    throw Cancelled{};
  }
  if (granted) woken_ = false;
  return granted;
}

bool PermitCore::acquire_blocking(std::uint32_t n, const std::chrono::steady_clock::time_point* deadline) {
  if (try_acquire(n)) return true;
  std::condition_variable_any cv;
  PermitWaiter w;
  w.n = n;
  w.since = coarse_now();
  w.cv = &cv;
  std::unique_lock<SpinLock> lk(mu_);
  bool retry = false;
  for (;;) {
    if (take_or_mark_locked(n)) return true;
    link_locked(&w, retry);
    while (w.state == PermitWaiter::State::queued) {
      if (deadline == nullptr) {
        cv.wait(lk);
      } else if (cv.wait_until(lk, *deadline) == std::cv_status::timeout &&
                 w.state == PermitWaiter::State::queued) {
        unlink_locked(&w);
        PermitWaiter* woken = dispatch_locked();
        lk.unlock();
        wake(woken);
        return false;
      }
    }
    if (w.state == PermitWaiter::State::granted) return true;
    retry = true;  // woken: try again, from the head
  }
}

void require_blocking_allowed(const char* call) {
  if (on_worker_thread()) {
    throw std::logic_error(std::string("shoal::blocking::") + call +
                           " called on a runtime worker, where it would block every task on that worker; "
                           "co_await the task form instead (or run it inside spawn_blocking)");
  }
}

}  // namespace shoal::detail

namespace shoal::detail {

std::uintptr_t thread_holder_id() noexcept {
  static thread_local char marker;
  return reinterpret_cast<std::uintptr_t>(&marker) | 1;  // never a Fiber* (aligned)
}

void throw_self_deadlock(const PermitCore& core, const char* call) {
  throw SyncError(SyncError::Code::self_deadlock,
                  "shoal::" + std::string(call) + ": " + core.what() +
                      " is already held by this task (or thread); waiting for it would never end");
}

Task<void> acquire_permits(PermitCore& core, std::uint32_t n) {
  std::int64_t since = 0;
  bool woken = false;
  for (;;) {
    PermitCore::Awaiter a(core, n, since, woken);
    if (co_await a) co_return;
  }
}

}  // namespace shoal::detail

namespace shoal {

std::string sync_object_name(const char* kind, const std::string& name, std::uintptr_t self) {
  if (!name.empty()) return std::string("shoal::") + kind + " \"" + name + "\"";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", reinterpret_cast<const void*>(self));
  return std::string("shoal::") + kind + " at " + buf;
}

}  // namespace shoal

// ---- Once -----------------------------------------------------------------

namespace shoal::detail {

OnceCore::~OnceCore() {
  if (head_ != nullptr || thread_waiters_ != 0) {
    std::fprintf(stderr, "shoal: %s destroyed while tasks or threads wait for it\n", what_.c_str());
    std::abort();
  }
}

void OnceCore::throw_failed() const {
  throw SyncError(SyncError::Code::init_failed,
                  "shoal::once_do: the init of " + what_ + " threw (its caller got that exception); it runs once only");
}

void OnceCore::finish(State to) noexcept {
  Awaiter* woken;
  {
    std::lock_guard<std::mutex> g(mu_);
    state_.store(to, std::memory_order_release);
    woken = head_;
    for (Awaiter* w = head_; w != nullptr; w = w->next_) w->linked_ = false;
    head_ = nullptr;
    if (thread_waiters_ != 0) cv_.notify_all();
  }
  while (woken != nullptr) {
    Awaiter* w = woken;
    woken = w->next_;
    Fiber* f = w->f_;
    disarm_wait(f, w);
    schedule(f);  // w may be gone from here on
  }
}

bool OnceCore::Awaiter::suspend(Fiber* f, std::coroutine_handle<> h) noexcept {
  f_ = f;
  if (f == nullptr) return false;  // outside a task: the caller loops (only via misuse)
  if (f->cancelled()) {
    cancelled_ = true;
    return false;
  }
  f->resume = h;
  publish_hook(f, this);
  {
    std::lock_guard<std::mutex> g(core_.mu_);
    if (core_.state() == running && !f->cancelled()) {
      linked_ = true;
      prev_ = nullptr;
      next_ = core_.head_;
      if (core_.head_ != nullptr) core_.head_->prev_ = this;
      core_.head_ = this;
      return true;
    }
    cancelled_ = core_.state() == running;
  }
  disarm_wait(f, this);
  return false;
}

bool OnceCore::Awaiter::cancel_wait() noexcept {
  std::lock_guard<std::mutex> g(core_.mu_);
  if (!linked_) return false;
  linked_ = false;
  if (prev_ != nullptr) {
    prev_->next_ = next_;
  } else {
    core_.head_ = next_;
  }
  if (next_ != nullptr) next_->prev_ = prev_;
  cancelled_ = true;
  return true;
}

void OnceCore::wait_blocking() {
  std::unique_lock<std::mutex> lk(mu_);
  ++thread_waiters_;
  cv_.wait(lk, [&] { return state() != running; });
  --thread_waiters_;
}

}  // namespace shoal::detail
