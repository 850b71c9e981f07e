// A raw HTTP/2 client for the server suites: it writes frames (RFC 9113
// §4) as a test spells them and reads the server's, for what no real
// client does on demand (a reset at a chosen moment, a flood, a silent
// connection).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "shoal/net/stream.hpp"
#include "shoal/http2/server.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal::test::h2 {

enum : std::uint8_t {
  kData = 0,
  kHeaders = 1,
  kRstStream = 3,
  kSettings = 4,
  kPing = 6,
  kGoaway = 7,
  kWindowUpdate = 8,
  kContinuation = 9
};
enum : std::uint8_t { kEndStream = 1, kEndHeaders = 4 };
constexpr std::uint32_t kNoError = 0, kProtocolError = 1, kInternalError = 2, kRefusedStream = 7, kCancel = 8,
                        kEnhanceYourCalm = 11;

inline void put32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

inline std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream, const std::string& payload) {
  std::string f;
  const auto n = static_cast<std::uint32_t>(payload.size());
  f.push_back(static_cast<char>(n >> 16));
  f.push_back(static_cast<char>(n >> 8));
  f.push_back(static_cast<char>(n));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  put32(f, stream);
  return f + payload;
}

/// A GET of `path` as one HEADERS frame that ends the stream (HPACK:
/// :method GET and :scheme http from the static table, :path and
/// :authority as literals without indexing).
inline std::string get(std::uint32_t stream, const std::string& path) {
  std::string block = "\x82\x86";
  block += '\x04';  // literal, name = static entry 4 (:path)
  block += static_cast<char>(path.size());
  block += path;
  block += '\x01';  // literal, name = static entry 1 (:authority)
  block += '\x09';
  block += "localhost";
  return frame(kHeaders, kEndStream | kEndHeaders, stream, block);
}

/// A POST of `path` whose body follows in DATA frames (HEADERS without
/// END_STREAM; :method POST is static entry 3).
inline std::string post(std::uint32_t stream, const std::string& path) {
  std::string block = "\x83\x86";
  block += '\x04';
  block += static_cast<char>(path.size());
  block += path;
  block += '\x01';
  block += '\x09';
  block += "localhost";
  return frame(kHeaders, kEndHeaders, stream, block);
}

/// A DATA frame carrying `bytes`, ending the stream if `end`.
inline std::string data(std::uint32_t stream, const std::string& bytes, bool end) {
  return frame(kData, end ? kEndStream : 0, stream, bytes);
}

/// An HPACK string length (RFC 7541 §5.1: a 7-bit prefix, no Huffman).
inline std::string hpack_length(std::size_t n) {
  std::string out;
  if (n < 127) return std::string(1, static_cast<char>(n));
  out += '\x7f';
  for (n -= 127; n >= 128; n >>= 7) out += static_cast<char>((n & 0x7f) | 0x80);
  return out + static_cast<char>(n);
}

/// A GET of / with one more header field, `name: value` (a literal
/// without indexing, new name).
inline std::string get_with_field(std::uint32_t stream, const std::string& name, const std::string& value) {
  std::string block = "\x82\x86\x84";  // GET, http, /
  block += "\x01\x09localhost";       // :authority
  block += '\x00';
  block += hpack_length(name.size()) + name + hpack_length(value.size()) + value;
  return frame(kHeaders, kEndStream | kEndHeaders, stream, block);
}

inline std::string rst_stream(std::uint32_t stream, std::uint32_t code) {
  std::string payload;
  put32(payload, code);
  return frame(kRstStream, 0, stream, payload);
}

struct Frame {
  std::uint8_t type = 0, flags = 0;
  std::uint32_t stream = 0;
  std::string payload;
  std::uint32_t u32(std::size_t at) const {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(payload[at + i]);
    return v;
  }
};

/// A raw HTTP/2 client connection.
struct Client {
  shoal::net::Stream conn;
  std::string in;

  static shoal::Task<Client> open(const std::string& addr) {
    shoal::net::Stream conn = co_await shoal::net::connect(shoal::net::Address::parse(addr));
    Client c{std::move(conn), {}};
    co_await c.conn.write_all(std::string(shoal::http2::kClientPreface) + frame(kSettings, 0, 0, ""));
    co_return c;
  }
  shoal::Task<void> send(const std::string& bytes) { co_await conn.write_all(bytes); }
  /// The next frame, or empty at the end of the stream.
  shoal::Task<std::optional<Frame>> next() {
    auto need = [&](std::size_t n) -> shoal::Task<bool> {
      char buf[16384];
      while (in.size() < n) {
        const std::size_t got = co_await conn.read_some(std::as_writable_bytes(std::span(buf)));
        if (got == 0) co_return false;
        in.append(buf, got);
      }
      co_return true;
    };
    if (!co_await need(9)) co_return std::nullopt;
    const auto b = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])); };
    const std::size_t len = b(0) << 16 | b(1) << 8 | b(2);
    if (!co_await need(9 + len)) co_return std::nullopt;
    Frame f{static_cast<std::uint8_t>(b(3)), static_cast<std::uint8_t>(b(4)),
            (b(5) << 24 | b(6) << 16 | b(7) << 8 | b(8)) & 0x7fffffffu, in.substr(9, len)};
    in.erase(0, 9 + len);
    co_return f;
  }
  /// How the server ends `stream`: its first HEADERS (an answer) or
  /// RST_STREAM frame; empty if the connection ends first.
  shoal::Task<std::optional<Frame>> outcome(std::uint32_t stream) {
    for (;;) {
      std::optional<Frame> f = co_await next();
      if (!f || (f->stream == stream && (f->type == kHeaders || f->type == kRstStream))) co_return f;
    }
  }
  /// Frames until one of `type` (on `stream`, if given); empty if the
  /// connection ends first.
  shoal::Task<std::optional<Frame>> until(std::uint8_t type, std::optional<std::uint32_t> stream = std::nullopt) {
    for (;;) {
      std::optional<Frame> f = co_await next();
      if (!f || (f->type == type && (!stream || f->stream == *stream))) co_return f;
    }
  }
};

}  // namespace shoal::test::h2
