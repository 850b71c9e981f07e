// The permit queue behind Mutex, RwLock and Semaphore (see
// include/shoal/sync/detail/permits.hpp for the protocol).
#include "shoal/sync/detail/permits.hpp"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "shoal/sync/detail/sync_ops.hpp"
#include "shoal/detail/thread_wake.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "src/platform/platform.hpp"

namespace shoal::detail {

PermitWaiter::PermitWaiter(PermitCore& c) noexcept : Waiter(c.mu_), core(c) {}

// A canceller took the waiter out: the queue may be empty now.
void PermitWaiter::left_locked() noexcept { core.clear_if_empty_locked(); }

PermitCore::PermitCore(std::uint32_t permits, std::string what)
    : state_(permits), permits_(permits), what_(std::move(what)) {}

PermitCore::~PermitCore() {
  std::uint64_t s = state_.load(std::memory_order_acquire);
  if ((s & kCountMask) != permits_ || !waiters_.empty()) {
    std::fprintf(stderr, "shoal: %s destroyed while %s; a lock must outlive every with_* call on it\n",
                 what_.c_str(), !waiters_.empty() ? "tasks or threads wait for it" : "held");
    std::abort();
  }
}

std::int64_t PermitCore::coarse_now() noexcept {
  timespec ts{};
  ::clock_gettime(platform::kCoarseMonotonic, &ts);
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

bool PermitCore::move_to_holder(TaskRecord* f, std::coroutine_handle<> h) noexcept {
  const std::uint8_t to = holder_worker.load(std::memory_order_relaxed);
  if (to == TaskRecord::kNoWorker || to == f->worker) return false;
  // Barging allowed (fair mode hands over in queue order instead).
  if ((state_.load(std::memory_order_relaxed) & kFair) != 0) return false;
  return migrate_from(f, h, to, /*end_at_long_poll=*/false, this);
}

// The mark and the count are one word: release()'s RMW either comes first
// in its modification order (our try_acquire below sees its permits) or
// reads the mark. Atomicity, not ordering, is what this relies on.
bool PermitCore::take_or_mark_locked(std::uint32_t n) noexcept {
  state_.fetch_or(kWaiters, std::memory_order_relaxed);
  if (try_acquire(n)) {
    clear_if_empty_locked();
    return true;
  }
  return false;
}

void PermitCore::clear_if_empty_locked() noexcept {
  if (waiters_.empty()) state_.fetch_and(~(kWaiters | kFair), std::memory_order_relaxed);
}

// A grant hands on permits another thread may have released: the waiter's
// critical section must follow the releaser's. The dispatcher need not be
// that thread (a cancelled waiter's kick may come first), so the grant's
// subtraction acquires: every write to state_ is an RMW, so it reads from
// the release sequence of every release() before it. The other accesses
// only decide (the subtraction is what takes the permits) and are relaxed
// (tests/relacy/permits_relacy_test.cpp).
void PermitCore::dispatch_locked(WaitSection& sec) noexcept {
  if (waiters_.empty()) {
    clear_if_empty_locked();
    return;
  }
  const std::int64_t now = coarse_now();
  // Woken (not granted) waiters retry by barging: wake as many as the free
  // permits could serve (one for a mutex, a run of readers for a RwLock),
  // else readers queued behind one woken reader would sleep beside a lock
  // that has room for them.
  std::uint64_t wake_room = state_.load(std::memory_order_relaxed) & kCountMask;
  while (auto* w = static_cast<PermitWaiter*>(waiters_.front())) {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    const bool fair = (s & kFair) != 0 || now - w->since > kFairAfterNs;
    if (fair) {
      // Barging off: permits go to the queue in order. Once kFair is set no
      // fast path can take any, so the subtraction below cannot race.
      if ((s & kFair) == 0) s = state_.fetch_or(kFair, std::memory_order_relaxed) | kFair;
      if ((s & kCountMask) < w->n) break;
      state_.fetch_sub(w->n, std::memory_order_acquire);
      w->state = PermitWaiter::State::granted;
    } else {
      if (wake_room < w->n) break;
      wake_room -= w->n;
      w->state = PermitWaiter::State::woken;  // to retry: it may lose to a barger
    }
    w->unlink_locked();
    sec.wake(w);
  }
  const auto* head = static_cast<const PermitWaiter*>(waiters_.front());
  if (head == nullptr) {
    clear_if_empty_locked();
  } else if (now - head->since <= kFairAfterNs && (state_.load(std::memory_order_relaxed) & kFair) != 0) {
    state_.fetch_and(~kFair, std::memory_order_relaxed);  // the old ones are served: barging again
  }
}

void PermitCore::kick() noexcept {
  WaitSection sec(mu_);
  dispatch_locked(sec);
}

bool PermitCore::Awaiter::suspend(TaskRecord* f, std::coroutine_handle<> h) {
  if (f == nullptr) throw std::logic_error("shoal: " + core_.what_ + " awaited outside a shoal task");
  if (f->cancelled()) {
    cancelled_ = true;
    return false;
  }
  w_.record = f;
  if (consume_budget(f)) {
    // Out of budget: a schedule point even uncontended, taken before the
    // permits (yielding while holding them would stall the others).
    f->resume = h;
    schedule_yield(f);
    return true;  // resumes idle: the caller tries again
  }
  if (since_ == 0) since_ = coarse_now();  // before any move: the fairness clock runs from the first loss
  // Lost to a task on another worker (the fast path failed, or it is a
  // retry): join its worker even if the lock is free again by now, or the
  // next call loses there again. Exclusive acquisitions only: readers that
  // gathered behind a writer would give up their parallelism.
  if (w_.n == core_.permits_ && core_.move_to_holder(f, h)) return true;  // retries there: nothing may touch *this
  if (core_.try_acquire(w_.n) || core_.spin_acquire(w_.n)) {
    w_.state = PermitWaiter::State::granted;
    return false;
  }
  w_.since = since_;
  const WaitStep step = wait_step(
      w_, f, h, core_.mu_, core_.waiters_,
      [&](WaitSection&) {
        if (core_.take_or_mark_locked(w_.n)) {
          w_.state = PermitWaiter::State::granted;
          return true;
        }
        if (f->cancelled()) core_.clear_if_empty_locked();  // it will not queue: the mark may go
        return false;
      },
      [&] {
        const bool at_head = woken_;  // lost to a barger: keep its place
        woken_ = false;  // queued again, the wake-up is paid back: a release will wake it
        return at_head;
      });
  if (step == WaitStep::cancelled) cancelled_ = true;
  return step == WaitStep::suspended;  // then nothing may touch *this
}

bool PermitCore::Awaiter::resume() {
  if (w_.state == PermitWaiter::State::woken) woken_ = true;
  const bool left_queue = w_.cancelled;  // a canceller took it out of the queue
  if (cancelled_ || left_queue) {
    // It may have been the head a release was waiting on (a writer ahead of
    // readers), or hold a wake-up meant for it: whoever is next must not be
    // left asleep.
    if (left_queue || woken_) core_.kick();
    detail::raise_cancelled();
  }
  const bool granted = w_.state == PermitWaiter::State::granted;
  if (w_.record->cancelled()) {
    // Cancelled as it was granted (or woken): hand on before throwing.
    if (granted) {
      core_.release(w_.n);
    } else if (woken_) {
      core_.kick();
    }
    detail::raise_cancelled();
  }
  if (granted) woken_ = false;
  return granted;
}

bool PermitCore::acquire_blocking(std::uint32_t n, const std::chrono::steady_clock::time_point* deadline) {
  if (try_acquire(n)) return true;
  PermitWaiter w(*this);
  w.n = n;
  w.since = coarse_now();
  bool retry = false;
  for (;;) {
    ThreadWake wake;
    w.state = PermitWaiter::State::waiting;
    if (wait_step_thread(w, wake, mu_, waiters_, [&](WaitSection&) { return take_or_mark_locked(n); },
                         [&] { return retry; }) == WaitStep::done) {
      return true;
    }
    if (deadline == nullptr) {
      wake.wait();
    } else if (!wake.wait_until(*deadline)) {
      {
        WaitSection sec(mu_);
        if (w.is_linked()) {  // still queued: leave, and pass on what this release could serve
          w.unlink_locked();
          dispatch_locked(sec);
          return false;
        }
      }
      wake.wait();  // a dispatch claimed us as the deadline passed: its wake is on the way
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
  return reinterpret_cast<std::uintptr_t>(&marker) | 1;  // never a TaskRecord* (aligned)
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
