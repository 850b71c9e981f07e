// The keep-alive "hello" handler behind examples/http_server.cpp: one task
// per connection, pipelining, Content-Length bodies, limits that answer
// 400 / 431 and close, a header timeout against slow clients and an idle
// timeout between requests.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "http1.hpp"
#include "shoal/shoal.hpp"

namespace hello {

struct Limits {
  std::size_t max_head = 8192;                          ///< request line + headers
  std::size_t max_body = 1 << 20;
  std::chrono::milliseconds header_timeout{10'000};     ///< first byte of a request to its full head
  std::chrono::milliseconds idle_timeout{60'000};       ///< between keep-alive requests
};

inline constexpr std::string_view kBody = "Hello, world!";

inline void append_response(std::string& out, int status, std::string_view reason, std::string_view body, bool close) {
  out.append("HTTP/1.1 ").append(std::to_string(status)).append(" ").append(reason).append("\r\n");
  out.append("Content-Type: text/plain\r\nContent-Length: ").append(std::to_string(body.size())).append("\r\n");
  if (close) out.append("Connection: close\r\n");
  out.append("\r\n").append(body);
}

/// Reads more into `buf`, waiting at most `limit`. False on timeout or end of stream.
inline shoal::Task<bool> read_more(shoal::net::Stream& conn, std::string& buf, std::chrono::milliseconds limit) {
  const std::size_t old = buf.size();
  buf.resize(old + 4096);
  // The limit is the stream's: a timer inside the read's wait, paid only if
  // the read has to wait (a move_on_after would be a cancel scope, a timer
  // and two frames around every read).
  conn.set_idle_timeout(limit);
  std::size_t n = 0;
  try {
    n = co_await conn.read_some(std::as_writable_bytes(std::span(buf).subspan(old)));
  } catch (const shoal::net::IdleTimeout&) {
    // too slow: n stays 0
  }
  buf.resize(old + n);
  co_return n > 0;
}

/// Serves one connection until the client closes it, a limit is hit, or
/// a timeout passes.
inline shoal::Task<void> serve_connection(shoal::net::Stream conn, Limits limits) {
  std::string in, out;
  http1::Request req;
  for (;;) {
    if (in.empty()) {
      // Idle between requests: wait for readiness without holding a buffer
      // (clear() keeps the capacity: give it back, the next read allocates).
      std::string().swap(in);
      std::string().swap(out);
      // The stream's idle limit is a timer in the wait itself: cheaper than
      // a move_on_after scope around it for every idle connection.
      conn.set_idle_timeout(limits.idle_timeout);
      try {
        co_await conn.wait_readable();
      } catch (const shoal::net::IdleTimeout&) {
        co_return;  // quiet for too long: close
      }
      if (!co_await read_more(conn, in, limits.header_timeout)) co_return;  // sets the header timeout
    }
    const auto first_byte = std::chrono::steady_clock::now();
    http1::Parse r;
    while ((r = http1::parse_request(in, req, limits.max_head)) == http1::Parse::incomplete) {
      const auto left = limits.header_timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                                    std::chrono::steady_clock::now() - first_byte);
      if (left <= std::chrono::milliseconds(0) || !co_await read_more(conn, in, left)) co_return;  // slow client
    }
    if (r != http1::Parse::complete) {
      const bool big = r == http1::Parse::too_large;
      append_response(out, big ? 431 : 400, big ? "Request Header Fields Too Large" : "Bad Request", "", true);
      co_await conn.write_all(out);
      co_return;
    }
    if (req.content_length > limits.max_body) {
      append_response(out, 413, "Content Too Large", "", true);
      co_await conn.write_all(out);
      co_return;
    }
    const std::size_t total = req.head_size + req.content_length;
    while (in.size() < total) {
      if (!co_await read_more(conn, in, limits.header_timeout)) co_return;
    }
    const bool close = !req.keep_alive;
    append_response(out, 200, "OK", kBody, close);
    in.erase(0, total);
    // Pipelining: answer every complete request already buffered in one write.
    if (close || in.empty() || http1::parse_request(in, req, limits.max_head) != http1::Parse::complete ||
        in.size() < req.head_size + req.content_length) {
      co_await conn.write_all(out);
      out.clear();
      if (close) co_return;
    }
  }
}

}  // namespace hello
