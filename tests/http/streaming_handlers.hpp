// Handlers that stream their responses or read their requests' bodies as
// they arrive, shared by the HTTP/1.1 and HTTP/2 suites: the same
// behaviour is asserted over both protocols.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstddef>

#include "shoal/http.hpp"
#include "shoal/scope/cancel_scope.hpp"

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

/// A whole body with a trailer (gRPC's status).
inline void with_trailer(const http::Request&, http::Response& res) {
  res.body = "payload";
  res.set_trailer("grpc-status", "0");
}

}  // namespace shoal::test
