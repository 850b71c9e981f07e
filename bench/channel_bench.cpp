// Channels (DESIGN.md §3 rows 2 and 3, and row 4 on recv):
//   ping-pong through two capacity-1 channels (ns per round trip),
//   4 producers x 4 consumers over one capacity-1024 channel (msgs/s),
//   cancel-on-fault fan-out of 10,000 children blocked in recv (ms),
//   the same 4x4 with W ns of work per value on each side (`pipeline W`:
//   whether gathering a channel's tasks on one worker costs the parallelism
//   of stages that compute; docs/scheduler.md).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "bench/bench_util.hpp"
#include "shoal/shoal.hpp"

namespace {

using shoal::Channel;
using shoal::Scope;
using shoal::Task;

Task<double> ping_pong(long rounds) {
  Channel<long> ping(1), pong(1);
  auto t0 = shoal::bench::Clock::now();
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      for (long i = 0; i < rounds; ++i) {
        auto v = co_await ping.recv();
        co_await pong.send(*v);
      }
    });
    for (long i = 0; i < rounds; ++i) {
      co_await ping.send(i);
      (void)co_await pong.recv();
    }
  });
  co_return shoal::bench::since(t0);
}

Task<double> mpmc(long total, int producers, int consumers, std::size_t capacity) {
  Channel<long> ch(capacity);
  std::atomic<long> received{0};
  auto t0 = shoal::bench::Clock::now();
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    co_await shoal::scope([&](Scope& senders) -> Task<void> {
      for (int p = 0; p < producers; ++p) {
        senders.spawn([&, p]() -> Task<void> {
          const long n = total / producers;
          for (long i = 0; i < n; ++i) co_await ch.send(p * n + i);
        });
      }
      for (int c = 0; c < consumers; ++c) {
        s.spawn([&]() -> Task<void> {
          long local = 0;
          while (auto v = co_await ch.recv()) ++local;
          received.fetch_add(local);
        });
      }
      co_return;
    });
    ch.close();
  });
  const double secs = shoal::bench::since(t0);
  if (received.load() != (total / producers) * producers) std::fprintf(stderr, "mpmc: lost messages!\n");
  co_return secs;
}

void spin_for(long ns) {
  const auto t0 = shoal::bench::Clock::now();
  while (std::chrono::duration_cast<std::chrono::nanoseconds>(shoal::bench::Clock::now() - t0).count() < ns) {
  }
}

Task<double> pipeline(long total, long work_ns) {
  Channel<long> ch(1024);
  std::atomic<long> received{0};
  auto t0 = shoal::bench::Clock::now();
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (int c = 0; c < 4; ++c) {
      s.spawn([&]() -> Task<void> {
        long local = 0;
        while (auto v = co_await ch.recv()) {
          spin_for(work_ns);
          ++local;
        }
        received.fetch_add(local);
      });
    }
    co_await shoal::scope([&](Scope& senders) -> Task<void> {
      for (int p = 0; p < 4; ++p) {
        senders.spawn([&]() -> Task<void> {
          for (long i = 0; i < total / 4; ++i) {
            spin_for(work_ns);
            co_await ch.send(i);
          }
        });
      }
      co_return;
    });
    ch.close();
  });
  const double secs = shoal::bench::since(t0);
  if (received.load() != total / 4 * 4) std::fprintf(stderr, "pipeline: lost messages!\n");
  co_return secs;
}

Task<double> cancel_recv(long n) {
  Channel<int> never(0);
  std::atomic<long> blocked{0};
  shoal::bench::Clock::time_point t0;
  try {
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      for (long i = 0; i < n; ++i) {
        s.spawn([&]() -> Task<void> {
          blocked.fetch_add(1, std::memory_order_relaxed);
          (void)co_await never.recv();
        });
      }
      s.spawn([&]() -> Task<void> {
        while (blocked.load(std::memory_order_relaxed) < n) co_await shoal::checkpoint();
        co_await shoal::sleep_for(std::chrono::milliseconds(1));  // let the last ones block
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
  const char* only = argc > 1 ? argv[1] : "";
  shoal::Runtime rt;
  const int reps = shoal::bench::repetitions(5);
  if (!*only || !std::strcmp(only, "pingpong")) {
    const long rounds = 1'000'000;
    double s = shoal::bench::measure(reps, [&] { return rt.block_on(ping_pong(rounds)); });
    std::printf("channel ping-pong, capacity 1, %zu workers: median %.0f ns per round trip\n", rt.worker_count(),
                s / static_cast<double>(rounds) * 1e9);
  }
  if (!*only || !std::strcmp(only, "mpmc")) {
    const long total = 10'000'000;
    double s = shoal::bench::measure(reps, [&] { return rt.block_on(mpmc(total, 4, 4, 1024)); });
    std::printf("channel 4x4 MPMC, capacity 1024, %ld msgs, %zu workers: median %.2f M msgs/s\n", total,
                rt.worker_count(), static_cast<double>(total) / s / 1e6);
  }
  if (!std::strcmp(only, "pipeline")) {
    const long work = argc > 2 ? std::atol(argv[2]) : 1000;
    const long total = 600'000'000 / (work + 100);  // ~0.3 s of work on two cores
    double s = shoal::bench::measure(reps, [&] { return rt.block_on(pipeline(total, work)); });
    std::printf("channel 4x4 pipeline, %ld ns of work per value on each side, %zu workers: median %.3f M values/s\n",
                work, rt.worker_count(), static_cast<double>(total) / s / 1e6);
  }
  if (!*only || !std::strcmp(only, "cancel")) {
    double s = shoal::bench::measure(reps * 2 - 1, [&] { return rt.block_on(cancel_recv(10'000)); });
    std::printf("cancel fan-out: 10,000 children blocked in recv, %zu workers: median %.2f ms fault to rethrow\n",
                rt.worker_count(), s * 1e3);
  }
}
