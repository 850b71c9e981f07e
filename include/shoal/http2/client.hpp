// An HTTP/2 client (the shoal::http2 component): many requests at once on
// one connection, each awaited by the task that made it.
//
//   co_await shoal::http2::connect(address, [](shoal::http2::Client& c) -> shoal::Task<void> {
//     shoal::http2::ClientResponse r = co_await c.get("/health");
//     ...
//   });
//
// The connection lives for the call: a task of its own owns the socket and
// the nghttp2 session, as the server's does, and requests reach it through
// a queue. When the body returns, the connection ends with GOAWAY.
// docs/http2.md has the design.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "shoal/net/address.hpp"
#include "shoal/net/byte_stream.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal::http2 {

/// A header or trailer field: a name (lowercase on the wire, as HTTP/2
/// requires) and its value.
struct Field {
  std::string name;   ///< lowercase on the wire
  std::string value;  ///< as sent
};

/// A whole response.
struct ClientResponse {
  int status = 0;               ///< the final status (an informational 1xx head is dropped)
  std::vector<Field> headers;   ///< as received, pseudo-headers apart
  std::string body;             ///< the whole body
  std::vector<Field> trailers;  ///< fields after the body (gRPC's grpc-status)
  /// The first header named `name` (case-insensitive), or empty.
  std::string_view header(std::string_view name) const noexcept;
};

/// Settings of a client connection (connect).
struct ClientOptions {
  /// The :authority of every request; empty: the address connected to.
  std::string authority;
  /// The :scheme of every request; empty: "https" over a stream that
  /// negotiated ALPN (a tls::Stream), else "http".
  std::string scheme;
  /// A response body past this fails its request (the stream is reset).
  std::size_t max_body = 64u << 20;
  /// A response's header list, as HTTP/2 counts it (SETTINGS_MAX_HEADER_LIST_SIZE).
  std::size_t max_head = 65536;
};

/// What a request failed on: the server reset its stream, refused it (a
/// GOAWAY before it was processed: safe to retry), or the connection
/// ended first. what() says which.
class RequestError : public std::runtime_error {
 public:
  /// `what` names the failure; `retryable`: the server did not process it.
  RequestError(const std::string& what, bool retryable) : std::runtime_error(what), retryable_(retryable) {}
  /// True if the server did not process the request (REFUSED_STREAM, or
  /// past a GOAWAY's last stream): it may be sent again.
  bool retryable() const noexcept { return retryable_; }

 private:
  bool retryable_;
};

namespace detail {
class ClientConnection;
}

/// A connection's requests, given to connect's body.
class Client {
 public:
  /// Sends a request (`body` as its DATA, none if empty; `fields` as its
  /// headers, names lowercase) and waits for the whole response. Many may
  /// wait at once, from any tasks: they share the connection, at most as
  /// many streams open as the server allows (the rest wait their turn).
  /// Checkpoint: yes.
  /// Cancellation: the stream is reset (RST_STREAM CANCEL), so the server's
  ///   handler is cancelled too; then Cancelled.
  /// Thread-safety: any task, while connect's body runs.
  /// Throws: Cancelled; RequestError (reset, refused, the connection
  ///   ended, the body past max_body); std::bad_alloc.
  Task<ClientResponse> request(std::string method, std::string path, std::string body, std::vector<Field> fields);
  // Overloads, not default arguments: g++ 12 destroys a default
  // argument's temporary twice when the call is inside a co_await
  // expression (docs/compilers.md).
  /// request(method, path, body, {}).
  Task<ClientResponse> request(std::string method, std::string path, std::string body) {
    return request(std::move(method), std::move(path), std::move(body), std::vector<Field>());
  }
  /// request(method, path, "", {}).
  Task<ClientResponse> request(std::string method, std::string path) {
    return request(std::move(method), std::move(path), std::string(), std::vector<Field>());
  }
  /// request("GET", path).
  Task<ClientResponse> get(std::string path) { return request("GET", std::move(path)); }

 private:
  friend class detail::ClientConnection;
  explicit Client(detail::ClientConnection& c) noexcept : c_(&c) {}
  detail::ClientConnection* c_;
};

namespace detail {
using ClientBody = Task<void> (*)(void* body, Client& client);
Task<void> run_client(shoal::detail::ByteStreamRef conn, ClientOptions options, void* body, ClientBody call);
Task<void> connect_client(net::Address address, ClientOptions options, void* body, ClientBody call);

template <class F>
Task<void> call_body(void* body, Client& client) {
  return std::invoke(*static_cast<F*>(body), client);
}
}  // namespace detail

/// Connects to `address` over TCP and speaks HTTP/2 by prior knowledge
/// (h2c, as `curl --http2-prior-knowledge`), runs `body(Client&)` (which
/// returns Task<void>), then ends the connection (GOAWAY) and returns.
/// Checkpoint: yes.
/// Cancellation: requests in flight are reset and the connection closes.
/// Thread-safety: any task.
/// Throws: Cancelled; what the body throws; std::system_error (connect,
///   the connection); RequestError out of the body's requests.
template <class F>
Task<void> connect(net::Address address, F body, ClientOptions options) {
  static_assert(std::is_same_v<std::invoke_result_t<F&, Client&>, Task<void>>,
                "shoal::http2::connect: the body must be callable as body(Client&) returning Task<void>");
  co_await detail::connect_client(address, std::move(options), &body, &detail::call_body<F>);
}
/// connect(address, body, ClientOptions()). (An overload, not a default
/// argument: see Client::request.)
template <class F>
Task<void> connect(net::Address address, F body) {
  return connect(address, std::move(body), ClientOptions());
}

/// The same on a connected ByteStream (a tls::Stream whose ALPN chose
/// "h2", say), which must outlive the call.
template <net::ByteStream S, class F>
Task<void> connect(S& stream, F body, ClientOptions options) {
  static_assert(std::is_same_v<std::invoke_result_t<F&, Client&>, Task<void>>,
                "shoal::http2::connect: the body must be callable as body(Client&) returning Task<void>");
  if (options.scheme.empty()) {
    if constexpr (requires { stream.alpn(); }) options.scheme = "https";
  }
  shoal::detail::ByteStreamRef ref(stream);  // named: g++ 12 and temporaries in co_await (docs/compilers.md)
  co_await detail::run_client(ref, std::move(options), &body, &detail::call_body<F>);
}

/// connect(stream, body, ClientOptions()).
template <net::ByteStream S, class F>
Task<void> connect(S& stream, F body) {
  return connect(stream, std::move(body), ClientOptions());
}

}  // namespace shoal::http2
