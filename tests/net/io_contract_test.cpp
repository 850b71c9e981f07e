// The checkpoint contract for I/O awaitables: in a cancelled scope each one
// throws Cancelled before any side effect (the data, connection, datagram,
// signal or exit status is still there for the next, uncancelled call).
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "shoal/shoal.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::net::Listener;
using shoal::net::Stream;

SHOAL_TEST_SUITE(IoContractTest);

/// Runs `op` in a scope that is already cancelled; true if it threw Cancelled.
Task<bool> throws_when_cancelled(std::function<Task<void>()> op) {
  bool threw = false;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.cancel();
    try {
      co_await op();
    } catch (const shoal::Cancelled&) {
      threw = true;
      throw;
    }
  });
  co_return threw;
}

std::span<std::byte> bytes(std::vector<char>& v) { return std::as_writable_bytes(std::span(v)); }

SHOAL_TEST(IoContractTest, StreamOperationsThrowBeforeTouchingTheSocket) {
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  Stream client = co_await shoal::net::connect(addr);
  Stream server = co_await listener.accept();
  co_await client.write_all(std::string_view("x"));
  std::vector<char> buf(8);
  // The byte is readable, yet a cancelled read leaves it in the socket.
  EXPECT_TRUE(co_await throws_when_cancelled([&]() -> Task<void> { (void)co_await server.read_some(bytes(buf)); }));
  EXPECT_TRUE(co_await throws_when_cancelled([&]() -> Task<void> { co_await server.wait_readable(); }));
  EXPECT_EQ(co_await server.read_some(bytes(buf)), 1u) << "a cancelled read consumed the data";
  // A cancelled write sends nothing.
  EXPECT_TRUE(co_await throws_when_cancelled(
      [&]() -> Task<void> { (void)co_await server.write_some(std::as_bytes(std::span(std::string_view("y")))); }));
  char probe;
  EXPECT_EQ(::recv(client.native_handle(), &probe, 1, MSG_DONTWAIT), -1) << "a cancelled write sent data";
  // A pending connection stays in the backlog.
  Stream second = co_await shoal::net::connect(addr);
  EXPECT_TRUE(co_await throws_when_cancelled([&]() -> Task<void> { (void)co_await listener.accept(); }));
  auto accepted = co_await shoal::move_on_after(5s, listener.accept());
  EXPECT_TRUE(accepted.has_value()) << "a cancelled accept lost the pending connection";
  // A cancelled connect does not connect.
  EXPECT_TRUE(co_await throws_when_cancelled([&]() -> Task<void> { (void)co_await shoal::net::connect(addr); }));
  auto stray = co_await shoal::move_on_after(20ms, listener.accept());
  EXPECT_FALSE(stray.has_value()) << "a cancelled connect reached the listener";
}

SHOAL_TEST(IoContractTest, UdpOperationsThrowBeforeTouchingTheSocket) {
  auto a = shoal::net::UdpSocket::bind(Address::parse("127.0.0.1:0"));
  auto b = shoal::net::UdpSocket::bind(Address::parse("127.0.0.1:0"));
  const auto one = std::as_bytes(std::span(std::string_view("1")));
  EXPECT_TRUE(co_await throws_when_cancelled([&]() -> Task<void> { (void)co_await a.send_to(one, b.local_address()); }));
  (void)co_await a.send_to(std::as_bytes(std::span(std::string_view("2"))), b.local_address());
  std::vector<char> buf(8);
  EXPECT_TRUE(co_await throws_when_cancelled([&]() -> Task<void> { (void)co_await b.recv_from(bytes(buf)); }));
  auto d = co_await b.recv_from(bytes(buf));
  EXPECT_EQ(std::string(buf.data(), d.size), "2") << "the cancelled send went out, or the cancelled recv took the datagram";
}

SHOAL_TEST(IoContractTest, SignalAndChildWaitsThrowWithoutConsumingAnything) {
  auto pending = shoal::signal::wait({SIGUSR1});  // installs the handler
  ::kill(::getpid(), SIGUSR1);
  EXPECT_TRUE(co_await throws_when_cancelled([&]() -> Task<void> { (void)co_await shoal::signal::wait({SIGUSR1}); }));
  auto got = co_await shoal::move_on_after(5s, std::move(pending));
  EXPECT_TRUE(got.has_value()) << "a cancelled signal wait consumed the delivery";

  auto child = shoal::process::spawn({"true"});
  EXPECT_TRUE(co_await throws_when_cancelled([&]() -> Task<void> { (void)co_await child.wait(); }));
  EXPECT_TRUE((co_await child.wait()).success());
}

}  // namespace
