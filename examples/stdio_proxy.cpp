// A stdio proxy: for each TCP (or Unix-domain) connection, spawns a command
// in a process group of its own and forwards bytes both ways. Idle sessions
// hold no thread and no buffer.
//
//   stdio_proxy [options] <address> <command> [args...]
//     --max-connections N   sessions at once (default 10000)
//     --linger MS           after a client's EOF, before SIGTERM to the command's group (default 5000)
//     --grace MS            after SIGTERM, before SIGKILL (default 1000)
//     --idle-timeout S      a client silent this long is treated as gone (default 0: never)
//     --keepalive S         TCP keepalive after this much silence (default 60; 0: off)
//   e.g. stdio_proxy 127.0.0.1:7000 npx -y @modelcontextprotocol/server-everything
//
// SIGINT or SIGTERM: stop accepting, end every session as a disconnect would
// (close its stdin; SIGTERM after the linger, SIGKILL after the grace), reap
// every command, exit. One line per session on stderr. SIGUSR1: a task dump
// (every session, named after its client) to stderr.

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.hpp"
#include "stdio_proxy/proxy.hpp"

namespace {

struct Args {
  std::string address;
  std::size_t max_connections = 10'000;
  stdio_proxy::Config config;
};

using examples::number;

Args parse(int argc, char** argv) {
  Args a;
  int i = 1;
  for (; i < argc && std::strncmp(argv[i], "--", 2) == 0; i += 2) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (flag == "--max-connections") {
      a.max_connections = static_cast<std::size_t>(number(argv[i], value));
    } else if (flag == "--linger") {
      a.config.linger = std::chrono::milliseconds(number(argv[i], value));
    } else if (flag == "--grace") {
      a.config.kill_grace = std::chrono::milliseconds(number(argv[i], value));
    } else if (flag == "--idle-timeout") {
      a.config.idle_timeout = std::chrono::seconds(number(argv[i], value));
    } else if (flag == "--keepalive") {
      a.config.keepalive = std::chrono::seconds(number(argv[i], value));
    } else {
      throw std::invalid_argument("unknown option " + flag);
    }
  }
  if (argc - i < 2) throw std::invalid_argument("need an address and a command");
  a.address = argv[i];
  a.config.argv.assign(argv + i + 1, argv + argc);
  return a;
}

shoal::Task<void> run_proxy(Args args) {
  auto listener = shoal::net::Listener::bind(shoal::net::Address::parse(args.address));
  std::printf("proxying %s to `%s`\n", listener.local_address().to_string().c_str(), args.config.argv[0].c_str());
  std::fflush(stdout);
  std::fflush(stdout);
  shoal::net::ShutdownSignal stop;
  shoal::net::Connections sessions;
  args.config.sessions = &sessions;
  args.config.on_end = [](const stdio_proxy::Report& r) {
    std::fprintf(stderr, "stdio_proxy: %s\n", stdio_proxy::describe(r).c_str());
  };
  shoal::net::ServeOptions options;
  options.max_connections = args.max_connections;
  options.shutdown = &stop;
  // Sessions stop themselves on the shutdown (linger, SIGTERM, grace,
  // SIGKILL, reap): serve cancels only what is still running after that.
  options.grace_period = args.config.linger + 3 * args.config.kill_grace + std::chrono::seconds(1);
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    s.spawn([&]() -> shoal::Task<void> {
      const int sig = co_await shoal::signal::wait({SIGINT, SIGTERM});
      std::fprintf(stderr, "stdio_proxy: signal %d: ending every session\n", sig);
      stop.trigger();
      sessions.shutdown();
    });
    co_await shoal::net::serve(listener, options, [&args](shoal::net::Stream conn) {
      return stdio_proxy::run_session(std::move(conn), args.config);
    });
    s.cancel();  // the signal waiter
  });
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "stdio_proxy: %s\nusage: stdio_proxy [--max-connections N] [--linger MS] [--grace MS] "
                 "[--idle-timeout S] [--keepalive S] <address> <command> [args...]\n"
                 "  e.g. stdio_proxy 127.0.0.1:7000 cat\n",
                 e.what());
    return 2;
  }
  examples::raise_fd_limit();
  try {
    shoal::RuntimeOptions runtime;
    runtime.dump_signal = SIGUSR1;  // kill -USR1 <pid>: what every task waits on, to stderr
    shoal::run(run_proxy(std::move(args)), runtime);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stdio_proxy: %s\n", e.what());
    return 1;
  }
}
