// Handlers that stream their responses or read their requests' bodies as
// they arrive, shared by the HTTP/1.1 and HTTP/2 suites: the same
// behaviour is asserted over both protocols.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "shoal/http.hpp"
#include "shoal/scope/cancel_scope.hpp"
#include "shoal/sync/event.hpp"

namespace shoal::test {

/// Writes "a", then "b" in a scope already cancelled (which must send
/// nothing), then ends.
struct CancelledWrite {
  Task<void> operator()(const http::Request&, http::Response& res) const {
    co_await res.write("a");
    CancelScope cancelled;
    cancelled.cancel();
    const bool done = co_await cancelled.run(res.write("b"));
    EXPECT_FALSE(done);
  }
};

/// Its only write is in a scope already cancelled, so nothing was sent
/// when it returns; what it left in `body` is then the whole answer.
struct CancelledFirstWrite {
  Task<void> operator()(const http::Request&, http::Response& res) const {
    CancelScope cancelled;
    cancelled.cancel();
    const bool done = co_await cancelled.run(res.write("never"));
    EXPECT_FALSE(done);
    res.body = "after";
  }
};

/// Reads its (streamed) body in a scope already cancelled, which must take
/// nothing, then reads it all: answers "cancelled <body>".
struct CancelledRead {
  Task<void> operator()(const http::Request& req, http::Response& res) const {
    CancelScope cancelled;
    cancelled.cancel();
    std::array<std::byte, 16> buf;
    const auto got = co_await cancelled.run(req.read_some(buf));
    res.body = got.has_value() ? "read " : "cancelled ";
    res.body += co_await req.read_all(100);
  }
};

/// Reads the body `piece` bytes at a time; after the first piece, sets
/// `first` (if given) and waits for `go`. Answers "<bytes> <pieces>";
/// /unread answers at once, reading nothing.
struct BodyCounter {
  Event* first = nullptr;
  Event* go = nullptr;
  std::size_t piece = 7;
  bool streamed = true;  // the server streams the body
  Task<void> operator()(const http::Request& req, http::Response& res) const {
    if (req.target() == "/unread") {
      res.body = "not read";
      co_return;
    }
    EXPECT_EQ(req.body_streamed(), streamed);
    std::array<std::byte, 16> buf;
    std::size_t total = 0, pieces = 0;
    while (const std::size_t n = co_await req.read_some(std::span(buf).first(piece))) {
      total += n;
      if (++pieces == 1 && first != nullptr) {
        first->set();
        co_await go->wait();
      }
    }
    res.body = std::to_string(total) + " " + std::to_string(pieces);
  }
};

/// Reads the whole body 64 KiB at a time: "<bytes> <sum of the bytes>".
inline Task<std::string> count_body(const http::Request& req) {
  std::array<std::byte, 65536> buf;
  std::size_t total = 0;
  std::uint32_t sum = 0;
  while (const std::size_t n = co_await req.read_some(buf)) {
    total += n;
    for (std::size_t i = 0; i < n; ++i) sum += std::to_integer<std::uint32_t>(buf[i]);
  }
  co_return std::to_string(total) + " " + std::to_string(sum);
}

/// The answer count_body gives for `body`.
inline std::string counted(const std::string& body) {
  std::uint32_t sum = 0;
  for (const char ch : body) sum += static_cast<unsigned char>(ch);
  return std::to_string(body.size()) + " " + std::to_string(sum);
}

/// A whole body with a trailer (gRPC's status).
inline void with_trailer(const http::Request&, http::Response& res) {
  res.body = "payload";
  res.set_trailer("grpc-status", "0");
}

}  // namespace shoal::test
