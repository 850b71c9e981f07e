// TLS over a net::Stream, with OpenSSL (link shoal::tls): client and server
// handshakes as awaitables, SNI, ALPN, certificate verification on by
// default for clients (the system trust store, the host name checked), and a
// clean shutdown (close_notify). Every wait is a wait of the underlying
// net::Stream, so every wait is a checkpoint.
//
//   auto ctx = shoal::tls::Context::client();
//   shoal::net::Stream tcp = co_await shoal::net::connect(addr);
//   shoal::tls::Stream tls = co_await shoal::tls::connect(std::move(tcp), ctx, "example.com");
//   co_await tls.write_all(request);
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/net/stream.hpp"
#include "shoal/runtime/task.hpp"

struct ssl_st;      // OpenSSL's SSL, kept out of this header
struct ssl_ctx_st;  // OpenSSL's SSL_CTX

/// TLS over a net::Stream with OpenSSL (link shoal::tls): a Context of shared
/// settings, the encrypted Stream, and the client and server handshakes
/// (connect(), accept()).
namespace shoal::tls {

/// A TLS failure, naming what failed and why: "shoal::tls: handshake with
/// wrong.example (127.0.0.1:443) failed: certificate verify failed:
/// hostname mismatch".
class Error : public std::runtime_error {
 public:
  /// An error whose what() is `what`.
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// A TLS protocol version, for Profile::min_version.
enum class Version { tls1_2, tls1_3 };

/// The protocol versions and algorithms a Context allows. The defaults follow
/// a current server profile (Mozilla's "intermediate"): TLS 1.2 and 1.3, and
/// in TLS 1.2 only ECDHE key exchange with AEAD ciphers (no CBC, no RSA key
/// exchange, no SHA-1 MACs). A client whose only offers are outside it fails
/// the handshake. Each string is in OpenSSL's syntax and checked when the
/// Context is made (Error names the one it refused).
struct Profile {
  /// The oldest version a peer may use.
  Version min_version = Version::tls1_2;
  /// TLS 1.2 cipher suites (OpenSSL cipher-list syntax); TLS 1.3 ignores it.
  std::string tls12_ciphers =
      "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
      "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
  /// TLS 1.3 cipher suites (OpenSSL ciphersuites syntax).
  std::string tls13_ciphersuites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
  /// Key-exchange groups, most preferred first.
  std::string groups = "X25519:P-256:P-384";
};

/// Settings of a client Context (Context::client).
/// Set the members by name on a variable (`shoal::tls::ClientOptions o;
/// o.ca_file = "ca.pem";`): a designated initializer that leaves members
/// out draws g++'s -Wmissing-field-initializers under -Wextra.
struct ClientOptions {
  bool verify = true;      ///< check the peer's certificate chain and host name
  std::string ca_file;     ///< trust these CAs (PEM) instead of the system's store
  std::vector<std::string> alpn;  ///< protocols to offer, most preferred first (e.g. "h2", "http/1.1")
  Profile profile;         ///< versions and algorithms
};

/// Settings of a server Context (Context::server): the certificate and key to
/// present, the ALPN protocols to accept, and the versions and algorithms.
///
///   shoal::tls::ServerOptions o;
///   o.certificate_chain_file = "cert.pem";
///   o.private_key_file = "key.pem";
///   auto ctx = shoal::tls::Context::server(o);
struct ServerOptions {
  std::string certificate_chain_file;  ///< PEM: the certificate, then its intermediates
  std::string private_key_file;        ///< PEM
  std::vector<std::string> alpn;       ///< protocols to accept, most preferred first
  Profile profile;                     ///< versions and algorithms
};

/// Shared settings for many connections (an SSL_CTX). Cheap to copy; any
/// thread. Throws Error naming the file or setting that failed.
class Context {
 public:
  struct Impl;  // what the context's OpenSSL callbacks read; defined in the library
  /// An empty context (what a moved-from or default Stream holds).
  Context() noexcept = default;
  /// A client context with `options`. Throws Error naming the CA file or the
  /// setting that failed.
  static Context client(const ClientOptions& options);
  /// The defaults: verification against the system store, no ALPN. (An
  /// overload, not a default argument: g++ 12 destroys a default argument's
  /// temporary twice when the call is inside a co_await expression.)
  static Context client();
  /// A server context with `options`. Throws Error naming the certificate or
  /// key file that failed to load.
  static Context server(const ServerOptions& options);
  /// The OpenSSL SSL_CTX, for settings shoal does not offer (null for an
  /// empty context); every copy of this Context shares it.
  ssl_ctx_st* native() const noexcept { return ctx_.get(); }

 private:
  explicit Context(std::shared_ptr<ssl_ctx_st> ctx, std::shared_ptr<const Impl> impl) noexcept
      : ctx_(std::move(ctx)), impl_(std::move(impl)) {}
  std::shared_ptr<ssl_ctx_st> ctx_;
  std::shared_ptr<const Impl> impl_;  // the ALPN list, for the server's callback
  friend class Stream;
};

namespace detail {
struct Conn;  // the connection's OpenSSL state and buffers (src/tls/tls.cpp)
}

/// A TLS connection over a net::Stream. Move-only.
/// Thread-safety: as net::Stream: one reading task and one writing task may
/// run at once (e.g. a pump each way); two readers or two writers may not.
/// Moving or destroying it while a call runs is undefined.
class Stream {
 public:
  Stream() noexcept;
  /// Takes over the other stream's connection and socket; the other is left
  /// empty (is_open() false).
  Stream(Stream&&) noexcept;
  /// Drops this stream's connection and closes its socket (no close_notify
  /// is sent), then takes over the other's; the other is left empty.
  Stream& operator=(Stream&&) noexcept;
  ~Stream();

