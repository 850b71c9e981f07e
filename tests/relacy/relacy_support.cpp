// The Relacy search, instantiated once per thread count for an erased suite
// (relacy_support.hpp): a test file then compiles its suites' bodies only.
#include "relacy_support.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>

namespace shoal::relacy {
namespace {

// The suite being run. Relacy constructs its suite with no arguments, once
// per execution, on the one OS thread that runs all its fibers.
const SuiteOps* g_ops = nullptr;

template <rl::thread_id_t N>
struct Erased : rl::test_suite<Erased<N>, N> {
  alignas(std::max_align_t) unsigned char storage[kMaxSuiteSize];
  void* self;
  Erased() {
    // Relacy's storage for a suite is malloc'ed: align the real one here.
    auto at = reinterpret_cast<std::uintptr_t>(storage);
    at = (at + g_ops->align - 1) / g_ops->align * g_ops->align;
    self = reinterpret_cast<void*>(at);
    g_ops->construct(self);
  }
  ~Erased() { g_ops->destroy(self); }
  Erased(const Erased&) = delete;
  Erased& operator=(const Erased&) = delete;
  void before() { g_ops->before(self); }
  void thread(unsigned i) { g_ops->thread(self, i); }
  void after() { g_ops->after(self); }
};

template <rl::thread_id_t N>
bool simulate(rl::test_params& p) {
  return rl::simulate<Erased<N>>(p);
}

}  // namespace

bool check(const SuiteOps& ops, const char* search, unsigned max_bound) {
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
  g_ops = &ops;
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = false;
  switch (ops.threads) {
    case 1: ok = simulate<1>(p); break;
    case 2: ok = simulate<2>(p); break;
    case 3: ok = simulate<3>(p); break;
    default: ok = simulate<4>(p); break;
  }
  g_ops = nullptr;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("relacy: %s search%s, %llu executions, %.2f s%s%s\n", search,
              p.search_type == rl::sched_bound ? (" " + std::to_string(p.context_bound)).c_str() : "",
              static_cast<unsigned long long>(p.stop_iteration), s, ok ? "" : " FAILED: ",
              ok ? "" : rl::test_result_str(p.test_result));
  return ok;
}

}  // namespace shoal::relacy
