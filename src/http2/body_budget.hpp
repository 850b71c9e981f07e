// How much of the connection's flow-control window an HTTP/2 connection
// gives back for streamed request bodies. Their bytes wait in memory until
// the handlers read them; each stream's window bounds its own, and this
// bounds them all together: past `limit` bytes waiting, the connection's
// window is given back only as handlers read.
#pragma once

#include <algorithm>
#include <cstddef>

namespace shoal::http2::detail {

class BodyBudget {
 public:
  explicit BodyBudget(std::size_t limit) noexcept : limit_(limit) {}

  /// `n` bytes arrived and wait for a handler. Returns how many of them to
  /// give back to the connection's window now.
  std::size_t arrived(std::size_t n) noexcept {
    held_ += n;
    const std::size_t before = owed_;
    settle();
    return n - (owed_ - before);
  }

  /// `n` bytes that arrived left memory (a handler read them, or they were
  /// dropped). Returns how many owed bytes to give back to the
  /// connection's window now.
  std::size_t left(std::size_t n) noexcept {
    held_ -= std::min(n, held_);
    const std::size_t before = owed_;
    settle();
    return before - owed_;
  }

  /// Bytes waiting for handlers.
  std::size_t held() const noexcept { return held_; }

 private:
  // What is held past the limit stays off the connection's window, so the
  // client can send at most one connection window more: held bytes stay
  // under the limit plus that window.
  void settle() noexcept { owed_ = held_ > limit_ ? held_ - limit_ : 0; }

  std::size_t limit_;
  std::size_t held_ = 0;
  std::size_t owed_ = 0;  // arrived, not yet given back to the connection's window
};

}  // namespace shoal::http2::detail
