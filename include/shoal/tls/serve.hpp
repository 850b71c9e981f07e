// tls::serve: net::serve for TLS. Each accepted connection does its server
// handshake on its own task (a slow client holds only its own slot), then
// runs the handler with the tls::Stream. Link shoal::tls.
//
//   shoal::tls::ServerOptions tls_options;
//   tls_options.certificate_chain_file = "cert.pem";
//   tls_options.private_key_file = "key.pem";
//   auto ctx = shoal::tls::Context::server(tls_options);
//   auto hello = [](shoal::tls::Stream s) -> shoal::Task<void> { co_await s.write_all("hello\n"); };
//   co_await shoal::tls::serve(listener, options, ctx, hello);
#pragma once

#include <chrono>
#include <functional>
#include <type_traits>
#include <utility>

#include "shoal/net/serve.hpp"
#include "shoal/tls/tls.hpp"

namespace shoal::tls {

namespace detail {

template <class H>
Task<void> handshake_then_serve(net::Stream conn, const Context& ctx, std::chrono::milliseconds timeout, H& handler) {
  Stream stream;
  try {
    stream = co_await accept(std::move(conn), ctx, timeout);
  } catch (const Error&) {
    // A failed or timed-out handshake is the client's (a scanner, a client
    // that does not trust the certificate, a plain-HTTP request): the
    // connection ends, with an alert where TLS got far enough to send one,
    // and no fault is reported.
    co_return;
  }
  co_await std::invoke(handler, std::move(stream));
}

}  // namespace detail

/// Accepts connections on `listener` as net::serve does and runs
/// `handler(tls::Stream)` (returning Task<void>) for each once its server
/// handshake with `ctx` has succeeded within `handshake_timeout`. A failed
/// handshake ends its connection quietly (see above); everything else (the
/// limit, fault reports, the graceful shutdown) is net::serve's.
/// Checkpoint, Cancellation, Thread-safety, Throws: as net::serve. `ctx` is
/// copied (a Context is shared, cheap to copy).
template <class H>
Task<void> serve(net::Listener& listener, net::ServeOptions options, Context ctx, H handler,
                 std::chrono::milliseconds handshake_timeout = std::chrono::seconds(10)) {
  static_assert(std::is_invocable_r_v<Task<void>, H&, Stream>,
                "shoal::tls::serve: the handler must be callable as handler(shoal::tls::Stream) -> Task<void>");
  auto per_connection = [&ctx, &handler, handshake_timeout](net::Stream conn) {
    return detail::handshake_then_serve(std::move(conn), ctx, handshake_timeout, handler);
  };
  co_await net::serve(listener, std::move(options), per_connection);
}

}  // namespace shoal::tls
