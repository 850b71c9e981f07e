// What the examples' command lines share: a number option, and the
// descriptor limit a server of many connections needs.
#pragma once

#include <sys/resource.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace examples {

/// `text` as a number >= 0; std::invalid_argument naming `flag` otherwise.
inline long number(const std::string& flag, const char* text) {
  char* end = nullptr;
  const long v = text != nullptr ? std::strtol(text, &end, 10) : -1;
  if (text == nullptr || *text == '\0' || *end != '\0' || v < 0) {
    throw std::invalid_argument(flag + " needs a number >= 0, got \"" + (text ? text : "") + "\"");
  }
  return v;
}

/// Raises the soft descriptor limit to the hard one: each session holds a
/// socket and a child's pipes, and the common soft limit of 1,024 would
/// stop a proxy near 300 sessions.
inline void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace examples
