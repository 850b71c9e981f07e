// Builds against an installed shoal::http2: an h2c server on a loopback
// port answers a client's preface with its SETTINGS frame.
#include <shoal/http2/server.hpp>
#include <shoal/shoal.hpp>

#include <cstdio>
#include <string>

int main() {
  const bool settings = shoal::run([]() -> shoal::Task<bool> {
    auto listener = shoal::net::Listener::bind(shoal::net::Address::parse("127.0.0.1:0"));
    const auto address = listener.local_address();
    shoal::http::Server server;
    const auto hello = [](const shoal::http::Request&, shoal::http::Response& res) { res.body = "hello"; };
    bool got = false;
    co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
      s.spawn([&]() -> shoal::Task<void> {
        shoal::net::Stream conn = co_await listener.accept();
        co_await shoal::http2::serve_connection(server, std::move(conn), hello);
      });
      shoal::net::Stream client = co_await shoal::net::connect(address);
      const std::string preface = std::string(shoal::http2::kClientPreface) + std::string("\0\0\0\4\0\0\0\0\0", 9);
      co_await client.write_all(std::as_bytes(std::span(preface.data(), preface.size())));
      std::byte head[9];
      std::size_t n = 0;
      while (n < sizeof head) {
        const std::size_t got_now = co_await client.read_some(std::span(head).subspan(n));
        if (got_now == 0) break;
        n += got_now;
      }
      got = n == sizeof head && head[3] == std::byte{4};  // a SETTINGS frame
      s.cancel();
    });
    co_return got;
  }());
  std::printf("installed shoal::http2 works: %s\n", settings ? "yes" : "no");
  return settings ? 0 : 1;
}
