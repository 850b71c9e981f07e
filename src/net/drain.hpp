// What a lingering close does after ending our sending side, for a
// ByteStream that has no read that reports a reset without throwing
// (tls::Stream::linger_close; net::Stream's has its own loop). Internal.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <new>

#include "shoal/net/byte_stream.hpp"

namespace shoal::detail {

/// Reads and drops what the peer still sends until it ends the stream, goes
/// silent for `limit`, fails (a reset, a truncated TLS close), `limit`
/// passes or 1 MiB came. Throws only Cancelled and std::bad_alloc.
template <net::ByteStream S>
Task<void> drain_input(S& s, std::chrono::milliseconds limit) {
  s.set_idle_timeout(limit);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::byte sink[4096];
  for (std::size_t total = 0; total < (std::size_t{1} << 20);) {
    std::size_t n = 0;
    try {
      n = co_await s.read_some(sink);
    } catch (const std::bad_alloc&) {
      throw;  // ours, not the peer's: out of memory is never swallowed
    } catch (const std::exception&) {
      co_return;  // reset, silent for `limit`, or a close the peer did not announce: the peer is done
    }
    if (n == 0 || std::chrono::steady_clock::now() >= deadline) co_return;
    total += n;
  }
}

}  // namespace shoal::detail
