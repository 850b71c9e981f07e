// shoal::http2's server driven frame by frame: a test client that writes
// raw HTTP/2 frames (RFC 9113 §4) and reads the server's, for what no
// real client does on demand (a reset at a chosen moment, a flood, a
// silent connection).
#include <atomic>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "shoal/http.hpp"
#include "http2/h2_frames.hpp"
#include "http2/h2_support.hpp"
#include "shoal/http2/server.hpp"
#include "shoal/scope/cancel_scope.hpp"
#include "shoal/sync/event.hpp"
#include "http/streaming_handlers.hpp"
#include "support/stream_io.hpp"
#include "support/test_support.hpp"
#include "src/http2/body_budget.hpp"

namespace {

using shoal::test::CancelledFirstWrite;
using shoal::test::CancelledWrite;
using shoal::test::with_trailer;

using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::test::with_h2_server;
using namespace shoal::test::h2;
namespace http = shoal::http;
namespace http2 = shoal::http2;

SHOAL_TEST_SUITE(Http2Server);

using shoal::test::Hang;

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

SHOAL_TEST(Http2Server, AConnectionTheServerEndsReadsTheClientsLastBytesUntilTheClientEnds) {
  // A close with the client's bytes unread would reset the connection, and
  // a reset can destroy the GOAWAY before the client reads it.
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  http::ServerOptions o;
  o.header_timeout = 50ms;
  http::Server server(o);
  Hang handler{nullptr, nullptr};
  shoal::test::StreamRecord record;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      shoal::test::RecordingStream conn(co_await listener.accept(), record);
      co_await http2::serve_connection(server, std::move(conn), handler);
    });
    Client c = co_await Client::open(listener.local_address().to_string());
    const std::optional<Frame> goaway = co_await c.until(kGoaway);
    EXPECT_TRUE(goaway.has_value()) << "the connection ended without GOAWAY";
    EXPECT_FALSE((co_await c.next()).has_value()) << "after GOAWAY, the server's end of stream";
    co_await c.send(std::string(64 * 1024, '\0'));  // crossed the GOAWAY: read and dropped
    c.conn.shutdown();
  });
  EXPECT_TRUE(record.lingered);
  EXPECT_TRUE(record.drained) << "the linger was cut short (cancelled with the connection's streams)";
}

SHOAL_TEST(Http2Server, AHandlerKnowsItsClientsAddress) {
  struct PeerOf {  // a Task<void> handler: a task per stream
    std::string* seen;
    Task<void> operator()(const http::Request& req, http::Response& res) const {
      const auto peer = req.peer();
      *seen = peer ? peer->to_string() : "none";
      res.body = "ok";
      co_return;
    }
  };
  std::string seen, client;
  co_await with_h2_server({}, PeerOf{&seen}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    client = c.conn.local_address().to_string();
    co_await c.send(get(1, "/"));
    const std::optional<Frame> answer = co_await c.outcome(1);
    EXPECT_TRUE(answer.has_value() && answer->type == kHeaders);
  });
  EXPECT_EQ(seen, client);
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

/// /slow answers "done" once `release` is set; anything else "ok".
struct Slow {
  shoal::Event* started;
  shoal::Event* release;
  Task<void> operator()(const http::Request& req, http::Response& res) const {
    if (req.target() == "/slow") {
      started->set();
      co_await release->wait();
      res.body = "done";
      co_return;
    }
    res.body = "ok";
  }
};

SHOAL_TEST(Http2Server, AGracefulShutdownSendsGoawayAtOnceAndFinishesTheStreamsItLetIn) {
  shoal::Event started, release;
  co_await with_h2_server({}, Slow{&started, &release}, [&](std::string addr, http::Server& server) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get(1, "/slow"));
    co_await started.wait();
    server.shutdown();  // stream 1's handler still runs
    std::optional<Frame> goaway;
    const bool in_time = co_await shoal::move_on_after(30s, [&]() -> Task<void> { goaway = co_await c.until(kGoaway); }());
    EXPECT_TRUE(in_time && goaway.has_value()) << "no GOAWAY while the stream ran";
    if (goaway) {
      EXPECT_EQ(goaway->u32(0), 1u) << "the last stream GOAWAY lets finish";
      EXPECT_EQ(goaway->u32(4), kNoError);
    }
    co_await c.send(get(3, "/"));  // past the GOAWAY's last stream: not processed
    release.set();
    bool answered_1 = false, answered_3 = false;
    while (std::optional<Frame> f = co_await c.next()) {
      if (f->type == kHeaders && f->stream == 1) answered_1 = true;
      if (f->type == kHeaders && f->stream == 3) answered_3 = true;
    }
    EXPECT_TRUE(answered_1) << "the stream in flight was not finished";
    EXPECT_FALSE(answered_3) << "a stream opened after GOAWAY was processed";
  });
}

