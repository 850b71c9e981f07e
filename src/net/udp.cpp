// UDP sockets on the reactor; resolution on the blocking pool.
#include "shoal/net/udp.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "src/runtime/driver/io/async_io.hpp"
#include "shoal/runtime/spawn_blocking.hpp"
#include "src/platform/platform.hpp"

namespace shoal::net {
namespace {

using detail::IoSource;
namespace io = detail::io;


[[noreturn]] void udp_error(const std::string& what, int err) {
  throw std::system_error(err, std::generic_category(), "shoal::net::UdpSocket::" + what);
}

}  // namespace

UdpSocket UdpSocket::bind(const Address& address) {
  const int fd = shoal::detail::platform::make_socket(address.family(), SOCK_DGRAM);
  if (fd < 0) udp_error("bind " + address.to_string() + ": socket", errno);
  if (::bind(fd, address.native(), address.native_size()) != 0) {
    const int err = errno;
    ::close(fd);
    udp_error("bind " + address.to_string(), err);
  }
  UdpSocket s;
  s.fd_ = fd;
  return s;
}

UdpSocket::UdpSocket(UdpSocket&& o) noexcept : fd_(std::exchange(o.fd_, -1)), src_(std::move(o.src_)) {}

UdpSocket& UdpSocket::operator=(UdpSocket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = std::exchange(o.fd_, -1);
    src_ = std::move(o.src_);
  }
  return *this;
}

UdpSocket::~UdpSocket() { close(); }

void UdpSocket::close() noexcept {
  src_.release();
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

IoSource* UdpSocket::source() {
  if (fd_ < 0) throw std::logic_error("shoal::net::UdpSocket: used after close (or moved from)");
  return src_.get(fd_, io::readable | io::writable);
}

Task<std::size_t> UdpSocket::send_to(std::span<const std::byte> data, Address to) {
  return detail::async_io(source(), io::writable,
                          [fd = fd_, data, to = std::move(to)](detail::IoAttempt&) -> std::optional<std::size_t> {
                            for (;;) {
                              const ssize_t n = ::sendto(fd, data.data(), data.size(),
                                                         shoal::detail::platform::kSendNoSigpipe, to.native(),
                                                         to.native_size());
                              if (n >= 0) return static_cast<std::size_t>(n);
                              if (errno == EINTR) continue;
                              if (errno == EAGAIN || errno == EWOULDBLOCK) return std::nullopt;
                              udp_error("send_to " + to.to_string(), errno);
                            }
                          });
}

Task<Datagram> UdpSocket::recv_from(std::span<std::byte> buf) {
  // A datagram shorter than `buf` says nothing about the next one: no
  // readiness is dropped on success.
  auto attempt = [fd = fd_, buf](detail::IoAttempt&) -> std::optional<Datagram> {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      const ssize_t n = ::recvfrom(fd, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&ss), &len);
      if (n >= 0) {
        return Datagram{static_cast<std::size_t>(n), Address::from_native(reinterpret_cast<sockaddr*>(&ss), len)};
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return std::nullopt;
      udp_error("recv_from", errno);
    }
  };
  return detail::async_io(source(), io::readable, std::move(attempt));
}

Address UdpSocket::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) udp_error("local_address", errno);
  return Address::from_native(reinterpret_cast<sockaddr*>(&ss), len);
}

Task<std::vector<Address>> resolve(std::string host, std::uint16_t port) {
  // A named callable: g++ 12 miscompiles a lambda temporary with a
  // class-type capture inside a co_await expression (docs/task_sets.md).
  auto lookup = [host = std::move(host), port] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (rc != 0) {
      throw std::runtime_error("shoal::net::resolve \"" + host + "\": " +
                               (rc == EAI_SYSTEM ? std::generic_category().message(errno) : ::gai_strerror(rc)));
    }
    std::vector<Address> out;
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      out.push_back(Address::from_native(a->ai_addr, a->ai_addrlen));
    }
    ::freeaddrinfo(res);
    return out;
  };
  co_return co_await spawn_blocking(std::move(lookup));
}

}  // namespace shoal::net
