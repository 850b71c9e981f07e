// Running a Relacy test suite from GoogleTest: the search, its bound, and a
// line with what it explored (the relacy CI leg prints these).
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>

#include "shoal/detail/sync_shim.hpp"  // Relacy itself, through the shim

namespace shoal::relacy {

/// SHOAL_RELACY_SEARCH if set ("full", "bound", "random"), else `fallback`.
inline const char* search_or(const char* fallback) {
  const char* s = std::getenv("SHOAL_RELACY_SEARCH");
  return s != nullptr ? s : fallback;
}

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
  rl::test_params p;
  p.output_history = true;
  p.collect_history = std::getenv("SHOAL_RELACY_HISTORY") != nullptr;  // slow: to read a failure
  static std::ostream quiet(nullptr);  // no progress lines
  p.progress_stream = &quiet;
  if (std::strcmp(search, "full") == 0) {
    p.search_type = rl::sched_full;
  } else if (std::strcmp(search, "bound") == 0) {
    p.search_type = rl::sched_bound;
    const char* b = std::getenv("SHOAL_RELACY_BOUND");
    p.context_bound = b != nullptr ? static_cast<unsigned>(std::atoi(b)) : 2;
    if (max_bound != 0 && p.context_bound > max_bound) p.context_bound = max_bound;
  } else {
    p.search_type = rl::sched_random;
    const char* n = std::getenv("SHOAL_RELACY_ITERATIONS");
    p.iteration_count = n != nullptr ? std::strtoull(n, nullptr, 10) : 200'000;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const bool ok = rl::simulate<Suite>(p);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("relacy: %s search%s, %llu executions, %.2f s%s%s\n", search,
              p.search_type == rl::sched_bound ? (" " + std::to_string(p.context_bound)).c_str() : "",
              static_cast<unsigned long long>(p.stop_iteration), s, ok ? "" : " FAILED: ",
              ok ? "" : rl::test_result_str(p.test_result));
  return ok;
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
