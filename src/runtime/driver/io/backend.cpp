// Backend selection: SHOAL_IO_BACKEND at run time, the platform default otherwise.
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "src/runtime/driver/io/backend.hpp"
#include "src/runtime/driver/io/poll/poll_backend.hpp"
#include "src/platform/platform.hpp"
#if defined(SHOAL_HAVE_EPOLL)
#include "src/runtime/driver/io/epoll/epoll_backend.hpp"
#endif
#if defined(SHOAL_HAVE_KQUEUE)
#include "src/runtime/driver/io/kqueue/kqueue_backend.hpp"
#endif
#if defined(SHOAL_HAVE_URING)
#include <cstdio>

#include "src/runtime/driver/io/uring/uring_backend.hpp"
#endif

namespace shoal::detail::io {

#if defined(SHOAL_HAVE_URING)
namespace {
/// io_uring where the kernel allows it, else epoll, saying why on one line
/// (each runtime probes as it starts).
std::unique_ptr<Backend> make_uring_or_epoll() {
  try {
    return std::make_unique<UringBackend>();
  } catch (const RingUnavailable& e) {
    std::fprintf(stderr, "shoal: SHOAL_IO_BACKEND=uring: %s; using epoll\n", e.what());
    return std::make_unique<EpollBackend>();
  }
}
}  // namespace
#endif

std::unique_ptr<Backend> make_backend() {
  const char* name = std::getenv("SHOAL_IO_BACKEND");
  if (name == nullptr || *name == '\0') {
#if defined(SHOAL_HAVE_EPOLL)
    return std::make_unique<EpollBackend>();
#elif defined(SHOAL_HAVE_KQUEUE)
    return std::make_unique<KqueueBackend>();
#else
    return std::make_unique<PollBackend>();
#endif
  }
#if defined(SHOAL_HAVE_EPOLL)
  if (std::strcmp(name, "epoll") == 0) return std::make_unique<EpollBackend>();
#endif
#if defined(SHOAL_HAVE_KQUEUE)
  if (std::strcmp(name, "kqueue") == 0) return std::make_unique<KqueueBackend>();
#endif
#if defined(SHOAL_HAVE_URING)
  if (std::strcmp(name, "uring") == 0) return make_uring_or_epoll();
#endif
  if (std::strcmp(name, "poll") == 0) return std::make_unique<PollBackend>();
  throw std::invalid_argument(std::string("SHOAL_IO_BACKEND=") + name +
                              " is not a backend built into shoal (expected one of:"
#if defined(SHOAL_HAVE_EPOLL)
                              " epoll,"
#endif
#if defined(SHOAL_HAVE_KQUEUE)
                              " kqueue,"
#endif
#if defined(SHOAL_HAVE_URING)
                              " uring,"
#endif
                              " poll)");
}

}  // namespace shoal::detail::io
