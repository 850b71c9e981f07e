// Running a Relacy test suite from GoogleTest: the search, its bound, and a
// line with what it explored (the relacy CI leg prints these).
#pragma once

#include <cstddef>
#include <new>

#include "shoal/detail/sync_shim.hpp"  // Relacy itself, through the shim

namespace shoal::relacy {

/// SHOAL_RELACY_SEARCH if set ("full", "bound", "random"), else `fallback`.
inline const char* search_or(const char* fallback) {
  const char* s = std::getenv("SHOAL_RELACY_SEARCH");
  return s != nullptr ? s : fallback;
}

/// A suite's operations with its type erased: the Relacy search machinery
/// (a context and three schedulers per suite type, most of a test file's
/// compile time) is instantiated once, in relacy_support.cpp, for a suite
/// of each thread count, which runs the real suite through these.
struct SuiteOps {
  std::size_t size;
  std::size_t align;
  unsigned threads;
  void (*construct)(void*);
  void (*destroy)(void*);
  void (*before)(void*);
  void (*thread)(void*, unsigned);
  void (*after)(void*);
};

/// The largest suite (bytes, with its alignment) check() can run.
inline constexpr std::size_t kMaxSuiteSize = 64 * 1024;

/// check<Suite>() with the suite erased (relacy_support.cpp).
bool check(const SuiteOps& ops, const char* search, unsigned max_bound);

/// Runs `Suite` under Relacy. `search`: "full" explores every schedule and
/// every outcome the memory model allows; "bound" does so for schedules with
/// at most SHOAL_RELACY_BOUND (default 2) preemptions, as loom's
/// LOOM_MAX_PREEMPTIONS; "random" runs SHOAL_RELACY_ITERATIONS (default
/// 200,000) random schedules. False when an execution failed; with
/// SHOAL_RELACY_HISTORY set, Relacy prints that execution's history.
/// `max_bound` (if not 0) caps the bound for a suite that takes minutes
/// above it.
template <class Suite>
bool check(const char* search, unsigned max_bound = 0) {
  using P = typename Suite::params;
  static_assert(P::dynamic_thread_count == 0 && P::expected_result == rl::test_result_success,
                "the erased suites have static threads and expect success");
  static_assert(P::static_thread_count >= 1 && P::static_thread_count <= 4, "1 to 4 threads");
  static_assert(sizeof(Suite) + alignof(Suite) <= kMaxSuiteSize, "raise kMaxSuiteSize");
  static constexpr SuiteOps ops{
      sizeof(Suite),
      alignof(Suite),
      P::static_thread_count,
      [](void* p) { ::new (p) Suite(); },
      [](void* p) { static_cast<Suite*>(p)->~Suite(); },
      [](void* p) { static_cast<Suite*>(p)->before(); },
      [](void* p, unsigned i) { static_cast<Suite*>(p)->thread(i); },
      [](void* p) { static_cast<Suite*>(p)->after(); },
  };
  return check(ops, search, max_bound);
}

/// N items handed from thread to thread. `T` has two rl::var<int>s: its
/// payload, written before the item is published and checked by whoever
/// takes it (a take with no happens-before edge from the write is a data
/// race), and a count of its takers, which check() wants at exactly one.
template <class T, int N>
struct Handed {
  T items[N];
  void before() {
    for (T& it : items) {
      it.payload($) = 0;
      it.taken($) = 0;
    }
  }
  /// Item `i`, its payload written: the caller publishes it.
  T* make(int i) {
    items[i].payload($) = i + 1;
    return &items[i];
  }
  void take(T* it) {
    RL_ASSERT(it->payload($) == static_cast<int>(it - items) + 1);
    it->taken($) = it->taken($) + 1;
  }
  /// Every item taken exactly once: none lost, none twice.
  void check() {
    for (T& it : items) RL_ASSERT(it.taken($) == 1);
  }
};

}  // namespace shoal::relacy
