// The HTTP/1.1 connection loop and the graceful shutdown's reach into it.
//
// Shutdown protocol. The server sets shutting_down_ and then, under mu_,
// moves every idle connection to closing and shuts its socket's read side,
// which wakes its wait_readable. A connection stores idle and then reads
// shutting_down_ (both seq_cst), so either it sees the shutdown itself or the
// server sees it idle: none sleeps through it. A connection leaves the list
// (under mu_) before its socket closes, so the server never shuts an fd that
// has been closed and reused.
#include "shoal/http/server.hpp"

#include <sys/socket.h>

#include "src/http/connection.hpp"

namespace shoal::http {

void Server::shutdown() noexcept {
  shutting_down_.store(true, std::memory_order_seq_cst);
  std::lock_guard lock(mu_);
  for (detail::Connection* c = connections_.front(); c != nullptr; c = connections_.next(c)) {
    auto expected = detail::Connection::idle;
    if (c->state.compare_exchange_strong(expected, detail::Connection::closing)) ::shutdown(c->fd, SHUT_RD);
  }
}

namespace detail {

Connection::Connection(Server& s, int f) : server(s), fd(f) {
  std::lock_guard lock(server.mu_);
  server.connections_.push_back(this);
}

Connection::~Connection() {
  std::lock_guard lock(server.mu_);
  server.connections_.remove(this);
}

bool Connection::go_idle() noexcept {
  state.store(idle, std::memory_order_seq_cst);
  if (!server.shutting_down()) return true;
  auto expected = idle;
  state.compare_exchange_strong(expected, closing);
  return false;
}

bool Connection::go_busy() noexcept {
  auto expected = idle;
  return state.compare_exchange_strong(expected, busy);
}

Task<void> serve_connection(Server& server, net::Stream conn, HandlerRef handler) {
  return serve_stream(server, std::move(conn), handler);
}

}  // namespace detail
}  // namespace shoal::http
