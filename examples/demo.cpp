// The shoal demo: structured concurrency with timings.
//  1. A fan-out of 10,000 children; one fails; the rest are cancelled and
//     joined, and the scope rethrows the original fault.
//  2. Spawn+join throughput of 200,000 trivial tasks.
//  3. A deadline cutting off slow work, which unwinds before the deadline returns.
//  4. A channel pipeline: producer -> 4 workers -> consumer.
//  5. A task set standing in for a server: "connections" arrive on a
//     channel, one task each, at most 64 live; a failing one does not stop
//     the others, and the set reports it once everything is done.
//  6. Thousands of idle connections to its own server (net::serve): the
//     thread count stays the pool's, and each connection costs well under a
//     page of memory; a new connection is still answered at once.
//  7. The sync library: 8 tasks and a plain thread share one Mutex (the
//     total is exact); 16 callers race a Once (one init runs); a waiter cut
//     off by its deadline leaves the queue and the lock is still free.
//  8. The coordination toolkit: select and broadcast.
//  9. Observability: a task dump of waiting tasks (names, spawn sites, what
//     each waits on and for how long) and the runtime's counters.
// 10. Files (shoal::fs): 16 tasks write 1 MiB each into one file at their
//     own offsets, and it is read back whole.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <type_traits>
#include <variant>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shoal/shoal.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

shoal::Task<void> fan_out_with_a_failure() {
  constexpr int kChildren = 10'000;
  std::atomic<int> started{0}, cancelled{0};
  Clock::time_point fault_at;
  const auto t0 = Clock::now();
  try {
    co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
      for (int i = 0; i < kChildren; ++i) {
        s.spawn([&]() -> shoal::Task<void> {
          started.fetch_add(1);
          try {
            for (;;) co_await shoal::checkpoint();  // "work" that checks in regularly
          } catch (const shoal::Cancelled&) {
            cancelled.fetch_add(1);
            throw;
          }
        });
      }
      s.spawn([&]() -> shoal::Task<void> {
        while (started.load() < kChildren) co_await shoal::checkpoint();
        fault_at = Clock::now();
        throw std::runtime_error("backend 7 returned garbage");
      });
      co_return;
    });
  } catch (const std::runtime_error& e) {
    std::printf("1. fan-out: %d children started in %.1f ms; one failed: \"%s\"\n", started.load(),
                std::chrono::duration<double, std::milli>(fault_at - t0).count(), e.what());
    std::printf("   %d siblings cancelled and joined %.2f ms after the fault; the scope rethrew it\n",
                cancelled.load(), ms_since(fault_at));
  }
}

shoal::Task<void> spawn_throughput() {
  constexpr int kTasks = 200'000;
  const auto t0 = Clock::now();
  std::atomic<int> ran{0};
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    for (int i = 0; i < kTasks; ++i) s.spawn([&]() -> shoal::Task<void> {
        ran.fetch_add(1, std::memory_order_relaxed);
        co_return;
      });
    co_return;
  });
  const double ms = ms_since(t0);
  std::printf("2. spawn+join: %d tasks in %.1f ms (%.2f M tasks/s)\n", ran.load(), ms, kTasks / ms / 1e3);
}

shoal::Task<void> deadline_cuts_off_slow_work() {
  using namespace std::chrono_literals;
  bool cleaned_up = false;
  const auto t0 = Clock::now();
  auto slow_backend = [&]() -> shoal::Task<int> {
    struct Cleanup {
      bool& done;
      ~Cleanup() { done = true; }
    } cleanup{cleaned_up};
    co_await shoal::sleep_for(10s);  // a backend that hangs
    co_return 1;
  };
  std::optional<int> r = co_await shoal::move_on_after(50ms, slow_backend());
  std::printf("3. deadline: slow call %s after %.1f ms (limit 50 ms); its cleanup %s before the deadline returned\n",
              r ? "finished" : "cut off", ms_since(t0), cleaned_up ? "ran" : "had NOT run");
}

