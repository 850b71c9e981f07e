// Address parsing and formatting.
#include "shoal/net/address.hpp"

#include <arpa/inet.h>

#include <cstring>
#include <stdexcept>

namespace shoal::net {
namespace {

// The input as it can be shown in a message: control and non-ASCII bytes
// as \xHH, so a NUL cannot cut the message short.
std::string printable(std::string_view text) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out.push_back(c);
    } else {
      out.append("\\x").push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

[[noreturn]] void bad(std::string_view text, const std::string& why) {
  throw std::invalid_argument("shoal::net::Address: \"" + printable(text) + "\": " + why);
}

std::uint16_t parse_port(std::string_view text, std::string_view port) {
  if (port.empty()) bad(text, "the port is missing (expected host:port)");
  if (port.size() > 10) bad(text, "port " + std::string(port) + " is out of range (0..65535)");
  std::uint64_t v = 0;
  for (char c : port) {
    if (c < '0' || c > '9') bad(text, "port \"" + std::string(port) + "\" is not a number");
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > 65535) bad(text, "port " + std::string(port) + " is out of range (0..65535)");
  return static_cast<std::uint16_t>(v);
}

}  // namespace

namespace {
// Why `host` (no ':') is not an IPv4 address: digits and dots that do not
// make one, or a name, which needs a resolver.
std::string not_ipv4(std::string_view host) {
  const bool numeric = !host.empty() && host.find_first_not_of("0123456789.") == std::string_view::npos;
  // Appended piece by piece: g++ 12 -O3 warns falsely (-Wrestrict) on a
  // literal + std::string&&.
  std::string text(1, '"');
  text.append(host);
  text.append(numeric ? "\" is not a valid IPv4 address (four numbers 0..255 separated by dots)"
                      : "\" is not an IPv4 address (hostnames need net::resolve)");
  return text;
}
}  // namespace

Address::Address() noexcept : storage_{}, len_(0) {}

Address Address::ip(std::string_view host, std::uint16_t port) {
  Address a;
  const std::string h(host);
  if (h.find(':') != std::string::npos) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&a.storage_);
    if (::inet_pton(AF_INET6, h.c_str(), &sa->sin6_addr) != 1) bad(host, "\"" + h + "\" is not an IPv6 address");
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(port);
    a.len_ = sizeof(sockaddr_in6);
  } else {
    auto* sa = reinterpret_cast<sockaddr_in*>(&a.storage_);
    if (::inet_pton(AF_INET, h.c_str(), &sa->sin_addr) != 1) {
      bad(host, not_ipv4(h));
    }
    sa->sin_family = AF_INET;
    sa->sin_port = htons(port);
    a.len_ = sizeof(sockaddr_in);
  }
  return a;
}

namespace {
// `text` is what the caller wrote (quoted in errors), `path` the path in it.
void check_unix_path(std::string_view text, std::string_view path) {
  if (path.empty()) bad(text, "a Unix-domain socket path is empty");
  if (path.front() != '@' && path.find('\0') != std::string_view::npos) {
    bad(text, "a Unix-domain socket path contains a NUL byte");
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    bad(text, "a Unix-domain socket path is limited to " + std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                  " bytes, this one has " + std::to_string(path.size()));
  }
}
}  // namespace

Address Address::unix_socket(std::string_view path) {
  Address a;
  auto* sa = reinterpret_cast<sockaddr_un*>(&a.storage_);
  check_unix_path(path, path);
  sa->sun_family = AF_UNIX;
  std::memcpy(sa->sun_path, path.data(), path.size());
  const bool abstract = path.front() == '@';
  if (abstract) sa->sun_path[0] = '\0';
  a.len_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + (abstract ? 0 : 1));
  return a;
}

Address Address::parse(std::string_view text) {
  if (text.substr(0, 5) == "unix:") {
    check_unix_path(text, text.substr(5));
    return unix_socket(text.substr(5));
  }
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) bad(text, "an IPv6 address opened with '[' is not closed with ']'");
    if (close + 1 >= text.size() || text[close + 1] != ':') bad(text, "the port is missing (expected [v6]:port)");
    const auto port = parse_port(text, text.substr(close + 2));
    try {
      return ip(text.substr(1, close - 1), port);
    } catch (const std::invalid_argument&) {
      bad(text, "\"" + std::string(text.substr(1, close - 1)) + "\" is not an IPv6 address");
    }
  }
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) bad(text, "the port is missing (expected host:port)");
  if (text.substr(0, colon).find(':') != std::string_view::npos) {
    bad(text, "an IPv6 address needs brackets: [addr]:port");
  }
  const auto port = parse_port(text, text.substr(colon + 1));
  if (colon == 0) bad(text, "the host is missing (expected host:port)");
  try {
    return ip(text.substr(0, colon), port);
  } catch (const std::invalid_argument&) {
    bad(text, not_ipv4(text.substr(0, colon)));
  }
}

Address Address::from_native(const sockaddr* sa, socklen_t len) noexcept {
  Address a;
  if (len > static_cast<socklen_t>(sizeof(a.storage_))) len = sizeof(a.storage_);
  std::memcpy(&a.storage_, sa, len);
  a.len_ = len;
  return a;
}

std::uint16_t Address::port() const noexcept {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

std::string Address::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf, sizeof buf);
    std::string out = "[";  // appends: g++ 12 -Wrestrict misfires on "[" + std::string
    out.append(buf).append("]:").append(std::to_string(port()));
    return out;
  }
  if (family() == AF_UNIX) {
    const auto* sa = reinterpret_cast<const sockaddr_un*>(&storage_);
    const std::size_t n = len_ > offsetof(sockaddr_un, sun_path) ? len_ - offsetof(sockaddr_un, sun_path) : 0;
    if (n == 0) return "unix:(unnamed)";
    std::string out = "unix:";
    if (sa->sun_path[0] == '\0') return out.append("@").append(sa->sun_path + 1, n - 1);
    return out.append(sa->sun_path, strnlen(sa->sun_path, n));
  }
  return "(no address)";
}

bool operator==(const Address& a, const Address& b) noexcept {
  return a.len_ == b.len_ && std::memcmp(&a.storage_, &b.storage_, a.len_) == 0;
}

}  // namespace shoal::net
