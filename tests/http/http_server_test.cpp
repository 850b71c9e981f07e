// shoal::http's server (and the example's hello handler on it): framing,
// keep-alive, pipelining, bodies, Expect, limits and timeouts, and graceful
// shutdown. Real clients (curl, ab, Python, Node) drive it in
// http_clients_test.cpp.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

#include "http/hello.hpp"
#include "shoal/http.hpp"
#include "support/stream_io.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::test::read_to_end;

using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::net::Stream;
namespace http = shoal::http;

SHOAL_TEST_SUITE(HttpServer);

/// Echoes the request: "<METHOD> <target> <body>".
struct Echo {
  void operator()(const http::Request& req, http::Response& res) const {
    res.body.append(req.method()).append(" ").append(req.target()).append(" ").append(req.body());
  }
};

struct Config {
  http::ServerOptions http;
  std::size_t max_connections = 64;
  std::chrono::milliseconds grace{10};
  std::function<void()> on_held_at_cap;
};

/// Serves `handler` for the duration of `client(address, stop)`; triggers the
/// shutdown after it unless the client did, and returns once serve has.
template <class H>
Task<void> with_server(Config cfg, H handler, std::function<Task<void>(Address, shoal::net::ShutdownSignal&)> client) {
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions opts;
  opts.shutdown = &stop;
  opts.max_connections = cfg.max_connections;
  opts.grace_period = cfg.grace;
  opts.on_held_at_cap = cfg.on_held_at_cap;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(http::serve(listener, opts, cfg.http, std::move(handler)));
    co_await client(addr, stop);
    stop.trigger();
  });
}

Task<void> with_server(Config cfg, std::function<Task<void>(Address)> client) {
  co_await with_server(cfg, Echo{}, [&](Address a, shoal::net::ShutdownSignal&) { return client(a); });
}

/// Reads until `count` complete responses (each with a Content-Length) are in.
Task<std::string> read_responses(Stream& c, int count, bool head = false) {
  std::string out;
  std::vector<char> buf(4096);
  auto complete = [&] {
    int n = 0;
    for (std::size_t pos = 0; (pos = out.find("\r\n\r\n", pos)) != std::string::npos;) {
      const auto len_at = out.rfind("Content-Length: ", pos);
      const std::size_t len = head ? 0 : std::stoul(out.substr(len_at + 16));
      if (out.size() < pos + 4 + len) break;
      ++n;
      pos += 4 + len;
    }
    return n;
  };
  while (complete() < count) {
    const std::size_t n = co_await c.read_some(std::as_writable_bytes(std::span(buf)));
    if (n == 0) break;
    out.append(buf.data(), n);
  }
  co_return out;
}

/// Sends `request` on a fresh connection and reads until the server closes.
Task<std::string> exchange_once(Address addr, std::string_view request) {
  Stream c = co_await shoal::net::connect(addr);
  co_await c.write_all(request);
  co_return co_await read_to_end(c);
}

int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (std::size_t p = 0; (p = hay.find(needle, p)) != std::string::npos; p += needle.size()) ++n;
  return n;
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

