// The reactor under a runtime: registrations do not leak when blocked I/O is
// cancelled, idle connections cost no thread, and fd numbers reused while
// events are in flight never cross registrations.
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "shoal/testing/registrations.hpp"
#include "shoal/net/stream.hpp"
#include "support/process_stats.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::test::open_fds;
using shoal::test::thread_count;
using shoal::test::raise_fd_limit;
using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::net::Listener;
using shoal::net::Stream;

SHOAL_TEST_SUITE(ReactorTest);

std::span<std::byte> bytes(std::vector<char>& v) { return std::as_writable_bytes(std::span(v)); }

SHOAL_TEST(ReactorTest, CancelledBlockedIoLeavesNoRegistrationOrFdBehind) {
  const std::size_t regs_before = shoal::testing::io_registrations();
  const int fds_before = open_fds();
  {
    auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
    const Address addr = listener.local_address();
    Stream c = co_await shoal::net::connect(addr);  // the backlog completes it
    Stream conn = co_await listener.accept();
    std::vector<char> buf(16);
    // Blocked in a read on each end, in a write that never drains (nobody
    // reads), and in an accept nobody connects to; every one cancelled.
    EXPECT_FALSE((co_await shoal::move_on_after(5ms, conn.read_some(bytes(buf)))).has_value());
    EXPECT_FALSE((co_await shoal::move_on_after(5ms, c.read_some(bytes(buf)))).has_value());
    const std::string big(8 << 20, 'x');
    EXPECT_FALSE(co_await shoal::move_on_after(20ms, conn.write_all(big)));
    EXPECT_FALSE((co_await shoal::move_on_after(5ms, listener.accept())).has_value());
    EXPECT_GT(shoal::testing::io_registrations(), regs_before);
  }
  EXPECT_EQ(shoal::testing::io_registrations(), regs_before) << "a registration leaked";
  EXPECT_EQ(open_fds(), fds_before) << "a file descriptor leaked";
}

SHOAL_TEST(ReactorTest, ThousandsOfIdleConnectionsHoldNoThreadAndANewRequestIsServed) {
  const long want = shoal::test::scaled(2000, 200);
  const rlim_t limit = raise_fd_limit(static_cast<rlim_t>(2 * want + 256));
  const long conns = std::min<long>(want, (static_cast<long>(limit) - 256) / 2);
  if (conns < want) std::printf("note: fd limit %lu allows %ld connections\n", static_cast<unsigned long>(limit), conns);
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  std::atomic<long> accepted{0};
  std::vector<Stream> clients;
  clients.reserve(static_cast<std::size_t>(conns) + 1);
  const int threads_before = thread_count();
  co_await shoal::with_timeout(120s, shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await shoal::scope([&](shoal::Scope& handlers) -> Task<void> {
        for (;;) {
          Stream conn = co_await listener.accept();
          accepted.fetch_add(1);
          // A keep-alive handler: waits without a buffer, answers each line.
          auto handler = [c = std::move(conn)]() mutable -> Task<void> {
            std::vector<char> buf(64);
            for (;;) {
              co_await c.wait_readable();
              const std::size_t n = co_await c.read_some(bytes(buf));
              if (n == 0) co_return;
              co_await c.write_all(std::as_bytes(std::span(buf.data(), n)));
            }
          };
          handlers.spawn(std::move(handler));
        }
      });
    });
    for (long i = 0; i < conns; ++i) clients.push_back(co_await shoal::net::connect(addr));
    while (accepted.load() < conns) co_await shoal::checkpoint();
    EXPECT_EQ(thread_count(), threads_before) << conns << " idle connections changed the thread count";
    // A fresh connection is still served while all of them sit idle.
    Stream fresh = co_await shoal::net::connect(addr);
    co_await fresh.write_all(std::string_view("ping"));
    std::vector<char> back(4);
    co_await shoal::with_timeout(5s, fresh.read_exact(bytes(back)));
    EXPECT_EQ(std::string(back.begin(), back.end()), "ping");
    // And so is one of the idle ones.
    Stream& old = clients[static_cast<std::size_t>(conns / 2)];
    co_await old.write_all(std::string_view("pong"));
    co_await shoal::with_timeout(5s, old.read_exact(bytes(back)));
    EXPECT_EQ(std::string(back.begin(), back.end()), "pong");
    s.cancel();  // the acceptor and every handler
  }));
  clients.clear();
}

