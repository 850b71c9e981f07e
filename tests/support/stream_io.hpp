// Reading a whole stream in tests: a net::Stream, a process's pipe, or a
// tls::Stream (anything with read_some(std::span<std::byte>)).
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "shoal/net/byte_stream.hpp"
#include "shoal/net/stream.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal::test {

/// Everything `s` delivers until its end of stream.
template <class S>
Task<std::string> read_to_end(S& s) {
  std::string out;
  std::vector<std::byte> buf(8192);
  for (std::size_t n; (n = co_await s.read_some(std::span<std::byte>(buf))) != 0;) {
    out.append(reinterpret_cast<const char*>(buf.data()), n);
  }
  co_return out;
}

/// What crossed a RecordingStream.
struct StreamRecord {
  std::string read, written;  ///< the bytes, each way
  bool lingered = false;      ///< linger_close was called
  bool drained = false;       ///< linger_close returned (the peer ended, reset or stayed silent; not cancelled)
};

/// A ByteStream of the test's own over a net::Stream, which records what
/// crossed it into a StreamRecord that outlives it: protocol code that
/// takes any ByteStream must work through its calls (each a Task of its
/// own, as a user's type would make them).
class RecordingStream {
 public:
  RecordingStream(net::Stream s, StreamRecord& record) : s_(std::move(s)), r_(&record) {}
  Task<std::size_t> read_some(std::span<std::byte> buf) {
    const std::size_t n = co_await s_.read_some(buf);
    r_->read.append(reinterpret_cast<const char*>(buf.data()), n);
    co_return n;
  }
  Task<void> write_all(std::span<const std::byte> buf) {
    co_await s_.write_all(buf);
    r_->written.append(reinterpret_cast<const char*>(buf.data()), buf.size());
  }
  Task<void> wait_readable() { co_await s_.wait_readable(); }
  void shutdown() { s_.shutdown(); }
  Task<void> linger_close(std::chrono::milliseconds limit) {
    r_->lingered = true;
    co_await s_.linger_close(limit);
    r_->drained = true;
  }
  void close() noexcept { s_.close(); }
  void set_idle_timeout(std::chrono::milliseconds t) noexcept { s_.set_idle_timeout(t); }
  std::chrono::milliseconds idle_timeout() const noexcept { return s_.idle_timeout(); }
  int native_handle() const noexcept { return s_.native_handle(); }

 private:
  net::Stream s_;
  StreamRecord* r_;
};
static_assert(net::ByteStream<RecordingStream>);

}  // namespace shoal::test
