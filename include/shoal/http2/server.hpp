// HTTP/2 for shoal::http (the shoal::http2 component, on libnghttp2): the
// same handler as HTTP/1.1, one task per stream.
//
//   shoal::http::Server server;                 // its options: limits, timeouts
//   co_await shoal::http2::serve_connection(server, std::move(conn), handler);
//
// A connection task owns the socket and the nghttp2 session and is the only
// code that touches them; each request's handler runs as a child of the
// connection's task set once its request has ended, at most
// ServerOptions::max_concurrent_streams at once (the SETTINGS value the
// server advertises). docs/http2.md has the design and the limits.
#pragma once

#include <string_view>
#include <type_traits>
#include <utility>

#include "shoal/http/server.hpp"
#include "shoal/net/byte_stream.hpp"
#include "shoal/net/serve.hpp"
#include "shoal/runtime/task.hpp"

/// HTTP/2 (RFC 9113) for shoal::http's handlers.
namespace shoal::http2 {

/// The 24 bytes an HTTP/2 client sends first (RFC 9113 §3.4).
inline constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

namespace detail {
Task<void> serve_connection(http::Server& server, shoal::detail::ByteStreamRef conn, http::detail::HandlerRef handler,
                            std::string preread);

template <class S>
Task<void> serve_owned(http::Server& server, S conn, http::detail::HandlerRef handler, std::string preread) {
  shoal::detail::ByteStreamRef ref(conn);  // named: g++ 12 and temporaries in co_await (docs/compilers.md)
  co_await serve_connection(server, ref, handler, std::move(preread));
}
}  // namespace detail

/// Serves HTTP/2 on `conn` (a net::Stream, a tls::Stream whose ALPN chose
/// "h2", or any other ByteStream with a select case for readability) until
/// the client closes it or a connection error ends it. The client's preface
/// is read from the connection; `preread` is what of it (and after it) a
/// caller already read. Each request runs `handler(const Request&,
/// Response&)` (void or Task<void>) in a task of its own (a void one on
/// the connection's task), with the whole request body or, with
/// ServerOptions::stream_request_body, the body as it arrives; a peer's
/// RST_STREAM cancels that task. A handler's
/// exception answers its stream with 500; the first one is rethrown once
/// the connection ends.
/// Checkpoint: yes (every wait on the connection is one).
/// Cancellation: the connection's stream tasks are cancelled and the
///   connection closes.
/// Thread-safety: any task; many connections at once.
/// Throws: Cancelled; the first handler exception; std::system_error from
///   the connection; std::logic_error for a stream type with no readability
///   case.
template <net::ByteStream S, class H>
Task<void> serve_connection(http::Server& server, S conn, H& handler, std::string preread) {
  return detail::serve_owned(server, std::move(conn), http::detail::handler_ref(handler), std::move(preread));
}
/// As above, with nothing read yet (an overload, not a default argument:
/// g++ 12 destroys a default argument's temporary twice inside co_await,
/// docs/compilers.md).
template <net::ByteStream S, class H>
Task<void> serve_connection(http::Server& server, S conn, H& handler) {
  return detail::serve_owned(server, std::move(conn), http::detail::handler_ref(handler), std::string());
}

/// http::serve with HTTP/2 on the same port: a connection that opens with
/// the HTTP/2 preface (h2c by prior knowledge, as `curl
/// --http2-prior-knowledge`, h2load and gRPC clients speak it) is served
/// by serve_connection above, any other as HTTP/1.1; both with `options`
/// and `handler`, and one graceful shutdown. (Over TLS, by ALPN:
/// shoal/http2/https.hpp.)
/// Checkpoint, Cancellation, Thread-safety, Throws: as net::serve.
template <class H>
Task<void> serve(net::Listener& listener, net::ServeOptions serve_options, http::ServerOptions options, H handler) {
  auto serve_all = [&listener](http::Server& server, H& h, net::ServeOptions o) {
    server.set_http2(&detail::serve_connection);
    return net::serve(listener, std::move(o),
                      [&server, &h](net::Stream conn) { return server.serve_connection(std::move(conn), h); });
  };
  return http::detail::serve_with(std::move(serve_options), options, std::move(handler), serve_all);
}

}  // namespace shoal::http2
