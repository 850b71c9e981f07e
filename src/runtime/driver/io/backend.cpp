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

namespace shoal::detail::io {

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
  if (std::strcmp(name, "poll") == 0) return std::make_unique<PollBackend>();
  throw std::invalid_argument(std::string("SHOAL_IO_BACKEND=") + name +
                              " is not a backend built into shoal (expected one of:"
#if defined(SHOAL_HAVE_EPOLL)
                              " epoll,"
#endif
#if defined(SHOAL_HAVE_KQUEUE)
                              " kqueue,"
#endif
                              " poll)");
}

}  // namespace shoal::detail::io
