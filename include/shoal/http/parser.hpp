// HTTP/1.1 request parsing (RFC 9112): the request head, and chunked bodies.
// Both work on the bytes a connection has buffered, so pipelined requests are
// just the next call, and every view points into that buffer (no copies).
#pragma once

#include "shoal/version.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shoal::http {

/// One header field of a request: views into the parsed buffer.
struct Header {
  std::string_view name;   ///< as sent (compare case-insensitively)
  std::string_view value;  ///< leading and trailing spaces and tabs removed
};

/// What parse_request_head made of a buffer. `status` says whether the head
/// is there; on an error, `error` names what was wrong (for the response's
/// body and the log) and the connection must close after the answer.
enum class ParseStatus : std::uint8_t {
  complete,               ///< the head is parsed; its body (if any) follows it
  incomplete,             ///< need more bytes
  bad_request,            ///< 400: malformed or ambiguous
  too_large,              ///< 431: the head exceeds the limit
  expectation_failed,     ///< 417: an Expect other than 100-continue
  not_implemented,        ///< 501: a transfer coding other than chunked
  version_not_supported,  ///< 505: HTTP/2 and later in an HTTP/1 request line
};

/// A parsed request head. The views point into the parsed buffer.
struct RequestHead {
  /// The method as sent, e.g. "GET" (a token; methods are case-sensitive).
  std::string_view method;
  /// The request target as sent (usually origin form: path and query).
  std::string_view target;
  /// 0 for HTTP/1.0; 1 for HTTP/1.1 and any later HTTP/1.x, which is
  /// served as 1.1 (RFC 9110 §6.2).
  int minor_version = 1;
  /// Every header field, in the order sent (repeated names kept).
  std::vector<Header> headers;
  std::size_t content_length = 0;  ///< 0 without a Content-Length
  bool chunked = false;            ///< Transfer-Encoding: chunked (no Content-Length then)
  /// The connection may carry another request after this one: HTTP/1.1
  /// without `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`.
  bool keep_alive = true;
  bool expect_continue = false;  ///< `Expect: 100-continue` (HTTP/1.1)
  /// Bytes of the head, from the start of the buffer (leading empty lines,
  /// which are skipped, included) to the end of its blank line.
  std::size_t head_size = 0;
  /// Set with an error status: what was wrong, e.g. "missing Host header".
  std::string_view error;

  /// The first header named `name` (case-insensitive), or empty.
  std::string_view header(std::string_view name) const noexcept;
  /// True if the request has a body to read (a Content-Length above 0, or chunked).
  bool has_body() const noexcept { return chunked || content_length > 0; }
};

/// Parses the request head at the start of `buf` into `out` (views into
/// `buf`), within `max_head` bytes.
///
/// Accepted as RFC 9112 allows a server to: empty lines before the request
/// line, a bare LF as a line end, HTTP/1.2 and later 1.x (as 1.1), repeated
/// equal Content-Lengths. Refused, because guessing would let a request be
/// framed two ways: a missing or repeated Host in HTTP/1.1, a
/// Transfer-Encoding beside a Content-Length or in HTTP/1.0, conflicting
/// Content-Lengths, a bare CR, control bytes, whitespace before a header's
/// colon, obsolete line folding.
ParseStatus parse_request_head(std::string_view buf, RequestHead& out, std::size_t max_head = 8192);

/// Decodes a chunked body (RFC 9112 §7.1) as its bytes arrive: `feed` takes
/// what it can from the front of `in` (whole size lines, data, trailer
/// lines) and appends the data to `body`. Extensions and trailers are read
/// and dropped.
class ChunkedDecoder {
 public:
  /// What feed() reached.
  enum class Status : std::uint8_t {
    complete,     ///< the last chunk and the trailers are in; `in` starts after them
    incomplete,   ///< `in` is used up: feed it more
    bad_request,  ///< malformed framing (error() says how)
    too_large,    ///< the body would exceed `max_body`
  };
  /// Consumes what it can from the front of `in` (advancing it) and appends
  /// the chunk data to `body`, which may hold at most `max_body` bytes in all.
  /// Call again with more bytes after Status::incomplete.
  Status feed(std::string_view& in, std::string& body, std::size_t max_body);
  /// After Status::bad_request: what was wrong, e.g. "bad chunk size"
  /// (static text, always valid); empty before.
  std::string_view error() const noexcept { return error_; }

 private:
  enum class State : std::uint8_t { size_line, data, data_end, trailer, done };
  Status fail(std::string_view why) noexcept {
    error_ = why;
    return Status::bad_request;
  }
  State state_ = State::size_line;
  std::size_t remaining_ = 0;     // of the current chunk's data
  std::size_t trailer_bytes_ = 0;
  std::string_view error_;
};

/// True if `s` is a token (RFC 9110 §5.6.2): what a method or a header name must be.
bool is_token(std::string_view s) noexcept;

/// Case-insensitive ASCII comparison, for header names and tokens.
bool iequals(std::string_view a, std::string_view b) noexcept;

}  // namespace shoal::http
