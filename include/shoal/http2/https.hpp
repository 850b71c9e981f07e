// HTTP/2 over TLS (link shoal::http2 and shoal::tls): the client and the
// server agree on "h2" by ALPN in the handshake; a client that offers only
// HTTP/1.1 is served as HTTP/1.1, on the same port and with the same
// handler.
//
//   shoal::tls::ServerOptions tls_options;
//   tls_options.certificate_chain_file = "cert.pem";
//   tls_options.private_key_file = "key.pem";
//   tls_options.alpn = {"h2", "http/1.1"};  // h2 preferred
//   auto ctx = shoal::tls::Context::server(tls_options);
//   shoal::http::ServerOptions options;  // named: no braced list inside a co_await (docs/compilers.md)
//   co_await shoal::http2::serve(listener, serve_options, options, ctx, handler);
#pragma once

#include <utility>

#include "shoal/http/https.hpp"
#include "shoal/http2/server.hpp"

namespace shoal::http2 {

/// http::serve over TLS with HTTP/2: every connection does its TLS
/// handshake (within `options.header_timeout`), then is served as HTTP/2
/// if ALPN chose "h2" (offer it in the context's `alpn`), else as
/// HTTP/1.1; a connection that opens with the h2 preface without ALPN is
/// served as HTTP/2 too. Graceful shutdown as http::serve's.
/// Checkpoint, Cancellation, Thread-safety, Throws: as net::serve.
template <class H>
Task<void> serve(net::Listener& listener, net::ServeOptions serve_options, http::ServerOptions options,
                 tls::Context context, H handler) {
  auto serve_all = [&listener, ctx = std::move(context)](http::Server& server, H& h, net::ServeOptions o) {
    server.set_http2(&detail::serve_connection);
    auto per_connection = [&server, &h](tls::Stream conn) -> Task<void> {
      if (conn.alpn() == "h2") return serve_connection(server, std::move(conn), h);
      return server.serve_connection(std::move(conn), h);
    };
    return tls::serve(listener, std::move(o), ctx, std::move(per_connection), server.options().header_timeout);
  };
  return http::detail::serve_with(std::move(serve_options), options, std::move(handler), std::move(serve_all));
}

}  // namespace shoal::http2