SHOAL_TEST(Http2Server, AGracefulShutdownClosesAnIdleConnectionWithGoaway) {
  co_await with_h2_server({}, Slow{nullptr, nullptr}, [&](std::string addr, http::Server& server) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get(1, "/"));
    EXPECT_TRUE((co_await c.until(kHeaders, 1)).has_value());
    server.shutdown();
    const std::optional<Frame> goaway = co_await c.until(kGoaway);
    EXPECT_TRUE(goaway.has_value()) << "the idle connection closed without GOAWAY";
    if (goaway) {
      EXPECT_EQ(goaway->u32(4), kNoError);
    }
    EXPECT_FALSE((co_await c.next()).has_value()) << "the idle connection stayed open";
  });
}

/// /big answers a mebibyte; anything else "ok". A plain function: the
/// handlers that run on the connection's task.
void big_or_ok(const http::Request& req, http::Response& res) {
  res.body = req.target() == "/big" ? std::string(1 << 20, 'b') : "ok";
}

SHOAL_TEST(Http2Server, AStreamItsClientDoesNotReadDoesNotStallTheOthers) {
  co_await with_h2_server({}, big_or_ok, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    std::string window;  // every stream may be sent 100 bytes until the client says more
    window += std::string("\x00\x04", 2);
    put32(window, 100);
    co_await c.send(frame(kSettings, 0, 0, window) + get(1, "/big"));
    std::size_t big_bytes = 0;
    bool ok_done = false;
    for (std::uint32_t id = 3; id < 3 + 2 * 20; id += 2) {  // twenty small streams beside the stalled one
      co_await c.send(get(id, "/"));
      ok_done = false;
      while (std::optional<Frame> f = co_await c.next()) {
        if (f->type == kData && f->stream == 1) big_bytes += f->payload.size();
        if (f->type == kData && f->stream == id && (f->flags & kEndStream) != 0) {
          ok_done = true;
          break;
        }
      }
      if (!ok_done) break;
    }
    EXPECT_TRUE(ok_done) << "a small stream was not answered beside the stalled one";
    EXPECT_LE(big_bytes, 100u) << "the server sent past the stalled stream's window";
  });
}

/// What /big writes: more than a write may leave untaken (a frame's worth,
/// 16 KiB) and return.
constexpr std::size_t kBig = 1000 + 16384;

/// /events: one event, then (once `release` is set) a second; /big writes
/// kBig bytes at once (saying when the write completed), then ends.
struct Streamer {
  shoal::Event* release;
  std::atomic<bool>* wrote;
  shoal::Event* cancelled;
  Task<void> operator()(const http::Request& req, http::Response& res) const {
    if (req.target() == "/big") {
      try {
        co_await res.write(std::string(kBig, 'b'));
      } catch (const shoal::Cancelled&) {
        cancelled->set();
        throw;
      }
      wrote->store(true);
      co_return;
    }
    co_await res.write("data: one\n\n");
    co_await release->wait();
    res.body = "data: two\n\n";
  }
};

/// SETTINGS_INITIAL_WINDOW_SIZE = `n` for every stream.
std::string window_setting(std::uint32_t n) {
  std::string entry("\x00\x04", 2);
  put32(entry, n);
  return frame(kSettings, 0, 0, entry);
}

SHOAL_TEST(Http2Server, AWrittenChunkReachesTheClientWhileTheHandlerStillRuns) {
  shoal::Event release, cancelled;
  std::atomic<bool> wrote{false};
  co_await with_h2_server({}, Streamer{&release, &wrote, &cancelled}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get(1, "/events"));
    const std::optional<Frame> head = co_await c.until(kHeaders, 1);
    EXPECT_TRUE(head && (head->flags & kEndStream) == 0) << "the head ended the stream";
    const std::optional<Frame> one = co_await c.until(kData, 1);
    EXPECT_TRUE(one && one->payload == "data: one\n\n" && (one->flags & kEndStream) == 0);
    release.set();
    std::string rest;
    bool ended = false;
    while (std::optional<Frame> f = co_await c.next()) {
      if (f->stream != 1 || f->type != kData) continue;
      rest += f->payload;
      if ((f->flags & kEndStream) != 0) {
        ended = true;
        break;
      }
    }
    EXPECT_TRUE(ended) << "the stream did not end once the handler returned";
    EXPECT_EQ(rest, "data: two\n\n");
  });
}

