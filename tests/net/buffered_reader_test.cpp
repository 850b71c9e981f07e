// BufferedReader over a socket pair: lines split across reads, CRLF, the
// limit (a clear error, bounded memory), delimiters, exact reads.
#include <sys/socket.h>

#include <string>
#include <type_traits>
#include <vector>

#include "support/stream_io.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;
using shoal::net::BufferedReader;
using shoal::net::Stream;

SHOAL_TEST_SUITE(BufferedReaderTest);

struct Pair {
  Stream a, b;
};
Pair stream_pair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) throw std::runtime_error("socketpair");
  return {Stream(sv[0]), Stream(sv[1])};
}

// Writes the pieces with a yield between them, then closes.
Task<void> write_pieces(Stream& out, std::vector<std::string> pieces) {
  for (auto& p : pieces) {
    co_await out.write_all(p);
    co_await shoal::sleep_for(1ms);
  }
  out.close();
}

SHOAL_TEST(BufferedReaderTest, LinesSplitAcrossReadsComeOutWholeWithoutTheirEndings) {
  Pair pair = stream_pair();  // not a structured binding: clang 14 cannot capture one
  Stream& in = pair.a;
  Stream& out = pair.b;
  std::vector<std::string> lines;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(write_pieces(out, {"al", "pha\r\nbe", "ta\n\ngam", "ma"}));
    BufferedReader r(in, 64);
    while (auto line = co_await r.next_line(100)) lines.emplace_back(*line);
  });
  EXPECT_EQ(lines, (std::vector<std::string>{"alpha", "beta", "", "gamma"}));
}

SHOAL_TEST(BufferedReaderTest, AReaderWaitingInASelectWithNothingReadAheadHoldsNoBuffer) {
  Pair pair = stream_pair();  // not a structured binding: clang 14 cannot capture one
  Stream& in = pair.a;
  Stream& out = pair.b;
  BufferedReader r(in, 16 * 1024);
  co_await out.write_all(std::string_view("one\ntwo\n"));
  EXPECT_EQ(co_await r.read_line(100), "one");
  EXPECT_GE(r.buffer_size(), 16u * 1024) << "a read's buffer";
  auto still = co_await shoal::select(shoal::net::on_readable(r), shoal::on_timeout(10s));
  EXPECT_EQ(still.index(), 0u) << "\"two\" is read ahead: ready at once";
  EXPECT_GE(r.buffer_size(), 16u * 1024) << "kept while bytes are read ahead";
  EXPECT_EQ(co_await r.read_line(100), "two");
  // Nothing is read ahead and nothing comes: the select waits, then times out.
  auto woke = co_await shoal::select(shoal::net::on_readable(r), shoal::on_timeout(1ms));
  EXPECT_EQ(woke.index(), 1u);
  EXPECT_EQ(r.buffer_size(), 0u) << "the select waited holding the 16 KiB buffer";
  co_await out.write_all(std::string_view("three\n"));
  EXPECT_EQ(co_await r.read_line(100), "three");
}

SHOAL_TEST(BufferedReaderTest, ALineOverTheLimitIsAClearErrorAndMemoryStaysBounded) {
  Pair pair = stream_pair();  // not a structured binding: clang 14 cannot capture one
  Stream& in = pair.a;
  Stream& out = pair.b;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      const std::string big(64 * 1024, 'x');
      try {
        co_await out.write_all(big);
      } catch (const std::system_error&) {
        // the reader may close first
      }
    });
    BufferedReader r(in, 256);
    try {
      (void)co_await r.read_line(1000);
      ADD_FAILURE() << "no error";
    } catch (const shoal::net::LineTooLong& e) {
      EXPECT_NE(std::string(e.what()).find("1000 bytes"), std::string::npos) << e.what();
    }
    EXPECT_LT(r.buffered().size(), 1000u + 256u) << "the reader kept more than the limit";
    in.close();
  });
}

SHOAL_TEST(BufferedReaderTest, ReadUntilKeepsTheDelimiterAndReturnsTheRestAtTheEnd) {
  Pair pair = stream_pair();  // not a structured binding: clang 14 cannot capture one
  Stream& in = pair.a;
  Stream& out = pair.b;
  std::vector<std::string> records;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(write_pieces(out, {"a;bb;", "c"}));
    BufferedReader r(in);
    while (auto rec = co_await r.read_until(';', 10)) records.push_back(*rec);
  });
  EXPECT_EQ(records, (std::vector<std::string>{"a;", "bb;", "c"}));
}

