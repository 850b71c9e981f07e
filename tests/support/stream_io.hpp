// Reading a whole stream in tests: a net::Stream, a process's pipe, or a
// tls::Stream (anything with read_some(std::span<std::byte>)).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "shoal/runtime/task.hpp"

namespace shoal::test {

/// Everything `s` delivers until its end of stream.
template <class S>
Task<std::string> read_to_end(S& s) {
  std::string out;
  std::vector<std::byte> buf(8192);
  for (std::size_t n; (n = co_await s.read_some(std::span<std::byte>(buf))) != 0;) {
    out.append(reinterpret_cast<const char*>(buf.data()), n);
  }
  co_return out;
}

}  // namespace shoal::test