SHOAL_TEST(Http2Server, AWriteWaitsForTheClientsWindow) {
  shoal::Event release, cancelled;
  std::atomic<bool> wrote{false};
  co_await with_h2_server({}, Streamer{&release, &wrote, &cancelled}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(window_setting(100) + get(1, "/big"));
    std::size_t got = 0;
    while (got < 100) {
      const std::optional<Frame> f = co_await c.until(kData, 1);
      if (!f) break;
      got += f->payload.size();
    }
    EXPECT_EQ(got, 100u);
    // The PING's answer comes after the server's loop has run past the
    // closed window: the write has not completed.
    co_await c.send(frame(kPing, 0, 0, std::string(8, 'p')));
    EXPECT_TRUE((co_await c.until(kPing)).has_value());
    EXPECT_FALSE(wrote.load()) << "the write completed with more than a frame's worth the window did not allow";
    std::string more;
    put32(more, static_cast<std::uint32_t>(kBig));  // past the body: nghttp2 sends even the empty last DATA only into an open window
    co_await c.send(frame(kWindowUpdate, 0, 1, more));
    bool ended = false;
    while (std::optional<Frame> f = co_await c.until(kData, 1)) {
      got += f->payload.size();
      if ((f->flags & kEndStream) != 0) {
        ended = true;
        break;
      }
    }
    EXPECT_TRUE(ended);
    EXPECT_EQ(got, kBig);
  });
  EXPECT_TRUE(wrote.load());
}

/// Writes 100 pieces of 10 bytes, then says so and ends.
struct SmallWrites {
  shoal::Event* written;
  Task<void> operator()(const http::Request&, http::Response& res) const {
    for (int i = 0; i < 100; ++i) co_await res.write("0123456789");
    written->set();
  }
};

// Writes that fit in a frame complete without waiting for the client, and
// leave together: with the stream's window shut until every write is done,
// the body goes in one DATA frame (before, the first write waited for the
// window, and each piece went in a frame of its own).
SHOAL_TEST(Http2Server, SmallWritesCompleteAheadOfTheWindowAndLeaveInOneFrame) {
  shoal::Event written;
  co_await with_h2_server({}, SmallWrites{&written}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(window_setting(0) + get(1, "/"));
    const bool in_time = co_await shoal::move_on_after(20s, written.wait());
    EXPECT_TRUE(in_time) << "the writes waited for the shut window";
    std::string more;
    put32(more, 100000);
    co_await c.send(frame(kWindowUpdate, 0, 1, more));
    const std::optional<Frame> first = co_await c.until(kData, 1);
    EXPECT_TRUE(first && first->payload.size() == 1000u)
        << "the first DATA frame carries " << (first ? first->payload.size() : 0) << " bytes, not all 1,000";
  });
}

SHOAL_TEST(Http2Server, AResetCancelsAHandlerWaitingToWrite) {
  shoal::Event release, cancelled;
  std::atomic<bool> wrote{false};
  co_await with_h2_server({}, Streamer{&release, &wrote, &cancelled}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(window_setting(0) + get(1, "/big"));
    EXPECT_TRUE((co_await c.until(kHeaders, 1)).has_value());  // the head is out; the body cannot be
    co_await c.send(rst_stream(1, kCancel));
    const bool seen = co_await shoal::move_on_after(30s, cancelled.wait());
    EXPECT_TRUE(seen) << "the handler waiting on the window was not cancelled";
    co_await c.send(get(3, "/events"));
    release.set();
    EXPECT_TRUE((co_await c.until(kHeaders, 3)).has_value()) << "the connection did not serve on";
  });
  EXPECT_FALSE(wrote.load());
}

SHOAL_TEST(Http2Server, TrailersComeInAHeadersFrameThatEndsTheStream) {
  co_await with_h2_server({}, with_trailer, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get(1, "/"));
    const std::optional<Frame> head = co_await c.until(kHeaders, 1);
    const std::optional<Frame> data = co_await c.until(kData, 1);
    const std::optional<Frame> trailers = co_await c.until(kHeaders, 1);
    EXPECT_TRUE(head && (head->flags & kEndStream) == 0);
    EXPECT_TRUE(data && data->payload == "payload" && (data->flags & kEndStream) == 0);
    EXPECT_TRUE(trailers && (trailers->flags & kEndStream) != 0) << "no trailers ended the stream";
  });
}

