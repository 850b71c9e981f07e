// A small HTTP/1.1 request parser for the keep-alive example server.
// It parses one request head at a time out of a byte buffer, so pipelined
// requests are just the next call. Fuzzed by tests/fuzz/http_fuzz.cpp.
#pragma once

#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

namespace http1 {

struct Request {
  std::string_view method;
  std::string_view target;
  int minor_version = 1;  // HTTP/1.<minor>
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  std::size_t content_length = 0;
  bool keep_alive = true;
  std::size_t head_size = 0;  // bytes of the request line and headers, blank line included
};

enum class Parse {
  complete,       ///< `out` holds the head; the body (content_length bytes) follows it
  incomplete,     ///< need more bytes
  bad_request,    ///< malformed: answer 400 and close
  too_large,      ///< the head exceeds the limit: answer 431 and close
};

/// Parses the request head at the start of `buf`. Views in `out` point into
/// `buf`. Rejects what it does not support rather than guessing: a
/// Transfer-Encoding (no chunked bodies here), conflicting or malformed
/// Content-Length, bare CR, control bytes, obsolete line folding.
Parse parse_request(std::string_view buf, Request& out, std::size_t max_head = 8192);

}  // namespace http1
