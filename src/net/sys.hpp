// System calls the networking code makes through a seam, so a test can count
// or fail them (the EMFILE test counts accept attempts; the stream tests count
// readiness polls). Set before a runtime starts; never changed while one runs.
#pragma once

#include <poll.h>
#include <sys/socket.h>

namespace shoal::detail::sys {

using Accept4 = int (*)(int fd, sockaddr* addr, socklen_t* len, int flags);
/// What Listener::accept calls; ::accept4 unless a test replaced it.
extern Accept4 accept4;

using Poll = int (*)(pollfd* fds, nfds_t n, int timeout);
/// What a stream's readiness check calls; ::poll unless a test replaced it.
extern Poll poll;

}  // namespace shoal::detail::sys
