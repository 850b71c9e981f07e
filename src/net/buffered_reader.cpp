// BufferedReader. The buffer is buf_[start_, size): read-ahead bytes.
// Taken bytes are dropped lazily (a view handed out stays valid until the
// next call), and the consumed prefix is moved out only before a read. A
// record never makes the buffer grow past its limit plus one chunk.
#include "shoal/net/buffered_reader.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace shoal::detail {

ReadableCase ByteStreamRef::readable_case() {
  if (ops_->readable_case == nullptr) {
    throw std::logic_error("shoal::net::on_readable: this stream type has no readability case "
                           "(net::Stream and tls::Stream have one)");
  }
  return ops_->readable_case(self_);
}

}  // namespace shoal::detail

namespace shoal::net {

std::string_view BufferedReader::take(std::size_t n) noexcept {
  const std::string_view out(buf_.data() + start_, n);
  start_ += n;
  scanned_ = 0;
  return out;
}

detail::ReadableCase on_readable(BufferedReader& r) {
  detail::ReadableCase c = r.in_.readable_case();
  if (r.start_ < r.buf_.size() || r.eof_) {
    c.set_pending();
  } else {
    // A wait as fill's is: an idle reader holds no buffer.
    std::string().swap(r.buf_);
    r.start_ = 0;
  }
  return c;
}

Task<bool> BufferedReader::fill() {
  if (eof_) co_return false;
  if (start_ == buf_.size()) {
    // Nothing read ahead: wait without a buffer (an idle reader holds none).
    std::string().swap(buf_);
    start_ = 0;
    if (Stream* plain = in_.target<Stream>()) {
      co_await plain->wait_readable();  // a socket's wait, with no coroutine between
    } else {
      co_await in_.wait_readable();
    }
  } else if (start_ > 0) {
    buf_.erase(0, start_);
    start_ = 0;
  }
  const std::size_t old = buf_.size();
  buf_.resize(old + chunk_);
  std::size_t n = 0;
  const auto tail = std::as_writable_bytes(std::span(buf_).subspan(old));
  try {
    if (Stream* plain = in_.target<Stream>()) {
      n = co_await plain->read_some(tail);
    } else {
      n = co_await in_.read_some(tail);
    }
  } catch (...) {
    buf_.resize(old);
    throw;
  }
  buf_.resize(old + n);
  if (n == 0) eof_ = true;
  co_return n > 0;
}

Task<std::optional<std::size_t>> BufferedReader::scan(char delim, std::size_t limit) {
  // A call cut off while waiting keeps what it searched; only a call for the
  // same delimiter may skip it (another would merge records past its own).
  if (delim != scanned_for_) {
    scanned_ = 0;
    scanned_for_ = delim;
  }
  for (;;) {
    const std::size_t have = buf_.size() - start_;
    const std::size_t look = std::min(have, limit);
    if (look > scanned_) {
      const void* hit = std::memchr(buf_.data() + start_ + scanned_, delim, look - scanned_);
      if (hit != nullptr) co_return static_cast<const char*>(hit) - (buf_.data() + start_) + 1;
      scanned_ = look;
    }
    if (have >= limit) {
      start_ = buf_.size();  // drop the oversized record's bytes: memory stays bounded
      scanned_ = 0;
      throw LineTooLong("shoal::net::BufferedReader: no delimiter within the limit of " + std::to_string(limit) +
                        " bytes");
    }
    if (!co_await fill()) {
      if (have == 0) co_return std::nullopt;
      co_return have;  // the last, unterminated record
    }
  }
}

Task<std::optional<std::string>> BufferedReader::read_until(char delim, std::size_t limit) {
  const auto n = co_await scan(delim, limit);
  if (!n) co_return std::nullopt;
  co_return std::string(take(*n));
}

namespace {
std::string_view strip_line_end(std::string_view line) noexcept {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}
}  // namespace

Task<std::optional<std::string_view>> BufferedReader::next_line(std::size_t limit) {
  const auto n = co_await scan('\n', limit);
  if (!n) co_return std::nullopt;
  co_return strip_line_end(take(*n));
}

Task<std::optional<std::string>> BufferedReader::read_line(std::size_t limit) {
  const auto line = co_await next_line(limit);
  if (!line) co_return std::nullopt;
  co_return std::string(*line);
}

Task<std::size_t> BufferedReader::read_some(std::span<std::byte> buf) {
  if (buf.empty()) co_return 0;
  if (start_ == buf_.size()) {
    if (eof_) co_return 0;
    if (Stream* plain = in_.target<Stream>()) co_return co_await plain->read_some(buf);
    co_return co_await in_.read_some(buf);
  }
  const std::size_t n = std::min(buf.size(), buf_.size() - start_);
  std::memcpy(buf.data(), buf_.data() + start_, n);
  (void)take(n);
  co_return n;
}

Task<void> BufferedReader::read_exact(std::span<std::byte> buf) {
  std::size_t done = 0;
  while (done < buf.size()) {
    const std::size_t n = co_await read_some(buf.subspan(done));
    if (n == 0) {
      throw EndOfStream("shoal::net::BufferedReader::read_exact: the stream ended after " + std::to_string(done) +
                        " of " + std::to_string(buf.size()) + " bytes");
    }
    done += n;
  }
}

}  // namespace shoal::net
