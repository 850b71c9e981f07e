// Shared test helpers: SHOAL_TEST runs a coroutine body under shoal::run on
// 1 and N workers with a watchdog; scale and seed knobs for stress tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include "shoal/shoal.hpp"
#include "support/watchdog.hpp"

namespace shoal::test {

/// SHOAL_STRESS_SCALE (default 1): sanitizer legs scale heavy tests down.
inline double stress_scale() {
  const char* s = std::getenv("SHOAL_STRESS_SCALE");
  double v = s ? std::atof(s) : 1.0;
  return v > 0 ? v : 1.0;
}
inline long scaled(long n, long minimum = 1) {
  long v = static_cast<long>(static_cast<double>(n) * stress_scale());
  return v < minimum ? minimum : v;
}

/// The seed for a randomized test: SHOAL_SEED if set, else fresh. Printed.
inline std::uint64_t test_seed(const char* test_name) {
  std::uint64_t seed;
  if (const char* s = std::getenv("SHOAL_SEED")) {
    seed = std::strtoull(s, nullptr, 10);
  } else {
    seed = std::random_device{}();
    seed = (seed << 32) ^ std::random_device{}();
  }
  std::printf("[seed] %s: SHOAL_SEED=%llu\n", test_name, static_cast<unsigned long long>(seed));
  return seed;
}

inline constexpr std::chrono::seconds kWatchdog{120};

/// Makes `x` escape so the optimizer cannot elide it (clang elides coroutine
/// frames that provably never leave a function).
template <class T>
inline void escape(T& x) {
  asm volatile("" : : "g"(&x) : "memory");
}

/// Fixture for runtime-dependent suites: parameterized by worker count.
class RuntimeTest : public ::testing::TestWithParam<std::size_t> {
 protected:
  template <class T>
  T run_task(Task<T> t) {
    Watchdog dog(kWatchdog, ::testing::UnitTest::GetInstance()->current_test_info()->name());
    RuntimeOptions opts;
    opts.workers = GetParam();
    return shoal::run(std::move(t), std::move(opts));
  }
};

inline std::string worker_param_name(const ::testing::TestParamInfo<std::size_t>& info) {
  return std::to_string(info.param) + "workers";
}

}  // namespace shoal::test

/// ASSERT_* returns, which a coroutine cannot: this one co_returns.
#define SHOAL_CO_ASSERT(cond)                          \
  if (!(cond)) {                                       \
    ADD_FAILURE() << "assertion failed: " #cond;       \
    co_return;                                         \
  }

/// Declares a runtime suite run on 1 and 4 workers.
#define SHOAL_TEST_SUITE(Suite)                                                                       \
  class Suite : public ::shoal::test::RuntimeTest {};                                                \
  INSTANTIATE_TEST_SUITE_P(Workers, Suite, ::testing::Values(std::size_t{1}, std::size_t{4}),       \
                           ::shoal::test::worker_param_name)

/// A test whose body is a coroutine run under the simulated runtime
/// (RuntimeOptions::simulated: one worker, a seeded schedule, a manual
/// clock), once for each of three seeds, with a watchdog. There a
/// `co_await shoal::sleep_for(1ms)` returns only once every other task
/// waits and no I/O is ready: the event "the others got where they wait",
/// for a test that must act only then (or check that nothing happened).
#define SHOAL_SIMULATED_TEST(Suite, Name)                                                     \
  static ::shoal::Task<void> Suite##_##Name##_body();                                          \
  TEST(Suite, Name) {                                                                          \
    for (std::uint64_t seed : {1u, 2u, 3u}) {                                                  \
      SCOPED_TRACE(std::string("simulated seed ") + std::to_string(seed));                     \
      ::shoal::test::Watchdog dog(::shoal::test::kWatchdog, #Suite "." #Name);                 \
      ::shoal::run(Suite##_##Name##_body(), ::shoal::RuntimeOptions::simulated(seed));          \
    }                                                                                          \
  }                                                                                            \
  static ::shoal::Task<void> Suite##_##Name##_body()

/// A test whose body is a coroutine run under shoal::run (with a watchdog).
#define SHOAL_TEST(Suite, Name)                                  \
  static ::shoal::Task<void> Suite##_##Name##_body(std::size_t); \
  TEST_P(Suite, Name) { run_task(Suite##_##Name##_body(GetParam())); } \
  static ::shoal::Task<void> Suite##_##Name##_body([[maybe_unused]] std::size_t workers)
