// The stdio proxy example (examples/stdio_proxy): bytes both ways through a
// spawned command; either side ending ends the session and the command.
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "stdio_proxy/proxy.hpp"
#include "support/process_stats.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::test::thread_count;
using namespace std::chrono_literals;
using shoal::Task;
using shoal::net::Address;
using shoal::net::Listener;
using shoal::net::Stream;

SHOAL_TEST_SUITE(StdioProxyTest);

/// Prints its pid on the first line, then runs `then` in its place.
std::vector<std::string> announcing(const std::string& then) { return {"sh", "-c", "echo $$; exec " + then}; }

/// One session of `config` against `client(stream)`; returns when both ended.
Task<void> with_session(stdio_proxy::Config config, std::function<Task<void>(Stream&)> client) {
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  co_await shoal::with_timeout(30s, shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      Stream conn = co_await listener.accept();
      co_await stdio_proxy::run_session(std::move(conn), config);
    });
    Stream c = co_await shoal::net::connect(addr);
    co_await client(c);
  }));
}

Task<std::string> read_line(Stream& c) {
  std::string line;
  char ch = 0;
  while (co_await c.read_some(std::as_writable_bytes(std::span(&ch, 1))) == 1 && ch != '\n') line.push_back(ch);
  co_return line;
}

Task<std::string> read_to_eof(Stream& c) {
  std::string out;
  std::vector<char> buf(8192);
  for (std::size_t n; (n = co_await c.read_some(std::as_writable_bytes(std::span(buf)))) != 0;) out.append(buf.data(), n);
  co_return out;
}

bool process_gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

SHOAL_TEST(StdioProxyTest, CatEchoesBothWaysAtOnceAndEndOfInputEndsTheSession) {
  stdio_proxy::Config config;
  config.argv = {"cat"};
  co_await with_session(config, [](Stream& c) -> Task<void> {
    std::string text(300'000, '\0');  // far more than the pipe and socket buffers hold
    for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 26);
    std::string back;
    co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        co_await c.write_all(text);
        c.shutdown(shoal::net::Shutdown::write);  // cat sees EOF, exits, and we see EOF
      });
      back = co_await read_to_eof(c);
    });
    EXPECT_EQ(back.size(), text.size());
    EXPECT_TRUE(back == text);
  });
}

SHOAL_TEST(StdioProxyTest, ClosingTheClientEndsTheProcess) {
  stdio_proxy::Config config;
  config.argv = announcing("cat");
  config.linger = 60s;  // so the session can only end through cat's own exit
  pid_t pid = 0;
  co_await with_session(config, [&](Stream& c) -> Task<void> {
    pid = std::stoi(co_await read_line(c));
    c.close();
  });
  EXPECT_GT(pid, 0);
  EXPECT_TRUE(process_gone(pid)) << "the command outlived its session";
}

SHOAL_TEST(StdioProxyTest, KillingTheProcessClosesTheClient) {
  stdio_proxy::Config config;
  config.argv = announcing("cat");
  co_await with_session(config, [&](Stream& c) -> Task<void> {
    const pid_t pid = std::stoi(co_await read_line(c));
    ::kill(pid, SIGKILL);
    EXPECT_EQ(co_await read_to_eof(c), "") << "the client must see end of stream";
  });
}

SHOAL_TEST(StdioProxyTest, ACommandIgnoringEndOfInputIsStoppedAfterTheLinger) {
  stdio_proxy::Config config;
  config.argv = announcing("sleep 60");
  config.linger = 20ms;
  pid_t pid = 0;
  co_await with_session(config, [&](Stream& c) -> Task<void> {
    pid = std::stoi(co_await read_line(c));
    c.shutdown(shoal::net::Shutdown::write);
    EXPECT_EQ(co_await read_to_eof(c), "");
  });
  EXPECT_TRUE(process_gone(pid)) << "the command outlived its session";
}

SHOAL_TEST(StdioProxyTest, AClientResetEndsTheSessionWithoutAFault) {
  stdio_proxy::Config config;
  config.argv = announcing("cat");
  config.linger = 60s;
  pid_t pid = 0;
  co_await with_session(config, [&](Stream& c) -> Task<void> {
    pid = std::stoi(co_await read_line(c));
    linger l{1, 0};  // close with RST
    ::setsockopt(c.native_handle(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
    c.close();
  });
  EXPECT_TRUE(process_gone(pid));
}

SHOAL_TEST(StdioProxyTest, IdleSessionsHoldNoThread) {
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  stdio_proxy::Config config;
  config.argv = {"cat"};
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions opts;
  opts.shutdown = &stop;
  opts.grace_period = 5s;
  const int threads_before = thread_count();
  co_await shoal::with_timeout(30s, shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::net::serve(listener, opts, [&](Stream c) { return stdio_proxy::run_session(std::move(c), config); }));
    std::vector<Stream> clients;
    for (int i = 0; i < 24; ++i) {
      clients.push_back(co_await shoal::net::connect(addr));
      const std::string hello = "session " + std::to_string(i) + "\n";
      co_await clients.back().write_all(hello);
      EXPECT_EQ(co_await read_line(clients.back()), hello.substr(0, hello.size() - 1));
    }
    // Every session is now idle in a read on both sides.
    EXPECT_EQ(thread_count(), threads_before) << "an idle session holds a thread";
    for (auto& c : clients) c.shutdown(shoal::net::Shutdown::write);
    for (auto& c : clients) EXPECT_EQ(co_await read_to_eof(c), "");
    stop.trigger();  // every session has ended: the drain is immediate
  }));
}

}  // namespace
