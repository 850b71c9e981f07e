// Signals: a handler writes the number to a self-pipe; waiters read the pipe
// through the reactor and keep per-signal counts of deliveries nobody has
// consumed yet.
//
// Why not signalfd: it only sees signals that are blocked in every thread,
// and a library cannot block them in threads it did not create (the main
// thread would still take SIGINT and die). A handler works whatever the
// masks are; it only does async-signal-safe work (one write).
#include "shoal/signal/signal.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "src/runtime/driver/io/async_io.hpp"
#include "src/platform/platform.hpp"

namespace shoal::signal {
namespace {

int g_pipe[2] = {-1, -1};
std::mutex g_install_mu;
std::array<bool, NSIG> g_installed{};
std::array<std::atomic<long>, NSIG> g_pending{};  // deliveries read from the pipe, not yet returned

void on_signal(int signo) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(signo);
  [[maybe_unused]] ssize_t r = ::write(g_pipe[1], &b, 1);  // full pipe: the waiters are behind anyway
  errno = saved;
}

std::string name_of(int signo) {
  const char* d = ::sigabbrev_np(signo);
  return d != nullptr ? std::string("SIG") + d : "signal " + std::to_string(signo);
}

void install(const std::vector<int>& signals) {
  if (signals.size() == 0) throw std::invalid_argument("shoal::signal::wait: the set of signals is empty");
  for (int s : signals) {
    if (s <= 0 || s >= NSIG || s > 255) {
      throw std::invalid_argument("shoal::signal::wait: " + std::to_string(s) + " is not a signal number (1.." +
                                  std::to_string(NSIG - 1) + ")");
    }
    if (s == SIGKILL || s == SIGSTOP) {
      throw std::invalid_argument("shoal::signal::wait: " + name_of(s) + " cannot be caught");
    }
  }
  std::lock_guard<std::mutex> g(g_install_mu);
  if (g_pipe[0] < 0) {
    if (shoal::detail::platform::make_pipe(g_pipe, true) != 0) {
      throw std::system_error(errno, std::generic_category(), "shoal::signal::wait: pipe");
    }
  }
  for (int s : signals) {
    if (g_installed[static_cast<std::size_t>(s)]) continue;
    struct sigaction sa {};
    sa.sa_handler = &on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (::sigaction(s, &sa, nullptr) != 0) {
      throw std::system_error(errno, std::generic_category(), "shoal::signal::wait: sigaction(" + name_of(s) + ")");
    }
    g_installed[static_cast<std::size_t>(s)] = true;
  }
}

/// Moves what the pipe holds into the pending counts. False on EAGAIN.
bool drain(int fd) {
  unsigned char buf[64];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n <= 0) return false;
  for (ssize_t i = 0; i < n; ++i) g_pending[buf[i]].fetch_add(1, std::memory_order_acq_rel);
  return true;
}

/// This wait's own registration of the pipe (a dup: an fd is registered
/// once per reactor, and waiters may be on different runtimes).
struct PipeWatch {
  int fd;
  detail::IoSlot src;
  PipeWatch() : fd(::fcntl(g_pipe[0], F_DUPFD_CLOEXEC, 0)) {
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "shoal::signal::wait: dup");
  }
  ~PipeWatch() {
    src.release();
    ::close(fd);
  }
  PipeWatch(const PipeWatch&) = delete;
  PipeWatch& operator=(const PipeWatch&) = delete;
};

Task<int> wait_for(std::vector<int> wanted) {
  PipeWatch watch;
  detail::IoSource* src = watch.src.get(watch.fd, detail::io::readable);
  co_return co_await detail::async_io(src, detail::io::readable,
                                      [&watch, &wanted](detail::IoAttempt&) -> std::optional<int> {
                                        while (drain(watch.fd)) {
                                        }
                                        for (int s : wanted) {
                                          auto& p = g_pending[static_cast<std::size_t>(s)];
                                          long v = p.load(std::memory_order_acquire);
                                          while (v > 0) {
                                            if (p.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel)) return s;
                                          }
                                        }
                                        return std::nullopt;
                                      });
}

}  // namespace

// Not a coroutine: checks and installs at the call, so a signal sent right
// after the call (before the first await) is already counted.
Task<int> wait(SignalSet signals) {
  std::vector<int> wanted(signals.begin(), signals.end());
  install(wanted);
  return wait_for(std::move(wanted));
}

}  // namespace shoal::signal
