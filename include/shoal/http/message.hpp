// HTTP/1.1 messages as a handler sees them: the Request it reads and the
// Response it fills; and how a response is written (RFC 9112 framing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "shoal/http/parser.hpp"
#include "shoal/net/address.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal::http {

class Request;
class Response;

namespace detail {
/// Where Response::write sends: the connection serving the response (an
/// HTTP/1.1 chunked body, an HTTP/2 stream). Set by the server.
class BodySink {
 public:
  /// Sends the head if not yet sent, then what `res.body` holds (which it
  /// empties), then `chunk`; completes once the connection has taken them
  /// (HTTP/2: all but at most a frame's worth, 16 KiB).
  virtual Task<void> write(Response& res, std::string_view chunk) = 0;

 protected:
  ~BodySink() = default;
};
void attach(Response& res, BodySink* sink) noexcept;
/// Called by the sink when a write commits the head (sent or queued):
/// from then on the response is streaming() and no 500 can replace it.
void begin_streaming(Response& res) noexcept;
/// The connection's socket, for Request::peer. Set by the server.
void set_connection(Request& req, int fd) noexcept;

/// Where a streamed request body comes from: the connection serving the
/// request (HTTP/1.1 bytes after the head, an HTTP/2 stream's DATA). Set
/// by the server.
class BodySource {
 public:
  /// As Request::read_some.
  virtual Task<std::size_t> read_some(std::span<std::byte> buf) = 0;

 protected:
  ~BodySource() = default;
};
}  // namespace detail

/// A request body that could not be read because of the client: its chunk
/// framing was bad (400), it stopped arriving for the header timeout
/// (408), the connection ended inside it (400), or it was longer than a
/// read_all limit (413). If it leaves the handler before the response has
/// begun, the server answers status() with what() as the body; the
/// connection closes either way. Not a handler fault: serve does not
/// report it.
class BodyError : public std::runtime_error {
 public:
  /// `status` answers it; `what` names what was wrong.
  BodyError(int status, const std::string& what) : std::runtime_error(what), status_(status) {}
  /// The HTTP status that answers it.
  int status() const noexcept { return status_; }

 private:
  int status_;
};

/// A request as the handler gets it. Views into the connection's buffer:
/// valid until the handler returns.
class Request {
 public:
  /// A view of `head` and a whole `body`, which must outlive it (the
  /// server makes one per request).
  Request(const RequestHead& head, std::string_view body) noexcept : head_(&head), body_(body) {}
  /// A view of `head` whose body is read from `source` as it arrives.
  Request(const RequestHead& head, detail::BodySource& source) noexcept : head_(&head), source_(&source) {}
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
  /// The whole body (a chunked one already decoded), as the server read it
  /// before calling the handler. Empty if the body is streamed (see
  /// body_streamed()): then read it with read_some or read_all.
  std::string_view body() const noexcept { return body_; }
  /// True if the body arrives as the handler reads it
  /// (ServerOptions::stream_request_body, a Task<void> handler).
  bool body_streamed() const noexcept { return source_ != nullptr; }
  /// The client's address (getpeername(2) on the connection's socket, when
  /// called), or none: the connection is not a socket, or the client has
  /// gone. Throws std::bad_alloc.
  std::optional<net::Address> peer() const;

  /// Reads the next bytes of the body into `buf`: what has arrived, waiting
  /// if nothing has; 0 at the end of the body. A streamed body arrives no
  /// faster than the handler reads it (HTTP/2: the stream's window reopens
  /// as it reads; HTTP/1.1: the socket is read as it reads). A body the
  /// server read whole is read from memory. HTTP/1.1 sends
  /// `100 Continue` at the first read if the client asked for it.
  /// Checkpoint: yes (a streamed body).
  /// Cancellation: Cancelled (HTTP/2: the client reset the stream); what
  ///   was read stays read.
  /// Thread-safety: one reader at a time, any task of the handler's.
  /// Throws: Cancelled; BodyError (400, 408); the connection's errors
  ///   (std::system_error).
  Task<std::size_t> read_some(std::span<std::byte> buf) const;
  /// Reads the rest of the body, at most `limit` bytes of it.
  /// Checkpoint, Cancellation, Thread-safety: as read_some.
  /// Throws: as read_some; BodyError (413) naming the limit if the body is
  ///   longer.
  Task<std::string> read_all(std::size_t limit) const;

 private:
  const RequestHead* head_;
  std::string_view body_;
  detail::BodySource* source_ = nullptr;
  mutable std::size_t read_ = 0;  // of a whole body_, by read_some
  int fd_ = -1;                   // the connection's socket (detail::set_connection)
  friend void detail::set_connection(Request& req, int fd) noexcept;
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
  std::string_view header_lines() const noexcept { return std::string_view(fields_).substr(0, trailers_at_); }

