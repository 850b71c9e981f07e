// Socket addresses: IPv4, IPv6 and Unix-domain, parsed with errors that
// name what was wrong.
#pragma once

#include "shoal/version.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace shoal::net {

/// A socket address. Value type, copyable.
class Address {
 public:
  Address() noexcept;

  /// Parses "1.2.3.4:80", "[::1]:80", or "unix:/path/to/socket"
  /// ("unix:@name" for the abstract namespace). Hostnames are not resolved
  /// here (that may block; see net::resolve). Throws std::invalid_argument
  /// naming the text and what is wrong with it (e.g. the port out of range).
  static Address parse(std::string_view text);
  /// An IPv4 or IPv6 literal and a port; throws like parse.
  static Address ip(std::string_view host, std::uint16_t port);
  /// A Unix-domain address for `path` (a leading '@' means the abstract
  /// namespace). Throws std::invalid_argument for an empty path, a NUL byte
  /// in a file path, or one longer than sockaddr_un allows (107 bytes).
  static Address unix_socket(std::string_view path);
  /// From what the kernel returned (accept, getsockname).
  static Address from_native(const sockaddr* sa, socklen_t len) noexcept;

  /// AF_INET, AF_INET6 or AF_UNIX (AF_UNSPEC, 0, for a default-constructed Address).
  int family() const noexcept { return storage_.ss_family; }
  /// True for a Unix-domain address.
  bool is_unix() const noexcept { return family() == AF_UNIX; }
  /// 0 for a Unix-domain address.
  std::uint16_t port() const noexcept;
  /// "1.2.3.4:80", "[::1]:80", "unix:/path".
  std::string to_string() const;

  /// The sockaddr to pass to system calls (bind, connect, sendto), with native_size().
  const sockaddr* native() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  /// The length of native() in bytes (0 for a default-constructed Address).
  socklen_t native_size() const noexcept { return len_; }

  /// True if both hold the same sockaddr bytes and length (family, address
  /// and port; no name resolution).
  friend bool operator==(const Address& a, const Address& b) noexcept;

 private:
  sockaddr_storage storage_;
  socklen_t len_;
};

}  // namespace shoal::net
