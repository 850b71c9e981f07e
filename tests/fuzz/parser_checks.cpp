#include "parser_checks.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "http/http1.hpp"
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
  http1::Request req;
  const auto r = http1::parse_request(buf, req, 1024);
  if (r == http1::Parse::complete) {
    if (req.head_size > buf.size() || req.head_size > 1024) violation("head_size beyond the input or the limit");
    if (req.method.empty() || req.target.empty()) violation("a complete request without method or target");
    if (!inside(req.method, buf) || !inside(req.target, buf)) violation("a view outside the buffer");
    for (const auto& [name, value] : req.headers) {
      if (name.empty() || !inside(name, buf) || !inside(value, buf)) violation("a bad header view");
      if (!inside(name, buf.substr(0, req.head_size))) violation("a header beyond the head");
    }
    // The body bytes after the head must not change how the head parses.
    http1::Request again;
    if (http1::parse_request(buf.substr(0, req.head_size), again, 1024) != http1::Parse::complete ||
        again.content_length != req.content_length || again.keep_alive != req.keep_alive ||
        again.headers.size() != req.headers.size()) {
      violation("the head parses differently without the bytes after it");
    }
  } else if (r == http1::Parse::incomplete) {
    if (buf.size() > 1024) violation("incomplete beyond the limit (should be too_large)");
    if (buf.find("\r\n\r\n") != std::string_view::npos) violation("incomplete although the head is complete");
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
