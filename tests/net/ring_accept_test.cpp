// Listener::accept on a uring runtime (SHOAL_IO_BACKEND=uring): the kernel
// runs the accept (IORING_OP_ACCEPT, a CompletionOp). The structured cancel:
// a cancelled accept takes no connection, and one the kernel completed as
// the cancel came closes the connection it got rather than return it to a
// task that was cancelled. Skipped, saying why, where io_uring is refused.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "shoal/shoal.hpp"
#include "shoal/testing/registrations.hpp"
#include "support/process_stats.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;
using shoal::net::Address;
using shoal::net::Listener;
using shoal::net::Stream;

/// A blocking client socket connected to `to` (loopback: the handshake is
/// over when connect returns, the connection in the listener's backlog).
int connect_blocking(const Address& to) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, to.native(), to.native_size()) != 0) throw std::runtime_error("connect");
  return fd;
}

/// Connections waiting in a listening socket's backlog (for a listener,
/// tcp_info's unacked field is its accept queue).
unsigned backlog_of(const Listener& l) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(l.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) throw std::runtime_error("TCP_INFO");
  return info.tcpi_unacked;
}

std::uint16_t local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) throw std::runtime_error("getsockname");
  return ntohs(a.sin_port);
}

class RingAccept : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!shoal::test::io_uring_works()) GTEST_SKIP() << "io_uring is unavailable here";
  }
  /// One worker: no other thread can reap a completion while the test's
  /// task runs without yielding.
  void run_task(Task<void> t) {
    shoal::test::EnvGuard env("SHOAL_IO_BACKEND", "uring");
    shoal::testing::Watchdog dog(shoal::testing::kTestWatchdog, "RingAccept");
    shoal::run(std::move(t), shoal::RuntimeOptions::with_workers(1));
  }
};

// The accept is in the kernel; a connection arrives and the kernel accepts
// it (the backlog empties) before the task is cancelled, and the task has
// not seen the completion yet. Returning the connection would hand a
// cancelled task something new; it is closed, and its peer reads the end.
// Without the close in CompletionOp::await_resume the accept returns it.
TEST_F(RingAccept, AnAcceptCompletedAsItsCancelCameClosesTheConnectionAndThrowsCancelled) {
  const int fds_before = shoal::test::open_fds();
  int client = -1;
  run_task([](int& client) -> Task<void> {
    Listener l = Listener::bind(Address::parse("127.0.0.1:0"));
    bool accepted = false;
    bool cancelled = false;
    unsigned left_in_backlog = 99;
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        try {
          Stream c = co_await l.accept();
          accepted = true;
        } catch (const shoal::Cancelled&) {
          cancelled = true;
          throw;
        }
      });
      while (shoal::testing::operations_in_flight() == 0) co_await shoal::sleep_for(100us);  // submitted
      client = connect_blocking(l.local_address());
      // No checkpoint from here to the cancel: the one worker cannot reap
      // the accept's completion before it.
      const auto give_up = std::chrono::steady_clock::now() + 10s;
      while ((left_in_backlog = backlog_of(l)) != 0 && std::chrono::steady_clock::now() < give_up) {
      }
      s.cancel();
      co_return;
    });
    EXPECT_EQ(left_in_backlog, 0u) << "the kernel never took the connection";
    EXPECT_TRUE(cancelled);
    EXPECT_FALSE(accepted) << "a cancelled accept returned a connection";
  }(client));
  ASSERT_GE(client, 0);
  char c;
  EXPECT_EQ(::recv(client, &c, 1, MSG_DONTWAIT), 0) << "the accepted connection was not closed";
  ::close(client);
  EXPECT_EQ(shoal::test::open_fds(), fds_before);
}

// Cancelled while the kernel waits for a connection: nothing is taken, and
// the next accept gets the connection that comes after.
TEST_F(RingAccept, ACancelledAcceptTakesNothingAndTheNextAcceptGetsTheConnection) {
  run_task([]() -> Task<void> {
    Listener l = Listener::bind(Address::parse("127.0.0.1:0"));
    bool cancelled = false;
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        try {
          (void)co_await l.accept();
        } catch (const shoal::Cancelled&) {
          cancelled = true;
          throw;
        }
      });
      while (shoal::testing::operations_in_flight() == 0) co_await shoal::sleep_for(100us);
      s.cancel();
      co_return;
    });
    EXPECT_TRUE(cancelled);
    EXPECT_EQ(shoal::testing::operations_in_flight(), 0u);
    const int client = connect_blocking(l.local_address());
    EXPECT_EQ(backlog_of(l), 1u) << "the cancelled accept took the connection";
    Address peer;
    Stream c = co_await l.accept(peer);
    EXPECT_EQ(peer.port(), local_port(client)) << "the peer's address, as the ring reported it";
    const std::string_view hi = "hi";
    co_await c.write_all(hi);
    char buf[2] = {};
    EXPECT_EQ(::recv(client, buf, 2, MSG_WAITALL), 2);
    ::close(client);
  }());
}

// The ring's accept holds the listening socket: closed under it, the
// accept would wait on unseen (and the port stay bound). As on the
// readiness path, that bug aborts with a message.
TEST(RingAcceptDeathTest, ClosingAListenerWhileATaskWaitsInAcceptAbortsNamingIt) {
  if (!shoal::test::io_uring_works()) GTEST_SKIP() << "io_uring is unavailable here";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        shoal::test::EnvGuard env("SHOAL_IO_BACKEND", "uring");
        shoal::run([]() -> Task<void> {
          Listener l = Listener::bind(Address::parse("127.0.0.1:0"));
          co_await shoal::scope([&](Scope& s) -> Task<void> {
            s.spawn([&]() -> Task<void> { (void)co_await l.accept(); });
            while (shoal::testing::operations_in_flight() == 0) co_await shoal::sleep_for(100us);
            l.close();
          });
        }());
      },
      "a listener was closed while a task was waiting in accept; cancel the task first");
}

}  // namespace