SHOAL_TEST(BufferedReaderTest, ACallCutOffMidScanLeavesNoTraceForTheNextDelimiter) {
  // read_until(' ') searches the buffered "a\nb\nc" for a space, finds none,
  // and waits for more; cancelled there, it must not leave its "already
  // searched" mark for a next_line, which would then skip the newlines and
  // return the three records as one (or throw a spurious LineTooLong).
  Pair pair = stream_pair();  // not a structured binding: clang 14 cannot capture one
  Stream& in = pair.a;
  Stream& out = pair.b;
  co_await out.write_all(std::string_view("a\nb\nc"));
  BufferedReader r(in);
  // Until the cut-off call has read (and so searched) all five bytes: each
  // call reads what is there, searches it, and is cut off waiting for more.
  for (int attempt = 0; attempt < 500 && r.buffered().size() < 5; ++attempt) {
    co_await shoal::move_on_after(20ms, r.read_until(' ', 100));
  }
  EXPECT_EQ(r.buffered(), "a\nb\nc") << "the cut-off calls never read all five bytes";
  out.close();
  std::vector<std::string> lines;
  while (auto line = co_await r.read_line(3)) lines.push_back(*line);
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "b", "c"}));
}

SHOAL_TEST(BufferedReaderTest, ReadExactTakesBufferedBytesFirstThenTheStream) {
  Pair pair = stream_pair();  // not a structured binding: clang 14 cannot capture one
  Stream& in = pair.a;
  Stream& out = pair.b;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(write_pieces(out, {"head\n0123", "456789"}));
    BufferedReader r(in);
    EXPECT_EQ(co_await r.read_line(100), std::optional<std::string>("head"));
    char body[10];
    co_await r.read_exact(std::as_writable_bytes(std::span(body)));
    EXPECT_EQ(std::string(body, 10), "0123456789");
    std::byte more[1];
    EXPECT_EQ(co_await r.read_some(more), 0u);
  });
}

SHOAL_TEST(BufferedReaderTest, ReadExactPastTheEndSaysHowMuchCame) {
  Pair pair = stream_pair();  // not a structured binding: clang 14 cannot capture one
  Stream& in = pair.a;
  Stream& out = pair.b;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(write_pieces(out, {"abc"}));
    BufferedReader r(in);
    char buf[8];
    try {
      co_await r.read_exact(std::as_writable_bytes(std::span(buf)));
      ADD_FAILURE() << "no error";
    } catch (const shoal::net::EndOfStream& e) {
      EXPECT_NE(std::string(e.what()).find("3 of 8"), std::string::npos) << e.what();
    }
  });
}

// Asking whether a reader can be moved must not recurse through its
// stream constructor (clang 14 failed on a struct holding a Stream and its
// BufferedReader, as the cookbook's Client does).
static_assert(!std::is_move_constructible_v<BufferedReader>);
static_assert(!std::is_copy_constructible_v<BufferedReader>);

// Any ByteStream: the reader's calls go through the stream's own.
static_assert(!shoal::net::ByteStream<int>);
static_assert(!shoal::net::ByteStream<std::string>, "no read_some: not a stream");

SHOAL_TEST(BufferedReaderTest, ReadsLinesFromAnyByteStreamThroughItsOwnCalls) {
  Pair pair = stream_pair();
  shoal::test::StreamRecord record;
  shoal::test::RecordingStream in(std::move(pair.a), record);
  Stream& out = pair.b;
  std::vector<std::string> lines;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(write_pieces(out, {"al", "pha\r\nbe", "ta\n\ngam", "ma"}));
    BufferedReader r(in, 64);
    while (auto line = co_await r.next_line(100)) lines.emplace_back(*line);
  });
  EXPECT_EQ(lines, (std::vector<std::string>{"alpha", "beta", "", "gamma"}));
  EXPECT_EQ(record.read, "alpha\r\nbeta\n\ngamma") << "every byte came through the stream's read_some";
}

}  // namespace
