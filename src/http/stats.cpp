// http::ServerStats: striped counters and their Prometheus text.
#include "shoal/http/stats.hpp"

#include "shoal/detail/task_record.hpp"
#include "src/http/stats_tally.hpp"

namespace shoal::http {

struct alignas(64) ServerStats::Stripe {
  std::atomic<std::uint64_t> responses[5] = {};
  std::atomic<std::uint64_t> opened{0}, closed{0}, held{0}, received{0}, sent{0}, handler_ns{0}, handler_calls{0};
  std::atomic<std::uint64_t> buckets[kBuckets.size() + 1] = {};
  std::atomic<std::uint64_t> h2_opened{0}, h2_closed{0}, streams_opened{0}, streams_closed{0};
};

ServerStats::ServerStats() : stripes_(new Stripe[kStripes]) {}  // aligned new: a line apart
ServerStats::~ServerStats() = default;

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
/// kBuckets in nanoseconds: no floating point for each response.
constexpr auto kBucketNs = [] {
  std::array<std::int64_t, ServerStats::kBuckets.size()> ns{};
  for (std::size_t i = 0; i < ns.size(); ++i) ns[i] = static_cast<std::int64_t>(ServerStats::kBuckets[i] * 1e9 + 0.5);
  return ns;
}();
void add(std::atomic<std::uint64_t>& c, std::uint64_t n) noexcept { c.fetch_add(n, kRelaxed); }
}  // namespace

std::size_t detail::bucket(std::int64_t handler_ns) noexcept {
  std::size_t b = 0;
  while (b < kBucketNs.size() && handler_ns > kBucketNs[b]) ++b;
  return b;
}

ServerStats::Stripe& ServerStats::mine() noexcept {
  // The worker's own stripe: no cache line shared between workers while
  // counting. Off a worker (a test's thread), stripe 0.
  const shoal::detail::TaskRecord* f = shoal::detail::current_record();
  return stripes_[f != nullptr ? f->worker % kStripes : 0];
}

void ServerStats::connection_opened() noexcept { add(mine().opened, 1); }
void ServerStats::connection_closed() noexcept { add(mine().closed, 1); }
void ServerStats::connection_held_at_cap() noexcept { add(mine().held, 1); }
void ServerStats::http2_connection_opened() noexcept { add(mine().h2_opened, 1); }
void ServerStats::http2_connection_closed() noexcept { add(mine().h2_closed, 1); }
void ServerStats::stream_opened() noexcept { add(mine().streams_opened, 1); }
void ServerStats::stream_closed() noexcept { add(mine().streams_closed, 1); }

void ServerStats::response(int status, std::size_t received, std::size_t sent, std::int64_t handler_ns) noexcept {
  Stripe& s = mine();
  const int cls = status / 100 - 1;
  if (cls >= 0 && cls < 5) add(s.responses[cls], 1);
  add(s.received, received);
  add(s.sent, sent);
  if (handler_ns < 0) return;
  add(s.handler_ns, static_cast<std::uint64_t>(handler_ns));
  add(s.handler_calls, 1);
  add(s.buckets[detail::bucket(handler_ns)], 1);
}

void detail::StatsTally::publish() noexcept {
  if (stats_ == nullptr || !dirty_) return;
  ServerStats::Stripe& s = stats_->mine();
  const auto put = [](std::atomic<std::uint64_t>& c, std::uint64_t& n) noexcept {
    if (n != 0) add(c, n);
    n = 0;
  };
  for (std::size_t i = 0; i < responses_.size(); ++i) put(s.responses[i], responses_[i]);
  put(s.received, received_);
  put(s.sent, sent_);
  put(s.handler_ns, handler_ns_);
  put(s.handler_calls, handler_calls_);
  for (std::size_t i = 0; i < buckets_.size(); ++i) put(s.buckets[i], buckets_[i]);
  put(s.streams_opened, streams_opened_);
  put(s.streams_closed, streams_closed_);
  dirty_ = false;
}

void detail::StatsTally::response(int status, std::size_t received, std::size_t sent, std::int64_t handler_ns) noexcept {
  dirty_ = true;
  const int cls = status / 100 - 1;
  if (cls >= 0 && cls < 5) ++responses_[static_cast<std::size_t>(cls)];
  received_ += received;
  sent_ += sent;
  if (handler_ns < 0) return;
  handler_ns_ += static_cast<std::uint64_t>(handler_ns);
  ++handler_calls_;
  ++buckets_[bucket(handler_ns)];
}

