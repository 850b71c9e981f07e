// A connected socket's peer address: net::Stream::peer_address, the error
// messages that name a connection, and http::Request::peer ask the same.
#pragma once

#include <sys/socket.h>

#include <optional>

#include "shoal/net/address.hpp"

namespace shoal::detail {

/// The address of `fd`'s peer, or nullopt when getpeername(2) fails (errno
/// says why: not a socket, or no longer connected).
inline std::optional<net::Address> peer_address_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return std::nullopt;
  return net::Address::from_native(reinterpret_cast<sockaddr*>(&ss), len);
}

}  // namespace shoal::detail
