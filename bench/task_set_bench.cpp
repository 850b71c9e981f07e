// Task sets against a plain scope: spawn throughput, spawn_local, the cost of
// waiting for admission, and memory over many sequential children.
// Timings: medians of SHOAL_BENCH_REPS rounds (default 7), the workloads
// interleaved within a round. Memory: one pass per frame resource, run first,
// with the peak reset (/proc/self/clear_refs) before each pass; HWM+ is the
// peak's growth from child 10,000 to 100,000, the number that must stay flat.
// A run that throws is counted as FAILED in the table, not timed.
// Usage: task_set_bench [children=1000000]
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory_resource>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "shoal/shoal.hpp"

namespace {

using shoal::SpawnStatus;
using shoal::Task;
using shoal::TaskSet;

Task<void> trivial() { co_return; }

void expect_started(SpawnStatus s) {
  if (s != SpawnStatus::started) throw std::runtime_error("task_set_bench: a spawn was not started");
}

Task<void> scope_tasks(long n) {
  co_await shoal::scope([n](shoal::Scope& s) -> Task<void> {
    for (long i = 0; i < n; ++i) s.spawn(trivial());
    co_return;
  });
}

Task<void> scope_factories(long n) {
  co_await shoal::scope([n](shoal::Scope& s) -> Task<void> {
    for (long i = 0; i < n; ++i) s.spawn(trivial);
    co_return;
  });
}

Task<void> set_children(long n, std::size_t limit, bool local) {
  co_await shoal::task_set(limit, [n, local](TaskSet& set) -> Task<void> {
    for (long i = 0; i < n; ++i) {
      if (local) {
        expect_started(co_await set.spawn_local(trivial));
      } else {
        expect_started(co_await set.spawn(trivial));
      }
    }
  });
}

// ---- memory ----------------------------------------------------------------

struct Snapshot {
  long rss_kib = 0;       // VmRSS
  long hwm_kib = 0;       // VmHWM (peak since the last reset)
  long upstream_kib = 0;  // what the pmr resource took from its upstream
};

long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::size_t len = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, len, field) == 0 && line.size() > len && line[len] == ':') {
      return std::atol(line.c_str() + len + 1);
    }
  }
  return -1;
}

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

/// new/delete, counting the bytes held (the pools' and arenas' upstream).
class CountingResource final : public std::pmr::memory_resource {
 public:
  long held_kib() const noexcept { return held_.load(std::memory_order_relaxed) / 1024; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t align) override {
    void* p = std::pmr::new_delete_resource()->allocate(bytes, align);
    held_.fetch_add(static_cast<long>(bytes), std::memory_order_relaxed);
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t align) override {
    held_.fetch_sub(static_cast<long>(bytes), std::memory_order_relaxed);
    std::pmr::new_delete_resource()->deallocate(p, bytes, align);
  }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }

  std::atomic<long> held_{0};
};

Snapshot snap(const CountingResource* upstream) {
  return Snapshot{status_kib("VmRSS"), status_kib("VmHWM"), upstream != nullptr ? upstream->held_kib() : 0};
}

/// A short child that owns a heap-allocated argument and yields once.
Task<void> short_child(std::string payload) {
  co_await shoal::checkpoint();
  if (payload.empty()) throw std::logic_error("task_set_bench: empty payload");
}

constexpr long kMemChildren = 100'000;
constexpr long kMemMark = 10'000;
constexpr std::size_t kMemLimit = 64;

Task<void> sequential_children(std::pmr::memory_resource* resource, const CountingResource* upstream, Snapshot* out) {
  auto body = [upstream, out](TaskSet& set) -> Task<void> {
    out[0] = snap(upstream);
    for (long i = 0; i < kMemChildren; ++i) {
      if (i == kMemMark) out[1] = snap(upstream);
      expect_started(co_await set.spawn(short_child, std::string(48, 'x')));
    }
  };
  if (resource != nullptr) {
    co_await shoal::task_set(resource, kMemLimit, body);
  } else {
    co_await shoal::task_set(kMemLimit, body);
  }
  out[2] = snap(upstream);
}

void memory_pass(shoal::Runtime& rt, const char* name, std::pmr::memory_resource* resource,
                 const CountingResource* upstream, const char* expect) {
  Snapshot s[3];
  reset_peak_rss();
  try {
    rt.block_on(sequential_children(resource, upstream, s));
  } catch (const std::exception& e) {
    std::printf("  %-30s FAILED: %s\n", name, e.what());
    return;
  }
  std::printf("  %-30s %7ld %7ld %7ld   %7ld %7ld %7ld   %+6ld", name, s[0].rss_kib, s[1].rss_kib, s[2].rss_kib,
              s[0].hwm_kib, s[1].hwm_kib, s[2].hwm_kib, s[2].hwm_kib - s[1].hwm_kib);
  if (upstream != nullptr) {
    std::printf("   %7ld %7ld", s[1].upstream_kib, s[2].upstream_kib);
  } else {
    std::printf("   %7s %7s", "-", "-");
  }
  std::printf("  %s\n", expect);
}

