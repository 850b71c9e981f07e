// Response framing: status line, Date (formatted once a second per thread),
// Content-Length, Connection.
#include "shoal/http/message.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>

#include "src/net/peer.hpp"
#include "src/platform/platform.hpp"

namespace shoal::http {
namespace {

bool forges_lines(std::string_view s) noexcept {
  for (char c : s) {
    if (c == '\r' || c == '\n' || c == '\0') return true;
  }
  return false;
}

/// "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" for this second (RFC 9110
/// §5.6.7); formatting it costs more than the rest of a small response.
std::string_view date_line() noexcept {
  struct Cache {
    std::time_t second = -1;
    char text[48] = {};
    int size = 0;
  };
  thread_local Cache cache;
  // The clock as of the last tick (a few ms old where the kernel has a
  // coarse clock): whole seconds are all the header shows, and it costs a
  // third of a precise read.
  timespec ts{};
  (void)clock_gettime(shoal::detail::platform::kCoarseRealtime, &ts);
  const std::time_t now = ts.tv_sec;
  if (now != cache.second) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    cache.size = static_cast<int>(std::strftime(cache.text, sizeof cache.text, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm));
    cache.second = now;
  }
  return {cache.text, static_cast<std::size_t>(cache.size)};
}

}  // namespace

std::string_view http_date() noexcept {
  const std::string_view line = date_line();  // "Date: " value CRLF
  return line.substr(6, line.size() - 8);
}

namespace {

void append_number(std::string& out, std::size_t n) {
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, n);
  out.append(digits, static_cast<std::size_t>(r.ptr - digits));
}

}  // namespace

namespace {
void check_field(std::string_view what, std::string_view name, std::string_view value) {
  if (!is_token(name) || forges_lines(value)) {
    throw std::invalid_argument("shoal::http::Response::" + std::string(what) + ": header \"" +
                                std::string(name.substr(0, 64)) + "\" has a bad name or a CR, LF or NUL in its value");
  }
  for (std::string_view own : {"content-length", "transfer-encoding", "connection", "date"}) {
    if (name.size() == own.size() && iequals(name, own)) {
      throw std::invalid_argument("shoal::http::Response::" + std::string(what) + ": the server writes \"" +
                                  std::string(name) + "\" itself (use close_connection() to close)");
    }
  }
}
}  // namespace

void Response::set_header(std::string_view name, std::string_view value) {
  if (streaming_) {
    throw std::logic_error("shoal::http::Response::set_header: \"" + std::string(name.substr(0, 64)) +
                           "\" comes after write() sent the headers");
  }
  check_field("set_header", name, value);
  if (fields_.size() + name.size() + value.size() + 4 > UINT32_MAX) {
    throw std::length_error("shoal::http::Response::set_header: the header lines would pass 4 GiB");
  }
  const std::size_t trailer_size = fields_.size() - trailers_at_;
  if (trailer_size == 0) {
    fields_.append(name).append(": ").append(value).append("\r\n");
  } else {  // rare: a header set after a trailer goes before it
    std::string line;
    line.append(name).append(": ").append(value).append("\r\n");
    fields_.insert(trailers_at_, line);
  }
  trailers_at_ = static_cast<std::uint32_t>(fields_.size() - trailer_size);
}

void Response::set_trailer(std::string_view name, std::string_view value) {
  check_field("set_trailer", name, value);
  fields_.append(name).append(": ").append(value).append("\r\n");
}

Task<void> Response::write(std::string_view chunk) {
  if (sink_ == nullptr) {
    throw std::logic_error("shoal::http::Response::write: this response is not a server's (only a handler's can stream)");
  }
  if (status == 204 || status == 304 || status < 200 || status > 999) {
    throw std::logic_error("shoal::http::Response::write: status " + std::to_string(status) +
                           " has no body to stream");
  }
  return sink_->write(*this, chunk);  // which marks it streaming once the head is committed
}

namespace detail {
void attach(Response& res, BodySink* sink) noexcept { res.sink_ = sink; }
void begin_streaming(Response& res) noexcept { res.streaming_ = true; }
void set_connection(Request& req, int fd) noexcept { req.fd_ = fd; }
}  // namespace detail

Task<std::size_t> Request::read_some(std::span<std::byte> buf) const {
  if (source_ != nullptr) co_return co_await source_->read_some(buf);
  const std::size_t n = std::min(buf.size(), body_.size() - read_);
  if (n != 0) std::memcpy(buf.data(), body_.data() + read_, n);
  read_ += n;
  co_return n;
}

Task<std::string> Request::read_all(std::size_t limit) const {
  std::string all;
  for (;;) {
    const std::size_t at = all.size();
    // One byte past the limit tells a body of exactly `limit` from a longer one.
    const std::size_t room = std::min<std::size_t>(limit - at, std::max<std::size_t>(at, 16384) - 1) + 1;
    all.resize(at + room);
    const std::size_t n = co_await read_some(std::as_writable_bytes(std::span(all).subspan(at)));
    all.resize(at + n);
    if (n == 0) co_return all;
    if (all.size() > limit) {
      throw BodyError(413, "shoal::http::Request::read_all: the request body is longer than its limit (" +
                               std::to_string(limit) + " bytes)");
    }
  }
}

std::string_view reason_phrase(int status) noexcept {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

void append_head(std::string& out, const Response& r, Framing f) {
  if (r.status < 200 || r.status > 999) {
    throw std::invalid_argument("shoal::http: response status " + std::to_string(r.status) +
                                " is not a final status (200..999)");
  }
  const bool bodiless = r.status == 204 || r.status == 304;
  out.append("HTTP/1.1 ");
  append_number(out, static_cast<std::size_t>(r.status));
  out.push_back(' ');
  out.append(reason_phrase(r.status)).append("\r\n").append(date_line());
  if (bodiless || f.unsized) {
  } else if (f.chunked) {
    out.append("Transfer-Encoding: chunked\r\n");
  } else {
    out.append("Content-Length: ");
    append_number(out, r.body.size());
    out.append("\r\n");
  }
  out.append(r.header_lines());
  if (f.close) {
    out.append("Connection: close\r\n");
  } else if (f.announce_keep_alive) {
    out.append("Connection: keep-alive\r\n");
  }
  out.append("\r\n");
}

void append_chunk(std::string& out, std::string_view data) {
  if (data.empty()) return;
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, data.size(), 16);
  out.append(digits, static_cast<std::size_t>(r.ptr - digits)).append("\r\n").append(data).append("\r\n");
}

void append_last_chunk(std::string& out, const Response& r) {
  out.append("0\r\n").append(r.trailer_lines()).append("\r\n");
}

void append_response(std::string& out, const Response& r, Framing f) {
  const bool bodiless = r.status == 204 || r.status == 304;
  f.chunked = f.chunked && !bodiless && !r.trailer_lines().empty();  // only trailers need it
  append_head(out, r, f);
  if (bodiless || f.head_request) return;
  if (f.chunked) {
    append_chunk(out, r.body);
    append_last_chunk(out, r);
  } else {
    out.append(r.body);
  }
}

void append_error(std::string& out, int status, std::string_view text) {
  Response r;
  r.status = status;
  r.set_header("Content-Type", "text/plain; charset=utf-8");
  r.body.append(text).push_back('\n');
  append_response(out, r, Framing{.close = true});
}

std::optional<net::Address> Request::peer() const {
  if (fd_ < 0) return std::nullopt;
  return shoal::detail::peer_address_of(fd_);
}

}  // namespace shoal::http
