// Tests whose body is a coroutine, for GoogleTest (include it where you
// include <gtest/gtest.h>; link shoal::testing and GTest). Each test runs on
// a runtime of its own under a watchdog, so a hang fails loudly.
//
//   SHOAL_TEST_SUITE(Echo);           // runs each SHOAL_TEST(Echo, ...) on 1 and on 4 workers
//   SHOAL_TEST(Echo, RepliesWithTheLine) {
//     auto [a, b] = shoal::testing::stream_pair();
//     co_await a.write_all(std::string_view("hi\n"));
//     shoal::net::BufferedReader in(b);
//     EXPECT_EQ(co_await in.read_line(100), "hi");
//   }
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "shoal/runtime/run.hpp"
#include "shoal/runtime/task.hpp"
#include "shoal/testing/stream_pair.hpp"
#include "shoal/testing/watchdog.hpp"

namespace shoal::testing {

/// How long a SHOAL_TEST may run before its watchdog dumps every task and
/// aborts.
inline constexpr std::chrono::seconds kTestWatchdog{120};

/// SHOAL_TEST_SUITE's fixture: GetParam() is the worker count.
class RuntimeTest : public ::testing::TestWithParam<std::size_t> {
 protected:
  /// Runs `t` to its end on a runtime of GetParam() workers, under a watchdog.
  template <class T>
  T run_task(Task<T> t) {
    Watchdog dog(kTestWatchdog, ::testing::UnitTest::GetInstance()->current_test_info()->name());
    RuntimeOptions opts;
    opts.workers = GetParam();
    return shoal::run(std::move(t), std::move(opts));
  }
};

/// Names SHOAL_TEST_SUITE's instances "1workers", "4workers".
inline std::string worker_param_name(const ::testing::TestParamInfo<std::size_t>& info) {
  return std::to_string(info.param) + "workers";
}

}  // namespace shoal::testing

/// ASSERT_* returns, which a coroutine cannot: this one co_returns.
#define SHOAL_CO_ASSERT(cond)                    \
  if (!(cond)) {                                 \
    ADD_FAILURE() << "assertion failed: " #cond; \
    co_return;                                   \
  }

/// Declares a suite of SHOAL_TESTs, each run on 1 worker and on 4.
#define SHOAL_TEST_SUITE(Suite)                                                                 \
  class Suite : public ::shoal::testing::RuntimeTest {};                                       \
  INSTANTIATE_TEST_SUITE_P(Workers, Suite, ::testing::Values(std::size_t{1}, std::size_t{4}), \
                           ::shoal::testing::worker_param_name)

/// A test whose body is a coroutine (`co_await` in it, `co_return` to end
/// early), run under shoal::run with a watchdog; `workers` is the worker
/// count. Its suite is declared with SHOAL_TEST_SUITE.
#define SHOAL_TEST(Suite, Name)                                         \
  static ::shoal::Task<void> Suite##_##Name##_body(std::size_t);        \
  TEST_P(Suite, Name) { run_task(Suite##_##Name##_body(GetParam())); } \
  static ::shoal::Task<void> Suite##_##Name##_body([[maybe_unused]] std::size_t workers)

/// A test whose body is a coroutine run under the simulated runtime
/// (RuntimeOptions::simulated: one worker, a seeded schedule, a manual
/// clock), once for each of three seeds, with a watchdog. There a
/// `co_await shoal::sleep_for(1ms)` returns only once every other task
/// waits and no I/O is ready: the event "the others got where they wait",
/// for a test that must act only then (or check that nothing happened).
#define SHOAL_SIMULATED_TEST(Suite, Name)                                                  \
  static ::shoal::Task<void> Suite##_##Name##_body();                                       \
  TEST(Suite, Name) {                                                                       \
    for (std::uint64_t seed : {1u, 2u, 3u}) {                                               \
      SCOPED_TRACE(std::string("simulated seed ") + std::to_string(seed));                  \
      ::shoal::testing::Watchdog dog(::shoal::testing::kTestWatchdog, #Suite "." #Name);    \
      ::shoal::run(Suite##_##Name##_body(), ::shoal::RuntimeOptions::simulated(seed));       \
    }                                                                                       \
  }                                                                                         \
  static ::shoal::Task<void> Suite##_##Name##_body()
