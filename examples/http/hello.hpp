// The "hello" handler behind examples/http_server.cpp: every request gets
// "Hello, world!", except GET /metrics: the runtime's counters in the
// Prometheus text format. The HTTP work (keep-alive, pipelining, bodies, limits,
// timeouts, graceful shutdown) is shoal::http's.
#pragma once

#include <string_view>

#include "shoal/http.hpp"
#include "shoal/runtime/run.hpp"

namespace hello {

inline constexpr std::string_view kBody = "Hello, world!";

struct Handler {
  void operator()(const shoal::http::Request& req, shoal::http::Response& res) const {
    if (req.target() == "/metrics") {
      res.set_header("Content-Type", "text/plain; version=0.0.4");
      res.body = shoal::to_prometheus(shoal::this_task::runtime_metrics());
      return;
    }
    res.set_header("Content-Type", "text/plain");
    res.body.assign(kBody);
  }
};

}  // namespace hello
