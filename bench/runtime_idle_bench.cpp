// Idle CPU of a parked runtime: create one, run a trivial task so every
// worker has started and parked, then measure process CPU over a window.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "bench/bench_util.hpp"
#include "shoal/shoal.hpp"

int main(int argc, char** argv) {
  const double window = argc > 1 ? std::atof(argv[1]) : 2.0;
  shoal::Runtime rt;
  rt.block_on([]() -> shoal::Task<void> { co_return; }());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double cpu0 = shoal::bench::cpu_seconds();
  auto t0 = shoal::bench::Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(window));
  const double wall = shoal::bench::since(t0);
  const double cpu = shoal::bench::cpu_seconds() - cpu0;
  std::printf("idle: %zu workers parked for %.2f s: %.4f s CPU (%.3f%% of one core)\n", rt.worker_count(), wall, cpu,
              100.0 * cpu / wall);
}
