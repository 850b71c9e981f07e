// The HTTP/1.1 connection loop (src/http/connection.hpp), compiled twice:
// for plain sockets, and for every other ByteStream through a reference
// (TLS, a user's own stream), so plain HTTP pays nothing for the others.
// The graceful shutdown's reach into idle connections is net::Connections.
#include "shoal/http/server.hpp"

#include "src/http/connection.hpp"

namespace shoal::http {

namespace detail {

Task<void> serve_connection(Server& server, net::Stream conn, HandlerRef handler) {
  return serve_stream(server, std::move(conn), handler);
}

Task<void> serve_connection(Server& server, shoal::detail::ByteStreamRef conn, HandlerRef handler) {
  return serve_stream(server, conn, handler);
}

}  // namespace detail
}  // namespace shoal::http