ServerStats::Snapshot ServerStats::snapshot() const noexcept {
  Snapshot out;
  std::uint64_t closed = 0, h2_closed = 0, streams_closed = 0;
  for (std::size_t k = 0; k < kStripes; ++k) {
    const Stripe& s = stripes_[k];
    for (std::size_t i = 0; i < 5; ++i) out.responses[i] += s.responses[i].load(kRelaxed);
    out.connections_opened += s.opened.load(kRelaxed);
    closed += s.closed.load(kRelaxed);
    out.connections_held_at_cap += s.held.load(kRelaxed);
    out.bytes_received += s.received.load(kRelaxed);
    out.bytes_sent += s.sent.load(kRelaxed);
    out.handler_seconds_ns += s.handler_ns.load(kRelaxed);
    out.handler_calls += s.handler_calls.load(kRelaxed);
    for (std::size_t i = 0; i < out.handler_buckets.size(); ++i) out.handler_buckets[i] += s.buckets[i].load(kRelaxed);
    out.http2_connections_opened += s.h2_opened.load(kRelaxed);
    h2_closed += s.h2_closed.load(kRelaxed);
    out.streams_opened += s.streams_opened.load(kRelaxed);
    streams_closed += s.streams_closed.load(kRelaxed);
  }
  // Read apart, a close may be counted before its open: never below zero.
  out.connections_open = out.connections_opened > closed ? out.connections_opened - closed : 0;
  out.http2_connections_open = out.http2_connections_opened > h2_closed ? out.http2_connections_opened - h2_closed : 0;
  out.streams_open = out.streams_opened > streams_closed ? out.streams_opened - streams_closed : 0;
  return out;
}

namespace {
void head(std::string& out, std::string_view prefix, const char* name, const char* type, const char* help) {
  out.append("# HELP ").append(prefix).append("_").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(prefix).append("_").append(name).append(" ").append(type).append("\n");
}
void line(std::string& out, std::string_view prefix, const char* name, std::string_view labels, std::uint64_t v) {
  out.append(prefix).append("_").append(name).append(labels).append(" ").append(std::to_string(v)).append("\n");
}
/// `<what>_open` (a gauge) and `<what>_total` (a counter, the open included).
void open_and_total(std::string& out, std::string_view prefix, const std::string& what, const std::string& help,
                    std::uint64_t open, std::uint64_t total) {
  head(out, prefix, (what + "_open").c_str(), "gauge", (help + " open now.").c_str());
  line(out, prefix, (what + "_open").c_str(), "", open);
  head(out, prefix, (what + "_total").c_str(), "counter", (help + " opened, the open ones included.").c_str());
  line(out, prefix, (what + "_total").c_str(), "", total);
}
std::string seconds(double s) {
  std::string t = std::to_string(s);  // "0.000100": trim the zeros Prometheus does not need
  while (t.size() > 1 && t.back() == '0') t.pop_back();
  if (t.back() == '.') t.pop_back();
  return t;
}
}  // namespace

std::string ServerStats::to_prometheus(std::string_view prefix) const {
  const Snapshot s = snapshot();
  std::string out;
  out.reserve(3072);
  head(out, prefix, "responses_total", "counter", "Responses sent, by status class.");
  static const char* const kClass[] = {"{code=\"1xx\"}", "{code=\"2xx\"}", "{code=\"3xx\"}", "{code=\"4xx\"}",
                                       "{code=\"5xx\"}"};
  for (std::size_t i = 0; i < 5; ++i) line(out, prefix, "responses_total", kClass[i], s.responses[i]);
  open_and_total(out, prefix, "connections", "Connections", s.connections_open, s.connections_opened);
  head(out, prefix, "connections_held_at_cap_total", "counter",
       "Accepted connections that waited for a slot: max_connections handlers were live.");
  line(out, prefix, "connections_held_at_cap_total", "", s.connections_held_at_cap);
  open_and_total(out, prefix, "http2_connections", "HTTP/2 connections", s.http2_connections_open,
                 s.http2_connections_opened);
  open_and_total(out, prefix, "streams", "HTTP/2 request streams (per connection: over http2_connections_open)",
                 s.streams_open, s.streams_opened);
  head(out, prefix, "received_bytes_total", "counter", "Request bytes consumed.");
  line(out, prefix, "received_bytes_total", "", s.bytes_received);
  head(out, prefix, "sent_bytes_total", "counter", "Response bytes written.");
  line(out, prefix, "sent_bytes_total", "", s.bytes_sent);
  head(out, prefix, "handler_duration_seconds", "histogram", "Time in the request handler.");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kBuckets.size(); ++i) {
    cumulative += s.handler_buckets[i];
    std::string le = "{le=\"";  // not literal + string&&: g++ 12 -O3 warns falsely (-Wrestrict)
    le.append(seconds(kBuckets[i])).append("\"}");
    line(out, prefix, "handler_duration_seconds_bucket", le, cumulative);
  }
  cumulative += s.handler_buckets[kBuckets.size()];
  line(out, prefix, "handler_duration_seconds_bucket", "{le=\"+Inf\"}", cumulative);
  out.append(prefix).append("_handler_duration_seconds_sum ")
      .append(std::to_string(static_cast<double>(s.handler_seconds_ns) / 1e9)).append("\n");
  line(out, prefix, "handler_duration_seconds_count", "", s.handler_calls);
  return out;
}

}  // namespace shoal::http
