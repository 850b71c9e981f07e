// A tiny benchmark driver: repeat, report the median, read peak RSS and CPU.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace shoal::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline long peak_rss_kib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

inline double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

inline int repetitions(int dflt) {
  const char* r = std::getenv("SHOAL_BENCH_REPS");
  return r ? std::max(1, std::atoi(r)) : dflt;
}

/// Runs `once` (returning seconds) `reps` times; returns the median.
inline double measure(int reps, const std::function<double()>& once) {
  std::vector<double> samples;
  for (int i = 0; i < reps; ++i) samples.push_back(once());
  return median(samples);
}

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace shoal::bench
