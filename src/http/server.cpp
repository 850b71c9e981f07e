// The HTTP/1.1 connection loop and the graceful shutdown's reach into it.
//
// Shutdown protocol. The server sets shutting_down_ and then, under mu_,
// moves every idle connection to closing and shuts its socket's read side,
// which wakes its wait_readable. A connection stores idle and then reads
// shutting_down_ (both seq_cst), so either it sees the shutdown itself or the
// server sees it idle: none sleeps through it. A connection leaves the list
// (under mu_) before its socket closes, so the server never shuts an fd that
// has been closed and reused.
#include "shoal/http/server.hpp"

#include <sys/socket.h>

#include <string>

#include "shoal/runtime/errors.hpp"
#include "shoal/time/sleep.hpp"

namespace shoal::http {

void Server::shutdown() noexcept {
  shutting_down_.store(true, std::memory_order_seq_cst);
  std::lock_guard lock(mu_);
  for (detail::Connection* c = connections_.front(); c != nullptr; c = connections_.next(c)) {
    auto expected = detail::Connection::idle;
    if (c->state.compare_exchange_strong(expected, detail::Connection::closing)) ::shutdown(c->fd, SHUT_RD);
  }
}

namespace detail {

Connection::Connection(Server& s, int f) : server(s), fd(f) {
  std::lock_guard lock(server.mu_);
  server.connections_.push_back(this);
}

Connection::~Connection() {
  std::lock_guard lock(server.mu_);
  server.connections_.remove(this);
}

bool Connection::go_idle() noexcept {
  state.store(idle, std::memory_order_seq_cst);
  if (!server.shutting_down()) return true;
  auto expected = idle;
  state.compare_exchange_strong(expected, closing);
  return false;
}

bool Connection::go_busy() noexcept {
  auto expected = idle;
  return state.compare_exchange_strong(expected, busy);
}

namespace {

using std::chrono::milliseconds;

enum class Read { data, end, timeout };

/// Reads what is there into the back of `buf`, waiting at most `limit`.
Task<Read> read_more(net::Stream& conn, std::string& buf, milliseconds limit) {
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
/// this reads and drops what comes until the client closes (bounded in
/// bytes and time, like a lingering close).
Task<void> close_gracefully(net::Stream& conn, bool unread_input) {
  conn.shutdown(net::Shutdown::write);
  if (!unread_input) co_return;
  conn.set_idle_timeout(milliseconds(2000));
  char sink[4096];
  for (std::size_t total = 0; total < (1u << 20);) {
    std::size_t n = 0;
    try {
      n = co_await conn.read_some(std::as_writable_bytes(std::span(sink)));
    } catch (const net::IdleTimeout&) {
      co_return;
    }
    if (n == 0) co_return;
    total += n;
  }
}

/// Answers what the server refuses (status and what was wrong), then closes.
Task<void> refuse(net::Stream& conn, int status, std::string_view why, bool unread_input) {
  std::string out;
  append_error(out, status, why);
  co_await conn.write_all(out);
  co_await close_gracefully(conn, unread_input);
}

int status_of(ParseStatus s) noexcept {
  switch (s) {
    case ParseStatus::too_large: return 431;
    case ParseStatus::expectation_failed: return 417;
    case ParseStatus::not_implemented: return 501;
    case ParseStatus::version_not_supported: return 505;
    default: return 400;
  }
}

/// True if `in` holds another whole request after a response: then its
/// answer can go out in the same write as this one (pipelining).
bool next_request_buffered(std::string_view in, RequestHead& scratch, std::size_t max_head) {
  return parse_request_head(in, scratch, max_head) == ParseStatus::complete && !scratch.chunked &&
         !scratch.expect_continue && in.size() >= scratch.head_size + scratch.content_length;
}

}  // namespace

Task<void> serve_connection(Server& server, net::Stream conn, HandlerRef handler) {
  const ServerOptions& o = server.options();
  Connection entry(server, conn.native_handle());
  std::string in, out, chunked_body;
  RequestHead head;
  Response res;
  bool first = true;
  for (;;) {
    if (in.empty()) {
      // Between requests: wait for readiness holding no buffer.
      std::string().swap(in);
      std::string().swap(out);
      std::string().swap(chunked_body);
      res.release();
      if (!entry.go_idle()) co_return;
      // A new connection must send its first request within the header
      // timeout; a kept-alive one may idle longer.
      conn.set_idle_timeout(first ? o.header_timeout : o.idle_timeout);
      try {
        co_await conn.wait_readable();
      } catch (const net::IdleTimeout&) {
        co_return;  // silent for too long: close, no request to answer
      }
      if (!entry.go_busy()) co_return;  // the shutdown closed it meanwhile
      const Read r = co_await read_more(conn, in, o.header_timeout);
      if (r != Read::data) co_return;
    }
    first = false;

    // The head, within the header timeout from its first byte.
    const auto deadline = shoal::now() + o.header_timeout;
    ParseStatus parsed;
    while ((parsed = parse_request_head(in, head, o.max_head)) == ParseStatus::incomplete) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - shoal::now());
      const Read r = left > milliseconds(0) ? co_await read_more(conn, in, left) : Read::timeout;
      if (r == Read::end) co_return;
      if (r == Read::timeout) {
        co_await refuse(conn, 408, "the request head did not arrive in time", false);
        co_return;
      }
    }
    if (parsed != ParseStatus::complete) {
      co_await refuse(conn, status_of(parsed), head.error, true);
      co_return;
    }

