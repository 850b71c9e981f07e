// A small model checker for shoal's protocols, and the shim types it swaps
// in for std ones when SHOAL_MODEL is defined (detail/sync_shim.hpp), as
// Tokio's loom does for Rust.
//
// A test body runs as model thread 0 and spawns more. They are real threads,
// but exactly one runs at a time: every shim operation (atomic access, mutex
// lock/unlock, fence, spin) is a scheduling point where the checker picks
// who runs next. explore() enumerates those choices depth-first with a
// preemption bound; random_schedules() picks them from a seed.
//
// Sequential consistency only: every atomic behaves as seq_cst whatever
// order the code passes, so this explores interleavings, not the reorderings
// weaker orders allow. Those are TSan's job (the tsan CI leg).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <type_traits>

namespace shoal::model {

namespace rt {
/// A scheduling point, before a shared-memory operation. No-op outside an
/// execution (e.g. on the gtest thread after it).
void point() noexcept;
/// After an operation that changed shared state (see spin()).
void wrote() noexcept;
/// Blocks the calling model thread until wake(obj) and it is scheduled again.
void block(const void* obj, const char* what) noexcept;
/// Makes the oldest (or every) thread blocked on `obj` runnable.
void wake(const void* obj, bool all) noexcept;
/// The calling model thread's id; -1 outside an execution.
int self() noexcept;
}  // namespace rt

/// "I cannot make progress until another thread changes something"
/// (spin_pause and thread_yield map here). If another thread wrote since
/// this one last returned from spin() (or started), it switches to another
/// thread without counting a preemption. If none did, everything it read
/// since is still current and another round would read the same, so it
/// sleeps until another thread writes: a spin loop costs a switch or two
/// instead of unbounded schedules, and no behaviour is lost. A spin nobody
/// can end is reported like a deadlock.
void spin() noexcept;

/// Fails the current execution with `what` (reported with its schedule) and
/// never returns: the calling thread stays blocked until the process exits.
[[noreturn]] void fail(const std::string& what) noexcept;

/// fail(what) unless `ok`.
inline void check(bool ok, const char* what) noexcept {
  if (!ok) fail(what);
}

inline void fence() noexcept { rt::point(); }

template <class T>
class Atomic {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  Atomic() noexcept : v_() {}
  constexpr Atomic(T v) noexcept : v_(v) {}  // NOLINT: mirrors std::atomic
  Atomic(const Atomic&) = delete;
  Atomic& operator=(const Atomic&) = delete;

  T load(std::memory_order = std::memory_order_seq_cst) const noexcept {
    rt::point();
    return v_;
  }
  // A point after a store as well: a store often publishes (a lock's
  // release, a flag), and the plain code right after it (writes to what it
  // published) must be interleavable with whoever sees it.
  void store(T v, std::memory_order = std::memory_order_seq_cst) noexcept {
    rt::point();
    v_ = v;
    rt::wrote();
    rt::point();
  }
  T exchange(T v, std::memory_order = std::memory_order_seq_cst) noexcept {
    rt::point();
    T old = v_;
    v_ = v;
    rt::wrote();
    return old;
  }
  // Never fails spuriously: a spurious failure would only add schedules in
  // which a retry loop spins, and the code under test retries anyway.
  bool compare_exchange_strong(T& expected, T desired, std::memory_order = std::memory_order_seq_cst,
                               std::memory_order = std::memory_order_seq_cst) noexcept {
    rt::point();
    if (v_ == expected) {
      v_ = desired;
      rt::wrote();
      return true;
    }
    expected = v_;
    return false;
  }
  bool compare_exchange_weak(T& expected, T desired, std::memory_order o1 = std::memory_order_seq_cst,
                             std::memory_order o2 = std::memory_order_seq_cst) noexcept {
    return compare_exchange_strong(expected, desired, o1, o2);
  }
  T fetch_add(T d, std::memory_order = std::memory_order_seq_cst) noexcept
    requires std::is_integral_v<T>
  {
    return rmw([d](T v) { return static_cast<T>(v + d); });
  }
  T fetch_sub(T d, std::memory_order = std::memory_order_seq_cst) noexcept
    requires std::is_integral_v<T>
  {
    return rmw([d](T v) { return static_cast<T>(v - d); });
  }
  T fetch_or(T d, std::memory_order = std::memory_order_seq_cst) noexcept
    requires std::is_integral_v<T>
  {
    return rmw([d](T v) { return static_cast<T>(v | d); });
  }
  T fetch_and(T d, std::memory_order = std::memory_order_seq_cst) noexcept
    requires std::is_integral_v<T>
  {
    return rmw([d](T v) { return static_cast<T>(v & d); });
  }
  /// Blocks while the value equals `old` (no spurious returns, as std).
  void wait(T old, std::memory_order = std::memory_order_seq_cst) const noexcept {
    rt::point();
    while (v_ == old) rt::block(this, "atomic wait");
  }
  void notify_one() noexcept {
    rt::point();
    rt::wake(this, false);
  }
  void notify_all() noexcept {
    rt::point();
    rt::wake(this, true);
  }

