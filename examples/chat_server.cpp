// A line-based chat server: broadcast, select, a task set (serve) and a
// graceful shutdown.
//   chat_server [address]   (default 127.0.0.1:7070)
// Try it with two terminals: `nc 127.0.0.1 7070`, type a nickname, then lines.
// SIGINT or SIGTERM: everyone is told, the room closes, connections end.
// SIGUSR1: a task dump (who waits on what, for how long) to stderr.
#include <csignal>
#include <cstdio>

#include "chat/chat.hpp"

namespace {

shoal::Task<void> run_server(shoal::net::Address address) {
  auto listener = shoal::net::Listener::bind(address);
  std::printf("chat on %s (first line: your nickname)\n", listener.local_address().to_string().c_str());
  std::fflush(stdout);
  std::fflush(stdout);
  chat::Room room;
  shoal::Event shutdown;
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions options;
  options.shutdown = &stop;
  options.grace_period = std::chrono::seconds(2);
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    s.spawn([&]() -> shoal::Task<void> {
      const int sig = co_await shoal::signal::wait({SIGINT, SIGTERM});
      std::printf("signal %d: shutting down\n", sig);
      shutdown.set();  // the room says goodbye and closes: connections end on their own
      stop.trigger();  // serve stops accepting and waits for them (at most the grace period)
    });
    s.spawn(room.run(shutdown));
    co_await shoal::net::serve(listener, options, [&room](shoal::net::Stream conn) { return room.serve(std::move(conn)); });
  });
}

}  // namespace

int main(int argc, char** argv) {
  try {
    shoal::RuntimeOptions runtime;
    runtime.dump_signal = SIGUSR1;  // kill -USR1 <pid>: what every task waits on, to stderr
    shoal::run(run_server(shoal::net::Address::parse(argc > 1 ? argv[1] : "127.0.0.1:7070")), runtime);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chat_server: %s\n", e.what());
    return 1;
  }
}
