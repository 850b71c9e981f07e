// libFuzzer target: shoal::http::parse_request_head against http-parser
// 2.9.4 (Debian's libhttp-parser-dev; Node's parser before llhttp), on the
// same bytes. The property is one-way: a head shoal accepts, http-parser
// must accept too and read the same way (method, target, version, headers,
// framing, where the head ends, keep-alive). Shoal may refuse what
// http-parser accepts (a missing Host, obsolete folding, a space before a
// colon: it is stricter where request smuggling lives), never the other way
// round, except where RFC 9112 lets a server be lenient and shoal is on
// purpose, or where http-parser itself errs; each is skipped below with
// its reason.
#include <http_parser.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/http/parser.hpp"

namespace {

using shoal::http::iequals;

struct Theirs {
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  bool complete = false;
  bool value_last = false;  // the last callback was a value: a field starts a new header
};

int on_url(http_parser* p, const char* at, size_t n) {
  static_cast<Theirs*>(p->data)->url.append(at, n);
  return 0;
}

int on_field(http_parser* p, const char* at, size_t n) {
  auto* t = static_cast<Theirs*>(p->data);
  if (t->headers.empty() || t->value_last) t->headers.emplace_back();
  t->value_last = false;
  t->headers.back().first.append(at, n);
  return 0;
}

int on_value(http_parser* p, const char* at, size_t n) {
  auto* t = static_cast<Theirs*>(p->data);
  t->value_last = true;
  t->headers.back().second.append(at, n);
  return 0;
}

int on_headers_complete(http_parser* p) {
  static_cast<Theirs*>(p->data)->complete = true;
  return 0;
}

std::string escaped(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  return out;
}

[[noreturn]] void differ(std::string_view head, const std::string& what) {
  std::fprintf(stderr, "http_diff_fuzz: shoal and http-parser differ: %s\n  head: %s\n", what.c_str(),
               escaped(head).c_str());
  std::abort();
}

std::string_view trim(std::string_view v) {
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  return v;
}

/// Whether http-parser's verdict on this head can be trusted to compare.
bool comparable(const shoal::http::RequestHead& ours, std::string_view head, http_errno err) {
  for (const auto& h : ours.headers) {
    // http-parser's header-name matcher takes a longer name that starts
    // with one it acts on ("Transfer-Encoding-X", "Content-Length!") for
    // that name.
    for (std::string_view special : {"Connection", "Proxy-Connection", "Content-Length", "Transfer-Encoding", "Upgrade"}) {
      if (h.name.size() > special.size() && iequals(h.name.substr(0, special.size()), special)) return false;
    }
    // RFC 9112 §5 allows tabs around a value (OWS), and shoal does;
    // http-parser allows only spaces around the values it interprets.
    if (iequals(h.name, "Content-Length") || iequals(h.name, "Transfer-Encoding") || iequals(h.name, "Connection")) {
      const char* begin = h.value.data();
      const char* end = begin + h.value.size();
      if (begin[-1] == '\t' || (end < head.data() + head.size() && *end == '\t')) return false;
    }
  }
  // Lenient on purpose (RFC 9112 §6.3 lets a server accept it): repeated
  // Content-Lengths with one value. http-parser refuses any repeat.
  int lengths = 0;
  for (const auto& h : ours.headers) lengths += iequals(h.name, "Content-Length") ? 1 : 0;
  if (lengths > 1) return false;
  // RFC 3986 §3.1 lets a scheme hold digits, '+', '-' and '.' after its
  // first letter, and shoal follows it; http-parser takes letters only.
  if (err == HPE_INVALID_URL && ours.target.front() != '/') {
    const auto sep = ours.target.find("://");
    for (char c : ours.target.substr(0, sep)) {
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
    }
  }
  // http-parser knows a fixed list of methods; shoal takes any token (RFC 9110 §9.1).
  if (err == HPE_INVALID_METHOD) {
    for (int m = 0; m < 64; ++m) {
      const char* name = http_method_str(static_cast<http_method>(m));
      if (std::string_view(name) != "<unknown>" && ours.method == name) return true;
    }
    return false;
  }
  return true;
}

/// Where http-parser's Connection matcher can follow the list: every
/// element a token, none empty, no tabs. (Given "ZZZ,,,, keep-alive" it
/// misses the keep-alive, which RFC 9110 §5.6.1 says to accept.)
bool simple_connection_lists(const shoal::http::RequestHead& ours) {
  for (const auto& h : ours.headers) {
    if (!iequals(h.name, "Connection")) continue;
    if (h.value.find('\t') != std::string_view::npos) return false;
    std::string_view rest = h.value;
    for (;;) {
      const auto comma = rest.find(',');
      if (!shoal::http::is_token(trim(rest.substr(0, comma)))) return false;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, unsigned long size) {
  const std::string_view buf(reinterpret_cast<const char*>(data), size);
  shoal::http::RequestHead ours;
  if (shoal::http::parse_request_head(buf, ours, 8192) != shoal::http::ParseStatus::complete) return 0;
  const std::string_view head = buf.substr(0, ours.head_size);

  http_parser p;
  http_parser_init(&p, HTTP_REQUEST);
  Theirs t;
  p.data = &t;
  http_parser_settings s;
  http_parser_settings_init(&s);
  s.on_url = on_url;
  s.on_header_field = on_field;
  s.on_header_value = on_value;
  s.on_headers_complete = on_headers_complete;
  const size_t parsed = http_parser_execute(&p, &s, head.data(), head.size());
  const auto err = static_cast<http_errno>(p.http_errno);
  if (!comparable(ours, head, err)) return 0;

  if (err != HPE_OK || !t.complete) {
    differ(head, std::string("shoal accepted a head that http-parser refuses (") + http_errno_name(err) + ": " +
                     http_errno_description(err) + ")");
  }
  if (parsed != head.size()) {
    differ(head, "the head's end: shoal " + std::to_string(head.size()) + ", http-parser " + std::to_string(parsed));
  }
  if (ours.method != http_method_str(static_cast<http_method>(p.method))) differ(head, "the method");
  if (ours.target != t.url) {
    differ(head, "the target: shoal \"" + escaped(ours.target) + "\", http-parser \"" + escaped(t.url) + "\"");
  }
  if (p.http_major != 1 || (ours.minor_version == 0) != (p.http_minor == 0)) differ(head, "the version");
  if (ours.headers.size() != t.headers.size()) {
    differ(head, "the header count: shoal " + std::to_string(ours.headers.size()) + ", http-parser " +
                     std::to_string(t.headers.size()));
  }
  for (std::size_t i = 0; i < ours.headers.size(); ++i) {
    if (ours.headers[i].name != t.headers[i].first) differ(head, "header " + std::to_string(i) + "'s name");
    if (ours.headers[i].value != trim(t.headers[i].second)) {
      differ(head, "header " + std::to_string(i) + "'s value: shoal \"" + escaped(ours.headers[i].value) +
                       "\", http-parser \"" + escaped(t.headers[i].second) + "\"");
    }
  }
  if (ours.chunked != ((p.flags & F_CHUNKED) != 0)) differ(head, "chunked framing");
  const unsigned long long their_length = p.content_length == ULLONG_MAX ? 0 : p.content_length;
  if (!ours.chunked && ours.content_length != their_length) differ(head, "the Content-Length");
  // One way: shoal may close where http-parser would read on, never read on
  // where it would close.
  if (simple_connection_lists(ours) && ours.keep_alive && http_should_keep_alive(&p) == 0) {
    differ(head, "keep-alive: shoal keeps the connection, http-parser closes it");
  }
  return 0;
}
