// The stdio proxy example (examples/stdio_proxy): bytes both ways through a
// spawned command; either side ending ends the session and the command.
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <functional>
#include <mutex>
#include <atomic>
#include <string>
#include <vector>

#include "stdio_proxy/proxy.hpp"
#include "support/process_stats.hpp"
#include "support/stream_io.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::test::read_to_end;

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

bool process_gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

/// False once `pid` has exited (gone, or a zombie that is not ours to reap:
/// a grandchild is reaped by whoever adopted it).
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

/// Waits (up to 5 s) for `pid` to stop running: its pipes close as it exits,
/// a moment before its state says so.
Task<bool> stops_running(pid_t pid) {
  for (int i = 0; i < 5000; ++i) {
    if (!running(pid)) co_return true;
    co_await shoal::sleep_for(1ms);
  }
  co_return false;
}

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
      back = co_await read_to_end(c);
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
    EXPECT_EQ(co_await read_to_end(c), "") << "the client must see end of stream";
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
    EXPECT_EQ(co_await read_to_end(c), "");
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

SHOAL_TEST(StdioProxyTest, AGrandchildHoldingTheOutputIsStoppedWithItsGroup) {
  stdio_proxy::Config config;
  // sh exits at once; the sleep it started holds the session's stdout.
  config.argv = {"sh", "-c", "sleep 60 & echo $!"};
  config.linger = 20ms;
  pid_t grandchild = 0;
  co_await with_session(config, [&](Stream& c) -> Task<void> {
    grandchild = std::stoi(co_await read_line(c));
    EXPECT_EQ(co_await read_to_end(c), "") << "the session outlived its command";
  });
  EXPECT_TRUE(co_await stops_running(grandchild)) << "what the command started outlived the session";
}

SHOAL_TEST(StdioProxyTest, AClientSilentForTheIdleTimeoutIsTreatedAsGone) {
  stdio_proxy::Config config;
  config.argv = announcing("cat");
  config.idle_timeout = 50ms;
  pid_t pid = 0;
  co_await with_session(config, [&](Stream& c) -> Task<void> {
    pid = std::stoi(co_await read_line(c));
    EXPECT_EQ(co_await read_to_end(c), "");  // cat got EOF from the proxy and exited
  });
  EXPECT_TRUE(process_gone(pid));
}

SHOAL_TEST(StdioProxyTest, EachSessionReportsItsPeerPidStatusAndBytes) {
  stdio_proxy::Config config;
  config.argv = announcing("cat");
  std::vector<stdio_proxy::Report> reports;
  config.on_end = [&](const stdio_proxy::Report& r) { reports.push_back(r); };
  std::string pid_line;
  co_await with_session(config, [&](Stream& c) -> Task<void> {
    pid_line = co_await read_line(c);
    co_await c.write_all(std::string_view("hello\n"));
    EXPECT_EQ(co_await read_line(c), "hello");
    c.shutdown(shoal::net::Shutdown::write);
    EXPECT_EQ(co_await read_to_end(c), "");
  });
  SHOAL_CO_ASSERT(reports.size() == 1u);
  const stdio_proxy::Report& r = reports[0];
  EXPECT_EQ(std::to_string(r.pid), pid_line);
  EXPECT_EQ(r.bytes_in, 6u);
  EXPECT_EQ(r.bytes_out, pid_line.size() + 1 + 6);
  SHOAL_CO_ASSERT(r.status.has_value());
  EXPECT_TRUE(r.status->success()) << r.status->to_string();
  EXPECT_EQ(r.peer.rfind("127.0.0.1:", 0), 0u) << r.peer;
  const std::string line = stdio_proxy::describe(r);
  EXPECT_NE(line.find("6 bytes in"), std::string::npos) << line;
}

SHOAL_TEST(StdioProxyTest, AShutdownEndsSessionsAsADisconnectWouldAndReapsEveryCommand) {
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  shoal::net::ShutdownSignal stop;
  stdio_proxy::Config cat, sleeper;
  cat.argv = announcing("cat");
  sleeper.argv = announcing("sleep 60");  // ignores its EOF: stopped by SIGTERM after the linger
  std::mutex mu;
  std::vector<stdio_proxy::Report> reports;
  shoal::net::Connections live;
  for (stdio_proxy::Config* c : {&cat, &sleeper}) {
    c->linger = 50ms;
    c->sessions = &live;
    c->on_end = [&](const stdio_proxy::Report& r) {
      std::lock_guard lock(mu);
      reports.push_back(r);
    };
  }
  shoal::net::ServeOptions opts;
  opts.shutdown = &stop;
  opts.grace_period = 60s;  // the sessions end themselves long before
  std::atomic<int> sessions{0};
  std::vector<pid_t> pids;
  co_await shoal::with_timeout(30s, shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn(shoal::net::serve(listener, opts, [&](Stream c) {
      return stdio_proxy::run_session(std::move(c), sessions.fetch_add(1) < 3 ? cat : sleeper);
    }));
    std::vector<Stream> clients;
    for (int i = 0; i < 4; ++i) {
      clients.push_back(co_await shoal::net::connect(addr));
      pids.push_back(std::stoi(co_await read_line(clients.back())));
    }
    stop.trigger();
    live.shutdown();
    for (auto& c : clients) EXPECT_EQ(co_await read_to_end(c), "");
  }));
  // serve has returned: every session ended and reaped its command.
  for (pid_t pid : pids) EXPECT_TRUE(process_gone(pid)) << "pid " << pid << " left running or a zombie";
  SHOAL_CO_ASSERT(reports.size() == 4u);
  int exited = 0, terminated = 0;
  for (const auto& r : reports) {
    SHOAL_CO_ASSERT(r.status.has_value());
    exited += r.status->success();
    terminated += r.status->signal == SIGTERM;
  }
  EXPECT_EQ(exited, 3) << "cat should exit on the EOF the shutdown gives it";
  EXPECT_EQ(terminated, 1) << "the command ignoring its EOF should be stopped by SIGTERM";
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
    for (auto& c : clients) EXPECT_EQ(co_await read_to_end(c), "");
    stop.trigger();  // every session has ended: the drain is immediate
  }));
}

}  // namespace
