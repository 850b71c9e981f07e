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
  std::size_t size = 0;
  Address from;
};

/// A UDP socket. Move-only; the destructor closes it. Every operation that
/// can wait is a checkpoint; errors throw std::system_error naming the
/// operation and address.
class UdpSocket {
 public:
  UdpSocket() noexcept = default;
  /// Binds `address` (port 0 picks a free port: see local_address()).
  static UdpSocket bind(const Address& address);
  UdpSocket(UdpSocket&& o) noexcept;
  UdpSocket& operator=(UdpSocket&& o) noexcept;
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;
  ~UdpSocket();

  /// Sends one datagram; returns its size.
  Task<std::size_t> send_to(std::span<const std::byte> data, Address to);
  /// Receives one datagram (waits if none is queued).
  Task<Datagram> recv_from(std::span<std::byte> buf);
  Address local_address() const;
  int native_handle() const noexcept { return fd_; }
  void close() noexcept;

 private:
  detail::IoSource* source();
  int fd_ = -1;
  detail::IoSlot src_;  // registered at the first operation
};

/// Resolves `host` (a name or an address literal) for `port` through the
/// blocking pool, so no worker ever blocks in getaddrinfo. Throws
/// std::runtime_error naming the host and the resolver's reason.
/// Checkpoint: yes.
Task<std::vector<Address>> resolve(std::string host, std::uint16_t port);

}  // namespace shoal::net
