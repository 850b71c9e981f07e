// What an operator looks at first on an HTTP server: requests by status,
// connections open, bytes in and out, and how long handlers take.
//
//   shoal::http::ServerStats stats;
//   shoal::http::ServerOptions options;
//   options.stats = &stats;  // the server counts into it
//   ... in a handler: res.body = stats.to_prometheus();
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace shoal::http {

namespace detail {
class StatsTally;
}

/// Counters an HTTP server keeps when given them (ServerOptions::stats).
/// Each worker counts into a stripe of its own, so counting costs no shared
/// cache line; a snapshot adds the stripes up. Must outlive every server
/// counting into it; one ServerStats may serve several servers.
/// Thread-safety: any thread, at any time.
class ServerStats {
 public:
  /// The handler-duration histogram's upper bounds, in seconds (the last
  /// bucket, +Inf, is implied).
  static constexpr std::array<double, 14> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                      0.025,  0.05,    0.1,    0.25,  0.5,    1.0,   5.0};

  /// The counters added up at one moment (each counter exact; the set not
  /// one atomic cut).
  struct Snapshot {
    /// Responses sent by status class: [0] 1xx ... [4] 5xx (the server's own
    /// refusals, such as 400 or 431, included).
    std::array<std::uint64_t, 5> responses{};
    std::uint64_t connections_opened = 0;  ///< connections whose serving started
    std::uint64_t connections_open = 0;    ///< opened and not yet ended
    /// Accepted connections that waited for a handler slot because
    /// net::ServeOptions::max_connections handlers were live (the server
    /// holds them; it never refuses at the cap).
    std::uint64_t connections_held_at_cap = 0;
    std::uint64_t bytes_received = 0;      ///< request bytes consumed (heads and bodies)
    std::uint64_t bytes_sent = 0;          ///< response bytes written
    /// Handler calls by duration: [i] took at most kBuckets[i] seconds and
    /// more than kBuckets[i - 1]; the last counts the rest. Not cumulative.
    std::array<std::uint64_t, kBuckets.size() + 1> handler_buckets{};
    std::uint64_t handler_seconds_ns = 0;  ///< the handlers' total time, ns
    std::uint64_t handler_calls = 0;       ///< handlers called
    /// HTTP/2: connections served (a subset of connections_opened for h2c
    /// on an HTTP/1.1 port) and their streams; streams_open /
    /// http2_connections_open is the streams per connection now.
    std::uint64_t http2_connections_opened = 0;  ///< HTTP/2 connections whose serving started
    std::uint64_t http2_connections_open = 0;    ///< opened and not yet ended
    std::uint64_t streams_opened = 0;  ///< request streams opened
    std::uint64_t streams_open = 0;    ///< opened and not yet closed
  };

  /// Throws: std::bad_alloc (the stripes, 2 KiB).
  ServerStats();
  ~ServerStats();
  ServerStats(const ServerStats&) = delete;
  ServerStats& operator=(const ServerStats&) = delete;

  /// The counters now.
  Snapshot snapshot() const noexcept;
  /// The counters in Prometheus' text format, each name starting with
  /// `prefix` ("http_responses_total{code=\"2xx\"}", "http_connections_open",
  /// "http_handler_duration_seconds_bucket{le=\"0.001\"}", ...), for a
  /// `/metrics` endpoint (with shoal::to_prometheus for the runtime's).
  /// Throws: std::bad_alloc.
  std::string to_prometheus(std::string_view prefix = "http") const;

  // Counting, by the server (any worker).
  /// A connection's serving starts.
  void connection_opened() noexcept;
  /// A connection's serving ends.
  void connection_closed() noexcept;
  /// An accepted connection waits for a slot (net::ServeOptions::on_held_at_cap).
  void connection_held_at_cap() noexcept;
  /// An HTTP/2 connection's serving starts.
  void http2_connection_opened() noexcept;
  /// An HTTP/2 connection's serving ends.
  void http2_connection_closed() noexcept;
  /// An HTTP/2 request stream opens.
  void stream_opened() noexcept;
  /// An HTTP/2 request stream closes (or its connection ended).
  void stream_closed() noexcept;
  /// A response went out for `status`, after `received` request bytes; the
  /// handler ran `handler_ns` (negative: no handler ran, e.g. a 400).
  void response(int status, std::size_t received, std::size_t sent, std::int64_t handler_ns) noexcept;

 private:
  friend class detail::StatsTally;  // a connection's counts, added a batch at a time (src/http/stats_tally.hpp)
  static constexpr std::size_t kStripes = 8;
  struct Stripe;  // a cache line's worth of counters per worker (src/http/stats.cpp)
  Stripe& mine() noexcept;
  // On the heap: a ServerStats is often a coroutine's local, and a
  // coroutine frame does not honour a 64-byte alignment.
  std::unique_ptr<Stripe[]> stripes_;
};

}  // namespace shoal::http
