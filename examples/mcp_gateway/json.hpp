// Just enough JSON for a JSON-RPC gateway: validate a message (RFC 8259),
// find a top-level member's raw text, list an array's elements, decode a
// string. Nothing is built: every result is a view into the text, so a
// message passes through the gateway as the bytes it came as.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mcp_gateway::json {

/// Why a text is not JSON, and where.
struct Error {
  std::size_t offset = 0;
  std::string what;
};

namespace detail {

inline bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class Scanner {
 public:
  Scanner(std::string_view text, std::size_t max_depth) : t_(text), max_depth_(max_depth) {}

  /// One value from the current position; false with error() set if none.
  bool value(std::size_t depth = 0) {
    skip_space();
    if (at_end()) return fail("a value was expected");
    switch (t_[i_]) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': return string();
      case 't': return word("true");
      case 'f': return word("false");
      case 'n': return word("null");
      default: return number();
    }
  }
  void skip_space() noexcept {
    while (i_ < t_.size() && is_space(t_[i_])) ++i_;
  }
  bool at_end() const noexcept { return i_ >= t_.size(); }
  std::size_t pos() const noexcept { return i_; }
  void seek(std::size_t i) noexcept { i_ = i; }
  char peek() const noexcept { return at_end() ? '\0' : t_[i_]; }
  void advance() noexcept { ++i_; }
  const Error& error() const noexcept { return error_; }
  bool fail(std::string what) {
    if (error_.what.empty()) error_ = Error{i_, std::move(what)};
    return false;
  }
  bool string() {
    ++i_;  // the opening quote
    while (i_ < t_.size()) {
      const auto c = static_cast<unsigned char>(t_[i_]);
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20) return fail("a control character inside a string");
      if (c == '\\') {
        if (++i_ >= t_.size()) break;
        const char e = t_[i_];
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k) {
            if (i_ + k >= t_.size() || !is_hex(t_[i_ + k])) return fail("a \\u escape needs four hex digits");
          }
          i_ += 5;
          continue;
        }
        if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) return fail("an unknown escape");
        ++i_;
        continue;
      }
      if (c >= 0x80) {
        const std::size_t n = utf8_length(i_);
        if (n == 0) return fail("invalid UTF-8");
        i_ += n;
        continue;
      }
      ++i_;
    }
    return fail("a string was not closed");
  }

 private:
  static bool is_hex(char c) noexcept {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }
  // The length of a well-formed UTF-8 sequence at `at` (RFC 3629), or 0.
  std::size_t utf8_length(std::size_t at) const noexcept {
    const auto b = [&](std::size_t k) { return at + k < t_.size() ? static_cast<unsigned char>(t_[at + k]) : 0u; };
    const unsigned c = b(0);
    const auto cont = [&](std::size_t k) { return (b(k) & 0xC0u) == 0x80u; };
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
      const unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
      return b(1) >= lo && b(1) <= hi && cont(2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
      const unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
      return b(1) >= lo && b(1) <= hi && cont(2) && cont(3) ? 4 : 0;
    }
    return 0;
  }
  bool word(std::string_view w) {
    if (t_.substr(i_, w.size()) != w) return fail("an unknown word");
    i_ += w.size();
    return true;
  }
  bool digits() {
    const std::size_t from = i_;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
    return i_ > from;
  }
  bool number() {
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
    } else if (!digits()) {
      return fail("a value was expected");
    }
    if (peek() == '.') {
      ++i_;
      if (!digits()) return fail("a digit was expected after the decimal point");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!digits()) return fail("a digit was expected in the exponent");
    }
    return true;
  }
  bool object(std::size_t depth) {
    if (depth >= max_depth_) return fail("nested deeper than " + std::to_string(max_depth_));
    ++i_;
    skip_space();
    if (peek() == '}') {
      ++i_;
      return true;
    }
    for (;;) {
      skip_space();
      if (peek() != '"') return fail("a member name (a string) was expected");
      if (!string()) return false;
      skip_space();
      if (peek() != ':') return fail("':' was expected after a member name");
      ++i_;
      if (!value(depth + 1)) return false;
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == '}') {
        ++i_;
        return true;
      }
      return fail("',' or '}' was expected");
    }
  }
  bool array(std::size_t depth) {
    if (depth >= max_depth_) return fail("nested deeper than " + std::to_string(max_depth_));
    ++i_;
    skip_space();
    if (peek() == ']') {
      ++i_;
      return true;
    }
    for (;;) {
      if (!value(depth + 1)) return false;
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == ']') {
        ++i_;
        return true;
      }
      return fail("',' or ']' was expected");
    }
  }

  std::string_view t_;
  std::size_t i_ = 0;
  std::size_t max_depth_;
  Error error_;
};

}  // namespace detail

