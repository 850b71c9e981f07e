// HTTPS: shoal::http over shoal::tls (link shoal::tls). The same server,
// options and handlers as plain HTTP; each connection first does its TLS
// handshake within the header timeout.
//
//   shoal::tls::ServerOptions tls_options;
//   tls_options.certificate_chain_file = "cert.pem";
//   tls_options.private_key_file = "key.pem";
//   auto ctx = shoal::tls::Context::server(tls_options);
//   shoal::http::ServerOptions options;  // named: no braced list inside a co_await (docs/compilers.md)
//   co_await shoal::http::serve(listener, serve_options, options, ctx, handler);
#pragma once

#include <utility>

#include "shoal/http/server.hpp"
#include "shoal/tls/serve.hpp"
#include "shoal/tls/tls.hpp"

namespace shoal::http {

/// http::serve over TLS: every connection is accepted with tls::serve
/// (handshake within `options.header_timeout`; a failed handshake ends its
/// connection quietly), then served as plain HTTP is, graceful shutdown
/// included (close_notify before each close).
/// Checkpoint, Cancellation, Thread-safety, Throws: as net::serve.
template <class H>
Task<void> serve(net::Listener& listener, net::ServeOptions serve_options, ServerOptions options, tls::Context context,
                 H handler) {
  auto serve_all = [&listener, ctx = std::move(context)](Server& server, H& h, net::ServeOptions o) {
    auto per_connection = [&server, &h](tls::Stream conn) { return server.serve_connection(std::move(conn), h); };
    return tls::serve(listener, std::move(o), ctx, std::move(per_connection), server.options().header_timeout);
  };
  return detail::serve_with(std::move(serve_options), options, std::move(handler), std::move(serve_all));
}

}  // namespace shoal::http