SHOAL_TEST(Http2Server, AWriteInACancelledScopeThrowsCancelledAndSendsNothing) {
  co_await with_h2_server({}, CancelledWrite{}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get(1, "/"));
    std::string body;
    while (std::optional<Frame> f = co_await c.until(kData, 1)) {
      body += f->payload;
      if ((f->flags & kEndStream) != 0) break;
    }
    EXPECT_EQ(body, "a");
  });
}

// Its head was never submitted, so the stream is answered as a whole
// (before, it was submitted as a streamed answer that nothing would end).
SHOAL_TEST(Http2Server, AHandlerWhoseOnlyWriteWasCancelledIsAnsweredWithWhatItLeft) {
  co_await with_h2_server({}, CancelledFirstWrite{}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get(1, "/"));
    std::string body;
    bool ended = false;
    // Bounded: before the fix the stream never ended.
    (void)co_await shoal::move_on_after(std::chrono::seconds(20), [&]() -> Task<void> {
      while (std::optional<Frame> f = co_await c.next()) {
        if (f->stream != 1) continue;
        if (f->type == kData) body += f->payload;
        if ((f->type == kData || f->type == kHeaders) && (f->flags & kEndStream) != 0) {
          ended = true;
          break;
        }
        if (f->type == kRstStream) break;
      }
    }());
    EXPECT_TRUE(ended) << "the stream did not end";
    EXPECT_EQ(body, "after");
  });
}

/// A void handler that calls write: it cannot await it, so the call is refused.
void writes_without_awaiting(const http::Request&, http::Response& res) { (void)res.write("x"); }

SHOAL_TEST(Http2Server, AVoidHandlersWriteIsRefusedAndAnswered500) {
  co_await with_h2_server({}, writes_without_awaiting, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get(1, "/"));
    const std::optional<Frame> head = co_await c.until(kHeaders, 1);
    EXPECT_TRUE(head.has_value()) << "the stream was not answered";
    if (head) {
      EXPECT_EQ(head->payload.substr(0, 1), "\x8e") << "not :status 500 (HPACK static entry 14)";
    }
  });
}

/// BodyCounter reading 4 bytes at a time.
shoal::test::BodyCounter counter(shoal::Event* first, shoal::Event* go) {
  return shoal::test::BodyCounter{.first = first, .go = go, .piece = 4};
}

http::ServerOptions streamed_bodies() {
  http::ServerOptions o;
  o.stream_request_body = true;
  o.max_body = 2;  // would refuse every body here if it were read whole
  return o;
}

/// The body of stream `id`'s answer, or what came before the connection ended.
Task<std::string> body_of(Client& c, std::uint32_t id) {
  std::string body;
  while (std::optional<Frame> f = co_await c.until(kData, id)) {
    body += f->payload;
    if ((f->flags & kEndStream) != 0) break;
  }
  co_return body;
}

SHOAL_TEST(Http2Server, AStreamedBodyReachesTheHandlerBeforeItsStreamEnds) {
  shoal::Event first, go;
  co_await with_h2_server(streamed_bodies(), counter(&first, &go), [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(post(1, "/") + data(1, "0123", false));
    co_await first.wait();  // the handler read part of a body whose stream has not ended
    go.set();
    co_await c.send(data(1, "456789", true));
    EXPECT_EQ(co_await body_of(c, 1), "10 3");
  });
}

SHOAL_TEST(Http2Server, ABodyTheHandlerLeftUnreadIsDroppedAndTheConnectionServesOn) {
  shoal::Event first, go;
  go.set();
  co_await with_h2_server(streamed_bodies(), counter(&first, &go), [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(post(1, "/unread") + data(1, "abc", false));
    EXPECT_EQ(co_await body_of(c, 1), "not read");
    co_await c.send(data(1, std::string(1000, 'x'), true) + post(3, "/") + data(3, "xyz", true));
    EXPECT_EQ(co_await body_of(c, 3), "3 1");
  });
}

