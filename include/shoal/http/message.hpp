// HTTP/1.1 messages as a handler sees them: the Request it reads and the
// Response it fills; and how a response is written (RFC 9112 framing).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "shoal/http/parser.hpp"

namespace shoal::http {

/// A request as the handler gets it. Views into the connection's buffer:
/// valid until the handler returns.
class Request {
 public:
  /// A view of `head` and `body`, which must outlive it (the server makes
  /// one per request).
  Request(const RequestHead& head, std::string_view body) noexcept : head_(&head), body_(body) {}
  /// The method as sent, e.g. "GET" (case-sensitive).
  std::string_view method() const noexcept { return head_->method; }
  /// The request target as sent: usually origin form (path and query); also
  /// absolute form (a proxy request), host:port (CONNECT) or `*` (OPTIONS).
  std::string_view target() const noexcept { return head_->target; }
  /// 0 for HTTP/1.0, 1 for HTTP/1.1.
  int minor_version() const noexcept { return head_->minor_version; }
  /// The first header named `name` (case-insensitive), or empty.
  std::string_view header(std::string_view name) const noexcept { return head_->header(name); }
  /// Every header field, in the order sent (repeated names kept).
  const std::vector<Header>& headers() const noexcept { return head_->headers; }
  /// The whole body (a chunked one already decoded).
  std::string_view body() const noexcept { return body_; }

 private:
  const RequestHead* head_;
  std::string_view body_;
};

/// What the handler answers. Starts as 200 with no headers and no body;
/// the server adds Date, Content-Length and Connection itself.
class Response {
 public:
  int status = 200;  ///< a final status, 200..999
  /// The body; the server sends its length as Content-Length. Not sent for
  /// 204 and 304 (which have no body) nor in answer to HEAD.
  std::string body;

  /// Adds a header line. Throws std::invalid_argument naming the header if
  /// the name is not a token or either contains a CR, LF or NUL (which would
  /// let a value forge headers), and if the name is one the server writes
  /// itself (Content-Length, Transfer-Encoding, Connection, Date).
  void set_header(std::string_view name, std::string_view value);
  /// Close the connection after this response (`Connection: close`).
  void close_connection() noexcept { close_ = true; }
  /// True once close_connection() was called (until reset()).
  bool closes_connection() const noexcept { return close_; }
  /// The header lines added so far, each ending in CRLF.
  std::string_view header_lines() const noexcept { return headers_; }

  /// Back to a fresh 200 (keeps the strings' memory for the next request).
  void reset() noexcept {
    status = 200;
    body.clear();
    headers_.clear();
    close_ = false;
  }
  /// Gives the memory back (an idle connection holds none).
  void release() noexcept {
    reset();
    std::string().swap(body);
    std::string().swap(headers_);
  }

 private:
  std::string headers_;
  bool close_ = false;
};

/// The reason phrase of `status` ("OK", "Not Found"), or "Unknown".
std::string_view reason_phrase(int status) noexcept;

/// How append_response frames a response.
struct Framing {
  bool head_request = false;  ///< HEAD: the head says the body's length, no body follows
  bool close = false;         ///< `Connection: close`, and the connection ends after it
  bool announce_keep_alive = false;  ///< `Connection: keep-alive` (an HTTP/1.0 client asked for it)
};

/// Appends `r` as an HTTP/1.1 response to `out`: status line, Date,
/// Content-Length (none for 204 and 304, which have no body), the handler's
/// headers, Connection, then the body unless `f.head_request`.
/// Throws std::invalid_argument for a status outside 200..999.
void append_response(std::string& out, const Response& r, Framing f);

/// Appends a response of `status` whose body is `text` and a newline, with
/// `Connection: close`: how the server answers what it refuses.
void append_error(std::string& out, int status, std::string_view text);

/// The Date header's value now ("Sun, 06 Nov 1994 08:49:37 GMT", RFC 9110
/// §5.6.7), formatted once a second per thread; valid until the thread's
/// next call.
std::string_view http_date() noexcept;

}  // namespace shoal::http
