// spawn+join of N trivial tasks in one scope (DESIGN.md §3 row 1).
// Prints tasks/s (median of SHOAL_BENCH_REPS runs) and peak RSS.
#include <cstdio>
#include <cstdlib>

#include "bench/bench_util.hpp"
#include "shoal/shoal.hpp"

namespace {

shoal::Task<void> trivial() { co_return; }

shoal::Task<void> fan_out(long n) {
  co_await shoal::scope([n](shoal::Scope& s) -> shoal::Task<void> {
    for (long i = 0; i < n; ++i) s.spawn(trivial());
    co_return;
  });
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  const int reps = shoal::bench::repetitions(7);
  shoal::Runtime rt;
  const double secs = shoal::bench::measure(reps, [&] {
    auto t0 = shoal::bench::Clock::now();
    rt.block_on(fan_out(n));
    return shoal::bench::since(t0);
  });
  std::printf("spawn_join: %ld tasks, %zu workers: median %.3f ms, %.2f M tasks/s, peak RSS %.1f MiB\n", n,
              rt.worker_count(), secs * 1e3, static_cast<double>(n) / secs / 1e6,
              static_cast<double>(shoal::bench::peak_rss_kib()) / 1024.0);
}