  /// Reads decrypted bytes (waits if none are available); 0 once the peer
  /// has closed cleanly (close_notify), and for an empty `buf`.
  /// Checkpoint: yes (each wait on the socket). Cancellation: no byte was
  ///   returned; bytes already received stay for the next read.
  /// Throws: Cancelled; Error (including a peer that closed without
  ///   close_notify: the data may have been truncated); std::system_error
  ///   from the socket; net::IdleTimeout as net::Stream.
  Task<std::size_t> read_some(std::span<std::byte> buf);
  /// Encrypts and writes all of `buf`.
  /// Checkpoint: yes. Cancellation: a prefix may have gone out. If the cut
  ///   came inside a socket write (part of a record out), the stream is
  ///   broken: every later call throws Error saying so; close it. A cut
  ///   between records leaves it usable.
  /// Throws: Cancelled; Error; std::system_error (EPIPE, ECONNRESET).
  Task<void> write_all(std::span<const std::byte> buf);
  /// Encrypts and writes all of `text` (as write_all of its bytes).
  Task<void> write_all(std::string_view text) { return write_all(std::as_bytes(std::span(text.data(), text.size()))); }
  /// Waits until a read would not wait for the socket (decrypted or received
  /// bytes are buffered, or the socket is readable), without reading: an
  /// idle connection then holds no buffer.
  /// Checkpoint, Cancellation, Throws: as net::Stream::wait_readable.
  Task<void> wait_readable();
  /// Sends close_notify (the peer's read then returns 0) and ends our
  /// writing side; it does not wait for the peer's close_notify.
  /// Checkpoint: yes. Throws: Cancelled; Error; std::system_error.
  Task<void> shutdown();
  /// Ends the conversation without destroying what we sent, as
  /// net::Stream::linger_close: close_notify, then reads and drops what
  /// the peer still sends until it closes, at most `limit` and 1 MiB, then
  /// closes. Checkpoint: yes. Cancellation: closed all the same.
  /// Throws: Cancelled; nothing else.
  Task<void> linger_close(std::chrono::milliseconds limit = std::chrono::seconds(2));
  /// Drops the connection and closes the socket now, sending no
  /// close_notify (the peer's read then fails: a truncation). Idempotent.
  void close() noexcept;

  /// The socket's idle limit (net::Stream::set_idle_timeout): it applies to
  /// every wait of a read, a write or the handshake's.
  void set_idle_timeout(std::chrono::milliseconds t) noexcept { sock_.set_idle_timeout(t); }
  /// The idle limit (zero: none).
  std::chrono::milliseconds idle_timeout() const noexcept { return sock_.idle_timeout(); }
  /// The socket's descriptor, or -1.
  int native_handle() const noexcept { return sock_.native_handle(); }

  /// The protocol ALPN chose, or empty.
  std::string alpn() const;
  /// The underlying socket (e.g. for its addresses or an idle limit, which
  /// applies to every wait on it).
  net::Stream& socket() noexcept { return sock_; }
  /// The underlying socket, read-only (e.g. for its addresses).
  const net::Stream& socket() const noexcept { return sock_; }
  /// True if this holds a connection: false when default-constructed or
  /// moved from.
  bool is_open() const noexcept { return conn_ != nullptr; }

  /// A select case that completes when a read would not wait for the
  /// socket (decrypted or received bytes are buffered, or the socket is
  /// readable), reading nothing: as net::on_readable. Throws
  /// std::logic_error on an empty stream; as net::on_readable.
  friend shoal::detail::ReadableCase on_readable(Stream& s);

 private:
  friend Task<Stream> connect(net::Stream, const Context&, std::string, std::chrono::milliseconds);
  friend Task<Stream> accept(net::Stream, const Context&, std::chrono::milliseconds);
  enum class Op : unsigned char { handshake, read, write, shutdown };
  Stream(net::Stream sock, const Context& ctx, bool client);
  Task<int> drive(Op op, void* data, std::size_t size, std::size_t* done);
  Task<void> flush();
  Task<void> send(std::vector<std::byte>& bytes);
  Task<void> handshake(std::chrono::milliseconds timeout);
  std::string describe() const;

  net::Stream sock_;
  std::unique_ptr<detail::Conn> conn_;
};

/// A select case on `s`'s readability (see Stream's on_readable).
shoal::detail::ReadableCase on_readable(Stream& s);

static_assert(net::ByteStream<Stream>);

/// Performs a client handshake on `sock` for `host`: SNI and, with
/// verification on, the certificate checked against `host` (a name or an
/// IP address). The whole handshake must finish within `timeout`.
/// Checkpoint: yes. Cancellation: everything is freed; the socket closes.
/// Throws: Cancelled; Error naming the host and why (the verification
///   reason, a timeout, a protocol alert); std::system_error from the socket.
Task<Stream> connect(net::Stream sock, const Context& ctx, std::string host,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10));

/// Performs a server handshake on `sock` (an accepted connection).
/// Checkpoint, Cancellation, Throws: as connect (the error names the peer).
Task<Stream> accept(net::Stream sock, const Context& ctx,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace shoal::tls
