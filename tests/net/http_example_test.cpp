// The HTTP/1.1 example (examples/http): keep-alive, pipelining, bodies,
// limits (431 / 400 and close), the header timeout, max connections.
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "http/hello.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::net::Stream;

SHOAL_TEST_SUITE(HttpExampleTest);

/// Runs the hello server for the duration of `client(address)`.
Task<void> with_server(hello::Limits limits, std::size_t max_connections,
                       std::function<Task<void>(Address)> client) {
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions opts;
  opts.shutdown = &stop;
  opts.max_connections = max_connections;
  opts.grace_period = 10ms;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::net::serve(listener, opts, [limits](Stream c) { return hello::serve_connection(std::move(c), limits); }));
    co_await client(addr);
    stop.trigger();
  });
}

Task<std::string> read_until_eof(Stream& c) {
  std::string out;
  std::vector<char> buf(4096);
  for (;;) {
    const std::size_t n = co_await c.read_some(std::as_writable_bytes(std::span(buf)));
    if (n == 0) co_return out;
    out.append(buf.data(), n);
  }
}

/// Reads until `count` complete responses (each ends with the hello body or
/// an empty body after its blank line) are in.
Task<std::string> read_responses(Stream& c, int count) {
  std::string out;
  std::vector<char> buf(4096);
  auto complete = [&] {
    int n = 0;
    for (std::size_t pos = 0; (pos = out.find("\r\n\r\n", pos)) != std::string::npos; pos += 4) {
      const auto len_at = out.rfind("Content-Length: ", pos);
      const std::size_t len = std::stoul(out.substr(len_at + 16));
      if (out.size() < pos + 4 + len) break;
      ++n;
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

int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (std::size_t p = 0; (p = hay.find(needle, p)) != std::string::npos; p += needle.size()) ++n;
  return n;
}

SHOAL_TEST(HttpExampleTest, KeepAlivePipeliningAndBodies) {
  co_await with_server({}, 64, [](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(count(co_await read_responses(c, 1), "HTTP/1.1 200 OK"), 1);
    // Three pipelined requests in one write, one with a body.
    co_await c.write_all(std::string_view(
        "GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /c HTTP/1.1\r\n\r\n"));
    const std::string three = co_await read_responses(c, 3);
    EXPECT_EQ(count(three, "HTTP/1.1 200 OK"), 3) << three;
    EXPECT_EQ(count(three, "Hello, world!"), 3);
    co_await c.write_all(std::string_view("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
    const std::string last = co_await read_until_eof(c);
    EXPECT_EQ(count(last, "Connection: close"), 1) << last;
  });
}

SHOAL_TEST(HttpExampleTest, OversizedHeadersGet431AndClose) {
  co_await with_server({}, 64, [](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    const std::string big = "GET / HTTP/1.1\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n";
    co_await c.write_all(big);
    const std::string reply = co_await read_until_eof(c);
    EXPECT_EQ(reply.rfind("HTTP/1.1 431 ", 0), 0u) << reply.substr(0, 40);
  });
}

SHOAL_TEST(HttpExampleTest, AMalformedRequestGets400AndClose) {
  co_await with_server({}, 64, [](Address addr) -> Task<void> {
    for (std::string_view bad : {"GET /\r\n\r\n", "GET / HTTP/2.0\r\n\r\n", "GET / HTTP/1.1\r\nno colon\r\n\r\n",
                                 "GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
                                 "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
      Stream c = co_await shoal::net::connect(addr);
      co_await c.write_all(bad);
      const std::string reply = co_await read_until_eof(c);
      EXPECT_EQ(reply.rfind("HTTP/1.1 400 ", 0), 0u) << "for " << bad << ": " << reply.substr(0, 40);
    }
  });
}

SHOAL_TEST(HttpExampleTest, ASlowClientIsCutOffByTheHeaderTimeout) {
  hello::Limits limits;
  limits.header_timeout = 50ms;
  co_await with_server(limits, 64, [](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("GET / HTTP/1.1\r\nHost:"));  // and nothing more
    const auto t0 = std::chrono::steady_clock::now();
    const std::string reply = co_await read_until_eof(c);
    EXPECT_EQ(reply, "") << "the server answered a request it never got";
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s) << "the slow client was never cut off";
  });
}

SHOAL_TEST(HttpExampleTest, TheExtraClientWaitsUntilAConnectionFrees) {
  co_await with_server({}, 1, [](Address addr) -> Task<void> {
    Stream first = co_await shoal::net::connect(addr);
    co_await first.write_all(std::string_view("GET / HTTP/1.1\r\n\r\n"));
    (void)co_await read_responses(first, 1);
    // The server is full (one live handler, kept alive by `first`): the
    // second client connects (the backlog) but is served only once `first` leaves.
    Stream second = co_await shoal::net::connect(addr);
    co_await second.write_all(std::string_view("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
    auto early = co_await shoal::move_on_after(50ms, read_responses(second, 1));
    EXPECT_FALSE(early.has_value()) << "served beyond max_connections";
    first.close();
    const std::string reply = co_await read_until_eof(second);
    EXPECT_EQ(count(reply, "HTTP/1.1 200 OK"), 1) << reply;
  });
}

}  // namespace
