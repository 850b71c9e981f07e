// kqueue backend: EVFILT_READ registered once per fd, edge-triggered
// (EV_CLEAR), for the fd's lifetime; EVFILT_WRITE added one-shot when a
// writer waits (rearm); an EVFILT_USER event for wake-ups; removal
// (EV_DELETE) before the owner closes the fd. docs/reactor.md says why
// signals and child exits stay outside it.
//
// Why writability is one-shot: most sockets are writable almost always, so
// a standing EVFILT_WRITE would come back with every read edge. libkqueue
// keeps an fd's two filters in one epoll registration and fills the
// caller's slots from as many epoll events as there are slots: an fd that
// yields two events can leave no room for the next fd's, whose edge is
// then lost (mheily/libkqueue#89 is the one-slot case). With the write
// filter present only while a writer waits, an fd yields two events only
// then; native kqueue queues every event and never loses one. A writer's
// wait costs one kevent call, as libuv's and Tokio's do on kqueue.
#include <sys/event.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <system_error>

#include "src/runtime/driver/io/kqueue/kqueue_backend.hpp"

namespace shoal::detail::io {
namespace {

constexpr std::uintptr_t kWakeIdent = 0;  // EVFILT_USER's own identifier space: no fd

[[noreturn]] void fail(const char* what, int err) { throw std::system_error(err, std::generic_category(), what); }

struct kevent change(std::uintptr_t ident, short filter, unsigned short flags, unsigned int fflags, void* udata) {
  struct kevent k;
  EV_SET(&k, ident, filter, flags, fflags, 0, udata);
  return k;
}

}  // namespace

KqueueBackend::KqueueBackend() {
  kq_ = ::kqueue();
  if (kq_ < 0) fail("shoal: kqueue", errno);
  // Not inherited by a native fork anyway; libkqueue's is an ordinary fd.
  ::fcntl(kq_, F_SETFD, FD_CLOEXEC);
  struct kevent wake = change(kWakeIdent, EVFILT_USER, EV_ADD | EV_CLEAR, 0, this);
  if (::kevent(kq_, &wake, 1, nullptr, 0, nullptr) != 0) {
    const int err = errno;
    ::close(kq_);
    fail("shoal: kevent(EVFILT_USER wake)", err);
  }
}

KqueueBackend::~KqueueBackend() { ::close(kq_); }

void KqueueBackend::add(int fd, std::uint32_t interest, void* token) {
  const auto ident = static_cast<std::uintptr_t>(fd);
  shim::lock_guard<shim::mutex> g(mu_);
  if (static_cast<std::size_t>(fd) >= tokens_.size()) tokens_.resize(static_cast<std::size_t>(fd) + 1, nullptr);
  // Readability always; writability is assumed until a write says EAGAIN
  // (the reactor tries first), or asked for by rearm when nothing is.
  struct kevent ch = change(ident, EVFILT_READ, EV_ADD | EV_CLEAR, 0, token);
  if (::kevent(kq_, &ch, 1, nullptr, 0, nullptr) != 0) fail("shoal: kevent(EVFILT_READ, EV_ADD)", errno);
  tokens_[static_cast<std::size_t>(fd)] = token;
  if ((interest & writable) != 0 && (interest & readable) == 0) arm_write_locked(fd, token);
}

void KqueueBackend::rearm(int fd, std::uint32_t interest, void* token) {
  if ((interest & writable) == 0) return;  // readability stays registered
  shim::lock_guard<shim::mutex> g(mu_);
  if (static_cast<std::size_t>(fd) >= tokens_.size() || tokens_[static_cast<std::size_t>(fd)] != token) return;
  arm_write_locked(fd, token);
}

void KqueueBackend::arm_write_locked(int fd, void* token) {
  // Reported at once if the fd is writable now: a writer that waits after
  // EAGAIN and finds room freed meanwhile is not stranded.
  struct kevent ch = change(static_cast<std::uintptr_t>(fd), EVFILT_WRITE, EV_ADD | EV_ONESHOT | EV_CLEAR, 0, token);
  if (::kevent(kq_, &ch, 1, nullptr, 0, nullptr) != 0) fail("shoal: kevent(EVFILT_WRITE, EV_ADD)", errno);
}

void KqueueBackend::remove(int fd) noexcept {
  // One change per call: the write filter is usually absent (ENOENT),
  // which must not keep the read filter from going. libkqueue keeps state
  // for a closed fd that was not deleted first: this runs before every close.
  const auto ident = static_cast<std::uintptr_t>(fd);
  shim::lock_guard<shim::mutex> g(mu_);
  if (static_cast<std::size_t>(fd) < tokens_.size()) tokens_[static_cast<std::size_t>(fd)] = nullptr;
  for (short filter : {EVFILT_READ, EVFILT_WRITE}) {
    struct kevent ch = change(ident, filter, EV_DELETE, 0, nullptr);
    (void)::kevent(kq_, &ch, 1, nullptr, 0, nullptr);
  }
}

void KqueueBackend::add_process(int pid, void* token) {
  // One-shot by nature: the knote goes with the process. Over libkqueue
  // only a direct child can be watched, which a spawned Child is.
  struct kevent ch = change(static_cast<std::uintptr_t>(pid), EVFILT_PROC, EV_ADD | EV_ONESHOT, NOTE_EXIT, token);
  if (::kevent(kq_, &ch, 1, nullptr, 0, nullptr) != 0 && errno != ESRCH) {
    fail("shoal: kevent(EVFILT_PROC, EV_ADD)", errno);  // ESRCH: exited already, the first reap finds it
  }
}

void KqueueBackend::remove_process(int pid) noexcept {
  struct kevent ch = change(static_cast<std::uintptr_t>(pid), EVFILT_PROC, EV_DELETE, 0, nullptr);
  (void)::kevent(kq_, &ch, 1, nullptr, 0, nullptr);  // ENOENT: it fired (one-shot) or never went in
}

std::size_t KqueueBackend::wait(std::chrono::nanoseconds timeout, std::span<Event> out) {
  struct kevent evs[64];
  timespec ts{};
  timespec* tsp = nullptr;
  if (timeout.count() >= 0) {
    ts.tv_sec = static_cast<std::time_t>(timeout.count() / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
    tsp = &ts;
  }
  // Never one slot: libkqueue can lose a write event with nevents == 1
  // (mheily/libkqueue#89). The driver passes 64 slots; a caller passing
  // one would lose the second of two fds ready together.
  const int max = static_cast<int>(std::clamp<std::size_t>(out.size(), 2, 64));
  const int n = ::kevent(kq_, nullptr, 0, evs, max, tsp);
  if (n < 0) {
    if (errno == EINTR) return 0;
    fail("shoal: kevent(wait)", errno);
  }
  std::size_t count = 0;
  for (int i = 0; i < n && count < out.size(); ++i) {
    const struct kevent& k = evs[i];
    if (k.filter == EVFILT_USER) continue;  // a wake: returning was its purpose
    std::uint32_t ready = 0;
    if ((k.flags & EV_ERROR) != 0) {
      ready = readable | writable | read_closed | write_closed;
    } else if (k.filter == EVFILT_READ) {
      ready = readable;
      if ((k.flags & EV_EOF) != 0) ready |= read_closed;
    } else if (k.filter == EVFILT_WRITE) {
      ready = writable;
      if ((k.flags & EV_EOF) != 0) ready |= write_closed;
    } else if (k.filter == EVFILT_PROC) {
      ready = readable | read_closed;  // the child exited: final
    } else {
      continue;
    }
    // EV_EOF with an error (fflags: the socket's errno, e.g. a reset) fails
    // both directions, as epoll's EPOLLERR does.
    if ((k.flags & EV_EOF) != 0 && k.fflags != 0) ready |= readable | writable | read_closed | write_closed;
    // One event per fd, as epoll gives it: its two filters come apart here
    // (usually next to each other).
    std::size_t j = count;
    while (j > 0 && out[j - 1].token != k.udata) --j;
    if (j > 0) {
      out[j - 1].ready |= ready;
    } else {
      out[count++] = Event{k.udata, ready};
    }
  }
  return count;
}

void KqueueBackend::wake() noexcept {
  // A native kevent is one syscall; libkqueue's takes its own locks (no
  // caller in shoal wakes from a signal handler: signals use a self-pipe).
  struct kevent k = change(kWakeIdent, EVFILT_USER, 0, NOTE_TRIGGER, this);
  (void)::kevent(kq_, &k, 1, nullptr, 0, nullptr);
}

}  // namespace shoal::detail::io