 private:
  template <class F>
  T rmw(F f) noexcept {
    rt::point();
    T old = v_;
    v_ = f(old);
    rt::wrote();
    return old;
  }
  // Plain storage: only one model thread runs at a time, and the hand-over
  // between them (a semaphore) orders these accesses.
  T v_;
};

class Mutex {
 public:
  void lock() noexcept {
    rt::point();
    acquire();
  }
  bool try_lock() noexcept {
    rt::point();
    if (owner_ != kFree) return false;
    owner_ = rt::self();
    rt::wrote();
    return true;
  }
  void unlock() noexcept {
    rt::point();
    release();
  }

 private:
  friend class CondVar;
  static constexpr int kFree = -2;  // rt::self() is -1 outside an execution
  void acquire() noexcept {
    while (owner_ != kFree) {
      if (owner_ == rt::self()) fail("model::Mutex locked twice by one thread");
      rt::block(this, "mutex");
    }
    owner_ = rt::self();
    rt::wrote();
  }
  void release() noexcept {
    if (owner_ != rt::self()) fail("model::Mutex unlocked by a thread that does not hold it");
    owner_ = kFree;
    rt::wrote();
    rt::wake(this, true);
  }
  int owner_ = kFree;
};

/// No spurious wake-ups (callers loop anyway).
class CondVar {
 public:
  void wait(std::unique_lock<Mutex>& lk) noexcept {
    rt::point();
    lk.mutex()->release();
    rt::block(this, "condition variable");
    lk.mutex()->acquire();
  }
  template <class Pred>
  void wait(std::unique_lock<Mutex>& lk, Pred pred) {
    while (!pred()) wait(lk);
  }
  void notify_one() noexcept {
    rt::point();
    rt::wake(this, false);
  }
  void notify_all() noexcept {
    rt::point();
    rt::wake(this, true);
  }
};

/// A model thread, spawned from inside an execution.
class Thread {
 public:
  /// Blocks until the thread finished.
  void join() noexcept;
  int id() const noexcept { return id_; }

 private:
  friend Thread spawn(std::function<void()> fn, const char* name);
  explicit Thread(int id) noexcept : id_(id) {}
  int id_;
};

Thread spawn(std::function<void()> fn, const char* name = "");

struct Options {
  /// Preemptions per execution in explore(): switching away from a thread
  /// that could go on. Switches at a block, a spin or a thread's end are free.
  int preemption_bound = 2;
  /// explore() fails past this many executions (the scenario is too big).
  long max_executions = 1'000'000;
  /// Scheduling points per execution; more is reported as a livelock.
  long max_steps = 20'000;
};

struct Result {
  bool ok = true;
  long executions = 0;
  /// What failed, with the schedule that reproduces it.
  std::string failure;
};

/// Every schedule with at most `preemption_bound` preemptions, depth first.
/// The body must be deterministic given the schedule.
Result explore(const Options& opts, const std::function<void()>& body);

/// `iterations` executions, scheduled at random from `seed` (each execution
/// from seed and its index, so SHOAL_SEED reproduces a failure).
Result random_schedules(std::uint64_t seed, long iterations, const Options& opts, const std::function<void()>& body);

// With SHOAL_MODEL_SCHEDULE=<thread ids> (printed with a failure) both run
// that one schedule instead, to debug it.

}  // namespace shoal::model
