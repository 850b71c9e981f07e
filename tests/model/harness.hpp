// What the model binary provides in place of libshoal: the scheduler entry
// points the protocol code calls (schedule(), current_record(), ...), which
// here count wakes instead of running tasks, and helpers to drive an
// awaiter by hand on a model thread.
#pragma once

#include <gtest/gtest.h>

#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "model.hpp"
#include "shoal/detail/task_record.hpp"

namespace shoal::model {

/// A task whose wakes are counted. Every task in the model binary is one:
/// the harness's schedule() casts to it.
struct TestRecord : detail::TaskRecord {
  detail::shim::atomic<int> wakes{0};
  int resumed = 0;  // wakes its thread has consumed (that thread only)
  int moves = 0;    // migrate_from() calls (the task's own thread only)
};

/// The task current_record() returns on the calling thread.
void set_current_record(detail::TaskRecord* f) noexcept;

/// Blocks the calling model thread until `f` is scheduled once more.
void wait_until_scheduled(TestRecord& f) noexcept;

/// One `co_await aw` by task `f` (which must be current): await_suspend
/// gets a noop handle (record_of then falls back to current_record()); if it
/// suspends, the thread waits for the wake, then calls await_resume.
template <class Awaiter>
decltype(auto) await(TestRecord& f, Awaiter& aw) {
  if (!aw.await_ready() && aw.await_suspend(std::noop_coroutine())) wait_until_scheduled(f);
  return aw.await_resume();
}

/// SHOAL_STRESS_SCALE, as tests/support/test_support.hpp (which needs libshoal).
inline long scaled(long n) {
  const char* s = std::getenv("SHOAL_STRESS_SCALE");
  const double k = (s != nullptr && std::atof(s) > 0) ? std::atof(s) : 1.0;
  const long v = static_cast<long>(static_cast<double>(n) * k);
  return v < 1 ? 1 : v;
}

/// The seed of a randomized test: SHOAL_SEED if set, else fresh. Printed.
inline std::uint64_t test_seed() {
  const char* name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::uint64_t seed;
  if (const char* s = std::getenv("SHOAL_SEED")) {
    seed = std::strtoull(s, nullptr, 10);
  } else {
    seed = (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  }
  std::printf("[seed] %s: SHOAL_SEED=%llu\n", name, static_cast<unsigned long long>(seed));
  return seed;
}

/// Prints how many executions ran and fails the test with the checker's report.
inline void expect_passes(const Result& r) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::printf("[model] %s.%s: %ld executions\n", info->test_suite_name(), info->name(), r.executions);
  EXPECT_TRUE(r.ok) << r.failure;
}

/// Exhaustive at `bound`, with everything else default.
inline Result explore_bound(int bound, const std::function<void()>& body) {
  Options o;
  o.preemption_bound = bound;
  return explore(o, body);
}

inline Result random_runs(long n, const std::function<void()>& body) {
  return random_schedules(test_seed(), scaled(n), Options{}, body);
}

}  // namespace shoal::model
