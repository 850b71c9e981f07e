// Response bodies written as the handler goes (Response::write) and
// trailers, over HTTP/1.1: chunked to an HTTP/1.1 client, unframed and
// closed to an HTTP/1.0 one; and request bodies read as the handler goes
// (ServerOptions::stream_request_body). HTTP/2's are in
// tests/http2/h2_server_test.cpp.
#include <string>

#include "shoal/http.hpp"
#include "shoal/scope/cancel_scope.hpp"
#include "shoal/sync/event.hpp"
#include "support/stream_io.hpp"
#include "http/streaming_handlers.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::test::CancelledFirstWrite;
using shoal::test::CancelledWrite;
using shoal::test::with_trailer;

using shoal::Task;
using shoal::net::Address;
using shoal::net::Stream;
namespace http = shoal::http;

SHOAL_TEST_SUITE(HttpStream);

/// Serves `handler` with `options` while `client(address)` runs.
template <class H>
Task<void> with_server(http::ServerOptions options, H handler, std::function<Task<void>(Address)> client) {
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(http::serve(listener, {}, options, std::move(handler)));
    co_await client(addr);
    s.cancel();
  });
}

template <class H>
Task<void> with_server(H handler, std::function<Task<void>(Address)> client) {
  co_await with_server({}, std::move(handler), std::move(client));
}

/// Reads from `c` into `got` until it holds `what`; false if the stream ends first.
Task<bool> read_until(Stream& c, std::string& got, std::string_view what) {
  char buf[4096];
  while (got.find(what) == std::string::npos) {
    const std::size_t n = co_await c.read_some(std::as_writable_bytes(std::span(buf)));
    if (n == 0) co_return false;
    got.append(buf, n);
  }
  co_return true;
}

/// /events: one event, then (once `release` is set) a second, as
/// Server-Sent Events do.
struct Events {
  shoal::Event* release;
  Task<void> operator()(const http::Request&, http::Response& res) const {
    res.set_header("Content-Type", "text/event-stream");
    co_await res.write("data: one\n\n");
    co_await release->wait();
    res.body = "data: two\n\n";  // what body holds at the end goes last
  }
};

SHOAL_TEST(HttpStream, AWrittenChunkReachesTheClientWhileTheHandlerStillRuns) {
  shoal::Event release;
  co_await with_server(Events{&release}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string got;
    // The first event arrives before the handler is let go on: it was sent, not buffered.
    EXPECT_TRUE(co_await read_until(c, got, "data: one\n\n\r\n")) << got;
    EXPECT_NE(got.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << got;
    EXPECT_NE(got.find("Content-Type: text/event-stream\r\n"), std::string::npos) << got;
    EXPECT_EQ(got.find("Content-Length"), std::string::npos) << got;
    EXPECT_NE(got.find("\r\n\r\nb\r\ndata: one\n\n\r\n"), std::string::npos) << got;
    release.set();
    EXPECT_TRUE(co_await read_until(c, got, "0\r\n\r\n")) << got;
    EXPECT_NE(got.find("b\r\ndata: two\n\n\r\n0\r\n\r\n"), std::string::npos) << got;
    // The connection serves on after a streamed body.
    co_await c.write_all(std::string_view("GET /events HTTP/1.1\r\nHost: x\r\n\r\n"));
    got.clear();
    EXPECT_TRUE(co_await read_until(c, got, "data: two\n\n\r\n0\r\n\r\n")) << got;
  });
}

SHOAL_TEST(HttpStream, AnHttp10ClientGetsTheStreamUnframedAndThenTheClose) {
  shoal::Event release;
  release.set();
  co_await with_server(Events{&release}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("GET /events HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    const std::string got = co_await shoal::test::read_to_end(c);
    EXPECT_NE(got.find("Connection: close\r\n"), std::string::npos) << got;
    EXPECT_EQ(got.find("Transfer-Encoding"), std::string::npos) << got;
    EXPECT_TRUE(got.ends_with("\r\n\r\ndata: one\n\ndata: two\n\n")) << got;
  });
}

SHOAL_TEST(HttpStream, TrailersEndAChunkedBody) {
  co_await with_server(with_trailer, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string got;
    EXPECT_TRUE(co_await read_until(c, got, "grpc-status: 0\r\n\r\n")) << got;
    EXPECT_NE(got.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << got;
    EXPECT_TRUE(got.ends_with("\r\n\r\n7\r\npayload\r\n0\r\ngrpc-status: 0\r\n\r\n")) << got;
  });
}

SHOAL_TEST(HttpStream, AHeaderSetAfterATrailerStaysAHeader) {
  http::Response res;
  res.set_header("A", "1");
  res.set_trailer("T", "2");
  res.set_header("B", "3");
  EXPECT_EQ(res.header_lines(), "A: 1\r\nB: 3\r\n");
  EXPECT_EQ(res.trailer_lines(), "T: 2\r\n");
  res.reset();
  EXPECT_EQ(res.header_lines(), "");
  EXPECT_EQ(res.trailer_lines(), "");
  co_return;
}

SHOAL_TEST(HttpStream, WriteOutsideAServersHandlerAndAHeaderAfterTheFirstWriteAreRefused) {
  http::Response detached;
  EXPECT_THROW((void)detached.write("x"), std::logic_error);
  co_await with_server(
      [](const http::Request&, http::Response& res) -> Task<void> {
        co_await res.write("first");
        EXPECT_THROW(res.set_header("X-Late", "1"), std::logic_error);
      },
      [&](Address addr) -> Task<void> {
        Stream c = co_await shoal::net::connect(addr);
        co_await c.write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
        std::string got;
        EXPECT_TRUE(co_await read_until(c, got, "0\r\n\r\n")) << got;
      });
}

