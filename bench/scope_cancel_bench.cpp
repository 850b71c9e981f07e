// Cancel-on-fault fan-out (DESIGN.md §3 row 4): N children blocked in a
// cancellable wait; one sibling faults; time from the throw until the scope
// has joined everyone and rethrown.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "bench/bench_util.hpp"
#include "shoal/shoal.hpp"
#include "tests/support/manual_event.hpp"

namespace {

shoal::Task<double> fan_out(long n) {
  shoal::test::ManualEvent never;
  std::atomic<long> blocked{0};
  shoal::bench::Clock::time_point t0;
  try {
    co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
      for (long i = 0; i < n; ++i) {
        s.spawn([&]() -> shoal::Task<void> {
          blocked.fetch_add(1, std::memory_order_relaxed);
          co_await never.wait();
        });
      }
      s.spawn([&]() -> shoal::Task<void> {
        while (blocked.load(std::memory_order_relaxed) < n) co_await shoal::checkpoint();
        t0 = shoal::bench::Clock::now();
        throw std::runtime_error("fault");
      });
      co_return;
    });
  } catch (const std::runtime_error&) {
  }
  co_return shoal::bench::since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 10'000;
  const int reps = shoal::bench::repetitions(9);
  shoal::Runtime rt;
  const double secs = shoal::bench::measure(reps, [&] { return rt.block_on(fan_out(n)); });
  std::printf("cancel_fanout: %ld blocked children, %zu workers: median %.3f ms from fault to rethrow\n", n,
              rt.worker_count(), secs * 1e3);
}
