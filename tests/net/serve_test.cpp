// net::serve: admission limit, fault isolation, graceful shutdown, the
// start_ready handshake.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "shoal/net/connections.hpp"
#include "shoal/net/serve.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::net::Listener;
using shoal::net::ServeOptions;
using shoal::net::ShutdownSignal;
using shoal::net::Stream;

SHOAL_TEST_SUITE(ServeTest);

std::span<const std::byte> cbytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

Task<std::string> request(Address addr, std::string msg) {
  Stream c = co_await shoal::net::connect(addr);
  co_await c.write_all(cbytes(msg));
  c.shutdown(shoal::net::Shutdown::write);
  std::string reply;
  std::vector<char> buf(256);
  for (;;) {
    const std::size_t n = co_await c.read_some(std::as_writable_bytes(std::span(buf)));
    if (n == 0) break;
    reply.append(buf.data(), n);
  }
  co_return reply;
}

/// Reads the whole request, then answers "re: <request>".
Task<void> answer(Stream conn) {
  std::string req;
  std::vector<char> buf(256);
  for (;;) {
    const std::size_t n = co_await conn.read_some(std::as_writable_bytes(std::span(buf)));
    if (n == 0) break;
    req.append(buf.data(), n);
  }
  co_await conn.write_all(cbytes(std::string("re: ").append(req)));
}

SHOAL_TEST(ServeTest, ServesMoreClientsThanMaxConnectionsNeverAboveTheLimit) {
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  constexpr int kClients = 60;
  std::atomic<int> live{0}, peak{0}, ok{0};
  ShutdownSignal stop;
  ServeOptions opts;
  opts.max_connections = 4;
  opts.shutdown = &stop;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::net::serve(listener, opts, [&](Stream conn) -> Task<void> {
      const int now = live.fetch_add(1) + 1;
      for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
      }
      struct Leave {
        std::atomic<int>& l;
        ~Leave() { l.fetch_sub(1); }
      } leave{live};
      co_await shoal::sleep_for(1ms);
      co_await answer(std::move(conn));
    }));
    co_await shoal::scope([&](shoal::Scope& clients) -> Task<void> {
      for (int i = 0; i < kClients; ++i) {
        clients.spawn([&, i]() -> Task<void> {
          const std::string q = std::string("q").append(std::to_string(i));
          if (co_await request(addr, q) == std::string("re: ").append(q)) ok.fetch_add(1);
        });
      }
      co_return;
    });
    stop.trigger();
  });
  EXPECT_EQ(ok.load(), kClients);
  EXPECT_LE(peak.load(), 4) << "more handlers than max_connections";
  EXPECT_GE(peak.load(), 1);
}

SHOAL_TEST(ServeTest, AHandlerFaultIsReportedAndTheServerGoesOn) {
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  std::mutex mu;
  std::vector<std::string> faults;
  ShutdownSignal stop;
  ServeOptions opts;
  opts.shutdown = &stop;
  opts.on_handler_fault = [&](std::exception_ptr e, const Address& peer) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      std::lock_guard<std::mutex> g(mu);
      faults.push_back(std::string(ex.what()) + " from " + (peer.port() != 0 ? "a peer" : "nowhere"));
    }
  };
  std::string after;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::net::serve(listener, opts, [](Stream conn) -> Task<void> {
      std::vector<char> buf(4);
      const std::size_t n = co_await conn.read_some(std::as_writable_bytes(std::span(buf)));
      if (std::string(buf.data(), n) == "bad") throw std::runtime_error("bad request");
      co_await conn.write_all(cbytes(std::string("fine")));
    }));
    (void)co_await request(addr, "bad");
    after = co_await request(addr, "ok");
    stop.trigger();
  });
  EXPECT_EQ(after, "fine") << "the server stopped after a handler fault";
  SHOAL_CO_ASSERT(faults.size() == 1u);
  EXPECT_EQ(faults[0], "bad request from a peer");
}

