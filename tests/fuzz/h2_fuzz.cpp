// libFuzzer target: shoal::http2's server connection, fed the input as what
// a client sends after its preface, over a socket pair. Properties: the
// connection ends (the client's end of input and a bound on time), nothing
// leaks or overflows (ASan), and what the server writes is a well-formed
// frame sequence: whole frames within the default SETTINGS_MAX_FRAME_SIZE,
// SETTINGS first, answers only on streams a client may open (odd), and no
// frame but GOAWAY's own after the connection said GOAWAY with an error.
#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "shoal/http2/server.hpp"
#include "shoal/shoal.hpp"

namespace {

using namespace std::chrono_literals;
namespace http = shoal::http;

[[noreturn]] void violation(const char* what, const std::string& out) {
  std::fprintf(stderr, "h2_fuzz: %s (server wrote %zu bytes)\n", what, out.size());
  std::abort();
}

/// The server's bytes, frame by frame.
void check_frames(const std::string& out) {
  std::size_t at = 0;
  bool first = true, goaway_error = false;
  while (at < out.size()) {
    if (out.size() - at < 9) violation("a partial frame header at the end", out);
    const auto b = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(out[at + i])); };
    const std::size_t len = b(0) << 16 | b(1) << 8 | b(2);
    const std::uint32_t type = b(3);
    const std::uint32_t stream = (b(5) << 24 | b(6) << 16 | b(7) << 8 | b(8)) & 0x7fffffffu;
    if (len > 16384) violation("a frame past the default maximum frame size", out);
    if (out.size() - at - 9 < len) violation("a partial frame at the end", out);
    if (first && type != 4) violation("the first frame is not SETTINGS", out);
    first = false;
    if ((type == 0 || type == 1) && (stream == 0 || stream % 2 == 0)) {
      violation("DATA or HEADERS on a stream a client cannot have opened", out);
    }
    if (goaway_error && type != 7) violation("a frame after a GOAWAY with an error", out);
    if (type == 7 && len >= 8 && (b(13) | b(14) | b(15) | b(16)) != 0) goaway_error = true;
    at += 9 + len;
  }
}

shoal::Task<std::string> exchange(const std::string& input) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  shoal::net::Stream server_end(fds[0]), client(fds[1]);
  http::ServerOptions options;
  options.max_body = 4096;
  options.max_head = 2048;
  options.max_concurrent_streams = 4;
  http::Server server(options);
  std::string out;
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    s.spawn([&]() -> shoal::Task<void> {
      const auto handler = [](const http::Request& req, http::Response& res) -> shoal::Task<void> {
        res.set_header("x-len", std::to_string(req.body().size()));
        res.body.assign(req.target().size() % 3 == 0 ? 20000 : 5, 'x');  // some past one frame
        co_return;
      };
      try {
        co_await shoal::http2::serve_connection(server, std::move(server_end), handler);
      } catch (const std::runtime_error&) {
        // a connection error: what the server wrote is still checked
      }
    });
    const std::string bytes = std::string(shoal::http2::kClientPreface) + input;
    // Written while the answers are read, so that neither side's buffer fills.
    s.spawn([&]() -> shoal::Task<void> {
      try {
        co_await client.write_all(std::as_bytes(std::span(bytes.data(), bytes.size())));
        client.shutdown();
      } catch (const std::system_error&) {
        // the server closed first
      }
    });
    char buf[16384];
    for (;;) {
      std::size_t n = 0;
      try {
        n = co_await client.read_some(std::as_writable_bytes(std::span(buf)));
      } catch (const std::system_error&) {
        break;  // reset: what came is checked
      }
      if (n == 0) break;
      out.append(buf, n);
    }
    s.cancel();  // the writer, if the server stopped reading
  });
  co_return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, unsigned long size) {
  static shoal::Runtime runtime([] {
    shoal::RuntimeOptions o;
    o.workers = 1;
    return o;
  }());
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::optional<std::string> out = runtime.block_on(shoal::move_on_after(10s, exchange(input)));
  if (!out) violation("the connection did not end within 10 s of the client's last byte", {});
  check_frames(*out);
  return 0;
}
