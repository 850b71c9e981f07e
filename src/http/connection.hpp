// The HTTP/1.1 connection loop, over a net::Stream or any other ByteStream
// through a shoal::detail::ByteStreamRef: a template compiled once for each
// (src/http/server.cpp). Internal.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <type_traits>

#include "shoal/detail/raise.hpp"
#include "shoal/http/server.hpp"
#include "shoal/scope/cancel.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/time/sleep.hpp"

namespace shoal::http::detail {

using std::chrono::milliseconds;

enum class Read { data, end, timeout };

/// What an HTTP/2 client sends first (RFC 9113 §3.4).
inline constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads what is there into the back of `buf`, waiting at most `limit`.
template <class S>
[[gnu::noinline]] Task<Read> read_more(S& conn, std::string& buf, milliseconds limit) {
  const std::size_t old = buf.size();
  buf.resize(old + 4096);
  // The limit is the stream's own: a timer inside the read's wait, paid only
  // if the read has to wait (a move_on_after would be a cancel scope, a
  // timer and two frames around every read).
  conn.set_idle_timeout(limit);
  std::size_t n = 0;
  bool timed_out = false;
  try {
    n = co_await conn.read_some(std::as_writable_bytes(std::span(buf).subspan(old)));
  } catch (const net::IdleTimeout&) {
    timed_out = true;
  }
  buf.resize(old + n);
  co_return timed_out ? Read::timeout : n == 0 ? Read::end : Read::data;
}

/// The last response is out: end our side and let the client read it.
/// Closing with unread request bytes in the socket would send a reset that
/// can destroy the response in the client's buffers before it reads it, so
/// then the close lingers (reads and drops what comes until the client
/// closes, bounded in bytes and time).
template <class S>
[[gnu::noinline]] Task<void> close_gracefully(S& conn, bool unread_input) {
  if (unread_input) {
    co_await conn.linger_close(milliseconds(2000));
  } else if constexpr (std::is_void_v<decltype(conn.shutdown())>) {
    conn.shutdown();
  } else {
    co_await conn.shutdown();  // TLS: close_notify first
  }
}

inline int status_of(ParseStatus s) noexcept {
  switch (s) {
    case ParseStatus::too_large: return 431;
    case ParseStatus::expectation_failed: return 417;
    case ParseStatus::not_implemented: return 501;
    case ParseStatus::version_not_supported: return 505;
    default: return 400;
  }
}

/// How reading a request's head or body ended, when it was not simply done.
struct Stop {
  bool end = false;           ///< the client closed: close without an answer
  int status = 0;             ///< else, if not 0: answer this and close
  std::string_view why{};
};

/// Reads until the head in `in` is complete or an error, within the header
/// timeout from now. Its own coroutine: the common request arrives whole,
/// and an idle connection's frame should not carry this loop's awaiters.
template <class S>
[[gnu::noinline]] Task<Stop> read_head(S& conn, std::string& in, RequestHead& head, const ServerOptions& o) {
  const auto deadline = shoal::now() + o.header_timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - shoal::now());
    const Read r = left > milliseconds(0) ? co_await read_more(conn, in, left) : Read::timeout;
    if (r == Read::end) co_return Stop{.end = true};
    if (r == Read::timeout) co_return Stop{.status = 408, .why = "the request head did not arrive in time"};
    const ParseStatus parsed = parse_request_head(in, head, o.max_head);
    if (parsed == ParseStatus::complete) co_return Stop{};
    if (parsed != ParseStatus::incomplete) co_return Stop{.status = status_of(parsed), .why = head.error};
  }
}

