// Stream sockets (TCP and Unix-domain) on the runtime's reactor. An idle
// connection costs a registration and a suspended frame, never a thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "shoal/detail/io_slot.hpp"
#include "shoal/net/address.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal::net {

/// `read_exact` hit the end of the stream before the buffer was full.
class EndOfStream : public std::runtime_error {
 public:
  explicit EndOfStream(const std::string& what) : std::runtime_error(what) {}
};

/// A wait on a stream with an idle timeout (Stream::set_idle_timeout,
/// ServeOptions::idle_timeout) saw no progress for that long. `serve` ends
/// such a handler quietly; it is not reported as a fault.
class IdleTimeout : public std::runtime_error {
 public:
  explicit IdleTimeout(const std::string& what) : std::runtime_error(what) {}
};

enum class Shutdown { read, write, both };

/// A connected stream socket. Move-only; the destructor closes it.
/// Thread-safety: one task may read while another writes; closing (or
/// destroying) it while another task waits on it is a bug that aborts with a
/// message (cancel that task instead). Every operation that can wait is a
/// checkpoint; I/O errors throw std::system_error naming the operation and
/// the peer (a reset is ECONNRESET). Writes never raise SIGPIPE (EPIPE).
class Stream {
 public:
  Stream() noexcept = default;
  /// Adopts a connected, non-blocking socket or pipe end (set_nodelay,
  /// shutdown and the addresses are for sockets only).
  explicit Stream(int fd) noexcept : fd_(fd) {}
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  /// Reads what is available (waits if nothing is); 0 at end of stream.
  Task<std::size_t> read_some(std::span<std::byte> buf);
  /// Fills `buf`; throws EndOfStream if the peer ends the stream first.
  Task<void> read_exact(std::span<std::byte> buf);
  Task<std::size_t> write_some(std::span<const std::byte> buf);
  /// Writes all of `buf`.
  Task<void> write_all(std::span<const std::byte> buf);
  Task<void> write_all(std::string_view text) { return write_all(std::as_bytes(std::span(text.data(), text.size()))); }
  /// Waits until a read would not wait (data, end of stream or an error),
  /// without reading: an idle connection then holds no buffer.
  Task<void> wait_readable();

  /// From now on, a read or write that waits longer than `t` for the socket
  /// (no byte could move for `t`) throws IdleTimeout. Zero (the default):
  /// no limit. A wait costs a timer only while a limit is set.
  void set_idle_timeout(std::chrono::milliseconds t) noexcept { idle_timeout_ = t; }
  std::chrono::milliseconds idle_timeout() const noexcept { return idle_timeout_; }

  void shutdown(Shutdown how = Shutdown::write);
  /// TCP only: disables Nagle's algorithm.
  void set_nodelay(bool on);
  Address local_address() const;
  Address peer_address() const;
  bool is_open() const noexcept { return fd_ >= 0; }
  int native_handle() const noexcept { return fd_; }
  void close() noexcept;

 private:
  friend Task<Stream> connect(Address address, std::chrono::milliseconds timeout);
  static Task<Stream> connect_now(Address address);
  detail::IoSource* source(std::uint32_t ready_hint);
  Task<void> wait_with_idle_limit(detail::IoSource* s, std::uint32_t bit, const char* op);
  int fd_ = -1;
  detail::IoSlot src_;  // registered at the first operation
  std::chrono::milliseconds idle_timeout_{0};
};

struct ListenOptions {
  bool reuse_address = true;  ///< SO_REUSEADDR (TCP)
  bool reuse_port = false;    ///< SO_REUSEPORT (TCP)
  int backlog = 1024;
};

/// A listening socket. `bind` may be called outside a task (before `run`).
class Listener {
 public:
  Listener() noexcept = default;
  /// Binds and listens (TCP or Unix-domain, from the address). Port 0 picks
  /// a free port: see local_address(). Throws std::system_error naming the
  /// address (e.g. "address already in use").
  static Listener bind(const Address& address, ListenOptions options = {});
  Listener(Listener&& o) noexcept;
  Listener& operator=(Listener&& o) noexcept;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener();

  /// The next connection. Checkpoint: yes. Out of file descriptors
  /// (EMFILE/ENFILE), it backs off and retries (saying so once on stderr)
  /// instead of spinning.
  Task<Stream> accept();
  Address local_address() const;
  int native_handle() const noexcept { return fd_; }
  void close() noexcept;

 private:
  int fd_ = -1;
  detail::IoSlot src_;  // registered at the first operation
  bool warned_ = false;
};

/// Connects to `address`; throws std::system_error naming it (e.g.
/// "connection refused"), or TimedOut after `timeout`. Checkpoint: yes.
Task<Stream> connect(Address address, std::chrono::milliseconds timeout = std::chrono::seconds(30));

using TcpStream = Stream;
using TcpListener = Listener;
using UnixStream = Stream;
using UnixListener = Listener;

}  // namespace shoal::net
