// The one place that tests the platform. Linux gets its own calls (accept4,
// pipe2, the SOCK_ flags, MSG_NOSIGNAL, eventfd, futex, pidfd); macOS and
// the BSDs get their POSIX forms, and so does Linux when SHOAL_PORTABLE_POSIX
// is defined (the kqueue preset builds that way, so the forms a BSD or macOS
// build takes are compiled and tested here; docs/platforms.md says what
// still has not met a real BSD or macOS kernel).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#if defined(__linux__) && !defined(SHOAL_PORTABLE_POSIX)
#define SHOAL_LINUX_CALLS 1
#endif

// I/O backends: epoll (and io_uring) on Linux; kqueue natively, or over libkqueue on Linux
// (the build defines SHOAL_WITH_LIBKQUEUE); poll(2) everywhere.
#if defined(__linux__)
#define SHOAL_HAVE_EPOLL 1
#endif
// io_uring (SHOAL_IO_BACKEND=uring): probed at run time, epoll where refused.
#if defined(__linux__) && __has_include(<linux/io_uring.h>)
#define SHOAL_HAVE_URING 1
#endif
#if defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__NetBSD__) || \
    defined(__DragonFly__) || defined(SHOAL_WITH_LIBKQUEUE)
#define SHOAL_HAVE_KQUEUE 1
#endif
#define SHOAL_HAVE_POLL 1

namespace shoal::detail::platform {

/// Sets close-on-exec, and non-blocking if asked. The POSIX form of the
/// SOCK_CLOEXEC / O_CLOEXEC flags: not atomic, so a fork and exec in another
/// thread between the call that made `fd` and this one leaks it into that child.
inline int set_fd_flags(int fd, bool nonblocking) noexcept {
  if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) return -1;
  if (nonblocking && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) return -1;
  return 0;
}

/// A pipe, both ends close-on-exec, non-blocking if asked. 0, or -1 and errno.
inline int make_pipe(int (&fds)[2], bool nonblocking) noexcept {
#if defined(SHOAL_LINUX_CALLS)
  return ::pipe2(fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0));
#else
  if (::pipe(fds) != 0) return -1;
  if (set_fd_flags(fds[0], nonblocking) != 0 || set_fd_flags(fds[1], nonblocking) != 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    errno = err;
    return -1;
  }
  return 0;
#endif
}

/// Closes `fd` keeping errno, and returns -1: a failed set-up's cleanup.
inline int close_failed(int fd) noexcept {
  const int err = errno;
  ::close(fd);
  errno = err;
  return -1;
}

/// A socket, close-on-exec and non-blocking, whose writes to a closed peer
/// raise no SIGPIPE where a socket option can say so (SO_NOSIGPIPE: macOS,
/// the BSDs; Linux says it per send, kSendNoSigpipe). The fd, or -1 and errno.
inline int make_socket(int family, int type) noexcept {
#if defined(SHOAL_LINUX_CALLS)
  return ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
#else
  const int fd = ::socket(family, type, 0);
  if (fd < 0) return -1;
  if (set_fd_flags(fd, true) != 0) return close_failed(fd);
#if defined(SO_NOSIGPIPE)
  const int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one) != 0) return close_failed(fd);
#endif
  return fd;
#endif
}

/// accept(2) of the next connection, close-on-exec and non-blocking (a
/// socket accepted on macOS inherits the listener's SO_NOSIGPIPE). The fd,
/// or -1 and errno (EAGAIN: none pending).
inline int accept_connection(int fd, sockaddr* addr, socklen_t* len) noexcept {
#if defined(SHOAL_LINUX_CALLS)
  return ::accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
  const int c = ::accept(fd, addr, len);
  if (c < 0) return -1;
  if (set_fd_flags(c, true) != 0) return close_failed(c);
  return c;
#endif
}

/// send(2)'s flag that keeps a write to a closed peer from raising SIGPIPE,
/// where there is one (elsewhere SO_NOSIGPIPE, set by make_socket, and the
/// runtime ignoring SIGPIPE do it).
#if defined(MSG_NOSIGNAL)
inline constexpr int kSendNoSigpipe = MSG_NOSIGNAL;
#else
inline constexpr int kSendNoSigpipe = 0;
#endif

/// poll(2)'s report that the peer shut its writing down (Linux), or 0.
#if defined(POLLRDHUP)
inline constexpr short kPollReadHangup = POLLRDHUP;
#else
inline constexpr short kPollReadHangup = 0;
#endif

/// Clocks for times that a few milliseconds of error do not hurt, read
/// without a syscall where the kernel has a coarse one.
#if defined(CLOCK_MONOTONIC_COARSE)
inline constexpr clockid_t kCoarseMonotonic = CLOCK_MONOTONIC_COARSE;
#elif defined(CLOCK_MONOTONIC_FAST)
inline constexpr clockid_t kCoarseMonotonic = CLOCK_MONOTONIC_FAST;
#else
inline constexpr clockid_t kCoarseMonotonic = CLOCK_MONOTONIC;
#endif
#if defined(CLOCK_REALTIME_COARSE)
inline constexpr clockid_t kCoarseRealtime = CLOCK_REALTIME_COARSE;
#elif defined(CLOCK_REALTIME_FAST)
inline constexpr clockid_t kCoarseRealtime = CLOCK_REALTIME_FAST;
#else
inline constexpr clockid_t kCoarseRealtime = CLOCK_REALTIME;
#endif

}  // namespace shoal::detail::platform
