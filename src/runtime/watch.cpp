// The driver watch: what keeps I/O and timers served while a worker
// computes.
//
// The driver is held only by a parked worker (or for a moment by a busy
// worker's non-blocking poll). A worker that leaves the driver with one task
// runs it itself and wakes nobody (worker_pool.cpp, run_woken); if that task
// then computes for seconds, every other worker may be asleep on its futex
// and nobody is in the driver: no socket and no timer is served. Waking a
// sleeper to take over the driver each time a worker leaves it would cost a
// futex wake per event. Instead, a thread that is blocked anyway, the one in
// block_on, looks every tick: if nobody has taken the driver since the last
// tick and nobody holds it now, it wakes a sleeper, which finds nothing to
// run, parks and takes the driver. A stall is bounded by about two ticks,
// and a server under load pays one timed futex wait per tick on a thread
// that has nothing else to do (Go's sysmon does the same for its netpoller
// at 10 ms). With one worker there is nobody to wake: the cooperative budget
// and the every-61st-task poll are what there is (docs/scaling.md).
//
// Idle, the watch costs nothing: when every worker is parked and the driver
// has not turned for a whole tick, the watcher announces that it sleeps for
// good (watch_deep_) and the first worker to leave park wakes it. The
// handshake is a Dekker pair: the watcher stores watch_deep_ then reads the
// unparked count, a worker's count goes up (a seq_cst RMW in Idle) before it
// reads watch_deep_; one of them sees the other.
//
// Several block_on threads: one watches (watch_taken_), the others sleep
// untimed on the same word; the watcher leaving hands the watch on.
//
// The watch also frees contention moves from a stuck worker. A task that
// met a lock's holder (or a channel's home) on another worker moves there
// (placement.hpp) and waits in that worker's pinned inbox, where
// neither its deadline nor its canceller can reach it: it is queued, not
// waiting. If that worker stays in one step (a body that computes for
// 600 ms, or blocks in read(2) for a byte the moved task would write after
// giving up: a deadlock), the move must not hold. So every tick, a worker
// whose step count has not moved since the last tick and whose inbox holds
// tasks is stuck: its soft-pinned tasks lose their pin and go to the
// injector, its hard-pinned ones (spawn_local) go back, and moves to it are
// refused until it takes another step. A freed task then waits where its
// deadline and canceller reach it. A move is held up by at most two ticks.
#include <chrono>

#include "src/runtime/futex.hpp"
#include "src/runtime/placement.hpp"
#include "src/runtime/scheduler.hpp"
#include "src/runtime/worker_pool.hpp"

