// The coordination toolkit (issue 17), each beside its same-run reference:
//   select over 4 channels (4 producers, 1 consumer) vs the same traffic
//     through one merged channel (messages/s);
//   broadcast to 8 receivers (values/s, every receiver sees every value);
//   notify ping-pong between two tasks (ns per round trip) vs the channel
//     ping-pong through two capacity-1 channels.
//   channel_toolkit_bench [select|broadcast|notify]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/bench_util.hpp"
#include "shoal/shoal.hpp"

namespace {

using shoal::Channel;
using shoal::Scope;
using shoal::Task;

constexpr std::size_t kCap = 256;

Task<double> select4(long total) {
  std::vector<std::unique_ptr<Channel<long>>> ch;
  for (int i = 0; i < 4; ++i) ch.push_back(std::make_unique<Channel<long>>(kCap));
  const long per = total / 4;
  long sum = 0;
  auto t0 = shoal::bench::Clock::now();
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (std::size_t p = 0; p < 4; ++p) {
      s.spawn([&, p]() -> Task<void> {
        for (long i = 0; i < per; ++i) co_await ch[p]->send(i);
      });
    }
    for (long k = 0; k < per * 4; ++k) {
      auto r = co_await shoal::select(shoal::on_recv(*ch[0]), shoal::on_recv(*ch[1]), shoal::on_recv(*ch[2]),
                                      shoal::on_recv(*ch[3]));
      sum += std::visit([](auto& o) { return *o; }, r);
    }
  });
  const double secs = shoal::bench::since(t0);
  if (sum != 4 * (per * (per - 1) / 2)) std::fprintf(stderr, "select: lost messages\n");
  co_return secs;
}

Task<double> merged(long total) {
  Channel<long> ch(kCap * 4);
  long got = 0;
  auto t0 = shoal::bench::Clock::now();
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    co_await shoal::scope([&](Scope& ps) -> Task<void> {
      for (int p = 0; p < 4; ++p) {
        ps.spawn([&]() -> Task<void> {
          for (long i = 0; i < total / 4; ++i) co_await ch.send(i);
        });
      }
      s.spawn([&]() -> Task<void> {
        while (auto v = co_await ch.recv()) ++got;
      });
      co_return;
    });
    ch.close();
  });
  const double secs = shoal::bench::since(t0);
  if (got != total / 4 * 4) std::fprintf(stderr, "merged: lost messages\n");
  co_return secs;
}

Task<double> broadcast8(long total) {
  shoal::Broadcast<long> b(1024);
  std::atomic<long> got{0}, lagged{0};
  std::vector<std::atomic<long>> read(8);
  shoal::Notify progress;
  auto t0 = shoal::bench::Clock::now();
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (std::size_t r = 0; r < 8; ++r) {
      s.spawn([&, r, rx = b.subscribe()]() mutable -> Task<void> {
        long local = 0;
        for (;;) {
          auto v = co_await rx.recv();
          if (v.closed()) break;
          if (v.lagged()) {
            lagged.fetch_add(1);
            continue;
          }
          ++local;
          if ((local & 63) == 0) {
            read[r].store(local, std::memory_order_relaxed);
            progress.notify_one();
          }
        }
        got.fetch_add(local);
      });
    }
    // Paced so that nobody lags: the sender stays within the capacity of the slowest reader.
    for (long i = 0; i < total; ++i) {
      for (;;) {
        long slowest = total;
        for (auto& c : read) slowest = std::min(slowest, c.load(std::memory_order_relaxed));
        if (i - slowest < 1024 - 128) break;
        co_await progress.wait();
      }
      (void)b.send(i);
    }
    b.close();
  });
  const double secs = shoal::bench::since(t0);
  if (got.load() != total * 8 || lagged.load() != 0) std::fprintf(stderr, "broadcast: lost or lagged values\n");
  co_return secs;
}

Task<double> notify_pingpong(long rounds) {
  shoal::Notify ping, pong;
  auto t0 = shoal::bench::Clock::now();
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      for (long i = 0; i < rounds; ++i) {
        co_await ping.wait();
        pong.notify_one();
      }
    });
    for (long i = 0; i < rounds; ++i) {
      ping.notify_one();
      co_await pong.wait();
    }
  });
  co_return shoal::bench::since(t0);
}

Task<double> channel_pingpong(long rounds) {
  Channel<long> ping(1), pong(1);
  auto t0 = shoal::bench::Clock::now();
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      for (long i = 0; i < rounds; ++i) co_await pong.send(*co_await ping.recv());
    });
    for (long i = 0; i < rounds; ++i) {
      co_await ping.send(i);
      (void)co_await pong.recv();
    }
  });
  co_return shoal::bench::since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : "";
  shoal::Runtime rt;
  const int reps = shoal::bench::repetitions(5);
  const std::size_t w = rt.worker_count();
  if (!*only || !std::strcmp(only, "select")) {
    const long total = 4'000'000;
    // Interleaved, so drift hits both alike.
    std::vector<double> sel, mer;
    for (int i = 0; i < reps; ++i) {
      sel.push_back(rt.block_on(select4(total)));
      mer.push_back(rt.block_on(merged(total)));
    }
    const double a = static_cast<double>(total) / shoal::bench::median(sel) / 1e6;
    const double b = static_cast<double>(total) / shoal::bench::median(mer) / 1e6;
    std::printf("select over 4 channels (cap %zu), 4 producers, 1 consumer, %zu workers: median %.2f M msgs/s; "
                "one merged channel (cap %zu): %.2f M msgs/s; select / merged = %.2f\n",
                kCap, w, a, kCap * 4, b, a / b);
  }
  if (!*only || !std::strcmp(only, "broadcast")) {
    const long total = 500'000;
    const double s = shoal::bench::measure(reps, [&] { return rt.block_on(broadcast8(total)); });
    std::printf("broadcast to 8 receivers (cap 1024), %zu workers: median %.2f M values sent/s (%.2f M deliveries/s)\n",
                w, static_cast<double>(total) / s / 1e6, static_cast<double>(total) * 8 / s / 1e6);
  }
  if (!*only || !std::strcmp(only, "notify")) {
    const long rounds = 1'000'000;
    std::vector<double> nt, ch;
    for (int i = 0; i < reps; ++i) {
      nt.push_back(rt.block_on(notify_pingpong(rounds)));
      ch.push_back(rt.block_on(channel_pingpong(rounds)));
    }
    std::printf("notify ping-pong, %zu workers: median %.0f ns per round trip; channel ping-pong (cap 1): %.0f ns\n", w,
                shoal::bench::median(nt) / static_cast<double>(rounds) * 1e9,
                shoal::bench::median(ch) / static_cast<double>(rounds) * 1e9);
  }
}
