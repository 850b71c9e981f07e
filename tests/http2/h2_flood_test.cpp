// The floods HTTP/2 servers have fallen to, each sent by a raw client as an
// attacker writes it, and the outcome shoal::http2 defines: GOAWAY with
// ENHANCE_YOUR_CALM whose debug data names the limit, and the server's
// other connections served on. (Rapid reset: CVE-2023-44487; CONTINUATION
// floods: CVE-2024-27316; SETTINGS floods and empty frames: the 2019
// Netflix family, CVE-2019-9515 and -9518.)
#include <cstdint>
#include <optional>
#include <string>

#include "http2/h2_frames.hpp"
#include "http2/h2_support.hpp"
#include "shoal/http.hpp"
#include "shoal/http2/server.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::Task;
using shoal::test::with_h2_server;
using namespace shoal::test::h2;
namespace http = shoal::http;

SHOAL_TEST_SUITE(Http2Floods);

struct Ok {
  Task<void> operator()(const http::Request&, http::Response& res) const {
    res.body = "ok";
    co_return;
  }
};

/// The connection's GOAWAY (its code and debug data), after which it must
/// end; empty if it ended without one.
Task<std::optional<Frame>> goaway_then_end(Client& c) {
  std::optional<Frame> g = co_await c.until(kGoaway);
  if (g) {
    while (co_await c.next()) {
    }
  }
  co_return g;
}

std::string debug_data(const Frame& goaway) { return goaway.payload.substr(8); }

/// Another client's GET, answered while the flooder is cut off.
Task<void> expect_others_served(const std::string& addr) {
  Client other = co_await Client::open(addr);
  co_await other.send(get(1, "/"));
  const std::optional<Frame> answer = co_await other.until(kHeaders, 1);
  EXPECT_TRUE(answer.has_value()) << "another connection was not served";
}

void expect_calm_naming(const std::optional<Frame>& g, const std::string& limit) {
  ASSERT_TRUE(g.has_value()) << "the connection ended without GOAWAY";
  EXPECT_EQ(g->u32(4), kEnhanceYourCalm) << "debug data: " << debug_data(*g);
  EXPECT_NE(debug_data(*g).find(limit), std::string::npos) << "debug data: " << debug_data(*g);
}

SHOAL_TEST(Http2Floods, RapidResetPastTheResetRateLimitEndsTheConnectionWithEnhanceYourCalm) {
  co_await with_h2_server({}, Ok{}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    std::string flood;
    for (std::uint32_t id = 1; id < 2 * 1200; id += 2) flood += get(id, "/") + rst_stream(id, kCancel);
    co_await c.send(flood);
    expect_calm_naming(co_await goaway_then_end(c), "stream reset rate");
    co_await expect_others_served(addr);
  });
}

// Python's h2 answers each frame still in flight on a stream it reset with
// a RST_STREAM of its own: thousands after a handler's small writes. Such
// resets of a closed stream cost nothing and are not rapid reset.
SHOAL_TEST(Http2Floods, ResetsOfAStreamAlreadyClosedDoNotCountAgainstTheResetRateLimit) {
  co_await with_h2_server({}, Ok{}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get(1, "/"));
    std::optional<Frame> f;
    do {
      f = co_await c.next();
    } while (f && !(f->stream == 1 && (f->flags & kEndStream) != 0));
    EXPECT_TRUE(f.has_value()) << "stream 1 was not answered";
    std::string late;
    for (int i = 0; i < 3000; ++i) late += rst_stream(1, kCancel);
    co_await c.send(late + get(3, "/"));
    const std::optional<Frame> answer = co_await c.outcome(3);
    EXPECT_TRUE(answer && answer->type == kHeaders) << "stream 3 was not answered (the connection ended, or reset it)";
  });
}

SHOAL_TEST(Http2Floods, AHeaderBlockInTooManyContinuationFramesEndsTheConnection) {
  co_await with_h2_server({}, Ok{}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    // One field whose value comes a few bytes per CONTINUATION frame.
    const std::string value(200, 'v');
    std::string block = "\x82\x86\x84\x01\x09localhost";
    block += '\x00';
    block += hpack_length(1) + "x" + hpack_length(value.size()) + value;
    std::string flood = frame(kHeaders, kEndStream, 1, block.substr(0, 20));
    for (std::size_t at = 20; at < block.size(); at += 5) {
      const bool last = at + 5 >= block.size();
      flood += frame(kContinuation, last ? kEndHeaders : 0, 1, block.substr(at, 5));
    }
    co_await c.send(flood);
    expect_calm_naming(co_await goaway_then_end(c), "CONTINUATION");
    co_await expect_others_served(addr);
  });
}

SHOAL_TEST(Http2Floods, ASettingsFrameWithTooManyEntriesEndsTheConnection) {
  co_await with_h2_server({}, Ok{}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    std::string entries;
    for (int i = 0; i < 40; ++i) {
      entries += std::string("\x00\x04", 2);  // INITIAL_WINDOW_SIZE, again and again
      put32(entries, 65535);
    }
    co_await c.send(frame(kSettings, 0, 0, entries));
    expect_calm_naming(co_await goaway_then_end(c), "SETTINGS");
    co_await expect_others_served(addr);
  });
}

SHOAL_TEST(Http2Floods, EmptyDataFramesPastTheLimitEndTheConnection) {
  co_await with_h2_server({}, Ok{}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    // A POST whose body never comes: empty DATA frames, each costing the
    // server a frame's work and moving nothing.
    std::string flood = frame(kHeaders, kEndHeaders, 1, "\x83\x86\x84\x01\x09localhost");
    for (int i = 0; i < 20'000; ++i) flood += frame(kData, 0, 1, "");
    co_await c.send(flood);
    expect_calm_naming(co_await goaway_then_end(c), "empty frames");
    co_await expect_others_served(addr);
  });
}

}  // namespace
