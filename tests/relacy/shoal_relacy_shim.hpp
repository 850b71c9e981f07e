// The sync shim of the Relacy tests (SHOAL_RELACY): shoal/detail/sync_shim.hpp
// includes this instead of the std primitives, so the real protocol code runs
// under Relacy's C++ memory model, which explores the reorderings that
// relaxed, acquire and release orders and fences allow (the SHOAL_MODEL
// checker explores interleavings under sequential consistency only), and
// reports data races on the plain variables a test declares as rl::var.
//
// Relacy's own std replacement (relacy_std.hpp) does not build with
// libstdc++ 12, so this maps the shim's few types onto Relacy's core:
// every operation passes the caller's file and line to Relacy's history.
// Relacy runs a test's threads as fibers of one OS thread: the code under
// test must not keep per-thread state in thread_local variables.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

// Relacy's parts, not relacy/relacy.hpp: that one also defines new, delete,
// malloc, errno, assert, memory_order_* and pthread_* as macros, which the
// code under test (and GoogleTest) cannot live with.
#include <relacy/base.hpp>
#include <relacy/context.hpp>
#include <relacy/context_base_impl.hpp>
#include <relacy/backoff.hpp>
#include <relacy/atomic_fence.hpp>
#include <relacy/atomic.hpp>
#include <relacy/var.hpp>
#include <relacy/test_suite.hpp>
#include <relacy/dyn_thread.hpp>
#include <relacy/thread_local.hpp>
#include <relacy/stdlib/mutex.hpp>
#include <relacy/stdlib/condition_variable.hpp>
#include <relacy/stdlib/semaphore.hpp>
#include <relacy/stdlib/event.hpp>

namespace shoal::detail::shim {

inline rl::memory_order rl_order(std::memory_order mo) noexcept {
  switch (mo) {
    case std::memory_order_relaxed:
      return rl::mo_relaxed;
    case std::memory_order_consume:
    case std::memory_order_acquire:
      return rl::mo_acquire;
    case std::memory_order_release:
      return rl::mo_release;
    case std::memory_order_acq_rel:
      return rl::mo_acq_rel;
    default:
      return rl::mo_seq_cst;
  }
}

// Relacy follows C++11: a CAS's failure order may be no stronger than its
// success order, and it silently weakens one that is (C++17 allows it), so
// the test would check a weaker protocol than the library runs. Refuse it.
inline rl::memory_order rl_failure_order(std::memory_order mo, std::memory_order fail, const char* file, int line) {
  const auto rank = [](std::memory_order o) {
    return o == std::memory_order_relaxed ? 0 : o == std::memory_order_seq_cst ? 2 : 1;
  };
  const bool ok = rank(fail) <= rank(mo) && (mo != std::memory_order_release || fail == std::memory_order_relaxed);
  if (!ok) {
    std::fprintf(stderr, "%s:%d: a CAS whose failure order is stronger than its success order: Relacy would weaken it\n",
                 file, line);
    std::abort();
  }
  return rl_order(fail);
}

// Where the caller is, for Relacy's report (a default argument is
// evaluated where the call is).
#define SHOAL_RL_AT const char *rl_file = __builtin_FILE(), int rl_line = __builtin_LINE()
#define SHOAL_RL_INFO ::rl::debug_info("", rl_file, static_cast<unsigned>(rl_line))

/// std::atomic's interface over rl::atomic. Default-constructed it holds
/// T() (as std::atomic does since C++20).
template <class T>
class atomic {
 public:
  atomic() : a_(T()) {}
  atomic(T v) : a_(v) {}  // NOLINT: mirrors std::atomic
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  T load(std::memory_order mo = std::memory_order_seq_cst, SHOAL_RL_AT) const {
    return a_.load(rl_order(mo), SHOAL_RL_INFO);
  }
  void store(T v, std::memory_order mo = std::memory_order_seq_cst, SHOAL_RL_AT) {
    a_.store(v, rl_order(mo), SHOAL_RL_INFO);
  }
  T exchange(T v, std::memory_order mo = std::memory_order_seq_cst, SHOAL_RL_AT) {
    return a_(SHOAL_RL_INFO).exchange(v, rl_order(mo));
  }
  bool compare_exchange_weak(T& expected, T desired, std::memory_order mo = std::memory_order_seq_cst, SHOAL_RL_AT) {
    return a_(SHOAL_RL_INFO).compare_exchange_weak(expected, desired, rl_order(mo), failure_order(mo));
  }
  bool compare_exchange_weak(T& expected, T desired, std::memory_order mo, std::memory_order fail, SHOAL_RL_AT) {
    return a_(SHOAL_RL_INFO).compare_exchange_weak(expected, desired, rl_order(mo),
                                                    rl_failure_order(mo, fail, rl_file, rl_line));
  }
  bool compare_exchange_strong(T& expected, T desired, std::memory_order mo = std::memory_order_seq_cst,
                               SHOAL_RL_AT) {
    return a_(SHOAL_RL_INFO).compare_exchange_strong(expected, desired, rl_order(mo), failure_order(mo));
  }
  bool compare_exchange_strong(T& expected, T desired, std::memory_order mo, std::memory_order fail, SHOAL_RL_AT) {
    return a_(SHOAL_RL_INFO).compare_exchange_strong(expected, desired, rl_order(mo),
                                                      rl_failure_order(mo, fail, rl_file, rl_line));
  }
  template <class U>
  T fetch_add(U v, std::memory_order mo = std::memory_order_seq_cst, SHOAL_RL_AT) {
    return a_(SHOAL_RL_INFO).fetch_add(v, rl_order(mo));
  }
  template <class U>
  T fetch_sub(U v, std::memory_order mo = std::memory_order_seq_cst, SHOAL_RL_AT) {
    return a_(SHOAL_RL_INFO).fetch_sub(v, rl_order(mo));
  }
  T fetch_and(T v, std::memory_order mo = std::memory_order_seq_cst, SHOAL_RL_AT) {
    return a_(SHOAL_RL_INFO).fetch_and(v, rl_order(mo));
  }
  T fetch_or(T v, std::memory_order mo = std::memory_order_seq_cst, SHOAL_RL_AT) {
    return a_(SHOAL_RL_INFO).fetch_or(v, rl_order(mo));
  }
  // std::atomic's wait and notify (the Parker's futex sleep and the tests'
  // waits), on Relacy's futex-like waitset. As the kernel's futex check, the
  // value is compared with the newest one (an RMW that writes back what it
  // read; a plain load could read an older one) and the sleep follows with no
  // scheduling point between; a notify that wakes a sleeper happens before
  // its return. No spurious returns. A sleeper nobody wakes is a Relacy
  // deadlock report: that is how the tests see a lost wake-up.
  void wait(T old, std::memory_order mo = std::memory_order_seq_cst, SHOAL_RL_AT) const {
    for (T seen = old; a_(SHOAL_RL_INFO).compare_exchange_strong(seen, old, rl_order(mo), rl_order(mo)); seen = old) {
      a_.wait(rl::ctx(), false, false, SHOAL_RL_INFO);
    }
  }
  void notify_one(SHOAL_RL_AT) { a_.wake(rl::ctx(), 1, SHOAL_RL_INFO); }
  void notify_all(SHOAL_RL_AT) { a_.wake(rl::ctx(), 1 << 30, SHOAL_RL_INFO); }