/// Reads the body of the request whose head starts `in`: Content-Length
/// bytes (left in `in`), or chunks decoded into `chunked` (the chunk framing
/// is dropped from `in` as it goes). First answers `Expect: 100-continue`,
/// after what `out` holds. Sets `consumed` to the request's bytes in `in`.
template <class S>
[[gnu::noinline]] Task<Stop> read_body(S& conn, std::string& in, RequestHead& head, std::string& chunked, std::string& out,
                     std::size_t& consumed, const ServerOptions& o) {
  if (head.content_length > o.max_body) co_return Stop{.status = 413, .why = "request body too large"};
  if (head.expect_continue && in.size() == head.head_size) {
    // The client waits for this before it sends the body (RFC 9110 §10.1.1).
    out.append("HTTP/1.1 100 Continue\r\n\r\n");
    co_await conn.write_all(out);
    out.clear();
  }
  const Stop late{.status = 408, .why = "the request body did not arrive in time"};
  bool moved = false;  // `in` grew: the head's views must be taken again
  if (!head.chunked) {
    while (in.size() < head.head_size + head.content_length) {
      const Read r = co_await read_more(conn, in, o.header_timeout);
      if (r == Read::end) co_return Stop{.end = true};
      if (r == Read::timeout) co_return late;
      moved = true;
    }
    consumed = head.head_size + head.content_length;
  } else {
    ChunkedDecoder decoder;
    chunked.clear();
    for (;;) {
      std::string_view rest = std::string_view(in).substr(head.head_size);
      const auto st = decoder.feed(rest, chunked, o.max_body);
      const std::size_t used = in.size() - head.head_size - rest.size();
      if (st == ChunkedDecoder::Status::complete) {
        consumed = head.head_size + used;
        break;
      }
      if (st == ChunkedDecoder::Status::bad_request) co_return Stop{.status = 400, .why = decoder.error()};
      if (st == ChunkedDecoder::Status::too_large) co_return Stop{.status = 413, .why = "request body too large"};
      in.erase(head.head_size, used);  // decoded: only the head stays buffered
      const Read r = co_await read_more(conn, in, o.header_timeout);
      if (r == Read::end) co_return Stop{.end = true};
      if (r == Read::timeout) co_return late;
      moved = true;
    }
  }
  if (moved) (void)parse_request_head(in, head, o.max_head);  // the same bytes: fresh views
  co_return Stop{};
}