/// Whether `text` is exactly one JSON value (surrounding whitespace
/// allowed), nested at most `max_depth` deep; if not, where and why.
inline std::optional<Error> validate(std::string_view text, std::size_t max_depth = 64) {
  detail::Scanner s(text, max_depth);
  if (!s.value()) return s.error();
  s.skip_space();
  if (!s.at_end()) {
    s.fail("text after the value");
    return s.error();
  }
  return std::nullopt;
}

/// The raw text of the top-level member `key` of the object `object` (which
/// must be valid JSON), e.g. `"tools/list"` with its quotes, `7` or
/// `{...}`; none if `object` is not an object or has no such member. Keys
/// are compared as written (no escapes are decoded).
inline std::optional<std::string_view> member(std::string_view object, std::string_view key) {
  detail::Scanner s(object, SIZE_MAX);
  s.skip_space();
  if (s.peek() != '{') return std::nullopt;
  s.advance();
  for (;;) {
    s.skip_space();
    if (s.peek() != '"') return std::nullopt;  // '}' (empty) or not valid
    const std::size_t name_at = s.pos();
    if (!s.string()) return std::nullopt;
    const std::string_view name = object.substr(name_at + 1, s.pos() - name_at - 2);
    s.skip_space();
    if (s.peek() != ':') return std::nullopt;
    s.advance();
    s.skip_space();
    const std::size_t value_at = s.pos();
    if (!s.value()) return std::nullopt;
    if (name == key) return object.substr(value_at, s.pos() - value_at);
    s.skip_space();
    if (s.peek() != ',') return std::nullopt;
    s.advance();
  }
}

/// The raw texts of the elements of the array `array` (valid JSON); empty
/// if it is not an array.
inline std::vector<std::string_view> elements(std::string_view array) {
  std::vector<std::string_view> out;
  detail::Scanner s(array, SIZE_MAX);
  s.skip_space();
  if (s.peek() != '[') return out;
  s.advance();
  s.skip_space();
  if (s.peek() == ']') return out;
  for (;;) {
    s.skip_space();
    const std::size_t at = s.pos();
    if (!s.value()) return {};
    out.push_back(array.substr(at, s.pos() - at));
    s.skip_space();
    if (s.peek() != ',') return out;
    s.advance();
  }
}

/// True if `raw` (a valid JSON value) is an array.
inline bool is_array(std::string_view raw) noexcept {
  for (char c : raw) {
    if (!detail::is_space(c)) return c == '[';
  }
  return false;
}

/// The value of the JSON string `raw` (with its quotes; valid JSON),
/// escapes decoded to UTF-8; none if `raw` is not a string.
inline std::optional<std::string> string_value(std::string_view raw) {
  if (raw.size() < 2 || raw.front() != '"' || raw.back() != '"') return std::nullopt;
  std::string out;
  out.reserve(raw.size() - 2);
  const auto hex4 = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = raw[at + k];
      v = v * 16 + static_cast<std::uint32_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
  };
  const auto put = [&](std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | cp >> 6);
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | cp >> 12);
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | cp >> 18);
      out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
      out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  };
  for (std::size_t i = 1; i + 1 < raw.size(); ++i) {
    if (raw[i] != '\\') {
      out += raw[i];
      continue;
    }
    const char e = raw[++i];
    switch (e) {
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        std::uint32_t cp = hex4(i + 1);
        i += 4;
        // A surrogate pair is one code point; a lone surrogate becomes U+FFFD.
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 < raw.size() && raw[i + 1] == '\\' && raw[i + 2] == 'u') {
          const std::uint32_t lo = hex4(i + 3);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          }
        }
        put(cp >= 0xD800 && cp <= 0xDFFF ? 0xFFFD : cp);
        break;
      }
      default: out += e;  // " \ /
    }
  }
  return out;
}

/// `text` (a JSON string's content) as a JSON string, quotes included.
inline std::string quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace mcp_gateway::json
