// The "hello" handler behind examples/http_server.cpp: every request gets
// "Hello, world!", except GET /metrics: the runtime's counters and, given
// the server's ServerStats, its HTTP counters (responses by status,
// connections, bytes, handler time) in the Prometheus text format. The HTTP
// work (keep-alive, pipelining, bodies, limits, timeouts, graceful
// shutdown) is shoal::http's.
#pragma once

#include <string_view>

#include "shoal/http.hpp"
#include "shoal/runtime/run.hpp"

namespace hello {

inline constexpr std::string_view kBody = "Hello, world!";

struct Handler {
  const shoal::http::ServerStats* stats = nullptr;  ///< the server's, for /metrics (optional)

  void operator()(const shoal::http::Request& req, shoal::http::Response& res) const {
    if (req.target() == "/metrics") {
      res.set_header("Content-Type", "text/plain; version=0.0.4");
      res.body = shoal::to_prometheus(shoal::this_task::runtime_metrics());
      if (stats != nullptr) res.body += stats->to_prometheus();
      return;
    }
    res.set_header("Content-Type", "text/plain");
    res.body.assign(kBody);
  }
};

}  // namespace hello
