// Backend conformance: every I/O backend built (epoll, kqueue, poll)
// behind the one seam gives the reactor the same guarantees. No runtime here: the backend
// is driven directly, as the scheduler's driver holder does.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/runtime/driver/io/backend.hpp"
#include "src/runtime/driver/io/poll/poll_backend.hpp"
#include "src/platform/platform.hpp"
#if defined(SHOAL_HAVE_EPOLL)
#include "src/runtime/driver/io/epoll/epoll_backend.hpp"
#endif
#if defined(SHOAL_HAVE_KQUEUE)
#include "src/runtime/driver/io/kqueue/kqueue_backend.hpp"
#endif

namespace {

using namespace std::chrono_literals;
namespace io = shoal::detail::io;

constexpr std::uint32_t kBoth = io::readable | io::writable;

std::unique_ptr<io::Backend> make(const std::string& name) {
#if defined(SHOAL_HAVE_EPOLL)
  if (name == "epoll") return std::make_unique<io::EpollBackend>();
#endif
#if defined(SHOAL_HAVE_KQUEUE)
  if (name == "kqueue") return std::make_unique<io::KqueueBackend>();
#endif
  return std::make_unique<io::PollBackend>();
}

std::vector<std::string> backends() {
  std::vector<std::string> v;
#if defined(SHOAL_HAVE_EPOLL)
  v.push_back("epoll");
#endif
#if defined(SHOAL_HAVE_KQUEUE)
  v.push_back("kqueue");
#endif
  v.push_back("poll");
  return v;
}

struct Pair {
  int a = -1, b = -1;
  Pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
    a = fds[0];
    b = fds[1];
  }
  ~Pair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
};

class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<io::Backend> backend = make(GetParam());
  int tokens[4] = {};
  void* token(int i) { return &tokens[i]; }

  /// One wait; re-arms what was reported where the backend needs it, as
  /// the reactor does when a task waits again.
  std::vector<io::Event> wait(std::chrono::milliseconds timeout, const std::vector<std::pair<int, void*>>& rearm = {}) {
    std::array<io::Event, 16> out{};
    const std::size_t n = backend->wait(timeout, out);
    if (backend->needs_rearm()) {
      for (auto [fd, tok] : rearm) backend->rearm(fd, kBoth, tok);
    }
    return {out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n)};
  }
  /// Waits (up to 5 s) for an event on `tok`; returns its bits, 0 if none came.
  std::uint32_t wait_for(void* tok, int fd) {
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < until) {
      for (const io::Event& e : wait(100ms, {{fd, tok}})) {
        if (e.token == tok) return e.ready;
      }
    }
    return 0;
  }
  /// Reads everything pending, so the next readable edge is a new one.
  static void drain(int fd) {
    char buf[4096];
    while (::read(fd, buf, sizeof buf) > 0) {
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, BackendTest, ::testing::ValuesIn(backends()),
                         [](const auto& info) { return info.param; });

TEST_P(BackendTest, ANewSocketIsWritableAndBecomesReadableWhenDataArrives) {
  Pair p;
  backend->add(p.a, kBoth, token(0));
  EXPECT_EQ(wait_for(token(0), p.a) & io::writable, io::writable);
  ASSERT_EQ(::write(p.b, "x", 1), 1);
  std::uint32_t bits = 0;
  for (int i = 0; i < 5 && (bits & io::readable) == 0; ++i) bits |= wait_for(token(0), p.a);
  EXPECT_NE(bits & io::readable, 0u) << "data arrived but no readable event";
  backend->remove(p.a);
}

TEST_P(BackendTest, NothingReadyReportsNothing) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
  backend->add(fds[0], io::readable, token(0));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(wait(10ms, {{fds[0], token(0)}}).empty());  // may return early (a wake), never with an event
  backend->remove(fds[0]);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_P(BackendTest, HangUpWakesBothTheReaderAndTheWriter) {
  Pair p;
  backend->add(p.a, kBoth, token(0));
  (void)wait_for(token(0), p.a);  // the initial writable report
  ::close(p.b);
  p.b = -1;
  constexpr std::uint32_t kAll = kBoth | io::closed(kBoth);
  std::uint32_t bits = 0;
  for (int i = 0; i < 5 && bits != kAll; ++i) bits |= wait_for(token(0), p.a);
  EXPECT_EQ(bits, kAll) << "a hang-up must wake a reader and a writer, and close both directions for good";
  backend->remove(p.a);
}

TEST_P(BackendTest, AnErrorWakesBothTheReaderAndTheWriter) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
  backend->add(fds[1], kBoth, token(0));  // the write end
  (void)wait_for(token(0), fds[1]);
  ::close(fds[0]);  // writing now fails (EPIPE): an error condition
  constexpr std::uint32_t kAll = kBoth | io::closed(kBoth);
  std::uint32_t bits = 0;
  for (int i = 0; i < 5 && bits != kAll; ++i) bits |= wait_for(token(0), fds[1]);
  EXPECT_EQ(bits, kAll);
  backend->remove(fds[1]);
  ::close(fds[1]);
}