 private:
  // A failed CAS's order, derived from the success order as std does.
  static rl::memory_order failure_order(std::memory_order mo) noexcept {
    if (mo == std::memory_order_acq_rel) return rl::mo_acquire;
    if (mo == std::memory_order_release) return rl::mo_relaxed;
    return rl_order(mo);
  }
  mutable rl::atomic<T> a_;
};

/// A plain field that threads hand to each other through a protocol's
/// atomics (shim::plain): an rl::var here, so Relacy reports a read and a
/// write that no ordering separates, and a touch after the memory went.
/// Its destruction is a write, as the memory's reuse would be: a read by
/// another thread that does not happen before the owner frees the object
/// is a data race.
template <class T>
class plain {
 public:
  plain() : v_(T()) {}
  plain(T v) : v_(v) {}  // NOLINT: stands in for a T
  plain(const plain&) = delete;
  plain& operator=(const plain&) = delete;
  ~plain() { v_(RL_INFO) = T(); }
  plain& operator=(T v) {
    v_(RL_INFO) = v;
    return *this;
  }
  operator T() const { return v_(RL_INFO); }  // NOLINT: stands in for a T
  T operator->() const { return v_(RL_INFO); }

 private:
  rl::var<T> v_;
};

/// std::mutex's interface over Relacy's.
class mutex {
 public:
  void lock(SHOAL_RL_AT) { m_.lock(SHOAL_RL_INFO); }
  bool try_lock(SHOAL_RL_AT) { return m_.try_lock(SHOAL_RL_INFO); }
  void unlock(SHOAL_RL_AT) { m_.unlock(SHOAL_RL_INFO); }

 private:
  rl::mutex m_;
};

template <class M>
using lock_guard = std::lock_guard<M>;
template <class M>
using unique_lock = std::unique_lock<M>;

/// A thread primitive the Relacy tests do not drive: a protocol that needs
/// one is tested with the SHOAL_MODEL checker.
class condition_variable {
 public:
  template <class Lock>
  void wait(Lock&) = delete;
  void notify_one() = delete;
  void notify_all() = delete;
};
struct thread {
  thread() = delete;
};

inline void spin_pause(SHOAL_RL_AT) { rl::yield(1, SHOAL_RL_INFO); }
inline void thread_yield(SHOAL_RL_AT) { rl::yield(1, SHOAL_RL_INFO); }

}  // namespace shoal::detail::shim

#define SHOAL_FENCE_SEQ_CST() ::rl::atomic_thread_fence(::rl::mo_seq_cst, RL_INFO)

// Relacy's context.hpp replaces operator new and the unsized operator delete
// (inside a test, memory is Relacy's, for its leak and use-after-free
// checks) but not the sized delete that std::allocator calls: without these,
// a std::vector built inside a test (Idle's sleeper list) is handed to
// ::free. Inline, as Relacy's own replacements are.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Winline-new-delete"
#endif
inline void operator delete(void* p, std::size_t) noexcept { ::operator delete(p); }
inline void operator delete[](void* p, std::size_t) noexcept { ::operator delete[](p); }
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
