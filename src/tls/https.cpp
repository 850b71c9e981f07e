// The HTTP/1.1 connection loop over TLS: the same template as plain HTTP
// (src/http/connection.hpp), compiled here so only shoal::tls users link it.
#include "shoal/http/https.hpp"

#include "src/http/connection.hpp"

namespace shoal::http::detail {

Task<void> serve_connection(Server& server, tls::Stream conn, HandlerRef handler) {
  return serve_stream(server, std::move(conn), handler);
}

}  // namespace shoal::http::detail
