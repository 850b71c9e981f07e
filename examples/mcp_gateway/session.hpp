// One MCP session: a child process (the stdio MCP server, in a process
// group of its own) and the routes that carry its stdout to the client's
// HTTP streams. The session's task reads the child's stdout a line (one
// JSON-RPC message) at a time and hands each to the stream it belongs to:
// a response to the POST that asked for it, a progress notification to the
// POST whose request named its token, anything else to the GET stream (or
// the newest POST stream if there is none). A stream takes a few messages
// ahead; past that the task waits, so a client that stops reading stops
// the child's output (the child blocks) rather than growing a buffer.
#pragma once

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mcp_gateway/json.hpp"
#include "shoal/shoal.hpp"

namespace mcp_gateway {

using Clock = std::chrono::steady_clock;

/// What the gateway is told on its command line.
struct Config {
  std::vector<std::string> argv;  ///< the stdio MCP server run for each session
  std::string endpoint = "/mcp";
  std::size_t max_sessions = 10'000;
  std::size_t max_message = 4 << 20;  ///< a POST body, and a line of the child's output
  /// A session with no request in flight and no stream open ends after
  /// this long.
  std::chrono::milliseconds idle_timeout = std::chrono::minutes(5);
  /// The same, sooner, for a session whose last stream broke (its client
  /// went away: a reset, or a keep-alive write that failed) rather than
  /// ended: a client that is still there reconnects at once.
  std::chrono::milliseconds abandoned_timeout = std::chrono::seconds(10);
  /// After DELETE (or the end): how long the child has after its stdin
  /// closes, then after SIGTERM, before SIGKILL.
  std::chrono::milliseconds kill_grace = std::chrono::seconds(1);
  /// An SSE comment this often on an open stream, so that a client that
  /// went away is noticed (the write fails).
  std::chrono::milliseconds keepalive = std::chrono::seconds(15);
  std::size_t replay_events = 256;  ///< kept per session for Last-Event-ID
  std::vector<std::string> allowed_origins;  ///< beyond http(s)://localhost, 127.0.0.1, [::1]
  std::string token;  ///< a bearer token every request must carry (empty: none)
};

/// A JSON-RPC message, as the views into its text that routing needs.
struct Message {
  std::string_view text;
  std::optional<std::string_view> id;  ///< raw JSON ("7", "\"a\"")
  std::optional<std::string> method;
  std::optional<std::string_view> progress_token;  ///< params._meta.progressToken (a request) or params.progressToken (a notification)
  bool is_request() const noexcept { return method && id; }
  bool is_notification() const noexcept { return method && !id; }
  bool is_response() const noexcept { return !method && id; }
};

/// `text` (a valid JSON value) as a message; none if it is not an object
/// with a method or an id.
inline std::optional<Message> classify(std::string_view text) {
  Message m{text, json::member(text, "id"), std::nullopt, std::nullopt};
  if (const auto method = json::member(text, "method")) {
    m.method = json::string_value(*method);
    if (!m.method) return std::nullopt;
    if (const auto params = json::member(text, "params")) {
      if (m.id) {
        if (const auto meta = json::member(*params, "_meta")) m.progress_token = json::member(*meta, "progressToken");
      } else if (*m.method == "notifications/progress") {
        m.progress_token = json::member(*params, "progressToken");
      }
    }
  }
  if (m.id && *m.id == "null") m.id.reset();
  if (!m.method && !m.id) return std::nullopt;
  return m;
}

/// One SSE event for a stream: its id (the session's sequence number) and
/// the message.
struct Event {
  std::uint64_t seq = 0;
  std::string text;
};

/// An HTTP stream's inbox: the session's task sends, the stream's handler
/// receives. Shared, as either may end first.
struct Outbox {
  Outbox(std::uint64_t stream_no, bool sse) : stream(stream_no), events(sse), queue(8) {}
  const std::uint64_t stream;  ///< which stream (replay matches on it)
  const bool events;           ///< SSE: notifications and requests may come too
  shoal::Channel<Event> queue;
};

/// Gateway-wide counters (the metrics page).
struct Stats {
  std::atomic<std::uint64_t> sessions_open{0}, sessions_total{0}, sessions_refused{0};
  std::atomic<std::uint64_t> messages_in{0}, messages_out{0}, bytes_in{0}, bytes_out{0};
};

/// How a session ended, for its log line.
enum class Ending { running, child_exited, input_closed, deleted, idle, abandoned, shutdown, too_long, failed };

inline const char* to_string(Ending e) noexcept {
  switch (e) {
    case Ending::running: return "running";
    case Ending::child_exited: return "child exited";
    case Ending::input_closed: return "its child taking no more input";
    case Ending::deleted: return "DELETE";
    case Ending::idle: return "idle timeout";
    case Ending::abandoned: return "its client went away";
    case Ending::shutdown: return "shutdown";
    case Ending::too_long: return "a line of its output past --max-message";
    case Ending::failed: return "an I/O error";
  }
  return "?";
}

/// The event id of `seq` and its parse (SSE ids are text).
inline std::string event_id(std::uint64_t seq) { return std::to_string(seq); }
inline std::optional<std::uint64_t> parse_event_id(std::string_view text) {
  std::uint64_t v = 0;
  if (text.empty() || text.size() > 19) return std::nullopt;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

class Session {
 public:
  Session(std::string id, std::string peer, const Config& config, Stats& stats)
      : id_(std::move(id)), peer_(std::move(peer)), config_(config), stats_(stats) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& id() const noexcept { return id_; }
  pid_t pid() const noexcept { return child_ ? child_->pid() : -1; }

  /// Starts the child (before the session's task runs). Throws
  /// std::system_error if it cannot be spawned.
  void start() {
    shoal::process::Options o;
    o.in = shoal::process::Stdio::pipe;
    o.out = shoal::process::Stdio::pipe;
    o.process_group = true;   // DELETE stops what it started too
    o.die_with_parent = true;  // a gateway killed with SIGKILL leaves no child
    child_.emplace(shoal::process::spawn(config_.argv, o));
  }

  /// The protocol version the child chose in its initialize result (empty
  /// until then).
  std::string version() const {
    std::lock_guard g(lock_);
    return version_;
  }

  /// True once the session has ended (later requests get 404).
  bool ended() const noexcept { return ended_.load(std::memory_order_acquire); }

  /// Ends the session: its task closes every stream, stops the child and
  /// reaps it. The first reason given is the one logged. Any thread.
  void end(Ending why) noexcept {
    Ending expected = Ending::running;
    ending_.compare_exchange_strong(expected, why, std::memory_order_acq_rel);
    stop_.set();
  }

  /// A new stream's inbox, routed the responses to `messages`' requests
  /// (and their progress notifications); `standalone`: the GET stream,
  /// which replaces an older one (that one ends). Null once ended.
  std::shared_ptr<Outbox> open_stream(const std::vector<Message>& messages, bool sse, bool standalone) {
    std::lock_guard g(lock_);
    if (ended()) return nullptr;
    auto box = std::make_shared<Outbox>(next_stream_++, sse);
    abandoned_ = false;
    for (const Message& m : messages) {
      if (!m.is_request()) continue;
      Route r{box, box->stream, {}};
      if (m.progress_token && sse) {
        r.token = std::string(*m.progress_token);
        by_token_[r.token] = Route{box, box->stream, {}};
      }
      by_id_[std::string(*m.id)] = std::move(r);
    }
    if (standalone) {
      if (standalone_) standalone_->queue.close();
      standalone_ = box;
    }
    if (sse) sse_streams_.push_back(box);
    ++streams_open_;
    return box;
  }

  /// Forgets `box` (its handler ended). A response still due to it is kept
  /// for a GET with Last-Event-ID that resumes the stream.
  void close_stream(const std::shared_ptr<Outbox>& box, bool broken) noexcept {
    std::lock_guard g(lock_);
    abandoned_ = broken;
    if (standalone_ == box) standalone_.reset();
    std::erase(sse_streams_, box);
    // A broken stream's routes stay, boxless: what comes for it is kept
    // for a resume.
    for (auto* routes : {&by_id_, &by_token_}) {
      for (auto& [key, r] : *routes) {
        if (r.box == box) r.box.reset();
      }
    }
    // A stream that ended whole needs no resume: an idle session keeps
    // no events.
    if (!broken) std::erase_if(replay_, [&](const Stored& e) { return e.stream == box->stream; });
    --streams_open_;
    touched_ = Clock::now();
    box->queue.close();
    if (streams_open_ == 0 && requests_ == 0) idle_.notify_one();  // the session's task: the idle clock starts
  }

  /// What a GET with Last-Event-ID `last` resumes: the events after it on
  /// the stream it was sent on, and how many of that stream's requests are
  /// still unanswered (their answers go to `taker` from now on). None if
  /// `last` is no longer kept.
  std::optional<std::pair<std::vector<Event>, std::size_t>> resume(std::uint64_t last,
                                                                   const std::shared_ptr<Outbox>& taker) {
    std::lock_guard g(lock_);
    std::vector<Event> out;
    std::optional<std::uint64_t> stream;
    for (const Stored& e : replay_) {
      if (e.seq == last) stream = e.stream;
      if (stream && e.seq > last && e.stream == *stream) out.push_back(Event{e.seq, e.text});
    }
    if (!stream) return std::nullopt;
    // The client lost that stream, whether or not we have noticed yet:
    // its routes move to `taker`, and its handler ends (what it still
    // held is in the replay above).
    std::size_t due = 0;
    for (auto* routes : {&by_id_, &by_token_}) {
      for (auto& [key, r] : *routes) {
        if (r.stream != *stream) continue;
        r.box = taker;
        r.stream = taker->stream;
        if (routes == &by_id_) ++due;
      }
    }
    for (const auto& b : sse_streams_) {
      if (b->stream == *stream) b->queue.close();
    }
    return std::pair{std::move(out), due};
  }

  /// Writes `message` (valid JSON) to the child's stdin as one line.
  /// Throws std::system_error if the child's stdin is closed.
  shoal::Task<void> to_child(std::string line) {
    for (char& c : line) {
      if (c == '\n' || c == '\r') c = ' ';  // outside strings (valid JSON has none inside): whitespace
    }
    line += '\n';
    stats_.messages_in.fetch_add(1, std::memory_order_relaxed);
    stats_.bytes_in.fetch_add(line.size(), std::memory_order_relaxed);
    messages_in_.fetch_add(1, std::memory_order_relaxed);
    co_await shoal::with_lock(stdin_lock_, [&]() -> shoal::Task<void> { co_await child_->in().write_all(line); });
  }

  /// A request is in flight (+1) or answered (-1): the idle timeout counts
  /// only while none is and no stream is open.
  void busy(int d) noexcept {
    std::lock_guard g(lock_);
    requests_ += d;
    touched_ = Clock::now();
    if (streams_open_ == 0 && requests_ == 0) idle_.notify_one();
  }

  /// Runs the session to its end: routes the child's output until DELETE,
  /// the child's exit, the idle timeout or the shutdown, then closes every
  /// stream, stops the child (stdin closed, then SIGTERM and SIGKILL to its
  /// group, each after the grace) and reaps it. Returns its log line.
  shoal::Task<std::string> run() {
    const auto started = Clock::now();
    try {
      co_await route_output();
    } catch (const shoal::net::LineTooLong&) {
      end(Ending::too_long);
    } catch (const std::system_error&) {
      end(Ending::failed);
    }
    ended_.store(true, std::memory_order_release);
    close_all();
    const shoal::process::ExitStatus status = co_await shoal::shielded(stop_child());
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
    co_return "session " + id_ + " from " + peer_ + ": pid " + std::to_string(child_->pid()) + ", " +
        std::to_string(ms) + " ms, " + std::to_string(messages_in_.load()) + " messages in, " +
        std::to_string(messages_out_) + " out, ended by " + to_string(ending_.load()) + " (" + status.to_string() + ")";
  }

 private:
  struct Route {
    std::shared_ptr<Outbox> box;  // null: its stream broke (what comes is kept for a resume)
    std::uint64_t stream = 0;
    std::string token;  // (by_id_) the request's progress token, routed while it runs
  };
  struct Stored {
    std::uint64_t seq, stream;
    std::string text;
  };

  shoal::Task<void> route_output() {
    shoal::net::BufferedReader out(child_->out(), 16 * 1024);
    for (;;) {
      const auto deadline = idle_deadline();
      const auto woke = co_await shoal::select(shoal::net::on_readable(out), shoal::on_event(stop_),
                                               shoal::on_deadline(deadline), shoal::on_notify(idle_));
      if (woke.index() == 1) co_return;
      if (woke.index() == 3) continue;  // idle now: a new deadline
      if (woke.index() == 2) {
        if (idle_deadline() <= Clock::now()) {
          end(abandoned() ? Ending::abandoned : Ending::idle);
          co_return;
        }
        continue;
      }
      std::optional<std::string> line = co_await out.read_line(config_.max_message);
      if (!line) {
        end(Ending::child_exited);
        co_return;
      }
      co_await deliver(std::move(*line));
    }
  }

  bool abandoned() const {
    std::lock_guard g(lock_);
    return abandoned_;
  }

  Clock::time_point idle_deadline() const {
    std::lock_guard g(lock_);
    if (requests_ > 0 || streams_open_ > 0) return Clock::time_point::max();
    return touched_ + (abandoned_ ? std::min(config_.abandoned_timeout, config_.idle_timeout) : config_.idle_timeout);
  }

  // One line of the child's output to the stream it belongs to.
  shoal::Task<void> deliver(std::string line) {
    if (line.empty()) co_return;
    if (json::validate(line)) co_return;  // not a message (a server logging to stdout): dropped
    const std::optional<Message> m = classify(line);
    if (!m) co_return;
    messages_out_ += 1;
    stats_.messages_out.fetch_add(1, std::memory_order_relaxed);
    stats_.bytes_out.fetch_add(line.size() + 1, std::memory_order_relaxed);
    if (m->is_response()) note_version(*m);
    Event e;
    std::shared_ptr<Outbox> box;
    {
      std::lock_guard g(lock_);
      std::uint64_t stream = 0;
      box = route_locked(*m, stream);
      e.seq = next_seq_++;
      if (box) stream = box->stream;
      if (stream != 0 && (!box || box->events)) {
        if (replay_.size() >= config_.replay_events) replay_.erase(replay_.begin());
        replay_.push_back(Stored{e.seq, stream, line});
      }
    }
    if (!box) co_return;  // kept for a resume, or nobody is listening (as a stdio client that ignores it)
    e.text = std::move(line);
    try {
      co_await box->queue.send(std::move(e));  // waits while the client does not read: the child waits too
    } catch (const shoal::ChannelClosed&) {
      // the stream ended meanwhile: the event is in the replay buffer
    }
  }

  std::shared_ptr<Outbox> route_locked(const Message& m, std::uint64_t& stream) {
    if (m.is_response()) {
      const auto it = by_id_.find(std::string(*m.id));
      if (it == by_id_.end()) return nullptr;
      std::shared_ptr<Outbox> box = std::move(it->second.box);
      stream = it->second.stream;
      if (!it->second.token.empty()) by_token_.erase(it->second.token);
      by_id_.erase(it);
      return box;
    }
    if (m.progress_token) {
      if (const auto it = by_token_.find(std::string(*m.progress_token)); it != by_token_.end()) {
        stream = it->second.stream;
        return it->second.box;
      }
    }
    if (standalone_) return standalone_;
    if (!sse_streams_.empty()) return sse_streams_.back();
    return nullptr;
  }

  // The initialize result names the protocol version the session speaks.
  void note_version(const Message& m) {
    const auto result = json::member(m.text, "result");
    if (!result) return;
    const auto v = json::member(*result, "protocolVersion");
    if (!v) return;
    if (auto text = json::string_value(*v)) {
      std::lock_guard g(lock_);
      if (version_.empty()) version_ = std::move(*text);
    }
  }

  void close_all() noexcept {
    std::lock_guard g(lock_);
    for (auto& [id, r] : by_id_) {
      if (r.box) r.box->queue.close();
    }
    for (auto& box : sse_streams_) box->queue.close();
    if (standalone_) standalone_->queue.close();
  }

  shoal::Task<shoal::process::ExitStatus> stop_child() {
    child_->in().close();  // end of input: a stdio server's cue to exit
    auto status = co_await shoal::move_on_after(config_.kill_grace, child_->wait());
    if (!status) {
      child_->kill_group(SIGTERM);
      status = co_await shoal::move_on_after(config_.kill_grace, child_->wait());
    }
    if (!status) {
      child_->kill_group(SIGKILL);
      status = co_await child_->wait();
    }
    child_->kill_group(SIGKILL);  // what it left running in its group
    co_return *status;
  }

  std::string id_, peer_;
  const Config& config_;
  Stats& stats_;
  std::optional<shoal::process::Child> child_;
  shoal::Mutex stdin_lock_;
  shoal::Event stop_;
  shoal::Notify idle_;  // the last request or stream ended
  std::atomic<Ending> ending_{Ending::running};
  std::atomic<bool> ended_{false};
  std::atomic<std::uint64_t> messages_in_{0};
  std::uint64_t messages_out_ = 0;  // the session's task only

  mutable std::mutex lock_;  // everything below
  std::string version_;
  std::unordered_map<std::string, Route> by_id_;
  std::unordered_map<std::string, Route> by_token_;
  std::shared_ptr<Outbox> standalone_;
  std::vector<std::shared_ptr<Outbox>> sse_streams_;
  std::vector<Stored> replay_;  // oldest first; a vector: an empty one allocates nothing
  std::uint64_t next_seq_ = 1, next_stream_ = 1;
  int streams_open_ = 0, requests_ = 0;
  bool abandoned_ = false;  // the last stream to close broke
  Clock::time_point touched_ = Clock::now();
};

}  // namespace mcp_gateway
