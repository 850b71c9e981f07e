// An HTTP/1.1 server on shoal::net::serve: keep-alive, pipelining,
// Content-Length and chunked request bodies, Expect: 100-continue, header
// and idle timeouts, and a graceful shutdown that closes idle connections at
// once and answers in-flight requests with `Connection: close`.
//
//   auto hello = [](const shoal::http::Request& req, shoal::http::Response& res) {
//     res.set_header("Content-Type", "text/plain");
//     res.body = "Hello from " + std::string(req.target()) + "\n";
//   };
//   shoal::http::ServerOptions options;  // limits and timeouts, named before the co_await
//   co_await shoal::http::serve(listener, serve_options, options, hello);
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "shoal/http/message.hpp"
#include "shoal/http/stats.hpp"
#include "shoal/net/byte_stream.hpp"
#include "shoal/net/connections.hpp"
#include "shoal/net/serve.hpp"
#include "shoal/net/stream.hpp"
#include "shoal/runtime/task.hpp"
#include "shoal/scope/scope.hpp"


/// An HTTP/1.1 server on shoal::net: the request parser, Request and
/// Response, and serve() with keep-alive and graceful shutdown.
namespace shoal::http {

/// Limits and timeouts of an HTTP Server.
struct ServerOptions {
  std::size_t max_head = 8192;     ///< request line and headers; beyond it: 431
  std::size_t max_body = 1 << 20;  ///< a request body, decoded; beyond it: 413
  /// From a request's first byte to its whole head, and for each wait on its
  /// body; also how long a new connection may stay silent. Past it a client
  /// that sent part of a request gets 408; one that sent nothing is closed.
  std::chrono::milliseconds header_timeout{10'000};
  /// How long a keep-alive connection may wait for its next request.
  std::chrono::milliseconds idle_timeout{60'000};
  /// If set, the server counts into it (responses by status class,
  /// connections, those held at the cap, bytes, handler time); it must
  /// outlive the server. Null
  /// (the default): nothing is counted.
  ServerStats* stats = nullptr;
  /// HTTP/2: the streams a client may have open at once (the
  /// SETTINGS_MAX_CONCURRENT_STREAMS the server advertises; a stream past
  /// it is refused with RST_STREAM REFUSED_STREAM), and the handlers that
  /// run at once on one connection: a handler whose stream the client
  /// reset keeps its slot until it ends, so resets cannot multiply
  /// running handlers (the rapid-reset attack).
  std::uint32_t max_concurrent_streams = 100;
  /// A Task<void> handler starts as soon as a request's head is in and
  /// reads its body as it arrives (Request::read_some, read_all), at the
  /// pace it reads: for uploads, proxies and request streams. max_body
  /// does not apply (read_all takes its own limit). A body the handler
  /// leaves unread: HTTP/1.1 closes the connection after the response;
  /// HTTP/2 drops what still comes on that stream. Off (the default), or
  /// for a void handler: the whole body is read first, up to max_body.
  bool stream_request_body = false;
};

class Server;

namespace detail {

/// A handler, type-erased so that the connection loop is compiled once: a
/// plain function is called in place, one returning Task<void> is awaited.
struct HandlerRef {
  void* self = nullptr;
  void (*call)(void*, const Request&, Response&) = nullptr;
  Task<void> (*call_async)(void*, const Request&, Response&) = nullptr;
};

/// `handler` seen through a HandlerRef (which it must outlive). A const
/// handler is called as const: `self` only carries it.
template <class H>
HandlerRef handler_ref(H& handler) noexcept {
  HandlerRef ref{const_cast<void*>(static_cast<const void*>(std::addressof(handler))), nullptr, nullptr};
  if constexpr (std::is_void_v<std::invoke_result_t<H&, const Request&, Response&>>) {
    ref.call = [](void* h, const Request& q, Response& r) { std::invoke(*static_cast<H*>(h), q, r); };
  } else {
    static_assert(std::is_same_v<std::invoke_result_t<H&, const Request&, Response&>, Task<void>>,
                  "shoal::http: the handler must be callable as handler(const Request&, Response&) returning "
                  "void or Task<void>");
    ref.call_async = [](void* h, const Request& q, Response& r) { return std::invoke(*static_cast<H*>(h), q, r); };
  }
  return ref;
}

/// The HTTP/2 server, for a connection that opens with its preface: set by
/// shoal::http2::serve (null: HTTP/1.1 only, and libshoal never links
/// nghttp2). Serves `conn`, whose first bytes the caller read into
/// `preread`.
using Http2Entry = Task<void> (*)(Server& server, shoal::detail::ByteStreamRef conn, HandlerRef handler,
                                  std::string preread);

Task<void> serve_connection(Server& server, net::Stream conn, HandlerRef handler);
Task<void> serve_connection(Server& server, shoal::detail::ByteStreamRef conn, HandlerRef handler);

/// Any other ByteStream: owned here, served through a reference.
template <class S>
Task<void> serve_owned(Server& server, S conn, HandlerRef handler) {
  shoal::detail::ByteStreamRef ref(conn);  // named: g++ 12 and temporaries in co_await (docs/compilers.md)
  co_await serve_connection(server, ref, handler);
}

}  // namespace detail

/// An HTTP/1.1 server for connections you accept yourself: serve_connection()
/// on each, shutdown() to stop gracefully (serve() makes and runs one for
/// you). Outlives every connection it serves.
class Server {
 public:
  /// With `shutdown`, a triggered signal counts as shutdown() for every
  /// answer and connection from then on, even before shutdown() is called
  /// (which is still what closes the connections that are idle).
  explicit Server(ServerOptions options = {}, net::ShutdownSignal* shutdown = nullptr)
      : options_(options), connections_(shutdown) {}
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Serves HTTP/1.1 on `conn` (a net::Stream, a tls::Stream after its
  /// handshake, or any other ByteStream) until the client closes it, a limit or a
  /// timeout ends it, or a shutdown does. `handler(const Request&,
  /// Response&)` returns void or Task<void>; it must outlive the call. A
  /// handler's exception is answered with 500 and `Connection: close`, then
  /// rethrown (serve reports it).
  /// Checkpoint: yes (every wait on the connection is one).
  /// Cancellation: the connection closes; a response being written may be cut.
  /// Thread-safety: any task; many connections at once.
  /// Throws: Cancelled; the handler's exception; std::system_error from the
  ///   connection (a reset peer is ECONNRESET or EPIPE, which serve ignores).
  template <net::ByteStream S, class H>
  Task<void> serve_connection(S conn, H& handler) {
    const detail::HandlerRef ref = detail::handler_ref(handler);
    if constexpr (std::is_same_v<S, net::Stream>) {
      return detail::serve_connection(*this, std::move(conn), ref);
    } else {
      return detail::serve_owned(*this, std::move(conn), ref);
    }
  }

  /// Starts a graceful shutdown: idle keep-alive connections close now, a
  /// connection in the middle of a request closes after answering it (with
  /// `Connection: close`), and new connections are closed unserved.
  /// Idempotent; any thread or task; never waits.
  void shutdown() noexcept { connections_.shutdown(); }
  /// True once shutdown() was called or the ShutdownSignal given at
  /// construction triggered.
  bool shutting_down() const noexcept { return connections_.shutting_down(); }
  /// The options given at construction.
  const ServerOptions& options() const noexcept { return options_; }
  /// The connections being served, as the shutdown reaches them.
  net::Connections& connections() noexcept { return connections_; }
  /// Serves a connection that opens with the HTTP/2 preface with `entry`
  /// (shoal::http2::serve sets it, before the first connection).
  void set_http2(detail::Http2Entry entry) noexcept { http2_ = entry; }
  /// The HTTP/2 server, or null (HTTP/1.1 only).
  detail::Http2Entry http2() const noexcept { return http2_; }

 private:
  ServerOptions options_;
  net::Connections connections_;
  detail::Http2Entry http2_ = nullptr;
};

namespace detail {

/// What http::serve and its HTTPS overload share: one Server for every
/// connection, and the shutdown signal's reach into the idle ones.
/// `serve_all(server, handler, serve_options)` runs the accept loop.
template <class H, class ServeAll>
Task<void> serve_with(net::ServeOptions serve_options, ServerOptions options, H handler, ServeAll serve_all) {
  net::ShutdownSignal* const stop = serve_options.shutdown;
  if (options.stats != nullptr) {  // the cap's count, then the user's own hook
    serve_options.on_held_at_cap = [stats = options.stats, user = std::move(serve_options.on_held_at_cap)] {
      stats->connection_held_at_cap();
      if (user) user();
    };
  }
  Server server(options, stop);  // answers after the trigger say close, before the watcher below runs
  co_await scope([&](Scope& s) -> Task<void> {
    if (stop != nullptr) {
      s.spawn([&]() -> Task<void> {
        co_await stop->wait();
        server.shutdown();
      });
    }
    co_await serve_all(server, handler, std::move(serve_options));
    s.cancel();  // the shutdown watcher, if the shutdown never came
  });
}

}  // namespace detail

/// net::serve for HTTP: each connection is served by a Server with `options`
/// and `handler`. When `serve_options.shutdown` triggers, the listener closes
/// at once (new connections are refused), idle connections close, in-flight
/// requests are answered with `Connection: close`, and only what still runs
/// when `serve_options.grace_period` ends is cancelled.
/// (HTTPS: the overload taking a tls::Context, in shoal/http/https.hpp.)
/// Checkpoint, Cancellation, Thread-safety, Throws: as net::serve.
template <class H>
Task<void> serve(net::Listener& listener, net::ServeOptions serve_options, ServerOptions options, H handler) {
  auto serve_all = [&listener](Server& server, H& h, net::ServeOptions o) {
    return net::serve(listener, std::move(o),
                      [&server, &h](net::Stream conn) { return server.serve_connection(std::move(conn), h); });
  };
  return detail::serve_with(std::move(serve_options), options, std::move(handler), serve_all);
}

}  // namespace shoal::http
