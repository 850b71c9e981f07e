// What the HTTP examples share: serve a handler over HTTP/1.1, with
// shoal::http2 built also h2c on the same port, and with a certificate
// HTTPS (h2 by ALPN when shoal::http2 is built). The build says which
// parts exist (SHOAL_EXAMPLE_TLS, SHOAL_EXAMPLE_HTTP2).
#pragma once

#include <string>
#include <utility>

#include "shoal/shoal.hpp"
#if SHOAL_EXAMPLE_TLS
#include "shoal/http/https.hpp"
#endif
#if SHOAL_EXAMPLE_HTTP2
#include "shoal/http2/server.hpp"
#if SHOAL_EXAMPLE_TLS
#include "shoal/http2/https.hpp"
#endif
#endif

namespace examples {

/// Serves `handler` on `listener`; over TLS if `certificate` (a PEM chain)
/// and `key` are given. Checkpoint, Cancellation, Throws: as http::serve.
template <class H>
shoal::Task<void> serve_any(shoal::net::Listener& listener, shoal::net::ServeOptions options,
                            shoal::http::ServerOptions http_options, const H& handler, const std::string& certificate,
                            const std::string& key) {
  if (certificate.empty()) {
#if SHOAL_EXAMPLE_HTTP2
    co_await shoal::http2::serve(listener, std::move(options), http_options, handler);  // and h2c
#else
    co_await shoal::http::serve(listener, std::move(options), http_options, handler);
#endif
    co_return;
  }
#if SHOAL_EXAMPLE_TLS
  shoal::tls::ServerOptions tls_options;
  tls_options.certificate_chain_file = certificate;
  tls_options.private_key_file = key;
#if SHOAL_EXAMPLE_HTTP2
  tls_options.alpn = {"h2", "http/1.1"};
  auto tls = shoal::tls::Context::server(tls_options);
  co_await shoal::http2::serve(listener, std::move(options), http_options, std::move(tls), handler);
#else
  tls_options.alpn = {"http/1.1"};
  auto tls = shoal::tls::Context::server(tls_options);
  co_await shoal::http::serve(listener, std::move(options), http_options, std::move(tls), handler);
#endif
#else
  (void)key;
#endif
}

}  // namespace examples