    // The body: Content-Length bytes, or chunks decoded into chunked_body.
    std::string_view body;
    std::size_t consumed = head.head_size;
    if (head.has_body()) {
      if (head.content_length > o.max_body) {
        co_await refuse(conn, 413, "request body too large", true);
        co_return;
      }
      if (head.expect_continue && in.size() == head.head_size) {
        // The client waits for this before it sends the body (RFC 9110 §10.1.1).
        if (!out.empty()) {
          co_await conn.write_all(out);
          out.clear();
        }
        co_await conn.write_all(std::string_view("HTTP/1.1 100 Continue\r\n\r\n"));
      }
      bool moved = false;  // `in` grew: the head's views must be taken again
      if (!head.chunked) {
        while (in.size() < head.head_size + head.content_length) {
          const Read r = co_await read_more(conn, in, o.header_timeout);
          if (r == Read::end) co_return;
          if (r == Read::timeout) {
            co_await refuse(conn, 408, "the request body did not arrive in time", true);
            co_return;
          }
          moved = true;
        }
        consumed += head.content_length;
      } else {
        ChunkedDecoder decoder;
        chunked_body.clear();
        for (;;) {
          std::string_view rest = std::string_view(in).substr(head.head_size);
          const auto st = decoder.feed(rest, chunked_body, o.max_body);
          const std::size_t used = in.size() - head.head_size - rest.size();
          if (st == ChunkedDecoder::Status::complete) {
            consumed += used;
            break;
          }
          if (st == ChunkedDecoder::Status::bad_request) {
            co_await refuse(conn, 400, decoder.error(), true);
            co_return;
          }
          if (st == ChunkedDecoder::Status::too_large) {
            co_await refuse(conn, 413, "request body too large", true);
            co_return;
          }
          in.erase(head.head_size, used);  // decoded: only the head stays buffered
          const Read r = co_await read_more(conn, in, o.header_timeout);
          if (r == Read::end) co_return;
          if (r == Read::timeout) {
            co_await refuse(conn, 408, "the request body did not arrive in time", true);
            co_return;
          }
          moved = true;
        }
      }
      if (moved) (void)parse_request_head(in, head, o.max_head);  // same bytes, fresh views
      body = head.chunked ? std::string_view(chunked_body) : std::string_view(in).substr(head.head_size, head.content_length);
    }

    // The answer. A handler's fault is answered 500 before it goes on.
    res.reset();
    std::exception_ptr fault;
    try {
      const Request req(head, body);
      if (handler.call != nullptr) {
        handler.call(handler.self, req, res);
      } else {
        co_await handler.call_async(handler.self, req, res);
      }
      const bool close = !head.keep_alive || res.closes_connection() || server.shutting_down();
      append_response(out, res,
                      Framing{.head_request = head.method == "HEAD",
                              .close = close,
                              .announce_keep_alive = !close && head.minor_version == 0});
      if (close) res.close_connection();
    } catch (...) {
      fault = std::current_exception();
    }
    if (fault) {
      if (is_cancellation(fault)) std::rethrow_exception(fault);
      co_await conn.write_all(out);  // the answers before this one
      co_await refuse(conn, 500, "the handler failed", in.size() > consumed);
      std::rethrow_exception(fault);
    }
    in.erase(0, consumed);
    if (res.closes_connection()) {
      co_await conn.write_all(out);
      co_await close_gracefully(conn, !in.empty());
      co_return;
    }
    // Pipelining: the answers to requests already buffered go out in one write.
    if (in.empty() || out.size() >= 65536 || !next_request_buffered(in, head, o.max_head)) {
      co_await conn.write_all(out);
      out.clear();
    }
  }
}

}  // namespace detail
}  // namespace shoal::http
