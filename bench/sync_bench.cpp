// Sync library figures: uncontended with_lock vs std::mutex, contended
// with_lock (8 tasks x 100,000 increments), and Once's fast path.
//   build/release/bench/sync_bench      (SHOAL_BENCH_REPS, default 5)
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/bench_util.hpp"
#include "shoal/shoal.hpp"

namespace {

using shoal::bench::Clock;
using shoal::bench::since;

volatile long sink = 0;

double std_mutex_ns(long n) {
  std::mutex m;
  long counter = 0;
  const auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) {
    std::lock_guard<std::mutex> g(m);
    ++counter;
  }
  sink = counter;
  return since(t0) * 1e9 / static_cast<double>(n);
}

// The same-run reference for the contended row: 8 plain threads on one
// std::mutex (each thread pins a core while it waits, tasks do not).
double std_mutex_contended_ops(int threads, long per_thread) {
  std::mutex m;
  long counter = 0;
  std::vector<std::thread> ts;
  const auto t0 = Clock::now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (long i = 0; i < per_thread; ++i) {
        std::lock_guard<std::mutex> g(m);
        ++counter;
      }
    });
  }
  for (auto& t : ts) t.join();
  const double ops = static_cast<double>(threads * per_thread) / since(t0);
  if (counter != threads * per_thread) std::printf("WRONG total %ld\n", counter);
  return ops;
}

double with_lock_uncontended_ns(long n) {
  double ns = 0;
  shoal::RuntimeOptions o;
  o.workers = 1;
  shoal::run([&]() -> shoal::Task<void> {
    shoal::Mutex m;
    long counter = 0;
    const auto t0 = Clock::now();
    for (long i = 0; i < n; ++i) co_await shoal::with_lock(m, [&] { ++counter; });
    ns = since(t0) * 1e9 / static_cast<double>(n);
    sink = counter;
  }(), o);
  return ns;
}

double with_lock_contended_ops(int tasks, long per_task) {
  double ops = 0;
  shoal::run([&]() -> shoal::Task<void> {
    shoal::Mutex m;
    long counter = 0;
    const auto t0 = Clock::now();
    co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
      for (int t = 0; t < tasks; ++t) {
        s.spawn([&]() -> shoal::Task<void> {
          for (long i = 0; i < per_task; ++i) co_await shoal::with_lock(m, [&] { ++counter; });
        });
      }
      co_return;
    });
    ops = static_cast<double>(tasks * per_task) / since(t0);
    if (counter != tasks * per_task) std::printf("WRONG total %ld\n", counter);
  }());
  return ops;
}

double once_fast_path_ns(long n) {
  double ns = 0;
  shoal::RuntimeOptions o;
  o.workers = 1;
  shoal::run([&]() -> shoal::Task<void> {
    shoal::Once<long> once;
    (void)co_await shoal::once_do(once, [] { return 42L; });
    long sum = 0;
    const auto t0 = Clock::now();
    for (long i = 0; i < n; ++i) sum += co_await shoal::once_do(once, [] { return 0L; });
    ns = since(t0) * 1e9 / static_cast<double>(n);
    sink = sum;
  }(), o);
  return ns;
}

}  // namespace

int main() {
  const int reps = shoal::bench::repetitions(5);
  const long n = 2'000'000;
  const double std_ns = shoal::bench::measure(reps, [&] { return std_mutex_ns(n); });
  const double lock_ns = shoal::bench::measure(reps, [&] { return with_lock_uncontended_ns(n); });
  const double contended = shoal::bench::measure(reps, [&] { return with_lock_contended_ops(8, 100'000); });
  const double std_contended = shoal::bench::measure(reps, [&] { return std_mutex_contended_ops(8, 100'000); });
  const double once_ns = shoal::bench::measure(reps, [&] { return once_fast_path_ns(n); });
  std::printf("sync_bench (medians of %d)\n", reps);
  std::printf("  std::mutex lock+unlock, uncontended:      %6.1f ns\n", std_ns);
  std::printf("  with_lock, uncontended (1 worker):        %6.1f ns  (%.1fx std::mutex)\n", lock_ns, lock_ns / std_ns);
  std::printf("  with_lock, 8 tasks x 100,000 increments:  %6.2f M ops/s\n", contended / 1e6);
  std::printf("  std::mutex, 8 threads x 100,000:          %6.2f M ops/s\n", std_contended / 1e6);
  std::printf("  once_do after init:                       %6.1f ns\n", once_ns);
}
