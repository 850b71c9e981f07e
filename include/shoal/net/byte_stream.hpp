// ByteStream: a connection's bytes, whatever carries them (a socket, TLS,
// an HTTP/2 stream). Code that speaks a protocol over bytes takes any
// ByteStream: BufferedReader and the HTTP/1.1 server do.
//
//   auto greet = [](shoal::net::ByteStream auto& conn) -> shoal::Task<void> {
//     co_await conn.write_all(std::string_view("hello\n"));
//   };
//   co_await greet(conn);  // a net::Stream, a tls::Stream, ...
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <span>
#include <string_view>
#include <type_traits>

#include "shoal/detail/io_op.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal::net {

/// A bidirectional stream of bytes with the net::Stream contract:
/// - `read_some(span<byte>)`: what is available, waiting if nothing is; 0 at
///   the end of the stream. `write_all(span<const byte>)`: all of it.
///   `wait_readable()`: until a read would not wait, reading nothing. Each is
///   awaitable (convertible to the matching Task) and a checkpoint.
/// - `shutdown()`: ends our sending side, so the peer reads the end of the
///   stream (void, or awaitable when it sends something first, as TLS's
///   close_notify). `linger_close(limit)`: shutdown, then read and drop
///   what the peer still sends, at most `limit`, then close. `close()`:
///   now, noexcept.
/// - `set_idle_timeout(limit)` / `idle_timeout()`: a read or write that
///   waits that long throws IdleTimeout (zero: no limit).
/// - `native_handle()`: the descriptor its waits are on, or -1 (a server's
///   graceful shutdown reaches an idle connection through it).
/// The last four never throw.
/// net::Stream and tls::Stream are ByteStreams.
template <class S>
concept ByteStream = std::movable<S> && requires(S& s, const S& cs, std::span<std::byte> in,
                                                  std::span<const std::byte> out, std::chrono::milliseconds limit) {
  { s.read_some(in) } -> std::convertible_to<Task<std::size_t>>;
  { s.write_all(out) } -> std::convertible_to<Task<void>>;
  { s.wait_readable() } -> std::convertible_to<Task<void>>;
  requires std::is_void_v<decltype(s.shutdown())> || std::convertible_to<decltype(s.shutdown()), Task<void>>;
  { s.linger_close(limit) } -> std::convertible_to<Task<void>>;
  { s.close() } noexcept;
  { s.set_idle_timeout(limit) } noexcept;
  { cs.idle_timeout() } noexcept -> std::convertible_to<std::chrono::milliseconds>;
  { cs.native_handle() } noexcept -> std::convertible_to<int>;
};

}  // namespace shoal::net

namespace shoal::detail {

/// Ends `s`'s sending side, awaiting it when the stream's shutdown waits.
template <net::ByteStream S>
Task<void> shutdown_write(S& s) {
  if constexpr (std::is_void_v<decltype(s.shutdown())>) {
    s.shutdown();
  } else {
    co_await s.shutdown();
  }
}

/// A ByteStream seen through function pointers, so that protocol code is
/// compiled once for every stream type (the HTTP/1.1 connection, the
/// buffered reader). Non-owning: the stream outlives it.
class ByteStreamRef {
 public:
  template <class S>
    requires(!std::same_as<std::remove_cv_t<S>, ByteStreamRef> && net::ByteStream<S>)
  explicit ByteStreamRef(S& s) noexcept : self_(&s), ops_(&kOps<S>) {}

  Task<std::size_t> read_some(std::span<std::byte> buf) { return ops_->read_some(self_, buf); }
  Task<void> write_all(std::span<const std::byte> buf) { return ops_->write_all(self_, buf); }
  Task<void> write_all(std::string_view text) { return write_all(std::as_bytes(std::span(text.data(), text.size()))); }
  Task<void> wait_readable() { return ops_->wait_readable(self_); }
  Task<void> shutdown() { return ops_->shutdown(self_); }
  Task<void> linger_close(std::chrono::milliseconds limit) { return ops_->linger_close(self_, limit); }
  void close() noexcept { ops_->close(self_); }
  void set_idle_timeout(std::chrono::milliseconds t) noexcept { ops_->set_idle_timeout(self_, t); }
  std::chrono::milliseconds idle_timeout() const noexcept { return ops_->idle_timeout(self_); }
  int native_handle() const noexcept { return ops_->native_handle(self_); }
  /// The stream's select case for readability (net::on_readable). Throws
  /// std::logic_error for a stream type that has none.
  ReadableCase readable_case();

  /// The stream referred to, if it is an `S` (else null): for a direct
  /// path where one type is common. May say null for an `S` whose
  /// reference was made in another shared object; then the
  /// function pointers serve it.
  template <net::ByteStream S>
  S* target() const noexcept {
    return ops_ == &kOps<S> ? static_cast<S*>(self_) : nullptr;
  }

 private:
  struct Ops {
    Task<std::size_t> (*read_some)(void*, std::span<std::byte>);
    Task<void> (*write_all)(void*, std::span<const std::byte>);
    Task<void> (*wait_readable)(void*);
    Task<void> (*shutdown)(void*);
    Task<void> (*linger_close)(void*, std::chrono::milliseconds);
    void (*close)(void*) noexcept;
    void (*set_idle_timeout)(void*, std::chrono::milliseconds) noexcept;
    std::chrono::milliseconds (*idle_timeout)(const void*) noexcept;
    int (*native_handle)(const void*) noexcept;
    ReadableCase (*readable_case)(void*);  // null: the stream has no on_readable
  };
  template <class S>
  static constexpr ReadableCase (*readable_case_of() noexcept)(void*) {
    if constexpr (requires(S& s) {
                    { on_readable(s) } -> std::same_as<ReadableCase>;
                  }) {
      return [](void* s) { return on_readable(as<S>(s)); };
    } else {
      return nullptr;
    }
  }
  template <class S>
  static S& as(void* s) noexcept {
    return *static_cast<S*>(s);
  }
  template <class S>
  static const S& as(const void* s) noexcept {
    return *static_cast<const S*>(s);
  }
  template <class S>
  static constexpr Ops kOps = {
      [](void* s, std::span<std::byte> b) -> Task<std::size_t> { return as<S>(s).read_some(b); },
      [](void* s, std::span<const std::byte> b) -> Task<void> { return as<S>(s).write_all(b); },
      [](void* s) -> Task<void> { return as<S>(s).wait_readable(); },
      [](void* s) -> Task<void> { return shutdown_write(as<S>(s)); },
      [](void* s, std::chrono::milliseconds t) -> Task<void> { return as<S>(s).linger_close(t); },
      [](void* s) noexcept { as<S>(s).close(); },
      [](void* s, std::chrono::milliseconds t) noexcept { as<S>(s).set_idle_timeout(t); },
      [](const void* s) noexcept -> std::chrono::milliseconds { return as<S>(s).idle_timeout(); },
      [](const void* s) noexcept -> int { return as<S>(s).native_handle(); },
      readable_case_of<S>(),
  };

  void* self_;
  const Ops* ops_;
};

static_assert(net::ByteStream<ByteStreamRef>);

}  // namespace shoal::detail
