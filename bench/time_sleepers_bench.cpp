// 100,000 tasks each sleeping 0-50 ms (DESIGN.md §3 row 6): wall time of
// the whole scope against the ideal 50 ms, and peak RSS.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "bench/bench_util.hpp"
#include "shoal/shoal.hpp"

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100'000;
  const int reps = shoal::bench::repetitions(5);
  shoal::Runtime rt;
  const double secs = shoal::bench::measure(reps, [&] {
    std::mt19937 rng(42);
    auto t0 = shoal::bench::Clock::now();
    rt.block_on(shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
      for (long i = 0; i < n; ++i) {
        s.spawn([](std::chrono::microseconds d) -> shoal::Task<void> { co_await shoal::sleep_for(d); },
                std::chrono::microseconds(rng() % 50'001));
      }
      co_return;
    }));
    return shoal::bench::since(t0);
  });
  std::printf("sleepers: %ld tasks sleeping 0-50 ms, %zu workers: median %.1f ms (ideal 50 ms), peak RSS %.1f MiB\n",
              n, rt.worker_count(), secs * 1e3, static_cast<double>(shoal::bench::peak_rss_kib()) / 1024.0);
}