shoal::Task<void> channel_pipeline() {
  constexpr long kItems = 100'000;
  shoal::Channel<long> jobs(256), results(256);
  long sum = 0;
  const auto t0 = Clock::now();
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    s.spawn([&]() -> shoal::Task<void> {  // producer
      for (long i = 1; i <= kItems; ++i) co_await jobs.send(i);
      jobs.close();
    });
    s.spawn([&]() -> shoal::Task<void> {  // 4 workers; results closes when all are done
      co_await shoal::scope([&](shoal::Scope& workers) -> shoal::Task<void> {
        for (int w = 0; w < 4; ++w) {
          workers.spawn([&]() -> shoal::Task<void> {
            while (auto v = co_await jobs.recv()) co_await results.send(*v * 2);
          });
        }
        co_return;
      });
      results.close();
    });
    while (auto v = co_await results.recv()) sum += *v;  // consumer
  });
  const double ms = ms_since(t0);
  std::printf("4. pipeline: %ld items through producer -> 4 workers -> consumer in %.1f ms (%.2f M items/s), sum %s\n",
              kItems, ms, kItems / ms / 1e3, sum == kItems * (kItems + 1) ? "correct" : "WRONG");
}

shoal::Task<void> serve_connections(shoal::TaskSet& set, shoal::Channel<int>& accepted, std::atomic<int>& live,
                                    std::atomic<int>& peak, std::atomic<int>& served) {
  while (auto conn = co_await accepted.recv()) {
    (void)co_await set.spawn([&, id = *conn]() -> shoal::Task<void> {
      int now = live.fetch_add(1) + 1;
      for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
      }
      co_await shoal::sleep_for(std::chrono::microseconds(50 + id % 200));  // the "request"
      live.fetch_sub(1);
      if (id == 777) throw std::runtime_error("connection 777 sent garbage");
      served.fetch_add(1);
    });
  }
}

shoal::Task<void> task_set_server() {
  constexpr int kConnections = 20'000;
  constexpr std::size_t kLimit = 64;
  std::atomic<int> live{0}, peak{0}, served{0};
  shoal::Channel<int> accepted(16);
  const auto t0 = Clock::now();
  try {
    co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
      s.spawn([&]() -> shoal::Task<void> {  // the "listener"
        for (int i = 0; i < kConnections; ++i) co_await accepted.send(i);
        accepted.close();
      });
      co_await shoal::task_set(kLimit, [&](shoal::TaskSet& set) -> shoal::Task<void> {
        co_await serve_connections(set, accepted, live, peak, served);
      });
    });
  } catch (const std::exception& e) {
    std::printf("5. task set: %d of %d connections served in %.1f ms, at most %d live (limit %zu);\n"
                "   the set reported the one failure after all finished: \"%s\"\n",
                served.load(), kConnections, ms_since(t0), peak.load(), kLimit, e.what());
    co_return;
  }
  std::printf("5. task set: WRONG: the failing connection was not reported\n");
}

long proc_status(const char* key) {  // a "Key:  value" line of /proc/self/status
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::char_traits<char>::length(key)));
  }
  return -1;
}

/// An idle-friendly handler: waits without a buffer, echoes what arrives.
shoal::Task<void> echo(shoal::net::Stream c) {
  std::array<std::byte, 64> buf;
  for (;;) {
    co_await c.wait_readable();
    const std::size_t n = co_await c.read_some(buf);
    if (n == 0) co_return;
    co_await c.write_all(std::span(buf.data(), n));
  }
}