SHOAL_TEST(Http2Server, AStreamedBodyThatStopsArrivingIsAnswered408) {
  shoal::Event first, go;
  go.set();
  http::ServerOptions o = streamed_bodies();
  o.header_timeout = 100ms;
  co_await with_h2_server(o, counter(&first, &go), [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(post(1, "/") + data(1, "0123", false));  // and then nothing
    const std::string body = co_await body_of(c, 1);
    EXPECT_NE(body.find("the request body did not arrive in time"), std::string::npos) << body;
  });
}

TEST(Http2BodyBudget, PastItsLimitTheConnectionsWindowReopensOnlyAsHandlersRead) {
  shoal::http2::detail::BodyBudget budget(100);
  EXPECT_EQ(budget.arrived(60), 60u);  // under the limit: given back at once
  EXPECT_EQ(budget.arrived(60), 40u);  // 20 past it are held off
  EXPECT_EQ(budget.arrived(10), 0u);
  EXPECT_EQ(budget.held(), 130u);
  EXPECT_EQ(budget.left(20), 20u);  // back to 110: 10 still held off
  EXPECT_EQ(budget.left(50), 10u);  // under the limit: all given back
  EXPECT_EQ(budget.left(60), 0u);
  EXPECT_EQ(budget.held(), 0u);
  EXPECT_EQ(budget.arrived(100), 100u);  // the whole limit again
}

SHOAL_TEST(Http2Server, AStreamWhoseWindowStaysShutIsResetAfterTheIdleTimeout) {
  shoal::Event release, cancelled;
  std::atomic<bool> wrote{false};
  http::ServerOptions o;
  o.idle_timeout = 100ms;
  co_await with_h2_server(o, Streamer{&release, &wrote, &cancelled}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(window_setting(0) + get(1, "/big"));  // and never a WINDOW_UPDATE
    const std::optional<Frame> rst = co_await c.until(kRstStream, 1);
    EXPECT_TRUE(rst.has_value()) << "the stalled stream was not reset";
    if (rst) {
      EXPECT_EQ(rst->u32(0), kCancel);
    }
    const bool seen = co_await shoal::move_on_after(30s, cancelled.wait());
    EXPECT_TRUE(seen) << "the stalled stream's handler was not cancelled";
  });
  EXPECT_FALSE(wrote.load());
}

SHOAL_TEST(Http2Server, ARequestThatStopsArrivingIsResetAfterTheHeaderTimeout) {
  http::ServerOptions o;
  o.header_timeout = 100ms;
  co_await with_h2_server(o, Hang{nullptr, nullptr}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(post(1, "/") + data(1, "part", false));  // and then nothing
    const std::optional<Frame> rst = co_await c.until(kRstStream, 1);
    EXPECT_TRUE(rst.has_value()) << "the stuck request's stream was not reset";
    if (rst) {
      EXPECT_EQ(rst->u32(0), kCancel);
    }
  });
}

SHOAL_TEST(Http2Server, AReadInACancelledScopeThrowsCancelledAndTakesNothing) {
  co_await with_h2_server(streamed_bodies(), shoal::test::CancelledRead{}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(post(1, "/") + data(1, "hello", true));
    EXPECT_EQ(co_await body_of(c, 1), "cancelled hello");
  });
}

SHOAL_TEST(Http2Server, TheTaskDumpNamesEachStreamsHandlerAndTheStatsCountStreams) {
  shoal::Event started, cancelled;
  http::ServerStats stats;
  http::ServerOptions o;
  o.stats = &stats;
  co_await with_h2_server(o, Hang{&started, &cancelled}, [&](std::string addr) -> Task<void> {
    Client c = co_await Client::open(addr);
    co_await c.send(get(1, "/hang") + get(3, "/"));
    co_await started.wait();
    EXPECT_TRUE((co_await c.until(kHeaders, 3)).has_value());
    std::ostringstream dump;
    shoal::Runtime::dump_all(dump);
    EXPECT_NE(dump.str().find("HTTP/2 stream 1: GET /hang"), std::string::npos) << dump.str();
    const http::ServerStats::Snapshot now = stats.snapshot();
    EXPECT_EQ(now.http2_connections_open, 1u);
    EXPECT_EQ(now.streams_opened, 2u);
    EXPECT_EQ(now.streams_open, 1u);  // /hang's
    EXPECT_NE(stats.to_prometheus().find("http_streams_open 1\n"), std::string::npos) << stats.to_prometheus();
  });
  EXPECT_EQ(stats.snapshot().http2_connections_open, 0u);
  EXPECT_EQ(stats.snapshot().streams_open, 0u);
}

}  // namespace
