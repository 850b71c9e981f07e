// A stdio proxy: for each TCP (or Unix-domain) connection, spawns a command
// and forwards bytes both ways. Idle sessions hold no thread.
//   stdio_proxy <address> <command> [args...]
//   e.g. stdio_proxy 127.0.0.1:7000 cat
// SIGINT or SIGTERM starts a graceful shutdown.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "stdio_proxy/proxy.hpp"

namespace {

shoal::Task<void> run_proxy(shoal::net::Address address, stdio_proxy::Config config) {
  auto listener = shoal::net::Listener::bind(address);
  std::printf("proxying %s to `%s`\n", listener.local_address().to_string().c_str(), config.argv[0].c_str());
  std::fflush(stdout);
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions options;
  options.shutdown = &stop;
  options.grace_period = std::chrono::seconds(5);
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    s.spawn([&]() -> shoal::Task<void> {
      const int sig = co_await shoal::signal::wait({SIGINT, SIGTERM});
      std::printf("signal %d: shutting down gracefully\n", sig);
      stop.trigger();
    });
    co_await shoal::net::serve(listener, options, [&config](shoal::net::Stream conn) {
      return stdio_proxy::run_session(std::move(conn), config);
    });
    s.cancel();  // the signal waiter
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: stdio_proxy <address> <command> [args...]\n  e.g. stdio_proxy 127.0.0.1:7000 cat\n");
    return 2;
  }
  try {
    const auto address = shoal::net::Address::parse(argv[1]);
    stdio_proxy::Config config;
    config.argv.assign(argv + 2, argv + argc);
    shoal::run(run_proxy(address, std::move(config)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stdio_proxy: %s\n", e.what());
    return 1;
  }
}
