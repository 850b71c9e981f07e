// Handlers that stream their responses, shared by the HTTP/1.1 and HTTP/2
// suites: the same behaviour is asserted over both protocols.
#pragma once

#include <gtest/gtest.h>

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

/// A whole body with a trailer (gRPC's status).
inline void with_trailer(const http::Request&, http::Response& res) {
  res.body = "payload";
  res.set_trailer("grpc-status", "0");
}

}  // namespace shoal::test
