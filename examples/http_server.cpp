// An HTTP/1.1 keep-alive "hello" server on shoal::http::serve.
//   http_server [address] [max_connections]   (default 127.0.0.1:8080, 10000)
// SIGINT or SIGTERM starts a graceful shutdown.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "http/hello.hpp"
#include "shoal/shoal.hpp"

namespace {

shoal::Task<void> run_server(shoal::net::Address address, std::size_t max_connections) {
  auto listener = shoal::net::Listener::bind(address);
  std::printf("listening on http://%s\n", listener.local_address().to_string().c_str());
  std::fflush(stdout);
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions options;
  options.max_connections = max_connections;
  options.shutdown = &stop;
  options.grace_period = std::chrono::seconds(5);
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    s.spawn([&]() -> shoal::Task<void> {
      const int sig = co_await shoal::signal::wait({SIGINT, SIGTERM});
      std::printf("signal %d: shutting down gracefully\n", sig);
      stop.trigger();
    });
    co_await shoal::http::serve(listener, options, shoal::http::ServerOptions{}, hello::Handler{});
    s.cancel();  // the signal waiter
  });
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto address = shoal::net::Address::parse(argc > 1 ? argv[1] : "127.0.0.1:8080");
    const std::size_t max_connections = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 10'000;
    shoal::run(run_server(address, max_connections));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_server: %s\n", e.what());
    return 1;
  }
}
