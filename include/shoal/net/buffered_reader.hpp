// BufferedReader: delimited records, lines and exact sizes from a stream
// (a socket, a pipe, TLS: any ByteStream), with memory bounded by the limit
// each call gives.
//
//   shoal::net::BufferedReader in(conn);
//   while (auto line = co_await in.next_line(8192)) handle(*line);   // a string_view, no copy
#pragma once

#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "shoal/net/byte_stream.hpp"
#include "shoal/net/stream.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal::net {

/// A record was longer than the limit its call allowed. The bytes read for
/// it are dropped, so the stream is mid-record: end the conversation.
class LineTooLong : public std::runtime_error {
 public:
  /// An error whose what() is `what`.
  explicit LineTooLong(const std::string& what) : std::runtime_error(what) {}
};

/// Reads a ByteStream (a net::Stream, a tls::Stream, ...) through a buffer.
/// Between calls it holds only the bytes it read ahead, and while it waits
/// with nothing read ahead it holds no buffer at all (an idle connection
/// stays small). The stream must outlive it; do not read the stream
/// directly while it holds read-ahead bytes. Every call is a checkpoint
/// (its reads are), has the stream's read contract (idle limits, errors),
/// and one task reads at a time.
class BufferedReader {
 public:
  /// `chunk`: how much one read asks the stream for (at least 64).
  template <class S>
    requires(!std::same_as<std::remove_cv_t<S>, BufferedReader> && ByteStream<S>)
  explicit BufferedReader(S& stream, std::size_t chunk = 4096) noexcept
      : in_(stream), chunk_(chunk < 64 ? 64 : chunk) {}
  BufferedReader(const BufferedReader&) = delete;
  BufferedReader& operator=(const BufferedReader&) = delete;

  /// The bytes up to and including the next `delim`; at the end of the
  /// stream, the bytes left without one; nullopt when nothing is left.
  /// Cancellation: the bytes read so far stay buffered for the next call.
  /// Throws: LineTooLong (no `delim` within `limit` bytes); as the stream's read_some.
  Task<std::optional<std::string>> read_until(char delim, std::size_t limit);

  /// The next line without its "\n" (or "\r\n"); at the end of the stream
  /// the last unterminated line; nullopt when nothing is left.
  /// Cancellation, Throws: as read_until (`limit` counts the line ending).
  Task<std::optional<std::string>> read_line(std::size_t limit);

  /// As read_line, without a copy: the view points into the buffer and is
  /// valid until the next call on this reader. The idiom for a lines loop:
  /// `while (auto line = co_await in.next_line(limit))`.
  Task<std::optional<std::string_view>> next_line(std::size_t limit);

  /// Up to `buf.size()` bytes: read-ahead bytes first, else one read of the
  /// stream. 0 at the end of the stream (or for an empty `buf`).
  /// Cancellation: nothing was taken. Throws: as the stream's read_some.
  Task<std::size_t> read_some(std::span<std::byte> buf);

  /// Fills `buf`. Throws EndOfStream if the stream ends first (the bytes
  /// that came are consumed); as the stream's read_some.
  Task<void> read_exact(std::span<std::byte> buf);

  /// The bytes read ahead and not yet taken.
  std::string_view buffered() const noexcept { return std::string_view(buf_).substr(start_); }
  /// The bytes of buffer it holds (read ahead or not): 0 while it waits
  /// with nothing read ahead, in a call or in a select on on_readable.
  std::size_t buffer_size() const noexcept { return buf_.capacity() > 15 ? buf_.capacity() : 0; }

  /// A select case (shoal::select) that completes when the reader's next
  /// call would not wait for the stream to become readable: at once while
  /// bytes are read ahead (or the stream ended), else when the stream is
  /// readable (net::on_readable). It reads nothing; a line may still need
  /// more than one read.
  /// Throws: std::logic_error for a stream type with no on_readable
  ///   (net::Stream and tls::Stream have one); as net::on_readable.
  friend shoal::detail::ReadableCase on_readable(BufferedReader& r);

 private:
  // Finds `delim` in the read-ahead, reading more as needed: the length of
  // the record (with its delimiter), or of the rest at the end of the
  // stream, or nullopt when nothing is left.
  Task<std::optional<std::size_t>> scan(char delim, std::size_t limit);
  // One read of the stream into the buffer's tail (waiting for readiness
  // first when nothing is buffered, with no buffer held). False at the end.
  Task<bool> fill();
  std::string_view take(std::size_t n) noexcept;

  shoal::detail::ByteStreamRef in_;  // a net::Stream is read directly (target)
  std::size_t chunk_;
  std::string buf_;
  std::size_t start_ = 0;    // consumed prefix of buf_
  std::size_t scanned_ = 0;  // bytes after start_ already searched for scanned_for_
  char scanned_for_ = 0;     // a call with another delimiter searches from start_ again
  bool eof_ = false;
};

/// A select case on `r`'s readability (see BufferedReader's on_readable).
shoal::detail::ReadableCase on_readable(BufferedReader& r);

}  // namespace shoal::net