void memory_section(shoal::Runtime& rt) {
  const bool reset = reset_peak_rss();
  std::printf("memory: %ld sequential children (one checkpoint, a 48-byte std::string each), limit %zu%s\n",
              kMemChildren, kMemLimit, reset ? "" : " (peak reset unavailable: VmHWM is the process peak)");
  std::printf("  %-30s %23s   %23s   %6s   %15s\n", "", "VmRSS KiB start/10k/100k", "VmHWM KiB start/10k/100k", "HWM+",
              "upstream 10k/100k");
  memory_pass(rt, "task_set(limit) (new/delete)", nullptr, nullptr, "flat expected");
  {
    // Unsynchronized is fine: the set serializes its calls into the resource.
    CountingResource upstream;
    std::pmr::unsynchronized_pool_resource pool(&upstream);
    memory_pass(rt, "unsynchronized_pool_resource", &pool, &upstream, "flat expected");
  }
  {
    CountingResource upstream;
    std::pmr::monotonic_buffer_resource arena(&upstream);
    memory_pass(rt, "monotonic_buffer_resource", &arena, &upstream, "grows (never frees): expected");
  }
}

// ---- timings ---------------------------------------------------------------

struct Workload {
  const char* name = "";
  long n = 0;
  std::function<Task<void>()> make;
  std::vector<double> secs;  // completed runs only
  int failed = 0;
  std::string error;
  double median = 0;
  bool ok() const { return !secs.empty(); }
  double ns_per_spawn() const { return median / static_cast<double>(n) * 1e9; }
};

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  const int reps = shoal::bench::repetitions(7);
  shoal::Runtime rt;

  memory_section(rt);

  std::vector<Workload> w;
  auto add = [&](const char* name, std::function<Task<void>()> make) {
    Workload x;
    x.name = name;
    x.n = n;
    x.make = std::move(make);
    w.push_back(std::move(x));
  };
  add("scope s.spawn(Task)", [n] { return scope_tasks(n); });
  add("scope s.spawn(factory)", [n] { return scope_factories(n); });
  add("task_set(1000) spawn", [n] { return set_children(n, 1000, false); });
  add("task_set(1000) spawn_local", [n] { return set_children(n, 1000, true); });
  add("task_set(1) spawn", [n] { return set_children(n, 1, false); });
  add("task_set(1) spawn_local", [n] { return set_children(n, 1, true); });
  for (int r = 0; r < reps; ++r) {
    for (auto& x : w) {
      auto t0 = shoal::bench::Clock::now();
      try {
        rt.block_on(x.make());
        x.secs.push_back(shoal::bench::since(t0));
      } catch (const std::exception& e) {  // reported in the table, not timed
        ++x.failed;
        x.error = e.what();
      }
    }
  }
  std::printf("\nthroughput: %ld trivial children, %zu workers, median (and best) of %d\n", n, rt.worker_count(), reps);
  std::printf("  %-30s %9s %9s %11s %9s\n", "workload", "ms", "best ms", "M tasks/s", "ns/spawn");
  for (auto& x : w) {
    if (x.ok()) {
      x.median = shoal::bench::median(x.secs);
      std::printf("  %-30s %9.1f %9.1f %11.2f %9.1f", x.name, x.median * 1e3,
                  *std::min_element(x.secs.begin(), x.secs.end()) * 1e3, static_cast<double>(x.n) / x.median / 1e6,
                  x.ns_per_spawn());
    } else {
      std::printf("  %-30s %9s %9s %11s %9s", x.name, "-", "-", "-", "-");
    }
    if (x.failed > 0) std::printf("   FAILED %d/%d: %s", x.failed, reps, x.error.c_str());
    std::printf("\n");
  }
  auto diff = [&](std::size_t slow, std::size_t fast) {
    return w[slow].ok() && w[fast].ok() ? w[slow].ns_per_spawn() - w[fast].ns_per_spawn()
                                        : std::numeric_limits<double>::quiet_NaN();
  };
  std::printf("  admission wait (limit 1 - limit 1000): spawn %+.1f ns/spawn, spawn_local %+.1f ns/spawn\n", diff(4, 2),
              diff(5, 3));
  if (w[1].ok() && w[2].ok()) {
    std::printf("  task_set(1000) spawn / scope s.spawn(factory): %.2fx the time\n", w[2].median / w[1].median);
  }
  std::printf("peak RSS since the memory section %.1f MiB\n",
              static_cast<double>(shoal::bench::peak_rss_kib()) / 1024.0);
}
