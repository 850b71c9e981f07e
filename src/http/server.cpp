// The HTTP/1.1 connection loop for plain connections (src/http/connection.hpp;
// the graceful shutdown's reach into idle connections is net::Connections).
#include "shoal/http/server.hpp"

#include "src/http/connection.hpp"

namespace shoal::http {

namespace detail {

Task<void> serve_connection(Server& server, net::Stream conn, HandlerRef handler) {
  return serve_stream(server, std::move(conn), handler);
}

}  // namespace detail
}  // namespace shoal::http