  /// Streams the body as the handler makes it (Server-Sent Events, a long
  /// download, a proxied stream). The first call sends the status and the
  /// headers set so far, which are then fixed; each call sends what `body`
  /// holds, then `chunk`, and completes once the connection has taken
  /// them, so a client that reads slowly slows the handler (backpressure),
  /// and memory stays at one chunk. Over HTTP/2 it completes while at most
  /// 16 KiB (a frame's worth) is still to be taken, so that small writes
  /// leave together in one DATA frame. No length is sent: HTTP/1.1 frames
  /// the body chunked (to an HTTP/1.0 client, the connection closes after it);
  /// HTTP/2 ends the stream when the handler returns. What `body` holds
  /// then is sent last.
  /// Checkpoint: yes.
  /// Cancellation: Cancelled (the client reset the stream or went away);
  ///   what was sent stays sent.
  /// Thread-safety: the handler's task only.
  /// Throws: Cancelled; std::logic_error outside a server's handler, or for
  ///   a status that has no body (204, 304) or is not final (200..999);
  ///   the connection's errors (std::system_error).
  Task<void> write(std::string_view chunk);
  /// True once a write() began the response: its head is sent (or, over
  /// HTTP/2, queued), so a failure after it cannot be answered 500. A
  /// write refused as cancelled, or that could not start, leaves it
  /// false. Until reset().
  bool streaming() const noexcept { return streaming_; }

  /// Adds a trailer field, sent after the body (gRPC's grpc-status is
  /// one). HTTP/2: a HEADERS frame that ends the stream. HTTP/1.1: the end
  /// of a chunked body, so a response with trailers is chunked even if not
  /// streamed; an HTTP/1.0 client does not get them.
  /// Throws: std::invalid_argument as set_header.
  void set_trailer(std::string_view name, std::string_view value);
  /// The trailer lines added so far, each ending in CRLF.
  std::string_view trailer_lines() const noexcept { return std::string_view(fields_).substr(trailers_at_); }

  /// Back to a fresh 200 (keeps the strings' memory for the next request).
  void reset() noexcept {
    status = 200;
    body.clear();
    fields_.clear();
    trailers_at_ = 0;
    close_ = false;
    streaming_ = false;
  }
  /// Gives the memory back (an idle connection holds none).
  void release() noexcept {
    reset();
    std::string().swap(body);
    std::string().swap(fields_);
  }

 private:
  friend void detail::attach(Response& res, detail::BodySink* sink) noexcept;
  friend void detail::begin_streaming(Response& res) noexcept;
  // The header lines, then the trailer lines: one string, as a connection
  // holds a Response in its frame for its whole life.
  std::string fields_;
  detail::BodySink* sink_ = nullptr;
  std::uint32_t trailers_at_ = 0;
  bool close_ = false;
  bool streaming_ = false;
};

/// The reason phrase of `status` ("OK", "Not Found"), or "Unknown".
std::string_view reason_phrase(int status) noexcept;

/// How append_response frames a response.
struct Framing {
  bool head_request = false;  ///< HEAD: the head says the body's length, no body follows
  bool close = false;         ///< `Connection: close`, and the connection ends after it
  bool announce_keep_alive = false;  ///< `Connection: keep-alive` (an HTTP/1.0 client asked for it)
  bool chunked = false;  ///< `Transfer-Encoding: chunked` instead of Content-Length
  bool unsized = false;  ///< neither: the body ends with the connection (needs `close`)
};

/// Appends `r` as an HTTP/1.1 response to `out`: status line, Date,
/// Content-Length (none for 204 and 304, which have no body), the handler's
/// headers, Connection, then the body unless `f.head_request`. With
/// trailers and `f.chunked` allowed, the body goes chunked, trailers last.
/// Throws std::invalid_argument for a status outside 200..999.
void append_response(std::string& out, const Response& r, Framing f);
/// The head alone, framed as `f` says (chunked, unsized or the length of
/// `r.body`).
/// Throws std::invalid_argument for a status outside 200..999.
void append_head(std::string& out, const Response& r, Framing f);
/// One chunk of a chunked body (nothing for an empty `data`, which would
/// end the body).
void append_chunk(std::string& out, std::string_view data);
/// The end of a chunked body: the last chunk and `r`'s trailers.
void append_last_chunk(std::string& out, const Response& r);

/// Appends a response of `status` whose body is `text` and a newline, with
/// `Connection: close`: how the server answers what it refuses.
void append_error(std::string& out, int status, std::string_view text);

/// The Date header's value now ("Sun, 06 Nov 1994 08:49:37 GMT", RFC 9110
/// §5.6.7), formatted once a second per thread; valid until the thread's
/// next call.
std::string_view http_date() noexcept;

}  // namespace shoal::http
