// An MCP gateway: stdio MCP servers over MCP's Streamable HTTP transport,
// one child process per session (docs/mcp_gateway.md).
//
//   mcp_gateway [options] ADDRESS -- COMMAND [ARGS...]
//     --endpoint PATH       where MCP is served (default /mcp)
//     --max-sessions N      sessions at once; past it, 503 with Retry-After (default 10000)
//     --max-message BYTES   a POST body or a line of a child's output (default 4194304)
//     --idle-timeout S      a session with no request and no stream open ends (default 300)
//     --abandoned-timeout S the same once its last stream broke (its client went away; default 10)
//     --grace MS            after DELETE: for the child to exit on end of input, then after SIGTERM (default 1000)
//     --keepalive S         an SSE comment this often on open streams (default 15)
//     --allow-origin O      an Origin allowed besides local pages (repeatable)
//     --token-file F        every request must carry "Authorization: Bearer <the file's first line>"
//     --tls CERT KEY        HTTPS (and h2 by ALPN)
//     --metrics             GET /metrics: Prometheus text
//   e.g. mcp_gateway 127.0.0.1:8000 -- npx -y @modelcontextprotocol/server-everything
//
// SIGINT or SIGTERM: stop accepting, end every session as DELETE would, reap
// every child, exit 0. One line per session on stderr. SIGUSR1: a task
// dump to stderr.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mcp_gateway/gateway.hpp"
#include "cli.hpp"
#include "http/serve_any.hpp"
#include "shoal/shoal.hpp"

namespace {

struct Args {
  std::string address;
  mcp_gateway::Config config;
  std::string certificate, key;
  bool metrics = false;
};

using examples::number;

Args parse(int argc, char** argv) {
  Args a;
  int i = 1;
  auto value = [&](const std::string& flag) -> const char* {
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg == "--endpoint") {
      a.config.endpoint = value(arg);
      if (!a.config.endpoint.starts_with("/")) throw std::invalid_argument("--endpoint must start with /");
    } else if (arg == "--max-sessions") {
      a.config.max_sessions = static_cast<std::size_t>(number(arg, value(arg)));
      if (a.config.max_sessions == 0) throw std::invalid_argument("--max-sessions must be at least 1");
    } else if (arg == "--max-message") {
      a.config.max_message = static_cast<std::size_t>(number(arg, value(arg)));
    } else if (arg == "--idle-timeout") {
      a.config.idle_timeout = std::chrono::seconds(number(arg, value(arg)));
    } else if (arg == "--abandoned-timeout") {
      a.config.abandoned_timeout = std::chrono::seconds(number(arg, value(arg)));
    } else if (arg == "--grace") {
      a.config.kill_grace = std::chrono::milliseconds(number(arg, value(arg)));
    } else if (arg == "--keepalive") {
      a.config.keepalive = std::chrono::seconds(number(arg, value(arg)));
      if (a.config.keepalive.count() == 0) throw std::invalid_argument("--keepalive must be at least 1");
    } else if (arg == "--allow-origin") {
      a.config.allowed_origins.emplace_back(value(arg));
    } else if (arg == "--token-file") {
      const std::string path = value(arg);
      std::ifstream f(path);
      if (!f || !std::getline(f, a.config.token) || a.config.token.empty()) {
        throw std::invalid_argument("--token-file " + path + ": cannot read a token from its first line");
      }
    } else if (arg == "--tls") {
      a.certificate = value(arg);
      a.key = value(arg);
    } else if (arg == "--metrics") {
      a.metrics = true;
    } else if (arg.starts_with("--")) {
      throw std::invalid_argument("unknown option " + arg);
    } else if (a.address.empty()) {
      a.address = arg;
    } else {
      throw std::invalid_argument("unexpected argument " + arg + " (the command comes after --)");
    }
  }
  if (a.address.empty()) throw std::invalid_argument("need an address");
  if (i + 1 >= argc) throw std::invalid_argument("need a command after --");
  a.config.argv.assign(argv + i + 1, argv + argc);
  return a;
}