shoal::Task<void> idle_connections(std::size_t workers) {
  // Two descriptors per connection (both ends live in this process).
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  const long conns = std::min<long>(5'000, (static_cast<long>(rl.rlim_cur) - 64) / 2);
  auto listener = shoal::net::Listener::bind(shoal::net::Address::parse("127.0.0.1:0"));
  const auto addr = listener.local_address();
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions opts;
  opts.shutdown = &stop;
  std::vector<shoal::net::Stream> clients;
  clients.reserve(static_cast<std::size_t>(conns));
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    s.spawn(shoal::net::serve(listener, opts, echo));
    // Warm the allocator with one round trip, then measure from here.
    auto probe = [&]() -> shoal::Task<double> {
      auto c = co_await shoal::net::connect(addr);
      const auto t0 = Clock::now();
      co_await c.write_all(std::string_view("ping"));
      std::array<std::byte, 4> back;
      co_await c.read_exact(back);
      co_return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    };
    (void)co_await probe();
    const long rss0 = proc_status("VmRSS:");
    const auto t0 = Clock::now();
    for (long i = 0; i < conns; ++i) clients.push_back(co_await shoal::net::connect(addr));
    // One round trip on the last one: by then every earlier one was accepted.
    co_await clients.back().write_all(std::string_view("x"));
    std::array<std::byte, 1> one;
    co_await clients.back().read_exact(one);
    const double open_ms = ms_since(t0);
    const long rss1 = proc_status("VmRSS:");
    const double fresh_us = co_await probe();
    std::printf("6. idle connections: %ld open to our own server in %.0f ms; %ld threads in the process for %zu workers;\n"
                "   RSS +%ld KiB = %.0f bytes per connection (server task + both sockets' user-space state);\n"
                "   a request on a fresh connection answered in %.0f us\n",
                conns, open_ms, proc_status("Threads:"), workers, rss1 - rss0,
                static_cast<double>(rss1 - rss0) * 1024.0 / static_cast<double>(conns), fresh_us);
    clients.clear();  // every handler sees end of stream
    stop.trigger();
  });
}

shoal::Task<void> sync_library() {
  constexpr long kPerTask = 100'000;
  shoal::Mutex m("demo counter");
  long counter = 0;  // only the mutex guards it
  const auto t0 = Clock::now();
  std::thread thread([&] {
    for (long i = 0; i < kPerTask; ++i) shoal::blocking::with_lock(m, [&] { ++counter; });
  });
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    for (int t = 0; t < 8; ++t) {
      s.spawn([&]() -> shoal::Task<void> {
        for (long i = 0; i < kPerTask; ++i) co_await shoal::with_lock(m, [&] { ++counter; });
      });
    }
    co_return;
  });
  thread.join();
  const double lock_ms = ms_since(t0);

  shoal::Once<std::string> config("demo config");
  std::atomic<int> inits{0};
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    for (int i = 0; i < 16; ++i) {
      s.spawn([&]() -> shoal::Task<void> {
        (void)co_await shoal::once_do(config, [&]() -> shoal::Task<std::string> {
          inits.fetch_add(1);
          co_await shoal::sleep_for(std::chrono::milliseconds(2));  // the others wait, parked
          co_return std::string("loaded");
        });
      });
    }
    co_return;
  });

  // A waiter cut off by its deadline leaves the queue; nothing leaks.
  bool waited_out = false;
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    shoal::Channel<int> held(1), release(1);  // one-shot signals
    s.spawn(shoal::with_lock(m, [&]() -> shoal::Task<void> {
      co_await held.send(1);
      (void)co_await release.recv();
    }));
    (void)co_await held.recv();
    const bool got = co_await shoal::move_on_after(std::chrono::milliseconds(5), shoal::with_lock(m, [] {}));
    waited_out = !got;
    co_await release.send(1);
  });
  const bool free_after = (co_await shoal::with_try_lock(m, [] {})).has_value();
  std::printf("7. sync: 8 tasks x %ld + a thread x %ld with_lock increments: total %ld (exact: %s) in %.1f ms;\n"
              "   16 callers raced a Once: init ran %d time(s), value \"%s\"; a waiter cut off after 5 ms %s,\n"
              "   and the mutex is free afterwards: %s\n",
              kPerTask, kPerTask, counter, counter == 9 * kPerTask ? "yes" : "NO", lock_ms, inits.load(),
              config.get() != nullptr ? config.get()->c_str() : "(none)", waited_out ? "left the queue" : "WRONG: got it",
              free_after ? "yes" : "NO");
}

