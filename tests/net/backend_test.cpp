// Backend conformance: every I/O backend built (epoll, kqueue, uring, poll)
// behind the one seam gives the reactor the same guarantees; and the uring
// backend's fallback to epoll where the kernel refuses io_uring. No runtime here: the backend
// is driven directly, as the scheduler's driver holder does.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "src/runtime/driver/io/backend.hpp"
#include "support/test_support.hpp"
#include "src/runtime/driver/io/poll/poll_backend.hpp"
#include "src/platform/platform.hpp"
#if defined(SHOAL_HAVE_EPOLL)
#include "src/runtime/driver/io/epoll/epoll_backend.hpp"
#endif
#if defined(SHOAL_HAVE_KQUEUE)
#include "src/runtime/driver/io/kqueue/kqueue_backend.hpp"
#endif
#if defined(SHOAL_HAVE_URING)
#include "src/runtime/driver/io/uring/uring_backend.hpp"
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
#if defined(SHOAL_HAVE_URING)
  if (name == "uring") return std::make_unique<io::UringBackend>();  // throws RingUnavailable where refused
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
#if defined(SHOAL_HAVE_URING)
  v.push_back("uring");
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
  void SetUp() override {
#if defined(SHOAL_HAVE_URING)
    try {
      backend = make(GetParam());
    } catch (const io::RingUnavailable& e) {
      GTEST_SKIP() << "io_uring is unavailable here: " << e.what();
    }
#else
    backend = make(GetParam());
#endif
  }
  std::unique_ptr<io::Backend> backend;
  int tokens[4] = {};
  void* token(int i) { return &tokens[i]; }

  /// One wait; re-arms what was reported where the backend needs it, as
  /// the reactor does when a task waits again. Not inlined: g++ 12 at -O3
  /// (the aarch64 cross build) inlines the vector built from the array into
  /// a caller and warns, falsely, that it frees a non-heap pointer.
  [[gnu::noinline]] std::vector<io::Event> wait(std::chrono::milliseconds timeout, const std::vector<std::pair<int, void*>>& rearm = {}) {
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

// The parker's contract (src/runtime/parker.hpp): a wake before a wait
// makes that wait return at once, one during it makes it return; none is
// lost, whichever comes first, whichever thread waits (the driver moves
// between workers; the one that waited last sleeps elsewhere meanwhile, as
// a parked worker does on its futex).
TEST_P(BackendTest, EveryWakeReturnsTheWaitItWasForOnWhicheverThreadWaits) {
  constexpr int kRounds = 1000;
  std::atomic<int> turn{0};     // the round whose wait may begin
  std::atomic<int> waited{-1};  // the last round whose wait returned
  std::atomic<bool> lost{false};
  auto waiter = [&](int parity) {
    std::array<io::Event, 4> out{};
    for (int round = parity; round < kRounds && !lost.load(); round += 2) {
      for (int t = turn.load(); t < round && !lost.load(); t = turn.load()) turn.wait(t);  // asleep in a futex
      if (lost.load()) break;
      const auto until = std::chrono::steady_clock::now() + 5s;
      (void)backend->wait(5s, out);  // returns for this round's wake, or a leftover one: never runs out
      if (std::chrono::steady_clock::now() >= until) {
        lost = true;
        ADD_FAILURE() << "round " << round << ": a wake was lost (the wait ran to its 5 s limit)";
      }
      waited.store(round);
      waited.notify_all();
      turn.store(round + 1);
      turn.notify_all();
    }
  };
  std::thread w0(waiter, 0), w1(waiter, 1);
  for (int round = 0; round < kRounds && !lost.load(); ++round) {
    for (int t = turn.load(); t < round && !lost.load(); t = turn.load()) turn.wait(t);
    if (round % 2 == 0) std::this_thread::yield();  // before the wait, or during it
    backend->wake();
    for (int w = waited.load(); w < round && !lost.load(); w = waited.load()) waited.wait(w);
  }
  lost = true;  // (ends the waiters if a round failed)
  turn.store(kRounds + 1);
  turn.notify_all();
  w0.join();
  w1.join();
}

// Each arrival on a drained fd is an edge, reported whichever thread
// registered the fd and wherever that thread is now (a ring posts a poll's
// events from the thread that armed it: here each fd's registrar sleeps on a
// futex, as a parked worker does).
TEST_P(BackendTest, EveryArrivalOnADrainedFdIsReportedWhicheverThreadRegisteredIt) {
  constexpr int kFds = 8, kRounds = 2000;
  std::vector<std::unique_ptr<Pair>> pairs;
  std::vector<int> toks(kFds);
  std::atomic<int> registered{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> registrars;
  for (int i = 0; i < kFds; ++i) pairs.push_back(std::make_unique<Pair>());
  for (int i = 0; i < kFds; ++i) {
    registrars.emplace_back([&, i] {
      backend->add(pairs[static_cast<std::size_t>(i)]->a, io::readable | io::writable, &toks[static_cast<std::size_t>(i)]);
      registered.fetch_add(1);
      registered.notify_all();
      done.wait(false);
    });
  }
  for (int n = registered.load(); n < kFds; n = registered.load()) registered.wait(n);
  std::array<io::Event, 16> out{};
  for (int round = 0; round < kRounds; ++round) {
    const auto i = static_cast<std::size_t>(round % kFds);
    ASSERT_EQ(::write(pairs[i]->b, "x", 1), 1);
    bool seen = false;
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (!seen && std::chrono::steady_clock::now() < until) {
      const std::size_t n = backend->wait(100ms, out);
      for (std::size_t k = 0; k < n; ++k) seen = seen || (out[k].token == &toks[i] && (out[k].ready & io::readable) != 0);
      if (backend->needs_rearm()) backend->rearm(pairs[i]->a, io::readable | io::writable, &toks[i]);
    }
    if (!seen) {
      ADD_FAILURE() << "round " << round << ": the arrival on fd " << i << " was never reported";
      break;
    }
    drain(pairs[i]->a);
  }
  done = true;
  done.notify_all();
  for (auto& t : registrars) t.join();
  for (auto& p : pairs) backend->remove(p->a);
}

// Readiness is reported as it is when the wait harvests it, not as it was
// when it arose: bytes read before the wait are not "readable" any more.
// (A ring's poll completion carries the mask of its wake-up; trusted, the
// HTTP/2 connection's wait_readable returned for bytes already read, and its
// read then waited with no limit for a client that had nothing more to say.)
TEST_P(BackendTest, DataReadBeforeTheWaitIsNotReportedReadable) {
  Pair p;
  ASSERT_EQ(::write(p.b, "x", 1), 1);
  backend->add(p.a, kBoth, token(0));  // readable as it is registered
  drain(p.a);                          // and read before any wait
  const auto until = std::chrono::steady_clock::now() + 50ms;
  while (std::chrono::steady_clock::now() < until) {
    for (const io::Event& e : wait(10ms, {{p.a, token(0)}})) {
      if (e.token == token(0)) {
        EXPECT_EQ(e.ready & io::readable, 0u) << "readable reported for bytes already read";
      }
    }
  }
  backend->remove(p.a);
}

TEST_P(BackendTest, ARemovedFdReportsNothingMore) {
  Pair p;
  backend->add(p.a, kBoth, token(0));
  (void)wait_for(token(0), p.a);
  backend->remove(p.a);
  ASSERT_EQ(::write(p.b, "x", 1), 1);
  // The whole 30 ms, though a wait returns early (the removal's own
  // completions, on a ring): a late event must be seen if there is one.
  const auto until = std::chrono::steady_clock::now() + 30ms;
  while (std::chrono::steady_clock::now() < until) {
    for (const io::Event& e : wait(10ms)) EXPECT_NE(e.token, token(0)) << "an event for a removed registration";
  }
}

// A removal that races the fd's events must still let go of it: closed, the
// peer sees the end. (On a ring, IORING_OP_POLL_REMOVE fails with EALREADY
// while the request is busy posting an event, and the request, armed for
// good, held the socket open: a reader on four workers never saw its EOF.)
TEST_P(BackendTest, AnFdRemovedWhileItsEventsArriveIsReallyClosedByClose) {
  std::array<io::Event, 16> out{};
  for (int round = 0; round < 100; ++round) {
    Pair p;
    // Registered by another thread, which then sleeps, as a parked worker
    // does (a ring posts a poll's events from the thread that armed it).
    std::atomic<bool> added{false}, done{false};
    std::thread adder([&] {
      backend->add(p.a, kBoth, token(0));
      added = true;
      added.notify_one();
      done.wait(false);
    });
    added.wait(false);
    std::atomic<bool> stop{false};
    std::thread writer([&] {
      while (!stop.load(std::memory_order_relaxed)) (void)::send(p.b, "x", 1, MSG_NOSIGNAL);  // an event on a per byte
    });
    std::this_thread::sleep_for(std::chrono::microseconds(50 * (round % 8)));  // the remove lands anywhere in the stream
    backend->remove(p.a);
    ::close(p.a);
    p.a = -1;
    stop = true;
    writer.join();
    pollfd pf{p.b, POLLIN | POLLRDHUP, 0};
    const int seen = ::poll(&pf, 1, 2000);
    done = true;
    done.notify_one();
    adder.join();
    ASSERT_EQ(seen, 1) << "round " << round << ": the peer never saw the close";
    EXPECT_NE(pf.revents & (POLLHUP | POLLRDHUP), 0) << "round " << round;
    for (int i = 0; i < 64; ++i) (void)backend->wait(0ms, out);  // what the removed registration left
  }
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

#if defined(SHOAL_HAVE_URING)
// SHOAL_IO_BACKEND=uring where the kernel refuses io_uring: epoll, and one
// line on stderr that says why in the words an operator acts on. Each way a
// machine refuses is driven through the set-up seam (src/runtime/driver/io/uring/ring.hpp).
class UringFallback : public ::testing::Test {
 protected:
  void TearDown() override {
    namespace sys = shoal::detail::sys;
    sys::uring_setup = setup_;
    sys::uring_register = register_;
    sys::uring_disabled_sysctl = sysctl_;
  }
  /// The backend make_backend picks, and what it said on stderr.
  static std::pair<std::string, std::string> pick() {
    ::testing::internal::CaptureStderr();
    const std::unique_ptr<io::Backend> b = io::make_backend();
    return {b->name(), ::testing::internal::GetCapturedStderr()};
  }
  static inline int errno_to_fail = 0;
  static inline int sysctl_value = -1;
  static int failing_setup(unsigned, io_uring_params*) {
    errno = errno_to_fail;
    return -1;
  }
  static int sysctl() { return sysctl_value; }

 private:
  shoal::detail::sys::UringSetup setup_ = shoal::detail::sys::uring_setup;
  shoal::detail::sys::UringRegister register_ = shoal::detail::sys::uring_register;
  shoal::detail::sys::UringDisabledSysctl sysctl_ = shoal::detail::sys::uring_disabled_sysctl;
  shoal::test::EnvGuard env_{"SHOAL_IO_BACKEND", "uring"};
};

TEST_F(UringFallback, ASeccompFilterFallsBackToEpollAndIsNamed) {
  errno_to_fail = EPERM;
  sysctl_value = 0;
  shoal::detail::sys::uring_setup = failing_setup;
  shoal::detail::sys::uring_disabled_sysctl = sysctl;
  const auto [name, said] = pick();
  EXPECT_EQ(name, "epoll");
  EXPECT_NE(said.find("SHOAL_IO_BACKEND=uring: io_uring_setup failed (Operation not permitted): refused by a seccomp filter"),
            std::string::npos) << said;
  EXPECT_NE(said.find("; using epoll\n"), std::string::npos) << said;
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << "one line: " << said;
}

TEST_F(UringFallback, TheSysctlThatDisablesIoUringIsNamed) {
  errno_to_fail = EPERM;
  shoal::detail::sys::uring_setup = failing_setup;
  shoal::detail::sys::uring_disabled_sysctl = sysctl;
  sysctl_value = 2;
  auto [name, said] = pick();
  EXPECT_EQ(name, "epoll");
  EXPECT_NE(said.find("the sysctl kernel.io_uring_disabled is 2"), std::string::npos) << said;
  sysctl_value = 1;
  std::tie(name, said) = pick();
  EXPECT_EQ(name, "epoll");
  EXPECT_NE(said.find("kernel.io_uring_disabled is 1 and this process is not in kernel.io_uring_group"),
            std::string::npos) << said;
}

TEST_F(UringFallback, AKernelWithoutIoUringIsNamed) {
  errno_to_fail = ENOSYS;
  shoal::detail::sys::uring_setup = failing_setup;
  const auto [name, said] = pick();
  EXPECT_EQ(name, "epoll");
  EXPECT_NE(said.find("this kernel has no io_uring"), std::string::npos) << said;
}

TEST_F(UringFallback, AKernelThatLacksAnOperationIsNamed) {
  // The real ring, and a probe that answers as a kernel from before poll
  // requests (5.1) would: operations 0 to 5 only.
  shoal::detail::sys::uring_register = [](int, unsigned op, void* arg, unsigned n) {
    if (op != IORING_REGISTER_PROBE) return -1;
    auto* probe = static_cast<io_uring_probe*>(arg);
    probe->last_op = IORING_OP_POLL_ADD - 1;
    for (unsigned i = 0; i < n && i < IORING_OP_POLL_ADD; ++i) probe->ops[i].flags = IO_URING_OP_SUPPORTED;
    return 0;
  };
  const auto [name, said] = pick();
  if (said.find("io_uring_setup failed") != std::string::npos) GTEST_SKIP() << "no io_uring here at all: " << said;
  EXPECT_EQ(name, "epoll");
  EXPECT_NE(said.find("this kernel's io_uring lacks operation " + std::to_string(IORING_OP_POLL_ADD)),
            std::string::npos) << said;
}

// A kernel from before IORING_SETUP_COOP_TASKRUN (5.19) refuses the flag
// with EINVAL: the ring is set up without it, and nothing is said.
TEST_F(UringFallback, AKernelWithoutCooperativeTaskRunStillGetsARing) {
  static int refused = 0;
  refused = 0;
  shoal::detail::sys::uring_setup = [](unsigned entries, io_uring_params* p) {
    if ((p->flags & IORING_SETUP_COOP_TASKRUN) != 0) {
      ++refused;
      errno = EINVAL;
      return -1;
    }
    return static_cast<int>(::syscall(__NR_io_uring_setup, entries, p));
  };
  const auto [name, said] = pick();
  if (said.find("io_uring_setup failed") != std::string::npos) GTEST_SKIP() << "no io_uring here: " << said;
  EXPECT_EQ(refused, 1) << "the set-up never asked for cooperative task running";
  EXPECT_EQ(name, "uring");
  EXPECT_EQ(said, "");
}

TEST_F(UringFallback, WhereIoUringWorksItIsUsedAndNothingIsSaid) {
  const auto [name, said] = pick();
  if (said.find("io_uring_setup failed") != std::string::npos) GTEST_SKIP() << "no io_uring here: " << said;
  EXPECT_EQ(name, "uring");
  EXPECT_EQ(said, "");
}
#endif

}  // namespace
