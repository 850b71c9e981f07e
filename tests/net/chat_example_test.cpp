// The chat example (examples/chat) end to end: several clients over TCP,
// join and leave notices, every line to everyone, a line too long, and the
// graceful shutdown that tells everyone and ends every connection.
#include <sys/socket.h>

#include <string>
#include <vector>

#include "chat/chat.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;
using shoal::net::Address;
using shoal::net::BufferedReader;
using shoal::net::Stream;

SHOAL_TEST_SUITE(ChatExampleTest);

// The stream lives on the heap: the reader points at it, and a Client moves.
struct Client {
  std::unique_ptr<Stream> conn;
  std::unique_ptr<BufferedReader> in;
};

Task<Client> join(Address addr, std::string nick) {
  Stream conn = co_await shoal::net::connect(addr);  // named: g++ 12 and temporaries in a co_await (docs/task_sets.md)
  Client c;
  c.conn = std::make_unique<Stream>(std::move(conn));
  c.in = std::make_unique<BufferedReader>(*c.conn);
  co_await c.conn->write_all(nick + "\n");
  co_return c;
}

// The next line, or "(eof)"; a missing line fails the test after 5 s.
Task<std::string> next(Client& c) {
  auto r = co_await shoal::with_timeout(5s, c.in->read_line(1 << 16));
  co_return r ? *r : std::string("(eof)");
}

// Runs the room and its server for the duration of `clients(address)`, then
// shuts down as chat_server does.
Task<void> with_chat(chat::Limits limits, std::function<Task<void>(Address, shoal::Event&)> clients) {
  auto listener = shoal::net::Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  chat::Room room(limits);
  shoal::Event shutdown;
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions opts;
  opts.shutdown = &stop;
  opts.grace_period = 5s;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(room.run(shutdown));
    s.spawn(shoal::net::serve(listener, opts, [&room](Stream c) { return room.serve(std::move(c)); }));
    co_await clients(addr, shutdown);
    shutdown.set();
    stop.trigger();
  });
}

SHOAL_TEST(ChatExampleTest, EveryLineReachesEveryoneWithJoinAndLeaveNotices) {
  co_await with_chat({}, [](Address addr, shoal::Event&) -> Task<void> {
    Client alice = co_await join(addr, "alice");
    EXPECT_EQ(co_await next(alice), "* alice joined");
    Client bob = co_await join(addr, "bob");
    EXPECT_EQ(co_await next(alice), "* bob joined");
    EXPECT_EQ(co_await next(bob), "* bob joined");
    Client carol = co_await join(addr, "carol");
    for (Client* c : {&alice, &bob, &carol}) EXPECT_EQ(co_await next(*c), "* carol joined");
    co_await bob.conn->write_all("hello\r\nhow are you\n");
    for (Client* c : {&alice, &bob, &carol}) {
      EXPECT_EQ(co_await next(*c), "bob: hello");
      EXPECT_EQ(co_await next(*c), "bob: how are you");
    }
    carol.conn->close();
    for (Client* c : {&alice, &bob}) EXPECT_EQ(co_await next(*c), "* carol left");
  });
}

SHOAL_TEST(ChatExampleTest, ALineOverTheLimitEndsThatConnectionOnly) {
  chat::Limits limits;
  limits.max_line = 64;
  co_await with_chat(limits, [](Address addr, shoal::Event&) -> Task<void> {
    Client alice = co_await join(addr, "alice");
    EXPECT_EQ(co_await next(alice), "* alice joined");
    Client mallory = co_await join(addr, "mallory");
    EXPECT_EQ(co_await next(alice), "* mallory joined");
    EXPECT_EQ(co_await next(mallory), "* mallory joined");
    co_await mallory.conn->write_all(std::string(1000, 'x') + "\n");
    EXPECT_EQ(co_await next(mallory), "* line too long");
    EXPECT_EQ(co_await next(mallory), "(eof)");
    EXPECT_EQ(co_await next(alice), "* mallory left");
    co_await alice.conn->write_all("still here\n");
    EXPECT_EQ(co_await next(alice), "alice: still here");
  });
}

// A line far past the limit is still arriving when the server refuses it.
// A plain close with those bytes unread makes the kernel reset the
// connection: a client that sends its line and then reads (as a real one
// did) failed in its send with ECONNRESET and never saw the notice. The
// server lingers: the send completes, and the client reads the notice.
// The client's send buffer is small, so its send cannot finish before the
// server has read (or refused) most of the line.
SHOAL_TEST(ChatExampleTest, AClientStillSendingAHugeLineReadsTheNoticeNotAReset) {
  co_await with_chat({}, [](Address addr, shoal::Event&) -> Task<void> {
    Client mallory = co_await join(addr, "mallory");
    EXPECT_EQ(co_await next(mallory), "* mallory joined");
    const int small = 4096;
    EXPECT_EQ(::setsockopt(mallory.conn->native_handle(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    const std::string huge(900 * 1024, 'x');  // within the server's linger (1 MiB), past any buffer
    std::string outcome = "sent";
    try {
      co_await mallory.conn->write_all(huge);
      mallory.conn->shutdown();
    } catch (const std::system_error& e) {
      outcome = e.what();
    }
    EXPECT_EQ(outcome, "sent") << "the server reset the connection while the line was still coming";
    std::string line;
    try {
      line = co_await next(mallory);
    } catch (const std::system_error& e) {
      line = e.what();
    }
    EXPECT_EQ(line, "* line too long");
  });
}

// The connection's loop waits in a select, not in a read, so the stream's
// idle limit does not see it: the loop's own deadline drops a silent client.
SHOAL_TEST(ChatExampleTest, AClientSilentPastTheIdleLimitIsToldAndDropped) {
  chat::Limits limits;
  limits.idle = 200ms;
  co_await with_chat(limits, [](Address addr, shoal::Event&) -> Task<void> {
    Client quiet = co_await join(addr, "quiet");
    EXPECT_EQ(co_await next(quiet), "* quiet joined");
    EXPECT_EQ(co_await next(quiet), "* you were idle too long");
    EXPECT_EQ(co_await next(quiet), "(eof)");
  });
}

SHOAL_TEST(ChatExampleTest, ShutdownTellsEveryoneAndEndsEveryConnection) {
  co_await with_chat({}, [](Address addr, shoal::Event& shutdown) -> Task<void> {
    std::vector<Client> clients;
    for (const char* nick : {"a", "b", "c", "d"}) clients.push_back(co_await join(addr, nick));
    // Each is in the room once it sees its own join notice (its handler
    // subscribes before it posts it; the handlers run concurrently).
    const char* nicks[] = {"a", "b", "c", "d"};
    for (std::size_t i = 0; i < clients.size(); ++i) {
      const std::string mine = std::string("* ") + nicks[i] + " joined";
      std::string line;
      while ((line = co_await next(clients[i])) != mine) {
        SHOAL_CO_ASSERT(line != "(eof)");
      }
    }
    const auto t0 = shoal::now();
    shutdown.set();
    for (Client& c : clients) {
      std::string line;
      while ((line = co_await next(c)) != "* the server is shutting down") {
        SHOAL_CO_ASSERT(line != "(eof)");
      }
      EXPECT_EQ(co_await next(c), "(eof)") << "a connection outlived the room";
    }
    EXPECT_LT(shoal::now() - t0, 2s) << "the shutdown waited for something";
  });
}

}  // namespace
