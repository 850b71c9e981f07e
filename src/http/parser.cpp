// HTTP/1.1 request-head and chunked-body parsing (RFC 9112).
//
// Strict where leniency would let one request be framed two ways (request
// smuggling): Transfer-Encoding with Content-Length, conflicting lengths,
// bare CR, whitespace before a colon, folding. Lenient where RFC 9112 lets a
// server be and real clients need it: leading empty lines, bare LF line ends,
// HTTP/1.x for x > 1. Fuzzed by tests/fuzz/http_fuzz.cpp.
#include "shoal/http/parser.hpp"

#include <algorithm>
#include <array>

namespace shoal::http {
namespace {

constexpr std::size_t npos = std::string_view::npos;

// RFC 9110 §5.6.2 tchar, as a table: header names and methods are checked
// byte by byte on every request.
constexpr auto kTchar = [] {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[static_cast<std::size_t>(c)] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[static_cast<std::size_t>(c)] = t[static_cast<std::size_t>(c - 'a' + 'A')] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

std::string_view trim(std::string_view v) noexcept {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

/// Calls f(token) for each element of a comma-separated list (empty ones skipped).
template <class F>
void for_each_token(std::string_view list, F f) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    if (!item.empty()) f(item);
    if (comma == npos) break;
    list.remove_prefix(comma + 1);
  }
}

/// The next line of `buf` from `pos`, in one pass: its end (exclusive, a CR
/// before the LF stripped) and where the next line starts; false if no LF
/// yet. `bad` is set if the line holds a CR not before its LF, or a control
/// byte other than tab (RFC 9112 §2.2, §5.5).
bool next_line(std::string_view buf, std::size_t pos, std::size_t& end, std::size_t& next, bool& bad) noexcept {
  const auto lf = buf.find('\n', pos);
  if (lf == npos) return false;
  end = lf > pos && buf[lf - 1] == '\r' ? lf - 1 : lf;
  next = lf + 1;
  bool ctl = false;
  for (std::size_t i = pos; i < end; ++i) {
    const auto u = static_cast<unsigned char>(buf[i]);
    ctl |= (u < 0x20 && u != '\t') || u == 0x7f;  // a CR here is bare: not before the LF
  }
  bad = ctl;
  return true;
}

bool parse_decimal(std::string_view v, std::size_t& n) noexcept {
  if (v.empty() || v.size() > 15) return false;  // 10^15 bytes: far beyond any limit, no overflow
  n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  return true;
}

}  // namespace

bool is_token(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s) {
    if (!kTchar[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view RequestHead::header(std::string_view name) const noexcept {
  for (const Header& h : headers) {
    if (iequals(h.name, name)) return h.value;
  }
  return {};
}

namespace {

/// host[:port] (RFC 3986 §3.2, without userinfo, which RFC 9110 §4.2.4
/// forbids): a host that is not empty (an IPv6 literal in brackets), and a
/// port of digits when there is a colon.
bool is_authority(std::string_view a, bool port_required) noexcept {
  if (a.empty() || a.find_first_of("@/?#") != npos) return false;
  std::string_view host = a, port;
  bool colon = false;
  if (a.front() == '[') {
    const auto close = a.find(']');
    if (close == npos || close == 1) return false;
    host = a.substr(0, close + 1);
    if (close + 1 < a.size()) {
      if (a[close + 1] != ':') return false;
      colon = true;
      port = a.substr(close + 2);
    }
  } else if (const auto c = a.rfind(':'); c != npos) {
    colon = true;
    host = a.substr(0, c);
    port = a.substr(c + 1);
  }
  if (host.empty() || (colon && port.empty()) || (port_required && !colon)) return false;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  auto alnum = [&](char c) { return digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  for (char c : port) {
    if (!digit(c)) return false;
  }
  // A name or IPv4 address as DNS writes it, or with '_' (stricter than
  // RFC 3986's reg-name, whose '~' and sub-delims no client sends), or an
  // IPv6 literal.
  if (host.front() == '[') {
    for (char c : host.substr(1, host.size() - 2)) {
      if (!alnum(c) && c != ':' && c != '.') return false;
    }
    return true;
  }
  for (char c : host) {
    if (!alnum(c) && c != '-' && c != '.' && c != '_') return false;
  }
  return true;
}

/// RFC 9112 §3.2: origin-form (/path?query), absolute-form (scheme://authority...),
/// authority-form (host:port, CONNECT only), asterisk-form (*, OPTIONS only).
/// Anything else ("0/", "index.html") is refused rather than guessed at.
bool is_request_target(std::string_view method, std::string_view t) noexcept {
  if (t.front() == '/') return true;
  if (t == "*") return method == "OPTIONS";
  if (method == "CONNECT") return is_authority(t, true);
  // absolute-form: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), "://", an authority
  const auto sep = t.find("://");
  if (sep == npos || sep == 0) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (!alpha(t.front())) return false;
  for (char c : t.substr(0, sep)) {
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.') return false;
  }
  const std::string_view rest = t.substr(sep + 3);
  return is_authority(rest.substr(0, rest.find_first_of("/?")), false);
}

}  // namespace

ParseStatus parse_request_head(std::string_view buf, RequestHead& out, std::size_t max_head) {
  out.method = out.target = out.error = {};
  out.headers.clear();
  out.minor_version = 1;
  out.content_length = 0;
  out.chunked = out.expect_continue = false;
  out.keep_alive = true;
  out.head_size = 0;
  auto fail = [&](ParseStatus s, std::string_view why) {
    out.error = why;
    return s;
  };
  // Only the first max_head bytes count; a head not complete within them is too large.
  const bool truncated = buf.size() > max_head;
  if (truncated) buf = buf.substr(0, max_head);
  auto need_more = [&] {
    return truncated || buf.size() == max_head ? fail(ParseStatus::too_large, "request head too large")
                                                : ParseStatus::incomplete;
  };

  // RFC 9112 §2.2: ignore empty lines before the request line.
  std::size_t pos = 0;
  while (pos < buf.size() && (buf[pos] == '\n' || (buf[pos] == '\r' && pos + 1 < buf.size() && buf[pos + 1] == '\n'))) {
    pos += buf[pos] == '\n' ? 1 : 2;
  }
  std::size_t end = 0, next = 0;
  bool bad = false;
  if (!next_line(buf, pos, end, next, bad)) return need_more();
  if (bad) return fail(ParseStatus::bad_request, "control byte in the request line");
  for (char c : buf.substr(pos, end - pos)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\t') return fail(ParseStatus::bad_request, "control byte in the request line");
    if (u >= 0x7f) return fail(ParseStatus::bad_request, "non-ASCII byte in the request line");
  }

  // Request line: method SP target SP HTTP-version
  const std::string_view line = buf.substr(pos, end - pos);
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == npos ? npos : line.find(' ', sp1 + 1);
  if (sp2 == npos || line.find(' ', sp2 + 1) != npos) {
    return fail(ParseStatus::bad_request, "the request line is not: method, target, HTTP version");
  }
  out.method = line.substr(0, sp1);
  out.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(out.method)) return fail(ParseStatus::bad_request, "bad method");
  if (out.target.empty()) return fail(ParseStatus::bad_request, "empty request target");
  // RFC 9112 §3.2: no form of request-target has a fragment; a client
  // strips it (RFC 9110 §7.1). Found by the differential fuzzer as
  // "scheme://host#/", which http-parser refuses.
  if (out.target.find('#') != std::string_view::npos) {
    return fail(ParseStatus::bad_request, "a request target has no fragment ('#')");
  }
  if (!is_request_target(out.method, out.target)) {
    return fail(ParseStatus::bad_request,
                "bad request target (not /path, an absolute URI, host:port for CONNECT, or * for OPTIONS)");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return fail(ParseStatus::bad_request, "bad HTTP version");
  }
  if (version[5] != '1') {
    return fail(version[5] == '0' ? ParseStatus::bad_request : ParseStatus::version_not_supported,
                "HTTP version not supported (this server speaks HTTP/1.0 and HTTP/1.1)");
  }
  out.minor_version = version[7] == '0' ? 0 : 1;

  bool have_length = false, close = false, keep_alive = false;
  int hosts = 0;
  std::size_t te_codings = 0;
  bool te_last_chunked = false;
  for (pos = next;;) {
    if (!next_line(buf, pos, end, next, bad)) return need_more();
    if (bad) return fail(ParseStatus::bad_request, "bare CR or control byte in a header line");
    const std::string_view h = buf.substr(pos, end - pos);
    pos = next;
    if (h.empty()) break;  // the blank line ending the head
    if (h.front() == ' ' || h.front() == '\t') return fail(ParseStatus::bad_request, "obsolete header line folding");
    const auto colon = h.find(':');
    if (colon == npos) return fail(ParseStatus::bad_request, "header line without a colon");
    const std::string_view name = h.substr(0, colon);
    if (!is_token(name)) return fail(ParseStatus::bad_request, "bad header name (or whitespace before its colon)");
    const std::string_view value = trim(h.substr(colon + 1));
    out.headers.push_back({name, value});
    if (iequals(name, "content-length")) {
      std::size_t n = 0;
      if (!parse_decimal(value, n)) return fail(ParseStatus::bad_request, "bad Content-Length");
      if (have_length && n != out.content_length) return fail(ParseStatus::bad_request, "conflicting Content-Lengths");
      out.content_length = n;
      have_length = true;
    } else if (iequals(name, "transfer-encoding")) {
      // Strict where framing is decided: no empty elements ("chunked,"),
      // which parsers read differently (nginx and http-parser refuse them).
      for (std::string_view rest = value;;) {
        const auto comma = rest.find(',');
        if (trim(rest.substr(0, comma)).empty()) {
          return fail(ParseStatus::bad_request, "an empty element in Transfer-Encoding");
        }
        if (comma == npos) break;
        rest.remove_prefix(comma + 1);
      }
      bool bad = false;
      for_each_token(value, [&](std::string_view coding) {
        if (te_last_chunked) bad = true;  // chunked must be applied last, and only once
        te_last_chunked = iequals(coding, "chunked");
        ++te_codings;
      });
      if (bad) return fail(ParseStatus::bad_request, "chunked is not the last transfer coding");
    } else if (iequals(name, "host")) {
      ++hosts;
    } else if (iequals(name, "connection")) {
      for_each_token(value, [&](std::string_view t) {
        close = close || iequals(t, "close");
        keep_alive = keep_alive || iequals(t, "keep-alive");
      });
    } else if (iequals(name, "expect")) {
      if (!iequals(value, "100-continue")) return fail(ParseStatus::expectation_failed, "unsupported Expect");
      out.expect_continue = out.minor_version == 1;
    }
  }
  out.head_size = pos;

  if (out.minor_version == 1 && hosts != 1) {
    return fail(ParseStatus::bad_request, hosts == 0 ? "missing Host header" : "more than one Host header");
  }
  if (te_codings > 0) {
    if (out.minor_version == 0) return fail(ParseStatus::bad_request, "Transfer-Encoding in an HTTP/1.0 request");
    if (have_length) return fail(ParseStatus::bad_request, "both Transfer-Encoding and Content-Length");
    if (!te_last_chunked) return fail(ParseStatus::bad_request, "a request body's last transfer coding must be chunked");
    if (te_codings > 1) return fail(ParseStatus::not_implemented, "transfer codings other than chunked");
    out.chunked = true;
  }
  out.keep_alive = !close && (out.minor_version == 1 || keep_alive);
  return ParseStatus::complete;
}

ChunkedDecoder::Status ChunkedDecoder::feed(std::string_view& in, std::string& body, std::size_t max_body) {
  constexpr std::size_t kMaxLine = 4096;     // a size line with its extensions
  constexpr std::size_t kMaxTrailers = 8192;
  for (;;) {
    switch (state_) {
      case State::size_line: {
        const auto lf = in.find('\n');
        // The same verdict however the bytes arrive: too long with or without its LF yet.
        if (lf == npos) return in.size() > kMaxLine ? fail("chunk size line too long") : Status::incomplete;
        if (lf > kMaxLine) return fail("chunk size line too long");
        std::string_view line = in.substr(0, lf);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        std::size_t size = 0, digits = 0;
        for (; digits < line.size(); ++digits) {
          const char c = line[digits];
          int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
          if (d < 0) break;
          if (digits == 15) return fail("chunk size too large");
          size = size * 16 + static_cast<std::size_t>(d);
        }
        if (digits == 0) return fail("bad chunk size");
        const std::string_view ext = trim(line.substr(digits));
        if (!ext.empty() && ext.front() != ';') return fail("bad chunk size");
        for (char c : ext) {
          const auto u = static_cast<unsigned char>(c);
          if ((u < 0x20 && c != '\t') || u == 0x7f) return fail("control byte in a chunk extension");
        }
        in.remove_prefix(lf + 1);
        if (size > max_body - std::min(max_body, body.size())) return Status::too_large;
        remaining_ = size;
        state_ = size == 0 ? State::trailer : State::data;
        break;
      }
      case State::data: {
        const std::size_t n = std::min(remaining_, in.size());
        body.append(in.data(), n);
        in.remove_prefix(n);
        remaining_ -= n;
        if (remaining_ > 0) return Status::incomplete;
        state_ = State::data_end;
        break;
      }
      case State::data_end: {
        if (in.empty() || (in[0] == '\r' && in.size() < 2)) return Status::incomplete;
        if (in[0] == '\n') {
          in.remove_prefix(1);
        } else if (in[0] == '\r' && in[1] == '\n') {
          in.remove_prefix(2);
        } else {
          return fail("chunk data not followed by a line end");
        }
        state_ = State::size_line;
        break;
      }
      case State::trailer: {
        const auto lf = in.find('\n');
        if (lf == npos) {
          return trailer_bytes_ + in.size() >= kMaxTrailers ? fail("trailer section too large") : Status::incomplete;
        }
        trailer_bytes_ += lf + 1;
        if (trailer_bytes_ > kMaxTrailers) return fail("trailer section too large");
        const bool last = lf == 0 || (lf == 1 && in[0] == '\r');
        in.remove_prefix(lf + 1);
        if (last) {
          state_ = State::done;
          return Status::complete;
        }
        break;
      }
      case State::done:
        return Status::complete;
    }
  }
}

}  // namespace shoal::http
