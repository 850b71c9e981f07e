// UDP sockets and name resolution.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "shoal/detail/io_slot.hpp"
#include "shoal/net/address.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal::net {

/// What `recv_from` got: the datagram's length (truncated to the buffer)
/// and where it came from.
struct Datagram {
  /// Bytes stored in the buffer (at most its size: the rest of a longer datagram is lost).
  std::size_t size = 0;
  /// The sender's address.
  Address from;
};

/// A UDP socket. Move-only; the destructor closes it. Every operation that
/// can wait is a checkpoint; errors throw std::system_error naming the
/// operation and address. Closing it while a task waits on it aborts.
class UdpSocket {
 public:
  UdpSocket() noexcept = default;
  /// Binds `address` (port 0 picks a free port: see local_address()).
  static UdpSocket bind(const Address& address);
  /// Takes over `o`'s socket; `o` is left closed.
  UdpSocket(UdpSocket&& o) noexcept;
  /// Closes this socket, then takes over `o`'s; `o` is left closed.
  UdpSocket& operator=(UdpSocket&& o) noexcept;
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;
  ~UdpSocket();

  /// Sends one datagram; returns its size.
  /// Checkpoint: yes (cancellation is checked first); a send that need not
  ///   wait returns without a budget yield.
  /// Cancellation: nothing was sent.
  /// Thread-safety: any task; a receiver may run beside it.
  /// Throws: Cancelled; std::system_error (e.g. EMSGSIZE); std::logic_error
  ///   on a closed or moved-from socket.
  Task<std::size_t> send_to(std::span<const std::byte> data, Address to);
  /// Receives one datagram (waits if none is queued); a datagram longer
  /// than `buf` is cut to it without notice.
  /// Checkpoint: yes (cancellation is checked first); a receive that need
  ///   not wait returns without a budget yield.
  /// Cancellation: no datagram was taken.
  /// Thread-safety: any task; a sender may run beside it.
  /// Throws: Cancelled; std::system_error; std::logic_error on a closed or
  ///   moved-from socket.
  Task<Datagram> recv_from(std::span<std::byte> buf);
  /// The bound address, with the port picked for port 0 (getsockname).
  /// Throws std::system_error.
  Address local_address() const;
  /// The file descriptor, or -1; still owned by the socket.
  int native_handle() const noexcept { return fd_; }
  /// Closes the socket now (idempotent); the destructor does the same. No
  /// task may be waiting on it (that aborts).
  void close() noexcept;

 private:
  detail::IoSource* source();
  int fd_ = -1;
  detail::IoSlot src_;  // registered at the first operation
};

/// Resolves `host` (a name or an address literal) for `port` through the
/// blocking pool, so no worker ever blocks in getaddrinfo.
/// Checkpoint: yes (as spawn_blocking).
/// Cancellation: a lookup not started is dropped; a running getaddrinfo
///   cannot be interrupted: the await ends when it returns, and then its
///   result is delivered.
/// Thread-safety: any task.
/// Throws: std::runtime_error naming the host and the resolver's reason;
///   Cancelled.
Task<std::vector<Address>> resolve(std::string host, std::uint16_t port);

}  // namespace shoal::net