SHOAL_TEST(HttpStream, AWriteInACancelledScopeThrowsCancelledAndSendsNothing) {
  co_await with_server(CancelledWrite{}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string got;
    EXPECT_TRUE(co_await read_until(c, got, "0\r\n\r\n")) << got;
    EXPECT_TRUE(got.ends_with("\r\n\r\n1\r\na\r\n0\r\n\r\n")) << got;
  });
}

SHOAL_TEST(HttpStream, AHandlerWhoseOnlyWriteWasCancelledIsAnsweredWithWhatItLeft) {
  co_await with_server(CancelledFirstWrite{}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    std::string got;
    std::array<std::byte, 512> buf{};
    while (const std::size_t n = co_await c.read_some(buf)) got.append(reinterpret_cast<const char*>(buf.data()), n);
    EXPECT_TRUE(got.starts_with("HTTP/1.1 200")) << got;
    EXPECT_TRUE(got.find("never") == std::string::npos) << got;
    EXPECT_TRUE(got.ends_with("after") || got.ends_with("5\r\nafter\r\n0\r\n\r\n")) << got;
  });
}

using shoal::test::BodyCounter;

http::ServerOptions streamed() {
  http::ServerOptions o;
  o.stream_request_body = true;
  o.max_body = 4;  // would refuse every body here if it were read whole
  return o;
}

SHOAL_TEST(HttpStream, AStreamedBodyReachesTheHandlerBeforeItEnds) {
  shoal::Event first, go;
  co_await with_server(streamed(), BodyCounter{&first, &go}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n0123456789"));
    co_await first.wait();  // the handler read some of a body whose end is not sent
    go.set();
    co_await c.write_all(std::string_view("abcdefghij"));
    std::string got;
    EXPECT_TRUE(co_await read_until(c, got, "\r\n\r\n20 ")) << got;
  });
}

SHOAL_TEST(HttpStream, AStreamedChunkedBodyIsDecodedAndThePipelinedRequestAfterItServed) {
  co_await with_server(streamed(), BodyCounter{}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view(
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"));
    const std::string got = co_await shoal::test::read_to_end(c);
    const std::size_t first = got.find("\r\n\r\n11 ");
    EXPECT_NE(first, std::string::npos) << got;
    EXPECT_NE(got.find("\r\n\r\n3 1", first), std::string::npos) << got;
  });
}

SHOAL_TEST(HttpStream, ExpectContinueIsAnsweredAtTheHandlersFirstRead) {
  co_await with_server(streamed(), BodyCounter{}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(
        std::string_view("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
    std::string got;
    EXPECT_TRUE(co_await read_until(c, got, "HTTP/1.1 100 Continue\r\n\r\n")) << got;
    co_await c.write_all(std::string_view("hello"));
    EXPECT_TRUE(co_await read_until(c, got, "\r\n\r\n5 1")) << got;
  });
}

SHOAL_TEST(HttpStream, ABodyTheHandlerLeftUnreadClosesTheConnectionAfterTheAnswer) {
  co_await with_server(streamed(), BodyCounter{}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("POST /unread HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nxx"));
    std::string got;
    EXPECT_TRUE(co_await read_until(c, got, "\r\n\r\nnot read")) << got;
    EXPECT_NE(got.find("Connection: close\r\n"), std::string::npos) << got;
    co_await c.write_all(std::string(98, 'x'));  // the rest: the server drains it, then closes
    EXPECT_EQ(co_await shoal::test::read_to_end(c), "");
  });
}

SHOAL_TEST(HttpStream, BadChunkFramingInAStreamedBodyIsAnswered400NamingIt) {
  co_await with_server(streamed(), BodyCounter{}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(
        std::string_view("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX"));
    const std::string got = co_await shoal::test::read_to_end(c);
    EXPECT_TRUE(got.starts_with("HTTP/1.1 400 ")) << got;
    EXPECT_NE(got.find("chunked request body"), std::string::npos) << got;
  });
}

/// Answers the body read with read_all(10), or what read_all threw.
struct ReadAll {
  Task<void> operator()(const http::Request& req, http::Response& res) const {
    res.body = co_await req.read_all(10);
  }
};

SHOAL_TEST(HttpStream, ReadAllRefusesABodyPastItsLimitWith413) {
  co_await with_server(streamed(), ReadAll{}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789"
                                          "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n0123456789A"));
    const std::string got = co_await shoal::test::read_to_end(c);
    const std::size_t first = got.find("\r\n\r\n0123456789");
    EXPECT_NE(first, std::string::npos) << got;
    EXPECT_NE(got.find("HTTP/1.1 413 ", first), std::string::npos) << got;
    EXPECT_NE(got.find("longer than its limit (10 bytes)", first), std::string::npos) << got;
  });
}

SHOAL_TEST(HttpStream, ReadSomeReadsAWholeBodyFromMemoryWhenItIsNotStreamed) {
  co_await with_server(BodyCounter{.streamed = false}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789"));
    std::string got;
    EXPECT_TRUE(co_await read_until(c, got, "\r\n\r\n10 2")) << got;
  });
}

SHOAL_TEST(HttpStream, AReadInACancelledScopeThrowsCancelledAndTakesNothing) {
  co_await with_server(streamed(), shoal::test::CancelledRead{}, [&](Address addr) -> Task<void> {
    Stream c = co_await shoal::net::connect(addr);
    co_await c.write_all(std::string_view("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"));
    std::string got;
    EXPECT_TRUE(co_await read_until(c, got, "\r\n\r\ncancelled hello")) << got;
  });
}

}  // namespace
