// A diagnostic server for the idle-connection benchmark, on shoal::net::serve.
//
//   net_idle_server [address=127.0.0.1:8081] [minimal|hello] [census]
//
// minimal: each handler waits with `co_await conn.wait_readable()` (no
//          timeout, no buffer while idle), then reads and answers keep-alive
//          "hello" requests: the floor a shoal server can reach.
// hello:   the examples/http_server handler (shoal::http::serve with the
//          default ServerOptions), for the census below.
// census:  routes every coroutine frame through counting hooks; SIGUSR1
//          prints the live frames by size to stdout (nothing else changes
//          except the frame cache being bypassed, so RSS is not comparable).
// The soft RLIMIT_NOFILE is raised to the hard limit. SIGINT/SIGTERM stop it.
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "http/hello.hpp"
#include "shoal/testing/frame_hooks.hpp"
#include "shoal/detail/frame_alloc.hpp"
#include "shoal/shoal.hpp"

namespace {

// ---- frame census -----------------------------------------------------------

std::mutex g_census_mu;
std::map<std::size_t, long> g_live;  // frame size (with shoal's 16-byte header) -> live count

void* census_allocate(std::size_t size, void*) {
  void* p = std::malloc(size);
  if (p != nullptr) {
    std::lock_guard<std::mutex> g(g_census_mu);
    ++g_live[size];
  }
  return p;
}

void census_deallocate(void* p, std::size_t size, void*) noexcept {
  {
    std::lock_guard<std::mutex> g(g_census_mu);
    --g_live[size];
  }
  std::free(p);
}

const shoal::testing::FrameHooks g_hooks{census_allocate, census_deallocate, nullptr};

void print_census() {
  std::lock_guard<std::mutex> g(g_census_mu);
  long frames = 0, bytes = 0;
  std::printf("census: live frames by size (bytes incl. the 16-byte frame header):\n");
  for (auto& [size, n] : g_live) {
    if (n == 0) continue;
    std::printf("  %6zu B x %ld\n", size, n);
    frames += n;
    bytes += n * static_cast<long>(size);
  }
  std::printf("census: %ld frames, %ld bytes\n", frames, bytes);
  std::fflush(stdout);
}

// ---- handlers -----------------------------------------------------------------

constexpr std::string_view kResponse =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, world!";
constexpr std::string_view kCloseResponse =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: close\r\n\r\nHello, world!";

/// Waits for readability with no timeout and no buffer; answers each
/// complete request head (bodies are not supported: GET only).
shoal::Task<void> minimal_handler(shoal::net::Stream conn) {
  std::string in;
  for (;;) {
    if (in.empty()) {
      std::string().swap(in);  // hold no buffer while idle
      co_await conn.wait_readable();
    }
    const std::size_t old = in.size();
    in.resize(old + 4096);
    const std::size_t n = co_await conn.read_some(std::as_writable_bytes(std::span(in).subspan(old)));
    in.resize(old + n);
    if (n == 0) co_return;
    std::size_t end;
    while ((end = in.find("\r\n\r\n")) != std::string::npos) {
      const std::string_view head(in.data(), end);
      const bool close = head.find("Connection: close") != std::string_view::npos;
      co_await conn.write_all(close ? kCloseResponse : kResponse);
      if (close) co_return;
      in.erase(0, end + 4);
    }
    if (in.size() > 8192) co_return;  // not a request we answer
  }
}

shoal::Task<void> run_server(shoal::net::Address address, bool hello_mode, bool census) {
  auto listener = shoal::net::Listener::bind(address);
  std::printf("listening on %s (%s handler%s)\n", listener.local_address().to_string().c_str(),
              hello_mode ? "hello" : "minimal", census ? ", frame census on SIGUSR1" : "");
  std::fflush(stdout);
  shoal::net::ShutdownSignal stop;
  shoal::net::ServeOptions options;
  options.max_connections = 1'000'000;
  options.shutdown = &stop;
  options.grace_period = std::chrono::seconds(1);
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    s.spawn([&]() -> shoal::Task<void> {
      const shoal::signal::SignalSet stops(SIGINT, SIGTERM);
      const int sig = co_await shoal::signal::wait(stops);
      std::printf("signal %d: shutting down\n", sig);
      stop.trigger();
    });
    if (census) {
      s.spawn([]() -> shoal::Task<void> {
        const shoal::signal::SignalSet usr1(SIGUSR1);
        for (;;) {
          (void)co_await shoal::signal::wait(usr1);
          print_census();
        }
      });
    }
    if (hello_mode) {
      co_await shoal::http::serve(listener, options, shoal::http::ServerOptions{}, hello::Handler{});
    } else {
      co_await shoal::net::serve(listener, options, minimal_handler);
    }
    s.cancel();  // the signal waiters
  });
}

}  // namespace

int main(int argc, char** argv) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  const bool hello_mode = argc > 2 && std::strcmp(argv[2], "hello") == 0;
  const bool census = argc > 3 && std::strcmp(argv[3], "census") == 0;
  if (census) shoal::testing::set_frame_hooks(&g_hooks);
  try {
    shoal::run(run_server(shoal::net::Address::parse(argc > 1 ? argv[1] : "127.0.0.1:8081"), hello_mode, census));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "net_idle_server: %s\n", e.what());
    return 1;
  }
}