/// TCP_NODELAY on `fd` if it is a TCP socket (else nothing).
inline void no_delay(int fd) noexcept {
  const int on = 1;
  if (fd >= 0) (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

/// Response::write over HTTP/1.1: the head at the first write, then each
/// write's bytes as a chunk (to an HTTP/1.0 client, unframed, and the
/// connection closes after the body).
template <class S>
class ChunkedSink final : public BodySink {
 public:
  ChunkedSink(S& conn, std::string& out, const RequestHead& head, const Server& server) noexcept
      : conn_(conn), out_(out), head_(head), server_(server) {}

  Task<void> write(Response& res, std::string_view chunk) override {
    // A cancelled write sends nothing (the checkpoint contract).
    if (this_task::cancellation_requested()) shoal::detail::throw_cancelled();
    if (!started_) {
      // Each write must leave at once, not wait behind the client's
      // delayed ACK of the last one (Nagle: up to 40 ms per event).
      no_delay(conn_.native_handle());
      const bool chunked = head_.minor_version >= 1;
      close_ = !chunked || !head_.keep_alive || res.closes_connection() || server_.shutting_down();
      framing_ = Framing{.head_request = head_.method == "HEAD",
                         .close = close_,
                         .announce_keep_alive = !close_ && head_.minor_version == 0,
                         .chunked = chunked,
                         .unsized = !chunked};
      // A head cut short by out of memory is taken back: the 500 that
      // answers the failure follows what was before it.
      const std::size_t before = out_.size();
      try {
        append_head(out_, res, framing_);
      } catch (...) {
        out_.resize(before);
        throw;
      }
      started_ = true;
      begin_streaming(res);
    }
    append_body(res.body);
    res.body.clear();
    append_body(chunk);
    co_await conn_.write_all(out_);
    out_.clear();
  }
  /// After the handler: the rest of the body and the end of it. True if
  /// the connection must close after it.
  bool finish(const Response& res) {
    append_body(res.body);
    if (framing_.chunked && !framing_.head_request) append_last_chunk(out_, res);
    return close_;
  }
  std::size_t sent() const noexcept { return sent_; }

 private:
  void append_body(std::string_view data) {
    if (framing_.head_request) return;
    sent_ += data.size();
    if (framing_.chunked) {
      append_chunk(out_, data);
    } else {
      out_.append(data);
    }
  }
  S& conn_;
  std::string& out_;
  const RequestHead& head_;
  const Server& server_;
  Framing framing_;
  bool started_ = false;
  bool close_ = true;
  std::size_t sent_ = 0;
};

/// A request body read as the handler reads it (ServerOptions::
/// stream_request_body). The bytes after the head move to `raw` at once,
/// so that `in` holds only the head, whose views the handler has, and
/// nothing the body reads does can move it. After the handler, finish()
/// leaves in `raw` what came after the body (a pipelined request).
template <class S>
class StreamedBody final : public BodySource {
 public:
  StreamedBody(S& conn, std::string& in, std::string& raw, const RequestHead& head, const ServerOptions& o)
      : conn_(conn), raw_(raw), head_(head), left_(head.content_length), limit_(o.header_timeout) {
    raw_.assign(in, head.head_size);
    in.resize(head.head_size);
  }

  Task<std::size_t> read_some(std::span<std::byte> buf) override {
    if (this_task::cancellation_requested()) shoal::detail::throw_cancelled();
    if (buf.empty()) co_return 0;
    if (head_.expect_continue && !continued_ && !done_) {
      continued_ = true;
      // The client waits for this before it sends the body (RFC 9110 §10.1.1).
      if (raw_.empty()) co_await conn_.write_all(std::as_bytes(std::span(kContinue)));
    }
    if (!head_.chunked) co_return co_await read_sized(buf);
    for (;;) {
      if (decoded_at_ < decoded_.size()) co_return take(decoded_, decoded_at_, buf);
      decoded_.clear();
      decoded_at_ = 0;
      if (done_) co_return 0;
      std::string_view rest = std::string_view(raw_).substr(at_);
      const auto st = decoder_.feed(rest, decoded_, SIZE_MAX);
      at_ = raw_.size() - rest.size();
      if (st == ChunkedDecoder::Status::complete) {
        done_ = true;
      } else if (st == ChunkedDecoder::Status::bad_request) {
        throw BodyError(400, "shoal::http: bad chunked request body: " + std::string(decoder_.error()));
      } else if (decoded_.empty()) {
        raw_.erase(0, at_);
        at_ = 0;
        co_await more(raw_);
      }
    }
  }

  /// After the handler: true if it read the whole body; then `raw` holds
  /// what followed it, else nothing (the connection closes).
  bool finish() {
    if (!done_) {
      raw_.clear();
      return false;
    }
    raw_.erase(0, at_);
    return true;
  }

 private:
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

  Task<std::size_t> read_sized(std::span<std::byte> buf) {
    if (done_) co_return 0;
    std::size_t n = 0;
    if (at_ < raw_.size()) {
      n = take(raw_, at_, buf.first(std::min(buf.size(), left_)));
    } else {
      // Straight into the handler's buffer, never past the body's end.
      conn_.set_idle_timeout(limit_);
      try {
        n = co_await conn_.read_some(buf.first(std::min(buf.size(), left_)));
      } catch (const net::IdleTimeout&) {
        throw BodyError(408, "shoal::http: the request body did not arrive in time");
      }
      if (n == 0) throw ended();
    }
    left_ -= n;
    done_ = left_ == 0;
    co_return n;
  }
  static std::size_t take(const std::string& from, std::size_t& at, std::span<std::byte> buf) noexcept {
    const std::size_t n = std::min(buf.size(), from.size() - at);
    std::memcpy(buf.data(), from.data() + at, n);
    at += n;
    return n;
  }
  Task<void> more(std::string& into) {
    const Read r = co_await read_more(conn_, into, limit_);
    if (r == Read::timeout) throw BodyError(408, "shoal::http: the request body did not arrive in time");
    if (r == Read::end) throw ended();
  }
  static BodyError ended() { return BodyError(400, "shoal::http: the connection ended inside the request body"); }

  S& conn_;
  std::string& raw_;         // the bytes after the head, from `at_` on not yet taken
  std::size_t at_ = 0;
  const RequestHead& head_;
  std::size_t left_;         // Content-Length bytes not yet read
  milliseconds limit_;       // each wait for the body's bytes
  ChunkedDecoder decoder_;
  std::string decoded_;      // chunk data decoded from `raw_`, from `decoded_at_` on not yet taken
  std::size_t decoded_at_ = 0;
  bool done_ = false;
  bool continued_ = false;
};

/// True if a request's body is read as the handler reads it.
inline bool streams_body(const ServerOptions& o, HandlerRef handler) noexcept {
  return o.stream_request_body && handler.call == nullptr;
}

/// The request's body: in `in` after its head, or decoded from chunks.
inline std::string_view request_body(const RequestHead& head, std::string_view in, std::string_view chunked_body) {
  return head.chunked ? chunked_body : in.substr(head.head_size, head.content_length);
}

/// Appends a whole (not streamed) response to `out`; true if the
/// connection must close after it.
inline bool append_answer(std::string& out, const Response& res, const RequestHead& head, const Server& server) {
  const bool close = !head.keep_alive || res.closes_connection() || server.shutting_down();
  append_response(out, res,
                  Framing{.head_request = head.method == "HEAD",
                          .close = close,
                          .announce_keep_alive = !close && head.minor_version == 0,
                          .chunked = head.minor_version >= 1});
  return close;
}

/// How a Task<void> handler's answer went.
struct Answered {
  bool close = false;   ///< the connection closes after it
  bool unread = false;  ///< (streamed body) the handler left some of it unread
};

/// Runs a Task<void> handler with a response that can stream through
/// `conn` and, with ServerOptions::stream_request_body, a body it reads as
/// it goes (`raw` then holds what follows the body); leaves the answer's
/// (rest of the) bytes in `out`. Its own coroutine, so that neither the
/// sink nor the request is in an idle connection's frame.
template <class S>
[[gnu::noinline]] Task<Answered> answer_async(S& conn, std::string& in, std::string& raw, std::string& out,
                                              Server& server, HandlerRef handler, const RequestHead& head,
                                              std::string_view body, Response& res) {
  ChunkedSink<S> sink(conn, out, head, server);
  struct Attached {  // the sink dies with this frame, whichever way it ends
    Response& res;
    ~Attached() { attach(res, nullptr); }
  } attached{res};
  attach(res, &sink);
  if (!(streams_body(server.options(), handler) && head.has_body())) {
    Request req(head, body);
    set_connection(req, conn.native_handle());
    co_await handler.call_async(handler.self, req, res);
    co_return Answered{.close = res.streaming() ? sink.finish(res) : append_answer(out, res, head, server)};
  }
  StreamedBody<S> source(conn, in, raw, head, server.options());
  Request req(head, source);
  set_connection(req, conn.native_handle());
  co_await handler.call_async(handler.self, req, res);
  const bool read = source.finish();
  if (!read) res.close_connection();  // the rest of the body is still coming
  const bool close = res.streaming() ? sink.finish(res) || !read : append_answer(out, res, head, server);
  co_return Answered{.close = close, .unread = !read};
}

/// True if `in` holds another whole request after a response: then its
/// answer can go out in the same write as this one (pipelining).
inline bool next_request_buffered(std::string_view in, RequestHead& scratch, std::size_t max_head) {
  return parse_request_head(in, scratch, max_head) == ParseStatus::complete && !scratch.chunked &&
         !scratch.expect_continue && in.size() >= scratch.head_size + scratch.content_length;
}

/// HTTP/2 by prior knowledge: the client's first bytes are its preface,
/// whose first line no HTTP/1.1 request has. Reads the rest of a preface
/// begun in `in` and, if it is one, serves the connection as HTTP/2 and
/// returns true (also when the client went away); false leaves `in` to the
/// HTTP/1.1 loop. Its own coroutine, so that an HTTP/1.1 connection's frame
/// carries none of this.
template <class S>
[[gnu::noinline]] Task<bool> serve_http2(Server& server, S& conn, HandlerRef handler, std::string& in) {
  while (in.size() < kHttp2Preface.size() && kHttp2Preface.starts_with(in)) {
    if (co_await read_more(conn, in, server.options().header_timeout) != Read::data) co_return true;
  }
  if (!std::string_view(in).starts_with(kHttp2Preface)) co_return false;
  if constexpr (std::is_same_v<S, shoal::detail::ByteStreamRef>) {
    co_await server.http2()(server, conn, handler, std::move(in));
  } else {
    shoal::detail::ByteStreamRef ref(conn);
    co_await server.http2()(server, ref, handler, std::move(in));
  }
  co_return true;
}

// One connection's frame lives as long as the connection, so it is kept
// small: one wait and one write site (each awaiter is ~140 bytes of frame),
// and the other paths (a read, a head in pieces, a body, a Task<void>
// handler, a close) in coroutines of their own that exist only while they
// run. Those are [[gnu::noinline]]: clang elides the allocation of a
// coroutine it can inline (HALO) by placing its frame inside the caller's,
// which put every one of them in every idle connection's frame (768 B with
// noinline, 1,080 without).
/// ServerOptions::stats for one connection: opened now, closed on every way out.
struct CountedConnection {
  ServerStats* stats;
  explicit CountedConnection(ServerStats* s) noexcept : stats(s) {
    if (stats != nullptr) stats->connection_opened();
  }
  ~CountedConnection() {
    if (stats != nullptr) stats->connection_closed();
  }
  CountedConnection(const CountedConnection&) = delete;
  CountedConnection& operator=(const CountedConnection&) = delete;
};

inline std::int64_t stats_now(const ServerStats* stats) noexcept {
  return stats != nullptr ? std::chrono::steady_clock::now().time_since_epoch().count() : 0;
}

template <class S>
Task<void> serve_stream(Server& server, S conn, HandlerRef handler) {
  const ServerOptions& o = server.options();
  const CountedConnection counted(o.stats);
  net::Connections::Entry entry(server.connections(), conn.native_handle());
  std::string in, out, chunked_body;
  RequestHead head;
  Response res;
  std::exception_ptr fault;
  bool first = true;
  bool ended_idle = false;  // the server closes it between requests
  for (;;) {
    if (in.empty()) {
      // Between requests: wait for readiness holding no buffer.
      std::string().swap(in);
      std::string().swap(out);
      std::string().swap(chunked_body);
      res.release();
      ended_idle = true;
      if (!entry.go_idle()) break;
      // A new connection must send its first request within the header
      // timeout; a kept-alive one may idle longer.
      conn.set_idle_timeout(first ? o.header_timeout : o.idle_timeout);
      try {
        co_await conn.wait_readable();
      } catch (const net::IdleTimeout&) {
        break;  // silent for too long: close, no request to answer
      }
      if (!entry.go_busy()) break;  // the shutdown closed it meanwhile
      ended_idle = false;
      if (co_await read_more(conn, in, o.header_timeout) != Read::data) co_return;
      // A Task<void> handler may wait long (an SSE stream, a long poll)
      // holding the request's head: hold it in a buffer its size, not the
      // read's 4 KiB (a malloc and a copy of a few hundred bytes, before any
      // view into it is taken).
      if (handler.call == nullptr && in.capacity() > in.size() + 1024) in.shrink_to_fit();
      const std::string_view opening = std::string_view(in).substr(0, kHttp2Preface.size());
      if (first && server.http2() != nullptr && kHttp2Preface.starts_with(opening)) {
        if (co_await serve_http2(server, conn, handler, in)) co_return;
      }
    }
    first = false;

    Stop stop;
    std::size_t consumed = 0;
    const ParseStatus parsed = parse_request_head(in, head, o.max_head);
    if (parsed == ParseStatus::incomplete) {
      stop = co_await read_head(conn, in, head, o);
    } else if (parsed != ParseStatus::complete) {
      stop = Stop{.status = status_of(parsed), .why = head.error};
    }
    if (!stop.end && stop.status == 0) {
      consumed = head.head_size;
      if (head.has_body() && !streams_body(o, handler)) {
        stop = co_await read_body(conn, in, head, chunked_body, out, consumed, o);
      }
    }
    if (stop.end) co_return;

    bool close = true;
    bool unread = true;      // request bytes may be left in the socket
    bool body_left = false;  // a streamed body's handler did not read it all
    const std::size_t out_before = out.size();
    std::int64_t handler_start = -1;  // stays negative when no handler runs
    if (stop.status != 0) {
      append_error(out, stop.status, stop.why);
    } else {
      // The answer. A handler's fault is answered 500, then goes on to serve.
      res.reset();
      handler_start = stats_now(o.stats);
      try {
        if (handler.call != nullptr) {
          Request req(head, request_body(head, in, chunked_body));
          set_connection(req, conn.native_handle());
          handler.call(handler.self, req, res);
          close = append_answer(out, res, head, server);
        } else {
          const Answered answered = co_await answer_async(conn, in, chunked_body, out, server, handler, head,
                                                          request_body(head, in, chunked_body), res);
          close = answered.close;
          body_left = answered.unread;
        }
      } catch (const BodyError& e) {
        // The client's doing (bad framing, too slow, gone): its status if
        // the response has not begun, and the connection closes.
        close = true;
        body_left = true;
        res.status = e.status();
        if (!res.streaming()) append_error(out, e.status(), e.what());
      } catch (...) {
        fault = std::current_exception();
        if (is_cancellation(fault)) throw;
        close = true;
        body_left = true;  // if streamed, the handler may have left some
        // Once a streamed body has begun, a 500 cannot follow: the body
        // stays unfinished (no last chunk), which the client sees.
        if (!res.streaming()) append_error(out, 500, "the handler failed");
      }
      in.erase(0, consumed);
      const bool streamed = head.has_body() && streams_body(o, handler);
      if (streamed) in.append(chunked_body);  // what followed a body the handler read whole (see StreamedBody)
      unread = !in.empty() || (streamed && body_left);
    }
    if (o.stats != nullptr) {
      const int status = stop.status != 0 ? stop.status : fault ? 500 : res.status;
      o.stats->response(status, stop.status != 0 ? in.size() : consumed, out.size() - out_before,
                        handler_start < 0 ? -1 : stats_now(o.stats) - handler_start);
    }
    // Pipelining: the answers to requests already buffered go out in one write.
    if (close || in.empty() || out.size() >= 65536 || !next_request_buffered(in, head, o.max_head)) {
      co_await conn.write_all(out);
      out.clear();
      if (close) {
        co_await close_gracefully(conn, unread);
        break;
      }
    }
  }
  if constexpr (!std::is_same_v<S, net::Stream>) {
    if (ended_idle) {
      // A close the client can tell from a truncation (TLS's close_notify).
      try {
        co_await conn.shutdown();
      } catch (const std::exception&) {
        // the client is gone already
      }
    }
  }
  if (fault) std::rethrow_exception(fault);
}

}  // namespace shoal::http::detail
