// HTTP/1.1 request-head parser (RFC 9112, the subset a hello server needs).
#include "http1.hpp"

#include <algorithm>
#include <cctype>

namespace http1 {
namespace {

bool is_tchar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

bool has_token(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    if (iequals(trim(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

Parse parse_request(std::string_view buf, Request& out, std::size_t max_head) {
  out = Request{};
  const auto end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos) return buf.size() > max_head ? Parse::too_large : Parse::incomplete;
  if (end + 4 > max_head) return Parse::too_large;
  const std::string_view head = buf.substr(0, end + 2);  // every line ends in CRLF
  out.head_size = end + 4;
  for (char c : head) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\r' && c != '\n' && c != '\t') || u == 0x7f) return Parse::bad_request;
  }

  // Request line: method SP target SP HTTP/1.x CRLF
  auto eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp2 == std::string_view::npos || sp2 == sp1 + 1) return Parse::bad_request;
  out.method = line.substr(0, sp1);
  out.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!std::all_of(out.method.begin(), out.method.end(), is_tchar)) return Parse::bad_request;
  if (out.target.find(' ') != std::string_view::npos || out.target.find('\t') != std::string_view::npos) {
    return Parse::bad_request;
  }
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || (version[7] != '0' && version[7] != '1')) {
    return Parse::bad_request;
  }
  out.minor_version = version[7] - '0';
  out.keep_alive = out.minor_version == 1;

  bool have_length = false;
  std::string_view rest = head.substr(eol + 2);
  while (!rest.empty()) {
    eol = rest.find("\r\n");
    line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    if (line.find('\r') != std::string_view::npos || line.find('\n') != std::string_view::npos) return Parse::bad_request;
    if (line.empty() || line.front() == ' ' || line.front() == '\t') return Parse::bad_request;  // obsolete folding
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return Parse::bad_request;
    const std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_tchar)) return Parse::bad_request;
    const std::string_view value = trim(line.substr(colon + 1));
    out.headers.emplace_back(name, value);
    if (iequals(name, "content-length")) {
      if (value.empty() || value.size() > 15 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return Parse::bad_request;
      }
      std::size_t n = 0;
      for (char c : value) n = n * 10 + static_cast<std::size_t>(c - '0');
      if (have_length && n != out.content_length) return Parse::bad_request;  // conflicting lengths
      out.content_length = n;
      have_length = true;
    } else if (iequals(name, "transfer-encoding")) {
      return Parse::bad_request;  // chunked bodies are not supported here: refuse, do not guess
    } else if (iequals(name, "connection")) {
      if (has_token(value, "close")) out.keep_alive = false;
      if (has_token(value, "keep-alive")) out.keep_alive = true;
    }
  }
  return Parse::complete;
}

}  // namespace http1
