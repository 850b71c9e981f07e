// The only place that tests the platform to pick I/O backends.
#pragma once

#if defined(__linux__)
#define SHOAL_HAVE_EPOLL 1
#endif
// Native kqueue, or libkqueue on Linux (the build defines SHOAL_WITH_LIBKQUEUE).
#if defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__NetBSD__) || \
    defined(__DragonFly__) || defined(SHOAL_WITH_LIBKQUEUE)
#define SHOAL_HAVE_KQUEUE 1
#endif
#define SHOAL_HAVE_POLL 1
