// shoal::http2's server driven frame by frame: a test client that writes
// raw HTTP/2 frames (RFC 9113 §4) and reads the server's, for what no
// real client does on demand (a reset at a chosen moment, a flood, a
// silent connection).
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "shoal/http.hpp"
#include "http2/h2_support.hpp"
#include "shoal/http2/server.hpp"
#include "shoal/scope/cancel_scope.hpp"
#include "shoal/sync/event.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::test::with_h2_server;
namespace http = shoal::http;
namespace http2 = shoal::http2;

SHOAL_TEST_SUITE(Http2Server);

enum : std::uint8_t { kData = 0, kHeaders = 1, kRstStream = 3, kSettings = 4, kPing = 6, kGoaway = 7 };
enum : std::uint8_t { kEndStream = 1, kEndHeaders = 4 };
constexpr std::uint32_t kRefusedStream = 7, kCancel = 8;

void put32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream, const std::string& payload) {
  std::string f;
  const auto n = static_cast<std::uint32_t>(payload.size());
  f.push_back(static_cast<char>(n >> 16));
  f.push_back(static_cast<char>(n >> 8));
  f.push_back(static_cast<char>(n));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  put32(f, stream);
  return f + payload;
}

/// A GET of `path` as one HEADERS frame that ends the stream (HPACK:
/// :method GET and :scheme http from the static table, :path and
/// :authority as literals without indexing).
std::string get(std::uint32_t stream, const std::string& path) {
  std::string block = "\x82\x86";
  block += '\x04';  // literal, name = static entry 4 (:path)
  block += static_cast<char>(path.size());
  block += path;
  block += '\x01';  // literal, name = static entry 1 (:authority)
  block += '\x09';
  block += "localhost";
  return frame(kHeaders, kEndStream | kEndHeaders, stream, block);
}

/// An HPACK string length (RFC 7541 §5.1: a 7-bit prefix, no Huffman).
std::string hpack_length(std::size_t n) {
  std::string out;
  if (n < 127) return std::string(1, static_cast<char>(n));
  out += '\x7f';
  for (n -= 127; n >= 128; n >>= 7) out += static_cast<char>((n & 0x7f) | 0x80);
  return out + static_cast<char>(n);
}

/// A GET of / with one more header field, `name: value` (a literal
/// without indexing, new name).
std::string get_with_field(std::uint32_t stream, const std::string& name, const std::string& value) {
  std::string block = "\x82\x86\x84";  // GET, http, /
  block += "\x01\x09localhost";       // :authority
  block += '\x00';
  block += hpack_length(name.size()) + name + hpack_length(value.size()) + value;
  return frame(kHeaders, kEndStream | kEndHeaders, stream, block);
}

std::string rst_stream(std::uint32_t stream, std::uint32_t code) {
  std::string payload;
  put32(payload, code);
  return frame(kRstStream, 0, stream, payload);
}

struct Frame {
  std::uint8_t type = 0, flags = 0;
  std::uint32_t stream = 0;
  std::string payload;
  std::uint32_t u32(std::size_t at) const {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(payload[at + i]);
    return v;
  }
};

/// A raw HTTP/2 client connection.
struct Client {
  shoal::net::Stream conn;
  std::string in;

  static Task<Client> open(const std::string& addr) {
    shoal::net::Stream conn = co_await shoal::net::connect(Address::parse(addr));
    Client c{std::move(conn), {}};
    co_await c.conn.write_all(std::string(http2::kClientPreface) + frame(kSettings, 0, 0, ""));
    co_return c;
  }
  Task<void> send(const std::string& bytes) { co_await conn.write_all(bytes); }
  /// The next frame, or empty at the end of the stream.
  Task<std::optional<Frame>> next() {
    auto need = [&](std::size_t n) -> Task<bool> {
      char buf[16384];
      while (in.size() < n) {
        const std::size_t got = co_await conn.read_some(std::as_writable_bytes(std::span(buf)));
        if (got == 0) co_return false;
        in.append(buf, got);
      }
      co_return true;
    };
    if (!co_await need(9)) co_return std::nullopt;
    const auto b = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])); };
    const std::size_t len = b(0) << 16 | b(1) << 8 | b(2);
    if (!co_await need(9 + len)) co_return std::nullopt;
    Frame f{static_cast<std::uint8_t>(b(3)), static_cast<std::uint8_t>(b(4)),
            (b(5) << 24 | b(6) << 16 | b(7) << 8 | b(8)) & 0x7fffffffu, in.substr(9, len)};
    in.erase(0, 9 + len);
    co_return f;
  }
  /// How the server ends `stream`: its first HEADERS (an answer) or
  /// RST_STREAM frame; empty if the connection ends first.
  Task<std::optional<Frame>> outcome(std::uint32_t stream) {
    for (;;) {
      std::optional<Frame> f = co_await next();
      if (!f || (f->stream == stream && (f->type == kHeaders || f->type == kRstStream))) co_return f;
    }
  }
  /// Frames until one of `type` (on `stream`, if given); empty if the
  /// connection ends first.
  Task<std::optional<Frame>> until(std::uint8_t type, std::optional<std::uint32_t> stream = std::nullopt) {
    for (;;) {
      std::optional<Frame> f = co_await next();
      if (!f || (f->type == type && (!stream || f->stream == *stream))) co_return f;
    }
  }
};