namespace shoal::detail {
namespace {
constexpr std::chrono::nanoseconds kWatchTick = std::chrono::milliseconds(10);
#if defined(SHOAL_ROOT_SLEEPS_ON_CONDVAR)
constexpr std::chrono::nanoseconds kDumpLook = std::chrono::milliseconds(100);
#endif
}  // namespace

struct Scheduler::WatchState {
  std::uint64_t turns;
};

// The block_on threads sleep on root_word_ (a generation count). Under
// ThreadSanitizer a signal reaches a thread only inside a call TSan
// intercepts, and the kernel prefers the main thread, often the one in
// block_on, for a process-directed signal: there it sleeps on a condition
// variable instead of a raw futex, or a signal wait could never see its
// signal. A signal handler cannot notify a condition variable, so there a
// runtime with a dump signal never sleeps longer than kDumpLook. The same
// where there is no futex (src/runtime/futex.hpp).
void Scheduler::wake_block_on_threads() noexcept {
  futex_wakes_.fetch_add(1, std::memory_order_relaxed);
#if defined(SHOAL_ROOT_SLEEPS_ON_CONDVAR)
  {
    std::lock_guard<std::mutex> g(root_mu_);
    root_word_.fetch_add(1, std::memory_order_release);
  }
  root_cv_.notify_all();
#else
  root_word_.fetch_add(1, std::memory_order_release);
  futex_wake(root_word_);
#endif
}

void Scheduler::root_sleep(std::uint32_t gen, const std::chrono::nanoseconds* timeout) noexcept {
#if defined(SHOAL_ROOT_SLEEPS_ON_CONDVAR)
  std::unique_lock<std::mutex> g(root_mu_);
  if (root_word_.load(std::memory_order_acquire) != gen) return;
  if (timeout == nullptr && options_.dump_signal != 0) timeout = &kDumpLook;
  if (timeout != nullptr) {
    root_cv_.wait_for(g, *timeout);
  } else {
    root_cv_.wait(g);
  }
#else
  if (timeout != nullptr) {
    futex_wait_for(root_word_, gen, *timeout);
  } else {
    futex_wait(root_word_, gen, nullptr);
  }
#endif
}

void Scheduler::root_done(shim::atomic<bool>& done) noexcept {
  done.store(true, std::memory_order_release);  // its owner may return at once: nothing below touches it
  wake_block_on_threads();
}

void Scheduler::wake_watcher() noexcept {
  if (watch_deep_.exchange(false, std::memory_order_acq_rel)) wake_block_on_threads();
}

void Scheduler::wait_root(const shim::atomic<bool>& done) noexcept {
  root_waiters_.fetch_add(1, std::memory_order_seq_cst);
  bool watching = false;
  WatchState st{driver_.turns()};
  for (;;) {
    const std::uint32_t gen = root_word_.load(std::memory_order_acquire);
    if (done.load(std::memory_order_acquire)) break;
    if (dump_asked_.load(std::memory_order_acquire)) answer_dump();
    if (watch_enabled_ && !watching && !watch_taken_.load(std::memory_order_seq_cst) &&
        !watch_taken_.exchange(true, std::memory_order_seq_cst)) {
      watching = true;
      st.turns = driver_.turns();
    }
    if (watching && !watch_deep_.load(std::memory_order_relaxed)) {
      root_sleep(gen, &kWatchTick);
      watch_tick(st);
    } else {
      root_sleep(gen, nullptr);
    }
  }
  root_waiters_.fetch_sub(1, std::memory_order_seq_cst);
  if (watching) {
    watch_deep_.store(false, std::memory_order_relaxed);
    watch_taken_.store(false, std::memory_order_seq_cst);
    // Pairs with a newcomer's "count itself; read watch_taken_": either it
    // takes the watch or we wake it to.
    if (root_waiters_.load(std::memory_order_seq_cst) != 0) wake_block_on_threads();
  }
}

void WorkerPool::free_stalled_moves() noexcept {
  for (auto& wp : workers_) {
    Worker& w = *wp;
    const std::uint64_t polls = w.polls.load(std::memory_order_relaxed);
    const bool stuck = polls == w.watch_polls.load(std::memory_order_relaxed) &&
                       w.activity.load(std::memory_order_relaxed) == 0;
    w.watch_polls.store(polls, std::memory_order_relaxed);
    if (!stuck) continue;
    TaskRecord* f = w.pinned.take_remote();
    if (f == nullptr) continue;
    w.stalled_at.store(polls + 1, std::memory_order_relaxed);
    while (f != nullptr) {
      TaskRecord* next = f->next;
      if (placement::soft_pinned(f)) {
        placement::end_soft_pin(f);  // ours now: taken from the inbox, not running
        inject(f);
      } else {
        // The owner ran when we looked, but may have finished its step and
        // parked since, having used up the wake for the tasks we took.
        if (w.pinned.push_remote(f)) sched_.unpark(w);
      }
      f = next;
    }
  }
}

void Scheduler::watch_tick(WatchState& st) noexcept {
  pool_->free_stalled_moves();
  const std::uint64_t turns = driver_.turns();
  const bool turned = turns != st.turns;
  st.turns = turns;
  if (turned) return;
  if (driver_.held()) {
    // Held for a whole tick: the last worker to park waits in the backend.
    // If everyone is parked, nothing needs watching until one leaves park.
    if (pool_->unparked() != 0) return;
    watch_deep_.store(true, std::memory_order_seq_cst);
    if (pool_->unparked_seq_cst() != 0) watch_deep_.store(false, std::memory_order_relaxed);
    return;
  }
  // Abandoned for a whole tick: a sleeper takes it over. If every worker is
  // running, one of them polls within 61 tasks; if all compute, none can.
  pool_->notify_parked();
}

}  // namespace shoal::detail
