// poll(2) backend. Registrations live in a map; each wait snapshots them.
// A readiness is reported once and the interest is cleared until `rearm`
// arms it again, which is what edge-triggered callers expect.
#include "src/runtime/driver/io/poll/poll_backend.hpp"
#include "src/platform/platform.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace shoal::detail::io {

PollBackend::PollBackend() {
  int fds[2];
  if (platform::make_pipe(fds, true) != 0) {
    throw std::system_error(errno, std::generic_category(), "shoal: pipe (poll backend wake)");
  }
  wake_read_ = fds[0];
  wake_write_ = fds[1];
}

PollBackend::~PollBackend() {
  ::close(wake_read_);
  ::close(wake_write_);
}

void PollBackend::add(int fd, std::uint32_t interest, void* token) {
  ::shoal::detail::shim::lock_guard<::shoal::detail::shim::mutex> g(mu_);
  if (!regs_.emplace(fd, Reg{interest, token}).second) {
    throw std::system_error(EEXIST, std::generic_category(), "shoal: poll backend add");
  }
  wake();
}

void PollBackend::rearm(int fd, std::uint32_t interest, void* token) {
  {
    ::shoal::detail::shim::lock_guard<::shoal::detail::shim::mutex> g(mu_);
    auto it = regs_.find(fd);
    if (it == regs_.end() || it->second.token != token) return;
    if ((it->second.interest & interest) == interest) return;  // armed already: the poller sees it
    it->second.interest |= interest;
  }
  wake();  // the poller re-reads the interest set
}

void PollBackend::remove(int fd) noexcept {
  {
    ::shoal::detail::shim::lock_guard<::shoal::detail::shim::mutex> g(mu_);
    regs_.erase(fd);
  }
  // A poll(2) in progress holds a reference to every file in its set, so a
  // socket closed now would not really close (no FIN or RST goes out) until
  // that poll returns, which may be never if it waits for the peer's answer.
  wake();
}

std::size_t PollBackend::wait(std::chrono::nanoseconds timeout, std::span<Event> out) {
  std::vector<pollfd> pfds;
  {
    ::shoal::detail::shim::lock_guard<::shoal::detail::shim::mutex> g(mu_);
    pfds.reserve(regs_.size() + 1);
    pfds.push_back(pollfd{wake_read_, POLLIN, 0});
    for (auto& [fd, reg] : regs_) {
      short ev = 0;
      if ((reg.interest & readable) != 0) ev |= POLLIN;
      if ((reg.interest & writable) != 0) ev |= POLLOUT;
      if (ev != 0) pfds.push_back(pollfd{fd, ev, 0});
    }
  }
  int ms = -1;
  if (timeout.count() >= 0) ms = static_cast<int>(std::min<std::int64_t>((timeout.count() + 999'999) / 1'000'000, 1 << 30));
  int n = ::poll(pfds.data(), pfds.size(), ms);
  if (n < 0) {
    if (errno == EINTR) return 0;
    throw std::system_error(errno, std::generic_category(), "shoal: poll");
  }
  if ((pfds[0].revents & POLLIN) != 0) {
    char buf[64];
    while (::read(wake_read_, buf, sizeof buf) > 0) {
    }
  }
  std::size_t count = 0;
  ::shoal::detail::shim::lock_guard<::shoal::detail::shim::mutex> g(mu_);
  for (std::size_t i = 1; i < pfds.size() && count < out.size(); ++i) {
    if (pfds[i].revents == 0) continue;
    auto it = regs_.find(pfds[i].fd);
    if (it == regs_.end()) continue;  // removed (maybe reused) while we polled
    std::uint32_t ready = 0;
    if ((pfds[i].revents & (POLLIN | POLLHUP | platform::kPollReadHangup)) != 0) ready |= readable;
    if ((pfds[i].revents & POLLOUT) != 0) ready |= writable;
    if ((pfds[i].revents & platform::kPollReadHangup) != 0) ready |= read_closed;
    if ((pfds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) ready |= readable | writable | read_closed | write_closed;
    it->second.interest &= ~ready;  // one report per arming
    out[count++] = Event{it->second.token, ready};
  }
  return count;
}

void PollBackend::wake() noexcept {
  char c = 1;
  [[maybe_unused]] auto r = ::write(wake_write_, &c, 1);
}

}  // namespace shoal::detail::io