/// The gateway's handler, and /metrics when asked for.
struct Handler {
  mcp_gateway::Gateway* gateway;
  const mcp_gateway::Stats* stats;
  const shoal::http::ServerStats* http;
  bool metrics;
  // Not a coroutine itself: a session's GET stream waits in the gateway's
  // frames only.
  shoal::Task<void> operator()(const shoal::http::Request& req, shoal::http::Response& res) const {
    if (metrics && req.method() == "GET" && req.target() == "/metrics") return serve_metrics(res);
    return (*gateway)(req, res);
  }
  shoal::Task<void> serve_metrics(shoal::http::Response& res) const {
    {
      res.set_header("Content-Type", "text/plain; version=0.0.4");
      res.body = shoal::to_prometheus(shoal::this_task::runtime_metrics()) + http->to_prometheus();
      const auto put = [&](const char* name, const char* help, std::uint64_t v) {
        res.body += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " +
                    std::to_string(v) + "\n";
      };
      put("mcp_gateway_sessions", "sessions open (each with a child)", stats->sessions_open.load());
      put("mcp_gateway_sessions_total", "sessions started", stats->sessions_total.load());
      put("mcp_gateway_sessions_refused_total", "initialize refused at --max-sessions", stats->sessions_refused.load());
      put("mcp_gateway_messages_in_total", "messages from clients to children", stats->messages_in.load());
      put("mcp_gateway_messages_out_total", "messages from children to clients", stats->messages_out.load());
      put("mcp_gateway_bytes_in_total", "bytes from clients to children", stats->bytes_in.load());
      put("mcp_gateway_bytes_out_total", "bytes from children to clients", stats->bytes_out.load());
    }
    co_return;
  }
};

shoal::Task<void> run_gateway(const Args& args) {
  auto listener = shoal::net::Listener::bind(shoal::net::Address::parse(args.address));
  std::printf("mcp_gateway: serving %s://%s%s, a `%s` per session\n", args.certificate.empty() ? "http" : "https",
              listener.local_address().to_string().c_str(), args.config.endpoint.c_str(), args.config.argv[0].c_str());
  std::fflush(stdout);
  mcp_gateway::Stats stats;
  shoal::http::ServerStats http_stats;
  mcp_gateway::Gateway gateway(args.config, stats);
  shoal::http::ServerOptions http_options;
  http_options.stats = &http_stats;
  http_options.stream_request_body = true;  // the gateway reads it, to --max-message
  http_options.max_body = args.config.max_message;
  const Handler handler{&gateway, &stats, &http_stats, args.metrics};
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions options;
  options.max_connections = 2 * args.config.max_sessions + 64;
  options.shutdown = &stop;
  // Every session's streams end with it, so the handlers finish at once;
  // the grace covers a child that ignores its end of input and SIGTERM.
  options.grace_period = 2 * args.config.kill_grace + std::chrono::seconds(1);
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    s.spawn([&]() -> shoal::Task<void> {
      const int sig = co_await shoal::signal::wait({SIGINT, SIGTERM});
      std::fprintf(stderr, "mcp_gateway: signal %d: ending every session\n", sig);
      stop.trigger();
      gateway.close();
    });
    s.spawn(gateway.run_sessions());
    co_await examples::serve_any(listener, options, http_options, handler, args.certificate, args.key);
    gateway.close();
    s.cancel();  // the signal waiter; the sessions have ended (close waits for none: run_sessions does)
  });
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "mcp_gateway: %s\nusage: mcp_gateway [--endpoint PATH] [--max-sessions N] [--max-message BYTES] "
                 "[--idle-timeout S] [--abandoned-timeout S] [--grace MS] [--keepalive S] [--allow-origin O]... [--token-file F] "
                 "[--tls CERT KEY] [--metrics] ADDRESS -- COMMAND [ARGS...]\n"
                 "  e.g. mcp_gateway 127.0.0.1:8000 -- npx -y @modelcontextprotocol/server-everything\n",
                 e.what());
    return 2;
  }
#if !SHOAL_EXAMPLE_TLS
  if (!args.certificate.empty()) {
    std::fprintf(stderr, "mcp_gateway: built without shoal::tls (OpenSSL 3 was not found): --tls is unavailable\n");
    return 2;
  }
#endif
  examples::raise_fd_limit();
  try {
    shoal::RuntimeOptions runtime;
    runtime.dump_signal = SIGUSR1;
    shoal::run(run_gateway(args), runtime);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mcp_gateway: %s\n", e.what());
    return 1;
  }
}