/// /hang waits until cancelled (saying when it started and when it was
/// cancelled); anything else answers "ok".
struct Hang {
  shoal::Event* started;
  shoal::Event* cancelled;
  Task<void> operator()(const http::Request& req, http::Response& res) const {
    if (req.target() != "/hang") {
      res.body = "ok";
      co_return;
    }
    started->set();
    shoal::Event never;
    try {
      co_await never.wait();
    } catch (const shoal::Cancelled&) {
      cancelled->set();
      throw;
    }
  }
};

SHOAL_TEST(Http2Server, APeersResetCancelsThatStreamsHandlerAndTheConnectionServesOn) {
  shoal::Event started, cancelled;
  co_await with_h2_server({}, Hang{&started, &cancelled}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get(1, "/hang"));
    co_await started.wait();
    co_await c.send(rst_stream(1, kCancel));
    const bool seen = co_await shoal::move_on_after(30s, cancelled.wait());
    EXPECT_TRUE(seen) << "the reset stream's handler was not cancelled";
    co_await c.send(get(3, "/"));
    const std::optional<Frame> answer = co_await c.until(kHeaders, 3);
    EXPECT_TRUE(answer.has_value()) << "the connection ended instead of answering stream 3";
  });
}

SHOAL_TEST(Http2Server, ASilentConnectionEndsWithGoawayNoErrorAfterTheHeaderTimeout) {
  http::ServerOptions o;
  o.header_timeout = 50ms;
  co_await with_h2_server(o, Hang{nullptr, nullptr}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    const std::optional<Frame> goaway = co_await c.until(kGoaway);
    EXPECT_TRUE(goaway.has_value()) << "the connection ended without GOAWAY";
    if (goaway) {
      EXPECT_EQ(goaway->u32(4), 0u);  // NO_ERROR
    }
    EXPECT_FALSE((co_await c.next()).has_value()) << "the connection stayed open after GOAWAY";
  });
}

SHOAL_TEST(Http2Server, AStreamPastTheAdvertisedLimitIsRefused) {
  shoal::Event started, cancelled;
  http::ServerOptions o;
  o.max_concurrent_streams = 1;
  co_await with_h2_server(o, Hang{&started, &cancelled}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);  // it never acknowledges the server's SETTINGS
    co_await c.send(get(1, "/hang"));
    co_await started.wait();
    co_await c.send(get(3, "/"));
    const std::optional<Frame> rst = co_await c.outcome(3);
    EXPECT_TRUE(rst && rst->type == kRstStream) << "stream 3 was not refused";
    if (rst && rst->type == kRstStream) {
      EXPECT_EQ(rst->u32(0), kRefusedStream);
    }
  });
}

SHOAL_TEST(Http2Server, AHeaderListPastMaxHeadResetsItsStreamAndTheConnectionServesOn) {
  http::ServerOptions o;
  o.max_head = 4096;
  co_await with_h2_server(o, Hang{nullptr, nullptr}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get_with_field(1, "x-big", std::string(5000, 'v')) + get(3, "/"));
    const std::optional<Frame> rst = co_await c.outcome(1);
    EXPECT_TRUE(rst && rst->type == kRstStream) << "the oversized header list was not refused";
    const std::optional<Frame> answer = co_await c.until(kHeaders, 3);
    EXPECT_TRUE(answer.has_value()) << "the connection ended instead of answering stream 3";
  });
}

/// /stubborn ignores its cancel (a shield) until `release` is set; "/"
/// notes whether it started while /stubborn still ran.
struct Stubborn {
  shoal::Event* started;
  shoal::Event* release;
  std::atomic<bool>* stubborn_running;
  std::atomic<bool>* ran_beside;
  Task<void> operator()(const http::Request& req, http::Response& res) const {
    if (req.target() == "/stubborn") {
      stubborn_running->store(true);
      started->set();
      shoal::CancelScope shield(shoal::CancelScope::kShield);
      co_await shield.run([](shoal::Event* e) -> Task<void> { co_await e->wait(); }(release));
      stubborn_running->store(false);
      co_return;
    }
    if (stubborn_running->load()) ran_beside->store(true);
    res.body = "ok";
  }
};

SHOAL_TEST(Http2Server, AResetStreamsHandlerThatHasNotEndedKeepsItsSlot) {
  shoal::Event started, release;
  std::atomic<bool> stubborn_running{false}, ran_beside{false};
  http::ServerOptions o;
  o.max_concurrent_streams = 1;
  co_await with_h2_server(o, Stubborn{&started, &release, &stubborn_running, &ran_beside}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get(1, "/stubborn"));
    co_await started.wait();
    // Stream 1 is closed for nghttp2 (so stream 3 is admitted) but its
    // handler runs on: stream 3's must wait. The PING's answer comes
    // after the server has taken in stream 3.
    co_await c.send(rst_stream(1, kCancel) + get(3, "/") + frame(kPing, 0, 0, std::string(8, 'p')));
    const std::optional<Frame> pong = co_await c.until(kPing);
    EXPECT_TRUE(pong.has_value());
    release.set();
    const std::optional<Frame> answer = co_await c.until(kHeaders, 3);
    EXPECT_TRUE(answer.has_value()) << "stream 3 was not answered once the slot came free";
    EXPECT_FALSE(ran_beside.load()) << "a handler started while a reset stream's handler held the only slot";
  });
}

}  // namespace
