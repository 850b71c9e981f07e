// The only place that tests the platform to pick I/O backends.
#pragma once

#if defined(__linux__)
#define SHOAL_HAVE_EPOLL 1
#endif
#define SHOAL_HAVE_POLL 1