SHOAL_TEST(ServeTest, GracefulShutdownLetsHandlersFinishThenCancelsTheRest) {
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  ShutdownSignal stop;
  ServeOptions opts;
  opts.shutdown = &stop;
  opts.grace_period = 50ms;
  std::atomic<int> started{0}, finished{0}, cut_off{0};
  std::atomic<bool> serve_returned{false};
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await shoal::net::serve(listener, opts, [&](Stream conn) -> Task<void> {
        std::vector<char> buf(8);
        const std::size_t n = co_await conn.read_some(std::as_writable_bytes(std::span(buf)));
        started.fetch_add(1);
        try {
          // "slow" takes far longer than the grace period; "quick" finishes within it.
          co_await shoal::sleep_for(std::string(buf.data(), n) == "slow" ? 1h : 5ms);
          finished.fetch_add(1);
        } catch (const shoal::Cancelled&) {
          cut_off.fetch_add(1);
          throw;
        }
      });
      serve_returned.store(true);
    });
    std::vector<Stream> conns;
    for (const char* msg : {"slow", "quick", "quick"}) {
      conns.push_back(co_await shoal::net::connect(addr));
      co_await conns.back().write_all(cbytes(std::string(msg)));
    }
    while (started.load() < 3) co_await shoal::sleep_for(1ms);
    stop.trigger();
    // New connections are refused (or never served) once shutdown began.
  });
  EXPECT_TRUE(serve_returned.load()) << "serve did not return normally after a graceful shutdown";
  EXPECT_EQ(finished.load(), 2);
  EXPECT_EQ(cut_off.load(), 1);
}

SHOAL_TEST(ServeTest, StartReadyReportsTheBoundPortBeforeServing) {
  ShutdownSignal stop;
  ServeOptions opts;
  opts.shutdown = &stop;
  auto handler = [](Stream conn) -> Task<void> { co_await answer(std::move(conn)); };
  std::string reply;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    const Address bound = co_await s.start_ready<Address>(&shoal::net::serve_on<decltype(handler)>,
                                                           Address::parse("127.0.0.1:0"), opts, handler);
    EXPECT_NE(bound.port(), 0) << "port 0 was not replaced by the real port";
    reply = co_await request(bound, "hi");
    stop.trigger();
  });
  EXPECT_EQ(reply, "re: hi");
}

SHOAL_TEST(ServeTest, CancellingServeCancelsEveryHandler) {
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  std::atomic<int> waiting{0}, cancelled{0};
  std::vector<Stream> conns;
  auto r = co_await shoal::move_on_after(100ms, [&]() -> Task<void> {
    co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
      s.spawn(shoal::net::serve(listener, ServeOptions{}, [&](Stream conn) -> Task<void> {
        waiting.fetch_add(1);
        try {
          co_await conn.wait_readable();
        } catch (const shoal::Cancelled&) {
          cancelled.fetch_add(1);
          throw;
        }
      }));
      for (int i = 0; i < 5; ++i) conns.push_back(co_await shoal::net::connect(addr));
      co_await shoal::sleep_for(1h);
    });
  }());
  EXPECT_FALSE(r);
  EXPECT_EQ(cancelled.load(), waiting.load());
}

SHOAL_TEST(ServeTest, IdleTimeoutEndsAQuietConnectionQuietlyAndSparesABusyOne) {
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  std::atomic<int> faults{0}, idled_out{0};
  ShutdownSignal stop;
  ServeOptions opts;
  opts.shutdown = &stop;
  opts.idle_timeout = 400ms;
  opts.on_handler_fault = [&](std::exception_ptr, const Address&) { faults.fetch_add(1); };
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::net::serve(listener, opts, [&](Stream conn) -> Task<void> {
      std::vector<char> buf(64);
      try {
        for (std::size_t n; (n = co_await conn.read_some(std::as_writable_bytes(std::span(buf)))) != 0;) {
          co_await conn.write_all(std::as_bytes(std::span(buf.data(), n)));
        }
      } catch (const shoal::net::IdleTimeout&) {
        idled_out.fetch_add(1);
        throw;  // serve ends the handler quietly
      }
    }));
    Stream quiet = co_await shoal::net::connect(addr);
    Stream busy = co_await shoal::net::connect(addr);
    // The busy one talks for three idle periods, never pausing for long.
    std::vector<char> back(1);
    for (int i = 0; i < 240; ++i) {
      co_await busy.write_all(std::string_view("x"));
      co_await busy.read_exact(std::as_writable_bytes(std::span(back)));
      co_await shoal::sleep_for(5ms);
    }
    // By now the quiet one was cut off: it reads end of stream at once.
    std::vector<char> buf(8);
    EXPECT_EQ(co_await shoal::with_timeout(10s, quiet.read_some(std::as_writable_bytes(std::span(buf)))), 0u);
    co_await busy.write_all(std::string_view("y"));
    co_await busy.read_exact(std::as_writable_bytes(std::span(back)));
    EXPECT_EQ(back[0], 'y') << "the busy connection was cut";
    EXPECT_EQ(idled_out.load(), 1);
    busy.shutdown(shoal::net::Shutdown::write);
    stop.trigger();
  });
  EXPECT_EQ(faults.load(), 0) << "an idle timeout is not a fault";
}

