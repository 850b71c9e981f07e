// The waiting core of Mutex, RwLock and Semaphore: a count of permits, a
// FIFO of waiters (tasks and plain threads), barging with eventual fairness.
//
// - State word: available permits (low 32 bits) | kWaiters | kFair. The
//   fast path is one CAS and needs no lock; it may take permits while others
//   wait (barging), unless kFair is set.
// - Before queueing, a task looks again for a few pauses (a holder on the
//   other worker is usually about to leave): a queue-and-wake trip costs far
//   more than the body it waits for. Cross-core hand-offs are what contended
//   throughput is made of, so the exclusive holder's id lives beside the
//   state word (one line moves per hand-off, not two).
// - A task that loses to an exclusive holder running on another worker moves
//   to that worker instead of spinning or queueing (Scheduler::migrate), and
//   stays there until its next wait or 64 budget yields: tasks on one worker
//   run one at a time, so once a lock's contenders are together they stop
//   contending and their hand-offs stay in one core's cache. Fair mode, plain
//   threads and shared acquisitions (readers, semaphores) never move.
// - A waiter that must wait links itself under the lock and re-checks there,
//   so a release (one fetch_add) either sees kWaiters (and wakes someone
//   under the lock) or happened before the waiter's re-check (which then
//   takes the permits).
// - A release with waiters wakes waiters from the head to retry, as many as
//   the free permits could serve (one for a mutex, a run of readers); one
//   that loses to a barger re-queues at the head, keeping its age. Once the head has
//   waited longer than kFairAfter, kFair turns barging off and releases hand
//   permits to waiters directly, in FIFO order, until the queue is young
//   again: nobody starves, and the uncontended path pays nothing for it.
// - Cancellation follows the cancellable-wait protocol (detail/task.hpp). A
//   waiter that is granted permits at the moment it is cancelled gives them
//   back (waking the next waiter) before it throws Cancelled; one that leaves
//   the queue, or leaves after it was woken to retry, kicks the queue so the
//   next waiter is not left asleep.
// - Orderings: the fast path's CAS acquires and release()'s fetch_add
//   releases, so one holder's critical section happens before the next
//   one's, whether the next takes the permits by the fast path, a retry, or
//   a grant from dispatch_locked (whose subtraction acquires the release it
//   passes on; a release sequence runs through every RMW of the word).
//   release() needs no acquire: what follows it reads shared data only under
//   the lock. The lost wake-up argument above needs no ordering at all: the
//   count and kWaiters share one word, whose modification order decides
//   which of the release's RMW and the waiter's mark came first, so the
//   mark and its clearing are relaxed. Checked under Relacy
//   (weak memory): tests/relacy/permits_relacy_test.cpp.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <string>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/spin_lock.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"

namespace shoal::detail {

class PermitCore;

/// One task or thread waiting for permits, on the core's wait list.
struct PermitWaiter final : Waiter {
  // What a dispatch gave a waiter it unlinked (a canceller's unlink is
  // Waiter::cancelled): woken to retry (it may lose to a barger), or
  // granted its permits outright.
  enum class State : std::uint8_t { waiting, woken, granted };
  explicit PermitWaiter(PermitCore& c) noexcept;
  const char* wait_kind() const noexcept override { return "a lock or semaphore (shoal::Mutex, Semaphore, ...)"; }
  PermitCore& core;
  std::uint32_t n = 0;
  std::int64_t since = 0;  // coarse ns when it first had to wait
  State state = State::waiting;  // guarded by the core's lock

 private:
  void left_locked() noexcept override;
};

class PermitCore {
 public:
  static constexpr std::uint64_t kCountMask = 0xffff'ffffull;
  static constexpr std::uint64_t kWaiters = 1ull << 32;
  static constexpr std::uint64_t kFair = 1ull << 33;
  static constexpr std::int64_t kFairAfterNs = 1'000'000;  // about 1 ms

  /// `what` names the object in messages: e.g. `shoal::Mutex "accounts"`.
  PermitCore(std::uint32_t permits, std::string what);
  /// Aborts, naming the object, if permits are out or someone waits.
  ~PermitCore();
  PermitCore(const PermitCore&) = delete;
  PermitCore& operator=(const PermitCore&) = delete;

  std::uint32_t permits() const noexcept { return permits_; }
  const std::string& what() const noexcept { return what_; }
  std::uint32_t available() const noexcept {
    return static_cast<std::uint32_t>(state_.load(std::memory_order_relaxed) & kCountMask);
  }

