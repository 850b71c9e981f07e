// The "hello" handler behind examples/http_server.cpp: every request gets
// "Hello, world!". The HTTP work (keep-alive, pipelining, bodies, limits,
// timeouts, graceful shutdown) is shoal::http's.
#pragma once

#include <string_view>

#include "shoal/http.hpp"

namespace hello {

inline constexpr std::string_view kBody = "Hello, world!";

struct Handler {
  void operator()(const shoal::http::Request&, shoal::http::Response& res) const {
    res.set_header("Content-Type", "text/plain");
    res.body.assign(kBody);
  }
};

}  // namespace hello
