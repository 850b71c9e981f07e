// UDP sockets and name resolution.
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "shoal/net/udp.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::net::UdpSocket;

SHOAL_TEST_SUITE(UdpTest);

SHOAL_TEST(UdpTest, DatagramsGoBothWaysWithTheirSenders) {
  auto server = UdpSocket::bind(Address::parse("127.0.0.1:0"));
  auto client = UdpSocket::bind(Address::parse("127.0.0.1:0"));
  const Address server_addr = server.local_address();
  const std::string ping = "ping";
  std::vector<char> buf(64);
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      auto d = co_await server.recv_from(std::as_writable_bytes(std::span(buf)));
      EXPECT_EQ(std::string(buf.data(), d.size), "ping");
      EXPECT_EQ(d.from, client.local_address()) << d.from.to_string();
      (void)co_await server.send_to(std::as_bytes(std::span(std::string_view("pong"))), d.from);
    });
    EXPECT_EQ(co_await client.send_to(std::as_bytes(std::span(ping.data(), ping.size())), server_addr), 4u);
    std::vector<char> reply(64);
    auto d = co_await client.recv_from(std::as_writable_bytes(std::span(reply)));
    EXPECT_EQ(std::string(reply.data(), d.size), "pong");
    EXPECT_EQ(d.from, server_addr);
  });
}

SHOAL_TEST(UdpTest, ARecvIsACancellationPoint) {
  auto sock = UdpSocket::bind(Address::parse("127.0.0.1:0"));
  std::vector<char> buf(16);
  auto r = co_await shoal::move_on_after(5ms, sock.recv_from(std::as_writable_bytes(std::span(buf))));
  EXPECT_FALSE(r.has_value());
}

SHOAL_TEST(UdpTest, ResolveFindsLocalhostAndNamesAFailure) {
  auto addrs = co_await shoal::net::resolve("localhost", 8080);
  SHOAL_CO_ASSERT(!addrs.empty());
  for (const auto& a : addrs) EXPECT_EQ(a.port(), 8080);
  auto lit = co_await shoal::net::resolve("127.0.0.1", 1);
  SHOAL_CO_ASSERT(lit.size() == 1u);
  EXPECT_EQ(lit[0].to_string(), "127.0.0.1:1");
  try {
    (void)co_await shoal::net::resolve("no-such-host.invalid", 80);
    ADD_FAILURE() << "resolved an .invalid name";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("\"no-such-host.invalid\""), std::string::npos) << e.what();
  }
}

}  // namespace