SHOAL_TEST(ReactorTest, FdNumbersReusedUnderChurnNeverCrossRegistrations) {
  // Many tasks open, use and close socket pairs as fast as they can, so fd
  // numbers are reused while events for their previous owners are still in
  // flight. Each pair carries its own tag: a crossed registration would wake
  // the wrong task (a hang, caught by the timeout) or deliver foreign bytes;
  // a freed source touched by a late event is what ASan would catch.
  const long rounds = shoal::test::scaled(400, 50);
  std::atomic<long> done{0};
  co_await shoal::with_timeout(60s, shoal::scope([&](shoal::Scope& s) -> Task<void> {
    for (int t = 0; t < 8; ++t) {
      s.spawn([&, t]() -> Task<void> {
        for (long r = 0; r < rounds; ++r) {
          int fds[2];
          if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) throw std::runtime_error("socketpair");
          Stream a(fds[0]), b(fds[1]);
          const char tag[2] = {static_cast<char>('a' + t), static_cast<char>('0' + r % 10)};
          std::vector<char> got(2);
          co_await shoal::scope([&](shoal::Scope& pair) -> Task<void> {
            pair.spawn([&]() -> Task<void> { co_await b.read_exact(bytes(got)); });  // waits first: a registration
            co_await shoal::checkpoint();  // lets the reader register first (a yield)
            co_await a.write_all(std::as_bytes(std::span(tag, 2)));
          });
          if (got[0] != tag[0] || got[1] != tag[1]) ADD_FAILURE() << "foreign bytes on a reused fd";
          done.fetch_add(1);
        }
      });
    }
    co_return;
  }));
  EXPECT_EQ(done.load(), 8 * rounds);
}

SHOAL_TEST(ReactorTest, AReaderAndAWriterStartingAtOnceRegisterTheStreamOnce) {
  // A fresh stream registers at its first operation; a reader and a writer
  // getting there at once on two workers must not both register it.
  const long rounds = shoal::test::scaled(300, 50);
  for (long r = 0; r < rounds; ++r) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) throw std::runtime_error("socketpair");
    Stream a(fds[0]), b(fds[1]);
    std::vector<char> got(1), echoed(1);
    co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> { co_await a.read_exact(bytes(got)); });
      s.spawn([&]() -> Task<void> { co_await a.write_all(std::string_view("q")); });
      co_await b.read_exact(bytes(echoed));
      co_await b.write_all(std::string_view("r"));
    });
    if (got[0] != 'r' || echoed[0] != 'q') ADD_FAILURE() << "round " << r << ": wrong bytes";
  }
}

}  // namespace

namespace {

// Replaces the runtime's epoll (or io_uring) descriptor with a pipe: every
// later wait fails (EINVAL, EOPNOTSUPP), as after a stray close() of that fd.
void break_the_backend_fd(const std::string& kind) {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) std::abort();
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) std::abort();
  while (dirent* e = ::readdir(d)) {
    char link[64] = {};
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    if (::readlink(path.c_str(), link, sizeof link - 1) > 0 && std::string(link) == kind) {
      ::dup2(pipe_fds[0], std::atoi(e->d_name));
    }
  }
  ::closedir(d);
}

// Regression (issue 14.10): a backend whose wait fails for good used to be
// retried forever, one stderr line per pass, a core spinning and every
// timer and socket silently starved.
TEST(ReactorDeathTest, ADriverWhoseBackendCannotWaitFailsClosedNamingTheError) {
  const char* backend = std::getenv("SHOAL_IO_BACKEND");
  if (backend != nullptr && std::string(backend) == "poll") GTEST_SKIP() << "breaks the epoll descriptor";
  if (backend != nullptr && std::string(backend) == "kqueue") {
    GTEST_SKIP() << "breaks the epoll descriptor (over libkqueue, epoll descriptors are libkqueue's own)";
  }
  if (shoal::test::under_emulation()) {
    GTEST_SKIP() << "a threadsafe death test re-executes the binary, which needs binfmt_misc under emulation";
  }
  // On a ring: the io_uring descriptor (where io_uring is refused the
  // runtime falls back to epoll, and so does the expectation).
  const bool ring = backend != nullptr && std::string(backend) == "uring" && shoal::test::io_uring_works();
  const std::string kind = ring ? "anon_inode:[io_uring]" : "anon_inode:[eventpoll]";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        shoal::run([](std::string k) -> Task<void> {
          break_the_backend_fd(k);
          for (int i = 0; i < 100; ++i) co_await shoal::sleep_for(std::chrono::milliseconds(5));
        }(kind));
      },
      ring ? "I/O backend \\(uring\\) cannot wait for events: .*io_uring_enter.*Operation not supported"
           : "I/O backend \\(epoll\\) cannot wait for events: .*epoll_wait.*Invalid argument");
}

}  // namespace
