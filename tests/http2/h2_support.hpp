// What the HTTP/2 suites share: an h2c server (prior knowledge) on a fresh
// port for the length of a test's client.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include "shoal/http.hpp"
#include "shoal/http2/server.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/scope/scope.hpp"
#include "shoal/sync/event.hpp"

namespace shoal::test {

/// /hang waits until cancelled (saying when it started and when it was
/// cancelled); anything else answers "ok".
struct Hang {
  Event* started;
  Event* cancelled;
  Task<void> operator()(const http::Request& req, http::Response& res) const {
    if (req.target() != "/hang") {
      res.body = "ok";
      co_return;
    }
    started->set();
    Event never;
    try {
      co_await never.wait();
    } catch (const Cancelled&) {
      cancelled->set();
      throw;
    }
  }
};

/// Serves h2c with `handler` on 127.0.0.1 while `client(address)` runs.
/// A handler's failure (answered 500 on its stream, rethrown as the
/// connection ends) is for the test to check in the answer.
/// The client may also shut the server down (http::Server::shutdown).
template <class H>
Task<void> with_h2_server(http::ServerOptions options, H handler,
                          std::function<Task<void>(std::string, http::Server&)> client) {
  auto listener = net::Listener::bind(net::Address::parse("127.0.0.1:0"));
  const std::string addr = listener.local_address().to_string();
  http::Server server(options);
  co_await scope([&](Scope& s) -> Task<void> {
    s.spawn(net::serve(listener, {}, [&](net::Stream conn) -> Task<void> {
      try {
        co_await http2::serve_connection(server, std::move(conn), handler);
      } catch (const std::runtime_error&) {
      }
    }));
    co_await client(addr, server);
    s.cancel();
  });
}

template <class H>
Task<void> with_h2_server(http::ServerOptions options, H handler, std::function<Task<void>(std::string)> client) {
  co_await with_h2_server(options, std::move(handler),
                          [&client](std::string addr, http::Server&) { return client(std::move(addr)); });
}

}  // namespace shoal::test
