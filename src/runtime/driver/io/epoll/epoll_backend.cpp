// epoll backend: edge-triggered registrations, an eventfd for wake-ups.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

#include "src/runtime/driver/io/epoll/epoll_backend.hpp"

namespace shoal::detail::io {
namespace {

std::uint32_t to_epoll(std::uint32_t interest) {
  std::uint32_t ev = EPOLLET | EPOLLRDHUP;
  if ((interest & readable) != 0) ev |= EPOLLIN;
  if ((interest & writable) != 0) ev |= EPOLLOUT;
  return ev;
}

[[noreturn]] void fail(const char* what, int err) { throw std::system_error(err, std::generic_category(), what); }

}  // namespace

EpollBackend::EpollBackend() {
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) fail("shoal: epoll_create1", errno);
  wakefd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakefd_ < 0) {
    int err = errno;
    ::close(epfd_);
    fail("shoal: eventfd", err);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered: drained on every wake
  ev.data.ptr = this;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, wakefd_, &ev) != 0) {
    int err = errno;
    ::close(wakefd_);
    ::close(epfd_);
    fail("shoal: epoll_ctl(wake eventfd)", err);
  }
}

EpollBackend::~EpollBackend() {
  ::close(wakefd_);
  ::close(epfd_);
}

void EpollBackend::add(int fd, std::uint32_t interest, void* token) {
  epoll_event ev{};
  ev.events = to_epoll(interest);
  ev.data.ptr = token;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) fail("shoal: epoll_ctl(ADD)", errno);
}

void EpollBackend::remove(int fd) noexcept { ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr); }

std::size_t EpollBackend::wait(std::chrono::nanoseconds timeout, std::span<Event> out) {
  epoll_event evs[64];
  int ms = -1;
  if (timeout.count() >= 0) {
    // Round up so a timer is never woken early and re-polled in a spin.
    ms = static_cast<int>(std::min<std::int64_t>((timeout.count() + 999'999) / 1'000'000, 1 << 30));
  }
  const int max = static_cast<int>(std::min<std::size_t>(out.size(), 64));
  int n = ::epoll_wait(epfd_, evs, max > 0 ? max : 1, ms);
  if (n < 0) {
    if (errno == EINTR) return 0;
    fail("shoal: epoll_wait", errno);
  }
  std::size_t count = 0;
  for (int i = 0; i < n; ++i) {
    if (evs[i].data.ptr == this) {
      std::uint64_t v;
      [[maybe_unused]] auto r = ::read(wakefd_, &v, sizeof v);
      continue;
    }
    std::uint32_t ready = 0;
    if ((evs[i].events & (EPOLLIN | EPOLLRDHUP)) != 0) ready |= readable;
    if ((evs[i].events & EPOLLOUT) != 0) ready |= writable;
    if ((evs[i].events & EPOLLRDHUP) != 0) ready |= read_closed;
    if ((evs[i].events & (EPOLLERR | EPOLLHUP)) != 0) ready |= readable | writable | read_closed | write_closed;
    out[count++] = Event{evs[i].data.ptr, ready};
  }
  return count;
}

void EpollBackend::wake() noexcept {
  std::uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(wakefd_, &one, sizeof one);
}

}  // namespace shoal::detail::io
