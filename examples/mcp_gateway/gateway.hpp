// The MCP Streamable HTTP transport (spec 2025-06-18; 2025-03-26 clients
// too) in front of stdio MCP servers: one endpoint taking POST (a message
// or a batch), GET (the session's stream for the server's own messages)
// and DELETE (the end of the session), sessions named by Mcp-Session-Id,
// one child process per session. The HTTP work is shoal::http's (and
// shoal::http2's); sessions run in a task set whose admission is the
// session limit.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "mcp_gateway/session.hpp"
#include "shoal/http.hpp"

namespace mcp_gateway {

/// Protocol versions a client may name in MCP-Protocol-Version.
inline bool known_version(std::string_view v) noexcept {
  return v == "2024-10-07" || v == "2024-11-05" || v == "2025-03-26" || v == "2025-06-18" || v == "2025-11-25";
}

/// The Origin is a local page's (http or https, localhost, 127.0.0.1 or
/// [::1], any port) or one the command line allowed.
inline bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed) {
  for (const std::string& a : allowed) {
    if (origin == a) return true;
  }
  for (std::string_view scheme : {"http://", "https://"}) {
    if (!origin.starts_with(scheme)) continue;
    std::string_view host = origin.substr(scheme.size());
    for (std::string_view local : {"localhost", "127.0.0.1", "[::1]"}) {
      if (host.starts_with(local) && (host.size() == local.size() || host[local.size()] == ':')) return true;
    }
  }
  return false;
}

inline bool accepts(std::string_view accept, std::string_view type) noexcept {
  return accept.find(type) != std::string_view::npos || accept.find("*/*") != std::string_view::npos;
}

/// A JSON-RPC error object for `id` (raw JSON, "null" if none).
inline std::string rpc_error(std::string_view id, int code, std::string_view message) {
  return std::string(R"({"jsonrpc":"2.0","id":)") + std::string(id) + R"(,"error":{"code":)" + std::to_string(code) +
         R"(,"message":)" + json::quote(message) + "}}";
}

