// http::detail::StatsTally: one connection's counts between its writes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "shoal/http/stats.hpp"

namespace shoal::http::detail {

/// The histogram bucket (ServerStats::kBuckets) a handler time falls in.
std::size_t bucket(std::int64_t handler_ns) noexcept;

/// Counts an HTTP/2 connection gathers while it answers one read's
/// requests, added to its ServerStats at once before the answers are
/// written: a few atomic adds a batch where counting each response took
/// eight (3.5% of a small request's CPU). Since publish() runs before the
/// write, a client that has its answer finds it counted.
/// Thread-safety: the connection's only (it may move between workers).
class StatsTally {
 public:
  /// Counts nothing when `stats` is null.
  explicit StatsTally(ServerStats* stats) noexcept : stats_(stats) {}
  ~StatsTally() { publish(); }
  StatsTally(const StatsTally&) = delete;
  StatsTally& operator=(const StatsTally&) = delete;

  bool counting() const noexcept { return stats_ != nullptr; }
  void stream_opened() noexcept {
    ++streams_opened_;
    dirty_ = true;
  }
  void stream_closed() noexcept {
    ++streams_closed_;
    dirty_ = true;
  }
  /// As ServerStats::response.
  void response(int status, std::size_t received, std::size_t sent, std::int64_t handler_ns) noexcept;
  /// Adds what it holds to the stats (the current worker's stripe).
  void publish() noexcept;

 private:
  ServerStats* stats_;
  bool dirty_ = false;
  std::array<std::uint64_t, 5> responses_{};
  std::uint64_t received_ = 0, sent_ = 0, handler_ns_ = 0, handler_calls_ = 0;
  std::array<std::uint64_t, ServerStats::kBuckets.size() + 1> buckets_{};
  std::uint64_t streams_opened_ = 0, streams_closed_ = 0;
};

}  // namespace shoal::http::detail
