// System calls the networking code makes through a seam, so a test can count
// or fail them (the EMFILE test counts accept attempts, the ring's too; the stream tests count
// readiness polls). Set before a runtime starts; never changed while one runs.
#pragma once

#include <poll.h>
#include <sys/socket.h>

namespace shoal::detail::sys {

/// Returns the connection close-on-exec and non-blocking (accept4 on Linux).
using Accept = int (*)(int fd, sockaddr* addr, socklen_t* len);
/// What Listener::accept calls; platform::accept_connection unless a test
/// replaced it.
extern Accept accept;

/// Sees each result (a descriptor, or -errno) of an accept the ring ran: a
/// uring runtime's Listener::accept makes no accept call of its own. Null
/// unless a test set it.
using RingAccepted = void (*)(int result);
extern RingAccepted ring_accepted;

using Poll = int (*)(pollfd* fds, nfds_t n, int timeout);
/// What a stream's readiness check calls; ::poll unless a test replaced it.
extern Poll poll;

}  // namespace shoal::detail::sys