  /// Takes `n` permits if they are free and barging is allowed. Lock-free.
  bool try_acquire(std::uint32_t n) noexcept {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    while ((s & kFair) == 0 && (s & kCountMask) >= n) {
      if (state_.compare_exchange_weak(s, s - n, std::memory_order_acquire, std::memory_order_relaxed)) return true;
    }
    return false;
  }
  /// Gives `n` permits back; wakes (or hands them to) waiters.
  void release(std::uint32_t n) noexcept {
    // One RMW, no retry loop: a waiter marks kWaiters (under the lock) before
    // its last try, so either it sees these permits or this sees the mark.
    if ((state_.fetch_add(n, std::memory_order_release) & kWaiters) != 0) kick();
  }

  /// One attempt to get `n` permits from a task. Checkpoint: yes (checks
  /// cancellation first; once per budget it only yields, even uncontended,
  /// and returns false). Takes them at once if it may; else waits in the
  /// queue until granted or woken to retry. `since` (0 at the first attempt) keeps the
  /// waiter's age across retries; `retry` re-queues at the head.
  class Awaiter final {
   public:
    Awaiter(PermitCore& core, std::uint32_t n, std::int64_t& since, bool& woken) noexcept
        : core_(core), since_(since), woken_(woken), w_(core) {
      w_.n = n;
    }
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
      return suspend(record_of(h), h);
    }
    /// True: the permits are ours. False: woken to retry. Throws Cancelled
    /// (having handed on anything it was given).
    bool await_resume() { return resume(); }

   private:
    bool suspend(TaskRecord* f, std::coroutine_handle<> h);
    bool resume();
    PermitCore& core_;
    std::int64_t& since_;
    bool& woken_;
    PermitWaiter w_;
    bool cancelled_ = false;  // seen before it queued
  };

  /// Blocks the calling (non-worker) thread until it holds `n` permits, or
  /// until `deadline` if given (false then).
  bool acquire_blocking(std::uint32_t n, const std::chrono::steady_clock::time_point* deadline);

  /// A coarse monotonic clock in ns: only read on slow paths.
  static std::int64_t coarse_now() noexcept;

 private:
  friend class Awaiter;
  friend struct PermitWaiter;
  static constexpr int kSpins = 16;
  // A holder on another worker usually leaves within a few hundred cycles
  // (bodies are short): a short look before queueing avoids a queue and
  // wake-up trip. Never past kFair or a queue.
  bool spin_acquire(std::uint32_t n) noexcept;
  // Under mu_, for a waiter about to queue: marks the queue non-empty first
  // (so a concurrent release takes the slow path), then tries the permits.
  bool take_or_mark_locked(std::uint32_t n) noexcept;
  // A task that lost to a holder running on another worker moves to that
  // worker instead of queueing (`f` suspended at `h`): tasks there run one
  // at a time, so once every contender is there nobody contends. True if it
  // moved (then nothing may touch the awaiter).
  bool move_to_holder(TaskRecord* f, std::coroutine_handle<> h) noexcept;
  void clear_if_empty_locked() noexcept;
  // Under mu_: grants or wakes what the current permits allow; the section
  // wakes them once the lock is dropped.
  void dispatch_locked(WaitSection& sec) noexcept;
  void kick() noexcept;  // dispatch: after a release that saw kWaiters, or a waiter that left

  shim::atomic<std::uint64_t> state_;

 public:
  /// Who holds it exclusively (Mutex, RwLock writer), for self-deadlock
  /// detection: beside the state word, so a hand-over moves one cache line.
  std::atomic<std::uintptr_t> holder{0};
  /// The worker the exclusive holder ran on when it took it (TaskRecord::worker).
  std::atomic<std::uint8_t> holder_worker{TaskRecord::kNoWorker};

 private:
  const std::uint32_t permits_;
  std::string what_;
  // A spin lock: its sections are a few pointer moves, and a std::mutex
  // sent both workers into futex calls under contention.
  SpinLock mu_;
  WaitList waiters_;  // PermitWaiters, guarded by mu_
};

/// Blocking forms need a plain thread: throws std::logic_error naming `call`
/// on a runtime worker (where it would block every task on that worker).
void require_blocking_allowed(const char* call);

}  // namespace shoal::detail