/// A fresh session id: 128 random bits in hex.
inline std::string new_session_id() {
  unsigned char b[16];
  // getentropy: Linux, macOS and the BSDs alike (at most 256 bytes a call).
  if (::getentropy(b, sizeof b) != 0) {
    throw std::system_error(errno, std::generic_category(), "mcp_gateway: getentropy (a session id)");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (const unsigned char c : b) {
    id += kHex[c >> 4];
    id += kHex[c & 15];
  }
  return id;
}

class Gateway {
 public:
  Gateway(const Config& config, Stats& stats) : config_(config), stats_(stats) {}
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  /// Runs the sessions until close(): admits each new one while fewer than
  /// max_sessions run. Returns once every session has ended.
  shoal::Task<void> run_sessions() {
    co_await shoal::task_set(config_.max_sessions, [this](shoal::TaskSet& set) -> shoal::Task<void> {
      while (std::optional<Admission> a = co_await admissions_.recv()) {
        std::shared_ptr<Session> s = a->session;
        const bool started = set.try_spawn([this, s]() -> shoal::Task<void> { co_await run_one(s); });
        a->reply.send(started);
      }
    });
  }

  /// Ends every session as DELETE would and admits no more (the shutdown).
  void close() {
    admissions_.close();
    std::lock_guard g(lock_);
    for (auto& [id, s] : sessions_) s->end(Ending::shutdown);
  }

  /// The http handler: `config.endpoint` (POST, GET, DELETE). Not a
  /// coroutine itself: a session's GET stream waits in get()'s frame only.
  shoal::Task<void> operator()(const shoal::http::Request& req, shoal::http::Response& res) {
    std::string_view path = req.target();
    if (const auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
    if (path != config_.endpoint) {
      refuse(res, 404, "no such endpoint: " + std::string(path) + " (MCP is served at " + config_.endpoint + ")");
      return answered();
    }
    if (const std::string_view origin = req.header("origin"); !origin.empty() && !origin_allowed(origin, config_.allowed_origins)) {
      refuse(res, 403, "Origin " + std::string(origin) + " is not allowed (DNS-rebinding protection; --allow-origin adds one)");
      return answered();
    }
    if (!config_.token.empty() && req.header("authorization") != "Bearer " + config_.token) {
      res.set_header("WWW-Authenticate", "Bearer");
      refuse(res, 401, "a missing or wrong bearer token (--token-file)");
      return answered();
    }
    if (req.method() == "POST") return post(req, res);
    if (req.method() == "GET") return get(req, res);
    if (req.method() == "DELETE") {
      del(req, res);
    } else {
      res.set_header("Allow", "GET, POST, DELETE");
      refuse(res, 405, "method " + std::string(req.method()) + " is not one of GET, POST, DELETE");
    }
    return answered();
  }

 private:
  // A stream's end on every way out, a cancellation included: `clean`
  // unless its client went away (a write failed, or HTTP/2 reset it).
  struct Closer {
    Session& s;
    std::shared_ptr<Outbox>& box;
    bool request = true;  // a POST's requests in flight (the idle timeout waits for them)
    bool clean = false;
    Closer(Session& session, std::shared_ptr<Outbox>& b, bool in_flight = true) : s(session), box(b), request(in_flight) {
      if (request) s.busy(+1);
    }
    Closer(const Closer&) = delete;
    Closer& operator=(const Closer&) = delete;
    ~Closer() {
      s.close_stream(box, !clean);
      if (request) s.busy(-1);
    }
  };

  static shoal::Task<void> answered() { co_return; }

  struct Admission {
    std::shared_ptr<Session> session;
    shoal::OneshotSender<bool> reply;
  };

  // An error answer: the status, a JSON-RPC error naming what was wrong,
  // and a log line.
  static void refuse(shoal::http::Response& res, int status, const std::string& why, std::string_view id = "null",
                     int code = -32600) {
    std::fprintf(stderr, "mcp_gateway: %d: %s\n", status, why.c_str());
    res.status = status;
    res.set_header("Content-Type", "application/json");
    res.body = rpc_error(id, code, why);
  }

  shoal::Task<void> run_one(std::shared_ptr<Session> s) {
    shoal::this_task::set_name("MCP session " + s->id() + " (pid " + std::to_string(s->pid()) + ")");  // the task dump
    stats_.sessions_open.fetch_add(1, std::memory_order_relaxed);
    stats_.sessions_total.fetch_add(1, std::memory_order_relaxed);
    const std::string line = co_await s->run();
    {
      std::lock_guard g(lock_);
      sessions_.erase(s->id());
    }
    stats_.sessions_open.fetch_sub(1, std::memory_order_relaxed);
    std::fprintf(stderr, "mcp_gateway: %s\n", line.c_str());
  }

  std::shared_ptr<Session> find(std::string_view id) {
    std::lock_guard g(lock_);
    const auto it = sessions_.find(std::string(id));
    if (it == sessions_.end() || it->second->ended()) return nullptr;
    return it->second;
  }

  // The session a request names, checked; null after answering.
  std::shared_ptr<Session> session_of(const shoal::http::Request& req, shoal::http::Response& res) {
    const std::string_view id = req.header("mcp-session-id");
    if (id.empty()) {
      refuse(res, 400, "a " + std::string(req.method()) + " with no Mcp-Session-Id header (only initialize starts a session)");
      return nullptr;
    }
    std::shared_ptr<Session> s = find(id);
    if (!s) {
      refuse(res, 404, "no session " + std::string(id) + " (it ended, or never was): initialize a new one", "null",
             -32001);
      return nullptr;
    }
    const std::string_view v = req.header("mcp-protocol-version");
    if (!v.empty() && !known_version(v)) {
      refuse(res, 400, "unsupported MCP-Protocol-Version " + std::string(v));
      return nullptr;
    }
    // From 2025-06-18 on, the client names the version on every request;
    // one that negotiated 2025-03-26 never does (and needs not).
    if (v.empty() && s->version() >= "2025-06-18") {
      refuse(res, 400, "no MCP-Protocol-Version header (the session speaks " + s->version() + ")");
      return nullptr;
    }
    return s;
  }

  shoal::Task<void> post(const shoal::http::Request& req, shoal::http::Response& res) {
    std::string body;
    try {
      body = co_await req.read_all(config_.max_message);
    } catch (const shoal::http::BodyError& e) {
      refuse(res, e.status(), e.status() == 413 ? "a message of more than " + std::to_string(config_.max_message) +
                                                      " bytes (--max-message)"
                                                : std::string(e.what()));
      co_return;
    }
    if (const auto bad = json::validate(body)) {
      refuse(res, 400, "the body is not JSON: " + bad->what + " at byte " + std::to_string(bad->offset), "null",
             -32700);
      co_return;
    }
    const bool batch = json::is_array(body);
    std::vector<std::string_view> texts = batch ? json::elements(body) : std::vector<std::string_view>{body};
    std::vector<Message> messages;
    for (std::string_view t : texts) {
      std::optional<Message> m = classify(t);
      if (!m) {
        refuse(res, 400, "not a JSON-RPC message (an object with a method or an id)");
        co_return;
      }
      messages.push_back(std::move(*m));
    }
    if (messages.empty()) {
      refuse(res, 400, "an empty batch");
      co_return;
    }
    std::shared_ptr<Session> s;
    const bool initialize = !messages.empty() && messages[0].method == "initialize";
    if (initialize) {
      if (!req.header("mcp-session-id").empty() || messages.size() != 1 || !messages[0].id) {
        refuse(res, 400, "initialize must be a request of its own, without Mcp-Session-Id");
        co_return;
      }
      s = co_await open_session(req, res);
      if (!s) co_return;
      res.set_header("Mcp-Session-Id", s->id());
    } else {
      s = session_of(req, res);
      if (!s) co_return;
    }
    std::size_t requests = 0;
    for (const Message& m : messages) requests += m.is_request() ? 1 : 0;
    if (requests == 0) {  // notifications and responses: accepted
      const bool written = co_await forward(*s, texts, res);
      if (written) res.status = 202;
      co_return;
    }
    const bool sse = accepts(req.header("accept"), "text/event-stream");
    std::shared_ptr<Outbox> box = s->open_stream(messages, sse, false);
    if (!box) {
      refuse(res, 404, "session " + s->id() + " ended", "null", -32001);
      co_return;
    }
    Closer done{*s, box};
    const bool written = co_await forward(*s, texts, res);
    if (!written) {
      done.clean = true;
      co_return;
    }
    if (sse) {
      co_await stream_events(*box, res, requests, true);
    } else {
      co_await answer_json(*box, res, requests, batch);
    }
    done.clean = true;
  }

  // Writes the messages to the child; false, answered 502, if its stdin
  // is closed (it exited, or closed it, before its stdout ended).
  shoal::Task<bool> forward(Session& s, const std::vector<std::string_view>& texts, shoal::http::Response& res) {
    try {
      for (std::string_view t : texts) co_await s.to_child(std::string(t));
    } catch (const std::system_error& e) {
      s.end(Ending::input_closed);
      refuse(res, 502, "the MCP server of session " + s.id() + " takes no more input (" + e.what() + ")", "null",
             -32603);
      co_return false;
    }
    co_return true;
  }

  shoal::Task<std::shared_ptr<Session>> open_session(const shoal::http::Request& req, shoal::http::Response& res) {
    const std::optional<shoal::net::Address> peer = req.peer();
    auto s = std::make_shared<Session>(new_session_id(), peer ? peer->to_string() : "?", config_, stats_);
    try {
      s->start();
    } catch (const std::exception& e) {
      refuse(res, 500, std::string("could not start the MCP server: ") + e.what(), "null", -32603);
      co_return nullptr;
    }
    {
      std::lock_guard g(lock_);
      sessions_.emplace(s->id(), s);
    }
    auto [tx, rx] = shoal::oneshot<bool>();
    bool admitted = false;
    try {
      Admission a{s, std::move(tx)};  // named: g++ 12 and a braced temporary in co_await (docs/compilers.md)
      co_await admissions_.send(std::move(a));
      admitted = co_await rx.recv();
    } catch (const shoal::ChannelClosed&) {
    }
    if (!admitted) {
      {
        std::lock_guard g(lock_);
        sessions_.erase(s->id());
      }
      stats_.sessions_refused.fetch_add(1, std::memory_order_relaxed);
      res.set_header("Retry-After", "1");
      refuse(res, 503, "sessions are at their limit (" + std::to_string(config_.max_sessions) +
                           ", --max-sessions), or the gateway is shutting down", "null", -32000);
      co_return nullptr;  // the Child's destructor kills and reaps the child
    }
    co_return s;
  }

  // Writes `e` as an SSE event.
  static shoal::Task<void> write_event(shoal::http::Response& res, const Event& e) {
    co_await res.write("id: " + event_id(e.seq) + "\nevent: message\ndata: " + e.text + "\n\n");
  }

  // The stream's next event into `e`, writing a keep-alive comment each
  // time none came for --keepalive (a client gone is noticed as the write
  // fails); false once the stream is closed.
  shoal::Task<bool> next_event(Outbox& box, shoal::http::Response& res, std::optional<Event>& e) {
    for (;;) {
      auto r = co_await shoal::select(shoal::on_recv(box.queue), shoal::on_timeout(config_.keepalive));
      if (r.index() == 0) {
        e = std::get<0>(std::move(r));
        co_return e.has_value();
      }
      co_await res.write(": keep-alive\n\n");
    }
  }

  shoal::Task<void> stream_events(Outbox& box, shoal::http::Response& res, std::size_t requests, bool head) {
    if (head) {
      res.set_header("Content-Type", "text/event-stream");
      res.set_header("Cache-Control", "no-cache");
      co_await res.write(": stream open\n\n");  // the head out now: the client knows it is accepted
    }
    while (requests > 0) {
      std::optional<Event> e;
      if (!co_await next_event(box, res, e)) co_return;  // the session ended
      const bool response = !json::member(e->text, "method");
      co_await write_event(res, *e);
      if (response) --requests;
    }
  }

  shoal::Task<void> answer_json(Outbox& box, shoal::http::Response& res, std::size_t requests, bool batch) {
    std::string out = batch ? "[" : "";
    std::size_t answered = 0;
    while (answered < requests) {
      std::optional<Event> e = co_await box.queue.recv();
      if (!e) break;
      if (answered > 0) out += ',';
      out += e->text;
      ++answered;
    }
    if (answered == 0) {
      refuse(res, 502, "the MCP server ended before it answered", "null", -32603);
      co_return;
    }
    if (batch) out += ']';
    res.set_header("Content-Type", "application/json");
    res.body = std::move(out);
  }

  shoal::Task<void> get(const shoal::http::Request& req, shoal::http::Response& res) {
    if (!accepts(req.header("accept"), "text/event-stream")) {
      refuse(res, 406, "GET opens an SSE stream: Accept must include text/event-stream");
      co_return;
    }
    std::shared_ptr<Session> s = session_of(req, res);
    if (!s) co_return;
    // With a Last-Event-ID still kept: the rest of that stream (a POST's
    // whose connection broke), until its requests are answered. Else the
    // session's stream for the server's own messages.
    const auto last = parse_event_id(req.header("last-event-id"));
    std::shared_ptr<Outbox> box = s->open_stream({}, true, !last);
    if (!box) {
      refuse(res, 404, "session " + s->id() + " ended", "null", -32001);
      co_return;
    }
    Closer done{*s, box, false};
    if (last) {
      auto resumed = s->resume(*last, box);
      if (!resumed) {
        std::fprintf(stderr, "mcp_gateway: session %s: Last-Event-ID %s is no longer kept (the last %zu are)\n",
                     s->id().c_str(), event_id(*last).c_str(), config_.replay_events);
        refuse(res, 404, "event " + event_id(*last) + " is no longer kept: nothing to resume");
        co_return;
      }
      res.set_header("Content-Type", "text/event-stream");
      res.set_header("Cache-Control", "no-cache");
      co_await res.write(": stream resumed\n\n");
      for (const Event& e : resumed->first) co_await write_event(res, e);
      co_await stream_events(*box, res, resumed->second, false);  // the answers still due
      done.clean = true;
      co_return;
    }
    res.set_header("Content-Type", "text/event-stream");
    res.set_header("Cache-Control", "no-cache");
    co_await res.write(": stream open\n\n");
    for (std::optional<Event> e; co_await next_event(*box, res, e);) co_await write_event(res, *e);
    done.clean = true;  // the session ended, or a newer GET took over
  }

  void del(const shoal::http::Request& req, shoal::http::Response& res) {
    std::shared_ptr<Session> s = session_of(req, res);
    if (!s) return;
    s->end(Ending::deleted);
    res.status = 200;
  }

  const Config& config_;
  Stats& stats_;
  shoal::Channel<Admission> admissions_{64};
  std::mutex lock_;
  std::unordered_map<std::string, std::shared_ptr<Session>> sessions_;
};

}  // namespace mcp_gateway
