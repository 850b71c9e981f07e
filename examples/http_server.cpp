// An HTTP/1.1 keep-alive "hello" server on shoal::http::serve, over TLS with
// --tls (HTTPS: a PEM certificate chain and its private key); with
// shoal::http2 built, HTTP/2 too: h2c by prior knowledge on the same port,
// and h2 by ALPN over TLS.
//   http_server [address] [max_connections] [--tls CERT KEY]
//   (default 127.0.0.1:8080, 10000)
// SIGINT or SIGTERM starts a graceful shutdown; SIGUSR1 writes a task dump
// (every connection's handler, named after its client) to stderr.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "http/hello.hpp"
#include "http/serve_any.hpp"
#include "shoal/shoal.hpp"

namespace {

struct Args {
  std::string address = "127.0.0.1:8080";
  std::size_t max_connections = 10'000;
  std::string certificate, key;  // --tls
};

shoal::Task<void> serve(shoal::net::Listener& listener, const Args& args, shoal::net::ServeOptions options) {
  shoal::http::ServerStats stats;  // GET /metrics shows them
  shoal::http::ServerOptions http_options;
  http_options.stats = &stats;
  const hello::Handler handler{&stats};
  co_await examples::serve_any(listener, std::move(options), http_options, handler, args.certificate, args.key);
}

shoal::Task<void> run_server(const Args& args) {
  auto listener = shoal::net::Listener::bind(shoal::net::Address::parse(args.address));
  std::printf("listening on %s://%s\n", args.certificate.empty() ? "http" : "https",
              listener.local_address().to_string().c_str());
  std::fflush(stdout);
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions options;
  options.max_connections = args.max_connections;
  options.shutdown = &stop;
  options.grace_period = std::chrono::seconds(5);
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    s.spawn([&]() -> shoal::Task<void> {
      const int sig = co_await shoal::signal::wait({SIGINT, SIGTERM});
      std::printf("signal %d: shutting down gracefully\n", sig);
      stop.trigger();
    });
    co_await serve(listener, args, options);
    s.cancel();  // the signal waiter
  });
}

std::optional<Args> parse(int argc, char** argv) {
  Args a;
  int positional = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--tls") {
      if (i + 2 >= argc) return std::nullopt;
      a.certificate = argv[++i];
      a.key = argv[++i];
    } else if (positional == 0) {
      a.address = arg;
      ++positional;
    } else if (positional == 1) {
      char* end = nullptr;
      a.max_connections = std::strtoul(argv[i], &end, 10);
      if (*end != '\0' || a.max_connections == 0) return std::nullopt;
      ++positional;
    } else {
      return std::nullopt;
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Args> args = parse(argc, argv);
  if (!args) {
    std::fprintf(stderr, "usage: http_server [address] [max_connections] [--tls CERT_CHAIN.pem KEY.pem]\n");
    return 2;
  }
#if !SHOAL_EXAMPLE_TLS
  if (!args->certificate.empty()) {
    std::fprintf(stderr, "http_server: built without shoal::tls (OpenSSL 3 was not found): --tls is unavailable\n");
    return 2;
  }
#endif
  try {
    shoal::RuntimeOptions runtime;
    runtime.dump_signal = SIGUSR1;  // kill -USR1 <pid>: what every task waits on, to stderr
    shoal::run(run_server(*args), runtime);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_server: %s\n", e.what());
    return 1;
  }
}
