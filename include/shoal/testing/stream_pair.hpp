// Two connected streams in one process, for testing protocol code without
// a listener: what one writes, the other reads.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <system_error>

#include "shoal/net/stream.hpp"

namespace shoal::testing {

/// Two ends of one connection (an AF_UNIX stream socket pair).
struct StreamPair {
  net::Stream first;   ///< one end
  net::Stream second;  ///< the other end
};

/// A connected pair of streams: bytes written to `first` are read from
/// `second` and back; closing one ends the other's reads (0), and
/// `shutdown()` ends one direction only.
/// Thread-safety: any thread. Throws: std::system_error (out of
///   descriptors, EMFILE).
inline StreamPair stream_pair() {
  int fds[2];
#if defined(SOCK_NONBLOCK) && defined(SOCK_CLOEXEC)
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) {
    throw std::system_error(errno, std::generic_category(), "shoal::testing::stream_pair: socketpair");
  }
#else  // macOS: the flags afterwards
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
    throw std::system_error(errno, std::generic_category(), "shoal::testing::stream_pair: socketpair");
  }
  for (int fd : fds) {
    (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
    (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
#endif
  return StreamPair{net::Stream(fds[0]), net::Stream(fds[1])};
}

}  // namespace shoal::testing