SHOAL_TEST(HttpServer, KeepAlivePipeliningAndBodies) {
  co_await with_server({}, [](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(count(co_await read_responses(c, 1), "HTTP/1.1 200 OK"), 1);
    // Three pipelined requests in one write, one with a body.
    co_await c.write_all(std::string_view(
        "GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
        "GET /c HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string three = co_await read_responses(c, 3);
    EXPECT_EQ(count(three, "HTTP/1.1 200 OK"), 3) << three;
    EXPECT_NE(three.find("\r\n\r\nGET /a HTTP/1.1"), std::string::npos) << three;
    EXPECT_NE(three.find("POST /b hello"), std::string::npos) << three;
    co_await c.write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const std::string last = co_await read_to_end(c);
    EXPECT_EQ(count(last, "Connection: close"), 1) << last;
  });
}

SHOAL_TEST(HttpServer, AHandlerKnowsItsClientsAddress) {
  std::string seen_void, seen_task;
  auto handler = [&](const http::Request& req, http::Response& res) {
    const auto peer = req.peer();
    (req.target() == "/v" ? seen_void : seen_task) = peer ? peer->to_string() : "none";
    res.body = "ok";
  };
  struct TaskHandler {
    decltype(handler)* h;
    Task<void> operator()(const http::Request& req, http::Response& res) const {
      (*h)(req, res);
      co_return;
    }
  };
  std::string client;
  co_await with_server({}, handler, [&](Address addr, shoal::net::ShutdownSignal&) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    client = c.local_address().to_string();
    co_await c.write_all(std::string_view("GET /v HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    (void)co_await read_to_end(c);
  });
  EXPECT_EQ(seen_void, client) << "a void handler";
  co_await with_server({}, TaskHandler{&handler}, [&](Address addr, shoal::net::ShutdownSignal&) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    client = c.local_address().to_string();
    co_await c.write_all(std::string_view("GET /t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    (void)co_await read_to_end(c);
  });
  EXPECT_EQ(seen_task, client) << "a Task<void> handler";
  const http::RequestHead head;
  EXPECT_FALSE(http::Request(head, "").peer().has_value()) << "a request no server made";
}

SHOAL_TEST(HttpServer, TheHelloHandlerAnswersWithDateAndLength) {
  co_await with_server({}, hello::Handler{}, [](Address addr, shoal::net::ShutdownSignal&) -> Task<void> {
    const std::string r = co_await exchange_once(addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_TRUE(starts_with(r, "HTTP/1.1 200 OK\r\n")) << r;
    EXPECT_NE(r.find("\r\nDate: "), std::string::npos) << r;
    EXPECT_NE(r.find(" GMT\r\n"), std::string::npos) << r;
    EXPECT_NE(r.find("\r\nContent-Length: 13\r\n"), std::string::npos) << r;
    EXPECT_EQ(r.substr(r.size() - 13), "Hello, world!");
  });
}

// ServerOptions::stats: what an operator reads first, counted by the server
// and served by the hello handler's /metrics.
SHOAL_TEST(HttpServer, ServerStatsCountResponsesByStatusConnectionsBytesAndHandlerTime) {
  http::ServerStats stats;
  Config cfg;
  cfg.http.stats = &stats;
  co_await with_server(cfg, hello::Handler{&stats}, [&](Address addr, shoal::net::ShutdownSignal&) -> Task<void> {
    const std::string ok = co_await exchange_once(addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string bad = co_await exchange_once(addr, "BROKEN\r\n\r\n");
    EXPECT_TRUE(starts_with(bad, "HTTP/1.1 400")) << bad;
    Stream held = co_await shoal::net::connect(addr);  // open while /metrics is asked for
    const std::string metrics =
        co_await exchange_once(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_NE(metrics.find("http_responses_total{code=\"2xx\"} 1\n"), std::string::npos) << metrics;  // itself not yet
    EXPECT_NE(metrics.find("http_responses_total{code=\"4xx\"} 1\n"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("http_handler_duration_seconds_bucket{le=\"+Inf\"} 1\n"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("shoal_tasks_live"), std::string::npos) << "the runtime's counters too";
    const http::ServerStats::Snapshot s = stats.snapshot();
    EXPECT_EQ(s.responses[1], 2u);  // /, /metrics
    EXPECT_EQ(s.responses[3], 1u);  // the 400
    EXPECT_EQ(s.handler_calls, 2u);  // the 400 ran no handler
    EXPECT_EQ(s.bytes_sent, ok.size() + bad.size() + metrics.size());
    EXPECT_GE(s.connections_opened, 3u);  // the fourth, `held`, may not be served yet
    EXPECT_GE(s.connections_open, s.connections_opened - 3);
    EXPECT_GT(s.bytes_received, 0u);
    held.close();
  });
  EXPECT_EQ(stats.snapshot().connections_open, 0u) << "every connection's end is counted";
}

SHOAL_TEST(HttpServer, AHeadResponseCarriesTheLengthButNoBody) {
  co_await with_server({}, hello::Handler{}, [](Address addr, shoal::net::ShutdownSignal&) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    // HEAD then GET on one connection: a body after the HEAD's head would
    // be read as the start of the GET's response.
    co_await c.write_all(std::string_view("HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n"
                                          "Connection: close\r\n\r\n"));
    const std::string r = co_await read_to_end(c);
    const auto second = r.find("HTTP/1.1 200 OK", 1);
    SHOAL_CO_ASSERT(second != std::string::npos);
    const std::string head = r.substr(0, second);
    EXPECT_NE(head.find("Content-Length: 13\r\n"), std::string::npos) << head;
    EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << "a body followed the HEAD response: " << head;
    EXPECT_EQ(count(r, "Hello, world!"), 1) << r;
  });
}

SHOAL_TEST(HttpServer, AnHttp10KeepAliveIsHonouredAndAnnounced) {
  co_await with_server({}, [](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("GET /1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    const std::string r = co_await read_responses(c, 1);
    EXPECT_NE(r.find("\r\nConnection: keep-alive\r\n"), std::string::npos) << r;
    co_await c.write_all(std::string_view("GET /2 HTTP/1.0\r\n\r\n"));  // 1.0 without keep-alive: the last
    const std::string last = co_await read_to_end(c);
    EXPECT_NE(last.find("GET /2"), std::string::npos) << last;
    EXPECT_NE(last.find("\r\nConnection: close\r\n"), std::string::npos) << last;
  });
}

SHOAL_TEST(HttpServer, ExpectContinueIsAnsweredBeforeTheBodyIsSent) {
  co_await with_server({}, [](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view(
        "PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
    std::string got;
    std::vector<char> buf(256);
    while (got.find("\r\n\r\n") == std::string::npos) {
      const std::size_t n = co_await c.read_some(std::as_writable_bytes(std::span(buf)));
      SHOAL_CO_ASSERT(n > 0);  // else closed before 100 Continue
      got.append(buf.data(), n);
    }
    EXPECT_EQ(got, "HTTP/1.1 100 Continue\r\n\r\n");
    co_await c.write_all(std::string_view("data"));
    const std::string r = co_await read_responses(c, 1);
    EXPECT_NE(r.find("PUT /up data"), std::string::npos) << r;
  });
}

SHOAL_TEST(HttpServer, AChunkedBodyIsDecodedAcrossReads) {
  co_await with_server({}, [](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"));
    co_await shoal::sleep_for(5ms);  // the rest in another segment: the decoder must resume mid-chunk
    co_await c.write_all(std::string_view("lo\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: x\r\n\r\n"
                                          "GET /after HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string r = co_await read_responses(c, 2);
    EXPECT_NE(r.find("POST /c hello, world"), std::string::npos) << r;
    EXPECT_NE(r.find("GET /after "), std::string::npos) << "the request after a chunked body was lost: " << r;
  });
}

SHOAL_TEST(HttpServer, LenientFramingThatRfc9112AllowsIsAccepted) {
  co_await with_server({}, [](Address addr) -> Task<void> {
    // A leading empty line, bare LF line ends, HTTP/1.2 (served as 1.1), and
    // the absolute and asterisk forms of a request target.
    for (std::string_view req : {"\r\nGET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                                 "GET /b HTTP/1.1\nHost: x\nConnection: close\n\n",
                                 "GET /c HTTP/1.2\r\nHost: x\r\nConnection: close\r\n\r\n",
                                 "GET http://x:8080/d?q HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                                 "GET http://[::1]/e HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                                 "OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"}) {
      const std::string r = co_await exchange_once(addr, req);
      EXPECT_TRUE(starts_with(r, "HTTP/1.1 200 OK\r\n")) << "for " << req << ": " << r;
    }
  });
}

SHOAL_TEST(HttpServer, WhatItRefusesGetsTheRightStatusAReasonAndAClose) {
  co_await with_server({}, [](Address addr) -> Task<void> {
    struct Case {
      std::string_view request, status, reason;
    };
    for (const Case& k : {
             Case{"GET /\r\n\r\n", "400", "method, target, HTTP version"},
             Case{"GET / HTTP/1.1\r\nno colon\r\n\r\n", "400", "colon"},
             Case{"GET / HTTP/1.1\r\n\r\n", "400", "missing Host"},
             Case{"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400", "more than one Host"},
             Case{"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n", "400", "Content-Length"},
             Case{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "400",
                  "both"},
             Case{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "501", "other than chunked"},
             Case{"GET / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n", "417", "Expect"},
             Case{"GET / HTTP/2.0\r\n\r\n", "505", "version"},
             // Request targets that are none of RFC 9112's four forms (found by the differential fuzzer).
             Case{"GET 0/ HTTP/1.1\r\nHost: a\r\n\r\n", "400", "bad request target"},
             Case{"GET index.html HTTP/1.1\r\nHost: a\r\n\r\n", "400", "bad request target"},
             Case{"GET * HTTP/1.1\r\nHost: a\r\n\r\n", "400", "* for OPTIONS"},
             Case{"CONNECT example.com HTTP/1.1\r\nHost: a\r\n\r\n", "400", "host:port for CONNECT"},
             Case{"GET http://:/ HTTP/1.1\r\nHost: a\r\n\r\n", "400", "an absolute URI"},
             Case{"GET http://a~b/ HTTP/1.1\r\nHost: a\r\n\r\n", "400", "an absolute URI"},
             Case{"GET http://a#/ HTTP/1.1\r\nHost: a\r\n\r\n", "400", "no fragment"},
             Case{"GET /page#top HTTP/1.1\r\nHost: a\r\n\r\n", "400", "no fragment"},
             Case{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n", "400", "empty element in Transfer-Encoding"},
             Case{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked,\r\n\r\n", "400", "empty element"},
             Case{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "400", "chunk size"},
         }) {
      const std::string r = co_await exchange_once(addr, k.request);
      EXPECT_TRUE(starts_with(r, "HTTP/1.1 " + std::string(k.status) + " ")) << "for " << k.request << ": " << r;
      EXPECT_NE(r.find(k.reason), std::string::npos) << "for " << k.request << ": " << r;
      EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos) << r;
    }
  });
}

SHOAL_TEST(HttpServer, OversizedHeadersGet431AndABodyOverTheLimit413) {
  Config cfg;
  cfg.http.max_body = 100;
  co_await with_server(cfg, [](Address addr) -> Task<void> {
    const std::string big = "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n";
    const std::string r1 = co_await exchange_once(addr, big);
    EXPECT_TRUE(starts_with(r1, "HTTP/1.1 431 ")) << r1.substr(0, 40);
    const std::string r2 = co_await exchange_once(addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n");
    EXPECT_TRUE(starts_with(r2, "HTTP/1.1 413 ")) << r2;
    const std::string chunk = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n";  // 0x65 = 101
    const std::string r3 = co_await exchange_once(addr, chunk);
    EXPECT_TRUE(starts_with(r3, "HTTP/1.1 413 ")) << r3;
  });
}

SHOAL_TEST(HttpServer, APartialRequestGets408AfterTheHeaderTimeout) {
  Config cfg;
  cfg.http.header_timeout = 50ms;
  co_await with_server(cfg, [](Address addr) -> Task<void> {
    const std::string r = co_await exchange_once(addr, "GET / HTTP/1.1\r\nHost:");  // and nothing more
    EXPECT_TRUE(starts_with(r, "HTTP/1.1 408 ")) << r;
    EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos) << r;
  });
}

SHOAL_TEST(HttpServer, ASilentConnectionIsClosedAfterTheHeaderTimeoutNotTheIdleTimeout) {
  Config cfg;
  cfg.http.header_timeout = 50ms;
  cfg.http.idle_timeout = std::chrono::hours(1);  // the watchdog ends the test long before
  co_await with_server(cfg, [](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    EXPECT_EQ(co_await read_to_end(c), "") << "the server answered a request it never got";
  });
}

SHOAL_TEST(HttpServer, AHandlersFaultIsAnswered500AndReported) {
  std::atomic<int> reported{0};
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions opts;
  opts.shutdown = &stop;
  opts.on_handler_fault = [&](std::exception_ptr, const Address&) { reported.fetch_add(1); };
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(http::serve(listener, opts, {}, [](const http::Request&, http::Response&) -> Task<void> {
      co_await shoal::checkpoint();
      throw std::runtime_error("handler bug");
    }));
    const std::string r = co_await exchange_once(addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_TRUE(starts_with(r, "HTTP/1.1 500 ")) << r;
    stop.trigger();
  });
  EXPECT_EQ(reported.load(), 1);
}

SHOAL_TEST(HttpServer, ABadHeaderFromTheHandlerIsRefusedWithAMessage) {
  http::Response res;
  try {
    res.set_header("X-Evil", "a\r\nSet-Cookie: b");
    ADD_FAILURE() << "a value with CRLF was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("X-Evil"), std::string::npos) << e.what();
  }
  EXPECT_THROW(res.set_header("Content-Length", "5"), std::invalid_argument);
  co_return;
}

SHOAL_TEST(HttpServer, ShutdownClosesIdleKeepAliveConnectionsAtOnce) {
  Config cfg;
  cfg.grace = std::chrono::hours(1);  // waiting out the grace would trip the watchdog
  co_await with_server(cfg, Echo{}, [](Address addr, shoal::net::ShutdownSignal& stop) -> Task<void> {
    std::vector<Stream> idle;
    for (int i = 0; i < 8; ++i) {
      idle.push_back(co_await shoal::net::connect(addr));
      co_await idle.back().write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
      (void)co_await read_responses(idle.back(), 1);
    }
    stop.trigger();
    for (Stream& c : idle) EXPECT_EQ(co_await read_to_end(c), "") << "an idle connection got bytes, not a close";
  });
}

SHOAL_TEST(HttpServer, ShutdownAnswersInFlightRequestsWithCloseAndRefusesNewConnections) {
  if (shoal::test::on_libkqueue()) SHOAL_CO_SKIP(shoal::test::kLibkqueueTakesSoError);
  constexpr int kClients = 32;
  std::atomic<int> inside{0};
  shoal::Event all_inside, release;
  auto handler = [&](const http::Request&, http::Response& res) -> Task<void> {
    if (inside.fetch_add(1) + 1 == kClients) all_inside.set();
    co_await release.wait();
    res.body = "done";
  };
  Config cfg;
  cfg.grace = std::chrono::hours(1);
  co_await with_server(cfg, handler, [&](Address addr, shoal::net::ShutdownSignal& stop) -> Task<void> {
    std::vector<Stream> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.push_back(co_await shoal::net::connect(addr));
      co_await clients.back().write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    }
    co_await all_inside.wait();
    stop.trigger();
    // The listener closes at once: a new connection is refused, not queued.
    bool refused = false;
    for (int i = 0; i < 2000 && !refused; ++i) {
      try {
        Stream late = co_await shoal::net::connect(addr);
        co_await shoal::sleep_for(1ms);  // the listener's close is the serve task's next step
      } catch (const std::system_error& e) {
        // A reset: it reached the backlog just before the listener closed.
        refused = e.code() == std::errc::connection_refused;
        if (!refused && e.code() != std::errc::connection_reset) ADD_FAILURE() << e.what();
      }
    }
    EXPECT_TRUE(refused) << "new connections were still accepted during the shutdown";
    release.set();
    int ok = 0;
    for (Stream& c : clients) {
      const std::string r = co_await read_to_end(c);
      ok += starts_with(r, "HTTP/1.1 200 OK\r\n") && r.find("\r\nConnection: close\r\n") != std::string::npos &&
            r.substr(r.size() - 4) == "done";
    }
    EXPECT_EQ(ok, kClients) << "in-flight requests were cut or not told the connection closes";
  });
}

SHOAL_TEST(HttpServer, TheExtraClientWaitsUntilAConnectionFrees) {
  Config cfg;
  cfg.max_connections = 1;
  co_await with_server(cfg, [](Address addr) -> Task<void> {
    Stream first = co_await shoal::net::connect(addr);
    co_await first.write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    (void)co_await read_responses(first, 1);
    // The server is full (one live handler, kept alive by `first`): the
    // second client connects (the backlog) but is served only once `first` leaves.
    Stream second = co_await shoal::net::connect(addr);
    co_await second.write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    auto early = co_await shoal::move_on_after(50ms, read_responses(second, 1));
    EXPECT_FALSE(early.has_value()) << "served beyond max_connections";
    first.close();
    const std::string reply = co_await read_to_end(second);
    EXPECT_EQ(count(reply, "HTTP/1.1 200 OK"), 1) << reply;
  });
}

// The cap holds, never refuses; an operator sees it bite in the stats.
SHOAL_TEST(HttpServer, AConnectionHeldAtTheCapIsCountedAndReported) {
  http::ServerStats stats;
  shoal::Event held;
  Config cfg;
  cfg.max_connections = 1;
  cfg.http.stats = &stats;
  cfg.on_held_at_cap = [&] { held.set(); };  // called after the stats counted it
  co_await with_server(cfg, hello::Handler{&stats}, [&](Address addr, shoal::net::ShutdownSignal&) -> Task<void> {
    Stream first = co_await shoal::net::connect(addr);
    co_await first.write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    (void)co_await read_responses(first, 1);
    EXPECT_EQ(stats.snapshot().connections_held_at_cap, 0u) << "one connection under a cap of one waits for nothing";
    Stream second = co_await shoal::net::connect(addr);
    co_await held.wait();
    EXPECT_EQ(stats.snapshot().connections_held_at_cap, 1u);
    first.close();
    co_await second.write_all(std::string_view("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const std::string metrics = co_await read_to_end(second);
    EXPECT_NE(metrics.find("http_connections_held_at_cap_total 1\n"), std::string::npos) << metrics;
  });
}

// Server::serve_connection takes any ByteStream; its reads, writes and
// lingering close go through the stream's own calls.
SHOAL_TEST(HttpServer, ServesAnyByteStreamThroughItsOwnCalls) {
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  http::Server server;
  Echo echo;
  shoal::test::StreamRecord kept, refused;
  std::string replies, refusal;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      for (shoal::test::StreamRecord* record : {&kept, &refused}) {
        // Named: g++ 12 and class temporaries inside a co_await (docs/compilers.md).
        shoal::test::RecordingStream conn(co_await listener.accept(), *record);
        co_await server.serve_connection(std::move(conn), echo);
      }
    });
    Stream c = co_await shoal::net::connect(listener.local_address());
    co_await c.write_all(std::string_view("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                                          "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"));
    replies = co_await read_to_end(c);
    // A refusal with the client's bytes still unread: the close lingers.
    Stream bad = co_await shoal::net::connect(listener.local_address());
    co_await bad.write_all(std::string_view("BROKEN\r\n\r\nmore bytes the server never reads"));
    bad.shutdown();
    refusal = co_await read_to_end(bad);
  });
  EXPECT_EQ(count(replies, "HTTP/1.1 200 OK"), 2) << replies;
  EXPECT_NE(replies.find("GET /a "), std::string::npos) << replies;
  EXPECT_NE(replies.find("POST /b hi"), std::string::npos) << replies;
  EXPECT_EQ(kept.written, replies) << "every response byte went through the stream's write_all";
  EXPECT_EQ(kept.read.substr(0, 3), "GET");
  EXPECT_FALSE(kept.lingered) << "nothing was left unread";
  EXPECT_TRUE(refusal.starts_with("HTTP/1.1 400")) << refusal;
  EXPECT_TRUE(refused.lingered) << "unread input: the stream's linger_close";
  EXPECT_TRUE(refused.drained) << "the linger read to the client's end";
}

}  // namespace