// 8. The coordination toolkit: a select loop over four producers' channels
// and a stop notification loses nothing (a race of recv()s would drop the
// values its losers had already taken), and a broadcast reaches every
// subscriber, telling a slow one how many lines it missed.
shoal::Task<void> coordination() {
  constexpr long kPer = 10'000;
  std::vector<std::unique_ptr<shoal::Channel<long>>> chans;
  for (int i = 0; i < 4; ++i) chans.push_back(std::make_unique<shoal::Channel<long>>(64));
  shoal::Notify stop;
  long received = 0, sum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    for (std::size_t p = 0; p < 4; ++p) {
      s.spawn([&, p]() -> shoal::Task<void> {
        for (long i = 1; i <= kPer; ++i) co_await chans[p]->send(i);
        if (p == 0) stop.notify_one();  // only a signal: the select still takes everything sent
      });
    }
    while (received < 4 * kPer) {
      auto r = co_await shoal::select(shoal::on_recv(*chans[0]), shoal::on_recv(*chans[1]), shoal::on_recv(*chans[2]),
                                      shoal::on_recv(*chans[3]), shoal::on_notify(stop));
      if (r.index() == 4) continue;
      sum += std::visit([](auto& v) -> long {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) {
          return 0;
        } else {
          return *v;
        }
      }, r);
      ++received;
    }
  });
  const double select_ms = ms_since(t0);
  shoal::Broadcast<int> news(8);
  std::vector<long> seen(4, 0);
  long missed = 0;
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    for (std::size_t r = 0; r < 4; ++r) {
      s.spawn([&, r, rx = news.subscribe()]() mutable -> shoal::Task<void> {
        for (;;) {
          auto v = co_await rx.recv();
          if (v.closed()) co_return;
          if (v.lagged()) {
            missed += static_cast<long>(v.missed());
            continue;
          }
          ++seen[r];
          if (r == 3) co_await shoal::sleep_for(std::chrono::microseconds(50));  // a slow reader
        }
      });
    }
    for (int i = 0; i < 1000; ++i) {
      (void)news.send(i);
      if (i % 8 == 7) co_await shoal::sleep_for(std::chrono::microseconds(10));
    }
    news.close();
  });
  std::printf("8. select over 4 channels + a notify: %ld of %ld values received, sum %s, in %.1f ms;\n"
              "   broadcast of 1000 lines to 4 subscribers: %ld, %ld, %ld each, the slow one %ld (+%ld missed, told so)\n",
              received, 4 * kPer, sum == 4 * (kPer * (kPer + 1) / 2) ? "exact" : "WRONG", select_ms, seen[0], seen[1],
              seen[2], seen[3], missed);
}

