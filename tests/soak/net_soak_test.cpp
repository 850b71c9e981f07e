// Network soak (release leg only, label soak): an echo server under 200
// clients for 60 s with 5% of sessions reset mid-request must see no error,
// give every descriptor back, and keep its RSS flat after warm-up. And a
// process holding 1,000 idle connections and 100 far timers stays nearly
// idle (CPU time over a window, wide bound).
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/process_stats.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::test::open_fds;
using shoal::test::rss_kib;
using shoal::test::cpu_seconds;
using shoal::test::raise_fd_limit;
using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::net::Listener;
using shoal::net::Stream;

bool is_disconnect(const std::system_error& e) {
  return e.code() == std::errc::connection_reset || e.code() == std::errc::broken_pipe;
}

/// Echoes until the client ends; a client's reset ends it quietly.
Task<void> echo(Stream c) {
  std::vector<std::byte> buf(16 * 1024);
  try {
    for (std::size_t n; (n = co_await c.read_some(buf)) != 0;) co_await c.write_all(std::span(buf.data(), n));
  } catch (const std::system_error& e) {
    if (!is_disconnect(e)) throw;
  }
}

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

double soak_seconds() {
  const char* s = std::getenv("SHOAL_NET_SOAK_SECONDS");
  return s != nullptr ? std::atof(s) : 60.0;
}

TEST(NetSoak, EchoUnderChurnAndResetsHasNoErrorsLeaksNoFdsAndKeepsRssFlat) {
  const double seconds = soak_seconds();
  shoal::test::Watchdog dog(std::chrono::seconds(static_cast<long>(seconds) + 120), "NetSoak");
  raise_fd_limit(4096);
  const int fds_before = open_fds();
  constexpr int kClients = 200;
  std::atomic<long> sessions{0}, resets{0}, round_trips{0}, handler_faults{0}, client_errors{0};
  long rss_warm = 0, rss_end = 0;
  const std::uint64_t seed = shoal::test::test_seed("NetSoak");
  shoal::run([&]() -> Task<void> {
    auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
    const Address addr = listener.local_address();
    shoal::net::ShutdownSignal stop;
    shoal::net::ServeOptions opts;
    opts.shutdown = &stop;
    opts.grace_period = 5s;
    opts.on_handler_fault = [&](std::exception_ptr e, const Address&) {
      handler_faults.fetch_add(1);
      std::fprintf(stderr, "handler fault: %s\n", shoal::detail::what_of(e).c_str());
    };
    const auto start = std::chrono::steady_clock::now();
    const auto warm = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(seconds / 6));
    const auto end = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(seconds));
    co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
      s.spawn(shoal::net::serve(listener, opts, echo));
      s.spawn([&]() -> Task<void> {  // RSS after warm-up
        co_await shoal::sleep_until(warm);
        rss_warm = rss_kib();
      });
      co_await shoal::scope([&](shoal::Scope& clients) -> Task<void> {
        for (int i = 0; i < kClients; ++i) {
          clients.spawn([&, i]() -> Task<void> {
            std::mt19937_64 rng(seed + static_cast<std::uint64_t>(i));
            while (std::chrono::steady_clock::now() < end) {
              try {
                Stream c = co_await shoal::net::connect(addr, 10s);
                const int trips = 1 + static_cast<int>(rng() % 20);
                const bool reset = rng() % 100 < 5;
                for (int t = 0; t < trips; ++t) {
                  std::string msg(1 + rng() % 8192, '\0');
                  for (auto& ch : msg) ch = static_cast<char>('a' + rng() % 26);
                  if (reset && t == trips - 1) {  // mid-request: half a message, then RST
                    co_await c.write_all(as_bytes(msg.substr(0, msg.size() / 2 + 1)));
                    linger l{1, 0};
                    ::setsockopt(c.native_handle(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
                    c.close();
                    resets.fetch_add(1);
                    break;
                  }
                  co_await c.write_all(as_bytes(msg));
                  std::string back(msg.size(), '\0');
                  co_await c.read_exact(std::as_writable_bytes(std::span(back.data(), back.size())));
                  if (back != msg) throw std::runtime_error("echo mismatch");
                  round_trips.fetch_add(1);
                }
                sessions.fetch_add(1);
              } catch (const std::exception& e) {
                if (client_errors.fetch_add(1) < 5) std::fprintf(stderr, "client %d: %s\n", i, e.what());
              }
            }
          });
        }
        co_return;
      });
      rss_end = rss_kib();
      stop.trigger();
    });
  }());
  std::printf("net soak: %.0f s, %ld sessions, %ld round trips, %ld resets, RSS %ld KiB after warm-up, %ld KiB at the end\n",
              seconds, sessions.load(), round_trips.load(), resets.load(), rss_warm, rss_end);
  EXPECT_EQ(client_errors.load(), 0);
  EXPECT_EQ(handler_faults.load(), 0);
  EXPECT_GT(resets.load(), 0);
  EXPECT_GT(sessions.load(), kClients);
  EXPECT_EQ(open_fds(), fds_before) << "descriptors leaked";
  ASSERT_GT(rss_warm, 0);
  // Flat: allocator noise, not growth with the number of sessions.
  EXPECT_LT(rss_end, rss_warm + rss_warm / 4 + 8 * 1024) << "RSS grew after warm-up";
}

TEST(NetSoak, IdleConnectionsAndFarTimersKeepTheProcessNearlyIdle) {
  shoal::test::Watchdog dog(std::chrono::seconds(120), "NetIdle");
  raise_fd_limit(4096);
  constexpr int kConns = 1000, kTimers = 100;
  double cpu = -1;
  shoal::run([&]() -> Task<void> {
    auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
    const Address addr = listener.local_address();
    std::vector<Stream> clients;
    std::atomic<int> accepted{0};
    co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        co_await shoal::scope([&](shoal::Scope& handlers) -> Task<void> {
          for (;;) {
            Stream conn = co_await listener.accept();
            accepted.fetch_add(1);
            auto handler = [c = std::move(conn)]() mutable -> Task<void> { co_await echo(std::move(c)); };
            handlers.spawn(std::move(handler));
          }
        });
      });
      for (int i = 0; i < kTimers; ++i) s.spawn([]() -> Task<void> { co_await shoal::sleep_for(1h); });
      for (int i = 0; i < kConns; ++i) clients.push_back(co_await shoal::net::connect(addr));
      while (accepted.load() < kConns) co_await shoal::checkpoint();
      // Everything is idle now: measure what the process burns over 2 s.
      const double before = cpu_seconds();
      co_await shoal::sleep_for(2s);
      cpu = cpu_seconds() - before;
      s.cancel();
    });
  }());
  std::printf("idle: %.1f ms of CPU over 2 s with %d idle connections and %d far timers\n", cpu * 1e3, kConns, kTimers);
  EXPECT_GE(cpu, 0.0);
  EXPECT_LT(cpu, 0.2) << "an idle process must not spin (10% of one core over the window)";
}

}  // namespace