TEST_P(BackendTest, WakeReturnsAWaitBlockedForever) {
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    std::array<io::Event, 4> out{};
    (void)backend->wait(std::chrono::nanoseconds(-1), out);
    returned = true;
  });
  std::this_thread::sleep_for(20ms);  // let it block (if it has not, wake still makes it return)
  backend->wake();
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!returned && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(returned.load()) << "wake() did not return a blocked wait";
  if (!returned) backend->wake();
  waiter.join();
}

TEST_P(BackendTest, ARemovedFdReportsNothingMore) {
  Pair p;
  backend->add(p.a, kBoth, token(0));
  (void)wait_for(token(0), p.a);
  backend->remove(p.a);
  ASSERT_EQ(::write(p.b, "x", 1), 1);
  for (const io::Event& e : wait(30ms)) EXPECT_NE(e.token, token(0)) << "an event for a removed registration";
}

TEST_P(BackendTest, AnFdNumberReusedAtOnceNeverGetsTheOldRegistrationsEvent) {
  // The old registration is made ready, then its fd is removed and closed and
  // the number reused before any wait: only the new token may be reported.
  Pair p;
  backend->add(p.a, kBoth, token(0));
  ASSERT_EQ(::write(p.b, "x", 1), 1);  // pending readiness on the old registration
  const int number = p.a;
  backend->remove(p.a);
  ::close(p.a);
  p.a = -1;
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
  if (fds[1] == number) {  // the write end took the number (another thread's fds moved): move it away
    const int moved = ::fcntl(fds[1], F_DUPFD_CLOEXEC, number + 1);
    ASSERT_GE(moved, 0);
    ::close(fds[1]);
    fds[1] = moved;
  }
  int reused = fds[0];
  if (reused != number) {  // take the number explicitly if the kernel did not
    ASSERT_EQ(::dup3(fds[0], number, O_CLOEXEC), number);
    ::close(fds[0]);
    reused = number;
  }
  backend->add(reused, io::readable, token(1));
  bool new_reported = false;
  ASSERT_EQ(::write(fds[1], "y", 1), 1);
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (!new_reported && std::chrono::steady_clock::now() < until) {
    for (const io::Event& e : wait(50ms, {{reused, token(1)}})) {
      EXPECT_NE(e.token, token(0)) << "the reused fd number got the old registration's event";
      new_reported = new_reported || e.token == token(1);
    }
  }
  EXPECT_TRUE(new_reported);
  backend->remove(reused);
  ::close(reused);
  ::close(fds[1]);
}

TEST_P(BackendTest, EdgesAreReportedOncePerArrivalNotWhileTheDataSits) {
  Pair p;
  backend->add(p.a, io::readable, token(0));
  ASSERT_EQ(::write(p.b, "x", 1), 1);
  bool reported = false;
  for (int i = 0; i < 50 && !reported; ++i) {
    for (const io::Event& e : wait(100ms)) reported = reported || e.token == token(0);  // no re-arm
  }
  EXPECT_TRUE(reported);
  // Nothing new arrived and nothing was re-armed: a waiting reactor must not spin.
  for (const io::Event& e : wait(30ms)) EXPECT_NE(e.token, token(0)) << "readiness reported again without a new edge";
  drain(p.a);
  backend->remove(p.a);
}

// More fds ready at once than one wait has slots: each is reported by this
// wait or the next, none lost. (libkqueue fills the slots from as many epoll
// events as there are slots, so an fd whose two filters both fire takes two:
// with a standing write filter, half the read edges of a busy wait were lost.)
TEST_P(BackendTest, ManyFdsReadyAtOnceAreAllReportedThoughTheyOutnumberTheSlots) {
  constexpr int kFds = 150;
  std::vector<std::unique_ptr<Pair>> pairs;
  std::vector<int> toks(kFds);
  for (int i = 0; i < kFds; ++i) {
    pairs.push_back(std::make_unique<Pair>());
    backend->add(pairs.back()->a, kBoth, &toks[static_cast<std::size_t>(i)]);
  }
  std::array<io::Event, 64> out{};
  while (backend->wait(50ms, out) != 0) {
  }  // the first writable reports, where a backend gives them
  for (auto& p : pairs) ASSERT_EQ(::write(p->b, "x", 1), 1);
  std::vector<bool> seen(kFds);
  int count = 0;
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (count < kFds && std::chrono::steady_clock::now() < until) {
    const std::size_t n = backend->wait(100ms, out);
    for (std::size_t i = 0; i < n; ++i) {
      if ((out[i].ready & io::readable) == 0) continue;
      const auto k = static_cast<std::size_t>(static_cast<int*>(out[i].token) - toks.data());
      if (!seen[k]) {
        seen[k] = true;
        ++count;
      }
    }
  }
  EXPECT_EQ(count, kFds) << "a readable edge was lost when more fds were ready than the wait had slots";
  for (auto& p : pairs) backend->remove(p->a);
}

}  // namespace