SHOAL_TEST(ServeTest, AStreamIdleTimeoutNamesTheOperationAndTheLimit) {
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  Stream c = co_await shoal::net::connect(listener.local_address());
  Stream server_end = co_await listener.accept();
  c.set_idle_timeout(20ms);
  std::vector<char> buf(8);
  try {
    (void)co_await c.read_some(std::as_writable_bytes(std::span(buf)));
    ADD_FAILURE() << "no IdleTimeout";
  } catch (const shoal::net::IdleTimeout& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("read"), std::string::npos) << what;
    EXPECT_NE(what.find("idle for 20 ms"), std::string::npos) << what;
  }
  // Still usable: the limit cut the wait, not the connection.
  co_await server_end.write_all(std::string_view("z"));
  EXPECT_EQ(co_await c.read_some(std::as_writable_bytes(std::span(buf))), 1u);
}

SHOAL_TEST(ServeTest, APeerResetEndsTheHandlerWithoutAFaultReport) {
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  std::atomic<int> faults{0}, ended{0};
  ShutdownSignal stop;
  ServeOptions opts;
  opts.shutdown = &stop;
  opts.on_handler_fault = [&](std::exception_ptr, const Address&) { faults.fetch_add(1); };
  co_await shoal::with_timeout(30s, shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::net::serve(listener, opts, [&](Stream conn) -> Task<void> {
      struct End {
        std::atomic<int>& n;
        ~End() { n.fetch_add(1); }
      } end{ended};
      std::vector<char> buf(64);
      while (co_await conn.read_some(std::as_writable_bytes(std::span(buf))) != 0) {
      }
    }));
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("x"));
    linger l{1, 0};  // close with RST
    ::setsockopt(c.native_handle(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
    c.close();
    while (ended.load() == 0) co_await shoal::sleep_for(1ms);
    stop.trigger();
  }));
  EXPECT_EQ(faults.load(), 0) << "a peer's reset is not a handler fault";
}

// ---- net::Connections: what a graceful shutdown reaches ----------------------

/// A connected socket pair; `end(i)` for each side. Closed on destruction.
struct Pair {
  int fd[2]{-1, -1};
  Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fd), 0); }
  ~Pair() {
    ::close(fd[0]);
    ::close(fd[1]);
  }
  /// True once our read side is shut: a read returns end of stream instead of "would block".
  bool read_side_shut() const {
    char c;
    return ::recv(fd[0], &c, 1, MSG_DONTWAIT) == 0;
  }
};

TEST(Connections, ShutdownWakesTheIdleLetsTheBusyFinishAndReachesLateIdleEntries) {
  shoal::net::Connections set;
  Pair busy, idle, later;
  using State = shoal::net::Connections::Entry::State;
  shoal::net::Connections::Entry b(set, busy.fd[0]);
  shoal::net::Connections::Entry i(set, idle.fd[0], State::idle);
  EXPECT_FALSE(set.shutting_down());
  set.shutdown();
  EXPECT_TRUE(set.shutting_down());
  EXPECT_TRUE(idle.read_side_shut()) << "an idle connection is woken with end of stream";
  EXPECT_FALSE(i.go_busy()) << "the shutdown claimed it: a request arriving now is not served";
  EXPECT_FALSE(busy.read_side_shut()) << "a request in progress is not cut";
  EXPECT_FALSE(b.go_idle()) << "after its answer, the busy connection is told to close";
  shoal::net::Connections::Entry l(set, later.fd[0], State::idle);
  EXPECT_TRUE(later.read_side_shut()) << "an idle entry registered after the shutdown is woken at once";
}

TEST(Connections, ATriggeredSignalCountsAsShuttingDownBeforeShutdownIsCalled) {
  shoal::net::ShutdownSignal signal;
  shoal::net::Connections set(&signal);
  Pair p;
  shoal::net::Connections::Entry e(set, p.fd[0]);
  EXPECT_TRUE(e.go_idle());
  EXPECT_TRUE(e.go_busy());
  signal.trigger();
  EXPECT_FALSE(e.go_idle()) << "a connection going idle after the trigger closes";
  EXPECT_FALSE(p.read_side_shut()) << "the signal alone shuts nothing: shutdown() does";
}


}  // namespace
