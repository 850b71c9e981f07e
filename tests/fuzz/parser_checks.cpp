#include "parser_checks.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "shoal/http/parser.hpp"
#include "shoal/net/address.hpp"

namespace shoal::fuzz {
namespace {
[[noreturn]] void violation(const char* what) {
  std::fprintf(stderr, "parser property violated: %s\n", what);
  std::abort();
}
bool inside(std::string_view part, std::string_view whole) {
  return part.empty() || (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}
}  // namespace

void check_http_parser(const std::uint8_t* data, std::size_t size) {
  const std::string_view buf(reinterpret_cast<const char*>(data), size);
  http::RequestHead req;
  const auto r = http::parse_request_head(buf, req, 1024);
  if (r == http::ParseStatus::incomplete) {
    if (buf.size() >= 1024) violation("incomplete at the limit (should be too_large)");
    return;
  }
  if (r != http::ParseStatus::complete) {
    if (req.error.empty()) violation("an error without a reason");
    return;
  }
  if (req.head_size > buf.size() || req.head_size > 1024) violation("head_size beyond the input or the limit");
  if (req.method.empty() || req.target.empty()) violation("a complete request without method or target");
  if (!inside(req.method, buf) || !inside(req.target, buf)) violation("a view outside the buffer");
  if (req.minor_version != 0 && req.minor_version != 1) violation("a minor version other than 0 or 1");
  if (req.chunked && req.content_length != 0) violation("chunked with a Content-Length");
  for (const auto& [name, value] : req.headers) {
    if (name.empty() || !inside(name, buf) || !inside(value, buf)) violation("a bad header view");
    if (!inside(name, buf.substr(0, req.head_size))) violation("a header beyond the head");
    if (value.find_first_of("\r\n") != std::string_view::npos) violation("a CR or LF inside a header value");
  }
  // The body bytes after the head must not change how the head parses.
  http::RequestHead again;
  if (http::parse_request_head(buf.substr(0, req.head_size), again, 1024) != http::ParseStatus::complete ||
      again.content_length != req.content_length || again.keep_alive != req.keep_alive ||
      again.chunked != req.chunked || again.headers.size() != req.headers.size()) {
    violation("the head parses differently without the bytes after it");
  }
  if (!req.chunked) return;
  // A chunked body decodes the same however its bytes arrive: all at once,
  // or one at a time.
  const std::string_view rest = buf.substr(req.head_size);
  http::ChunkedDecoder whole;
  std::string whole_body;
  std::string_view in = rest;
  const auto whole_status = whole.feed(in, whole_body, 512);
  if (whole_body.size() > 512) violation("a decoded body beyond max_body");
  http::ChunkedDecoder piecewise;
  std::string piece_body, pending;
  auto piece_status = http::ChunkedDecoder::Status::incomplete;
  std::size_t used = 0;
  for (char c : rest) {
    pending.push_back(c);
    ++used;
    std::string_view view = pending;
    piece_status = piecewise.feed(view, piece_body, 512);
    pending.erase(0, pending.size() - view.size());
    if (piece_status != http::ChunkedDecoder::Status::incomplete) break;
  }
  if (piece_status != whole_status) violation("a chunked body decodes differently when its bytes come one at a time");
  if (whole_status == http::ChunkedDecoder::Status::complete &&
      (piece_body != whole_body || used - pending.size() != rest.size() - in.size())) {
    violation("a chunked body decodes to different bytes or ends elsewhere when its bytes come one at a time");
  }
}

void check_address_parser(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  net::Address a;
  try {
    a = net::Address::parse(text);
  } catch (const std::invalid_argument& e) {
    if (std::string_view(e.what()).find("shoal::net::Address") == std::string_view::npos) {
      violation("an error message that does not say where it comes from");
    }
    return;
  }
  // What parses must print as something that parses back to the same address.
  const std::string printed = a.to_string();
  net::Address b;
  try {
    b = net::Address::parse(printed);
  } catch (const std::invalid_argument&) {
    violation("to_string() of a parsed address does not parse");
  }
  if (!(a == b)) violation("parse(to_string(a)) != a");
}

}  // namespace shoal::fuzz