// 9. Observability: two named tasks wait; a dump shows where each was
// spawned and what it waits on; then the runtime's counters so far.
shoal::Task<void> observability(const shoal::Runtime& rt) {
  shoal::Channel<int> inbox(0);
  shoal::Event go;
  std::string dump;
  auto body = [&](shoal::Scope& s) -> shoal::Task<void> {
    s.spawn(shoal::named("mailbox reader"), [&]() -> shoal::Task<void> { (void)co_await inbox.recv(); });
    s.spawn(shoal::named("ticker"), [&]() -> shoal::Task<void> { co_await go.wait(); });
    for (int tries = 0; tries < 1000; ++tries) {  // until both are at their waits (bounded)
      std::ostringstream out;
      rt.dump_tasks(out);
      dump = out.str();
      if (dump.find("\"mailbox reader\"") != std::string::npos && dump.find("\"ticker\"") != std::string::npos &&
          dump.find("on shoal::Channel::recv") != std::string::npos && dump.find("on shoal::Event::wait") != std::string::npos) {
        break;
      }
      co_await shoal::sleep_for(std::chrono::milliseconds(1));
    }
    s.cancel();
  };
  co_await shoal::scope(body);
  std::printf("9. a task dump (Runtime::dump_tasks), the lines of this section's two named tasks:\n");
  std::istringstream lines(dump);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("task \"") != std::string::npos) std::printf("   %s\n", line.c_str() + line.find_first_not_of(' '));
  }
  const shoal::RuntimeMetrics m = rt.metrics();
  std::uint64_t polls = 0, steals = 0, parks = 0;
  for (const auto& w : m.workers) {
    polls += w.polls;
    steals += w.steals;
    parks += w.parks;
  }
  std::printf("   runtime counters so far (Runtime::metrics): %llu tasks spawned, %llu task steps, %llu steals, %llu parks,\n"
              "   %llu I/O events, %llu timers fired, %zu scopes open (/metrics in examples/http_server serves these)\n",
              static_cast<unsigned long long>(m.tasks_spawned), static_cast<unsigned long long>(polls),
              static_cast<unsigned long long>(steals), static_cast<unsigned long long>(parks),
              static_cast<unsigned long long>(m.io_events), static_cast<unsigned long long>(m.timers_fired),
              m.scopes_live);
}

// 10. Files: each call is an operation the kernel runs on a uring runtime
// (SHOAL_IO_BACKEND=uring), a job on the blocking pool elsewhere; one
// contract for both.
shoal::Task<void> files() {
  constexpr int kTasks = 16;
  constexpr std::size_t kEach = std::size_t{1} << 20;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("shoal-demo-" + std::to_string(::getpid()))).string();
  const auto t0 = Clock::now();
  shoal::fs::File f = co_await shoal::fs::File::create(path);
  auto writers = [&](shoal::Scope& s) -> shoal::Task<void> {
    for (int i = 0; i < kTasks; ++i) {
      s.spawn([&f, i]() -> shoal::Task<void> {
        const std::vector<std::byte> block(kEach, static_cast<std::byte>('a' + i));
        co_await f.write_all(block, static_cast<std::uint64_t>(i) * kEach);
      });
    }
    co_return;
  };
  co_await shoal::scope(writers);
  co_await f.close();
  const std::string back = co_await shoal::fs::read_file(path);
  const double ms = ms_since(t0);
  std::filesystem::remove(path);
  bool in_place = back.size() == kTasks * kEach;
  for (int i = 0; in_place && i < kTasks; ++i) {
    in_place = std::all_of(back.begin() + static_cast<long>(i * kEach), back.begin() + static_cast<long>((i + 1) * kEach),
                           [i](char c) { return c == 'a' + i; });
  }
  std::printf("10. files (shoal::fs): %d tasks wrote 1 MiB each into one file at their offsets, read back whole: %s,\n"
              "   %.1f ms (with SHOAL_IO_BACKEND=uring the kernel runs each call, else the blocking pool does)\n",
              kTasks, in_place ? "every byte in place" : "WRONG", ms);
}

}  // namespace

int main() {
  shoal::RuntimeOptions opts;
  opts.track_waits = true;  // task dumps say how long each task has waited (section 9)
  shoal::Runtime rt(std::move(opts));
  std::printf("shoal demo on %zu workers\n", rt.worker_count());
  rt.block_on(fan_out_with_a_failure());
  rt.block_on(spawn_throughput());
  rt.block_on(deadline_cuts_off_slow_work());
  rt.block_on(channel_pipeline());
  rt.block_on(task_set_server());
  rt.block_on(idle_connections(rt.worker_count()));
  rt.block_on(sync_library());
  rt.block_on(coordination());
  rt.block_on(observability(rt));
  rt.block_on(files());
}
