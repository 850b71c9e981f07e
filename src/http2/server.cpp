// An HTTP/2 connection: one task owns the socket and the nghttp2 session
// (nghttp2 is I/O-free: bytes in through mem_recv, out through mem_send),
// and each request's handler is a child of the connection's task set.
// Handlers never touch the session: a finished one queues its stream and
// notifies, and the connection task submits the response.
#include "shoal/http2/server.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "shoal/channel/select.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/scope/cancel_scope.hpp"
#include "shoal/scope/task_set.hpp"
#include "shoal/sync/event.hpp"

namespace shoal::http2::detail {
namespace {

/// The receive window a stream opens with: a whole-body request is read
/// into memory anyway (up to max_body), so one round trip's worth.
constexpr std::int32_t kInitialWindow = 1 << 20;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

/// A buffer kept for the next stream only up to this: one large body does
/// not pin its memory for the connection's life.
constexpr std::size_t kKeepCapacity = 16384;

/// One request, from its HEADERS to the end of its response. A connection
/// reuses its streams' objects (and their strings' memory) while any is
/// open, and frees them all when none is.
struct Stream {
  std::int32_t id = 0;
  std::size_t slot = 0;  // its index in Connection::streams_
  std::string text;  // the fields' names and values, one after another
  struct Field {
    std::uint32_t at, name, value;  // offset in `text`, lengths
  };
  std::vector<Field> fields;  // as received, pseudo-headers apart
  Field method{}, path{}, authority{};
  bool has_host = false;
  std::size_t field_bytes = 0;
  http::RequestHead head;
  std::string body;
  bool too_large = false;  // the body went past max_body: 413
  http::Response res;
  std::size_t sent = 0;              // bytes of res.body handed to nghttp2
  std::optional<CancelScope> scope;  // a peer's RST_STREAM cancels the handler
  std::exception_ptr fault;
  bool handler_live = false;
  bool closed = false;  // nghttp2 closed the stream (reset, or answered)

  /// Ready for stream `new_id`, keeping what memory is small enough to.
  void open(std::int32_t new_id) {
    id = new_id;
    text.clear();
    fields.clear();
    method = path = authority = Field{};
    has_host = false;
    field_bytes = 0;
    if (body.capacity() > kKeepCapacity) std::string().swap(body);
    body.clear();
    too_large = false;
    if (res.body.capacity() > kKeepCapacity) res.release();
    res.reset();
    sent = 0;
    scope.emplace();
    fault = nullptr;
    handler_live = false;
    closed = false;
  }
  Field keep(std::string_view name, std::string_view value) {
    const Field f{static_cast<std::uint32_t>(text.size()), static_cast<std::uint32_t>(name.size()),
                  static_cast<std::uint32_t>(value.size())};
    text.append(name).append(value);
    return f;
  }
  std::string_view name(Field f) const noexcept { return std::string_view(text).substr(f.at, f.name); }
  std::string_view value(Field f) const noexcept { return std::string_view(text).substr(f.at + f.name, f.value); }

  /// The head the handler sees: views into this stream's text.
  void make_head() {
    if (!has_host && authority.value != 0) {
      text.reserve(text.size() + 4 + authority.value);  // the view below stays valid
      fields.push_back(keep("host", value(authority)));
    }
    head.method = value(method);
    head.target = value(path);
    head.minor_version = 1;
    head.headers.clear();
    for (const Field f : fields) head.headers.push_back(http::Header{name(f), value(f)});
    head.content_length = body.size();
  }
};

class Connection {
 public:
  Connection(http::Server& server, shoal::detail::ByteStreamRef conn, http::detail::HandlerRef handler)
      : server_(server),
        conn_(conn),
        handler_(handler),
        limit_(std::max<std::size_t>(1, server.options().max_concurrent_streams)) {
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_option* opt = nullptr;
    if (nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_option_new(&opt) != 0) {
      nghttp2_session_callbacks_del(cbs);
      throw std::bad_alloc();
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, &Connection::on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, &Connection::on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &Connection::on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &Connection::on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &Connection::on_stream_close);
    // Windows reopen as the connection takes the data (flow control by
    // consumption), not as nghttp2 parses it.
    nghttp2_option_set_no_auto_window_update(opt, 1);
    const int rv = nghttp2_session_server_new2(&session_, cbs, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    if (rv != 0) throw std::bad_alloc();
  }
  ~Connection() { nghttp2_session_del(session_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Task<void> run(TaskSet& set, std::string preread);
  std::exception_ptr fault() const noexcept { return first_fault_; }
  std::size_t limit() const noexcept { return limit_; }

 private:
  static Connection& of(void* user) noexcept { return *static_cast<Connection*>(user); }
  Stream* stream(std::int32_t id) noexcept {
    return static_cast<Stream*>(nghttp2_session_get_stream_user_data(session_, id));
  }

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) noexcept;
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
                       const std::uint8_t* value, std::size_t valuelen, std::uint8_t flags, void* user) noexcept;
  static int on_data(nghttp2_session*, std::uint8_t flags, std::int32_t id, const std::uint8_t* data, std::size_t len,
                     void* user) noexcept;
  static int on_frame(nghttp2_session*, const nghttp2_frame* frame, void* user) noexcept;
  static int on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) noexcept;
  static ssize_t read_body(nghttp2_session*, std::int32_t id, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source* src, void* user) noexcept;

  void request_ended(Stream& s);
  void run_waiting();
  Task<void> start_waiting(TaskSet& set);
  Task<void> handle(Stream& s);
  void finished(Stream& s);
  void respond(Stream& s);
  Stream& open_stream(std::int32_t id);
  void forget(Stream& s);
  Task<void> flush();

  http::Server& server_;
  shoal::detail::ByteStreamRef conn_;
  http::detail::HandlerRef handler_;
  nghttp2_session* session_ = nullptr;
  std::size_t limit_ = 1;    // handlers at once: the advertised stream limit
  std::size_t running_ = 0;  // handlers started and not yet reported back
  std::vector<std::unique_ptr<Stream>> streams_;  // every stream object: open ones, then `spare_` of them
  std::size_t spare_ = 0;
  std::size_t open() const noexcept { return streams_.size() - spare_; }
  std::deque<Stream*> waiting_;  // requests ended, no slot yet
  std::mutex done_lock_;
  std::vector<Stream*> done_;  // handlers finished (from their tasks)
  Notify done_notify_;
  std::string out_;
  std::exception_ptr first_fault_;
  bool served_ = false;  // a request came (the idle timeout applies, not the header one)
};

int Connection::on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) noexcept {
  Connection& c = of(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  try {
    c.served_ = true;
    Stream& s = c.open_stream(frame->hd.stream_id);
    nghttp2_session_set_stream_user_data(c.session_, s.id, &s);
  } catch (const std::bad_alloc&) {
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // RST_STREAM for this one
  }
  return 0;
}

int Connection::on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name_p,
                          std::size_t namelen, const std::uint8_t* value_p, std::size_t valuelen, std::uint8_t,
                          void* user) noexcept {
  Connection& c = of(user);
  Stream* s = c.stream(frame->hd.stream_id);
  if (s == nullptr) return 0;
  const std::string_view name(reinterpret_cast<const char*>(name_p), namelen);
  const std::string_view value(reinterpret_cast<const char*>(value_p), valuelen);
  // The decoded list's size as SETTINGS_MAX_HEADER_LIST_SIZE counts it
  // (RFC 9113 §6.5.2); past max_head the stream is refused (an HPACK bomb
  // decodes small frames into a large list).
  s->field_bytes += namelen + valuelen + 32;
  if (s->field_bytes > c.server_.options().max_head) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  try {
    if (name.empty() || name[0] != ':') {
      s->fields.push_back(s->keep(name, value));
      if (name == "host") s->has_host = true;
    } else if (name == ":method") {
      s->method = s->keep({}, value);
    } else if (name == ":path") {
      s->path = s->keep({}, value);
    } else if (name == ":authority") {
      s->authority = s->keep({}, value);
    }
  } catch (const std::bad_alloc&) {
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  return 0;
}

int Connection::on_data(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
                        void* user) noexcept {
  Connection& c = of(user);
  // Taken off the windows at once: the body is read into memory, bounded
  // by max_body (a stream past it is answered 413 and its data dropped).
  (void)nghttp2_session_consume(c.session_, id, len);
  Stream* s = c.stream(id);
  if (s == nullptr || s->too_large) return 0;
  if (s->body.size() + len > c.server_.options().max_body) {
    s->too_large = true;
    std::string().swap(s->body);
    return 0;
  }
  try {
    s->body.append(reinterpret_cast<const char*>(data), len);
  } catch (const std::bad_alloc&) {
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  return 0;
}

int Connection::on_frame(nghttp2_session*, const nghttp2_frame* frame, void* user) noexcept {
  Connection& c = of(user);
  if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) {
    return 0;
  }
  Stream* s = c.stream(frame->hd.stream_id);
  if (s == nullptr) return 0;
  try {
    c.request_ended(*s);
  } catch (const std::bad_alloc&) {
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  return 0;
}

int Connection::on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t, void* user) noexcept {
  Connection& c = of(user);
  Stream* s = c.stream(id);
  if (s == nullptr) return 0;
  s->closed = true;
  if (s->handler_live) {
    s->scope->cancel();  // a reset: the handler stops at its next checkpoint; finished() frees it
  } else {
    std::erase(c.waiting_, s);
    c.forget(*s);
  }
  return 0;
}

ssize_t Connection::read_body(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                              std::uint32_t* flags, nghttp2_data_source* src, void*) noexcept {
  Stream& s = *static_cast<Stream*>(src->ptr);
  const std::size_t n = std::min(length, s.res.body.size() - s.sent);
  std::memcpy(buf, s.res.body.data() + s.sent, n);
  s.sent += n;
  if (s.sent == s.res.body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

Stream& Connection::open_stream(std::int32_t id) {
  if (spare_ == 0) {
    streams_.push_back(std::make_unique<Stream>());
  } else {
    --spare_;
  }
  Stream& s = *streams_[open() - 1];
  s.slot = open() - 1;
  s.open(id);
  return s;
}

void Connection::forget(Stream& s) {
  // Swapped with the last open one, and then the first spare.
  const std::size_t last = open() - 1;
  std::swap(streams_[s.slot], streams_[last]);
  streams_[s.slot]->slot = s.slot;
  s.slot = last;
  ++spare_;
}

void Connection::request_ended(Stream& s) {
  if (s.too_large) {
    s.res.status = 413;
    s.res.body = "request body too large\n";
    respond(s);
    return;
  }
  s.make_head();
  // Started by the connection's loop, which may wait for a slot (a
  // callback cannot). The queue holds at most limit_ streams: nghttp2
  // refuses a stream past the advertised limit (RST_STREAM
  // REFUSED_STREAM) even before the client acknowledges the SETTINGS, so
  // only open streams wait, and only while reset streams' handlers that
  // have not yet ended hold their slots. Go's server, which does not
  // refuse, queues up to 4x and then sends GOAWAY ENHANCE_YOUR_CALM.
  waiting_.push_back(&s);
}

void Connection::run_waiting() {
  // A void handler has no checkpoint, so a task of its own would buy it
  // nothing but a second worker, and would cost a spawn, a hand-back and a
  // write per stream: it runs here, in the order the requests ended, and
  // the answers to one read's requests leave in one write (docs/http2.md).
  while (!waiting_.empty()) {
    Stream& s = *waiting_.front();
    waiting_.pop_front();
    try {
      const http::Request req(s.head, s.body);
      handler_.call(handler_.self, req, s.res);
    } catch (...) {
      s.fault = std::current_exception();
      if (is_cancellation(s.fault)) throw;
    }
    respond(s);
  }
}

Task<void> Connection::start_waiting(TaskSet& set) {
  // running_ counts the handlers that have not reported back; one that
  // has may not have left the set yet, so spawn waits for its slot.
  while (!waiting_.empty() && running_ < limit_) {
    Stream* s = waiting_.front();
    waiting_.pop_front();
    s->handler_live = true;
    ++running_;
    const SpawnStatus st = co_await set.spawn([this, s]() -> Task<void> { return handle(*s); });
    if (st != SpawnStatus::started) {  // out of memory for the task: this stream only
      s->handler_live = false;
      --running_;
      (void)nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
    }
  }
}

Task<void> Connection::handle(Stream& s) {
  try {
    const http::Request req(s.head, s.body);
    (void)co_await s.scope->run(handler_.call_async(handler_.self, req, s.res));
  } catch (...) {
    std::exception_ptr e = std::current_exception();
    if (is_cancellation(e)) throw;  // the connection is going: nobody waits for this stream
    s.fault = std::move(e);
  }
  finished(s);
}

void Connection::finished(Stream& s) {
  {
    const std::lock_guard<std::mutex> hold(done_lock_);
    done_.push_back(&s);
  }
  done_notify_.notify_one();
}

void Connection::respond(Stream& s) {
  if (s.fault) {
    if (!first_fault_) first_fault_ = s.fault;
    s.res.reset();
    s.res.status = 500;
    s.res.body = "the handler failed\n";
  }
  const std::string status = std::to_string(s.res.status);
  const std::string length = std::to_string(s.res.body.size());
  std::vector<std::pair<std::string, std::string>> fields;
  std::string_view lines = s.res.header_lines();
  while (!lines.empty()) {  // "Name: value\r\n", validated by set_header
    const std::size_t end = lines.find("\r\n");
    const std::string_view line = lines.substr(0, end);
    const std::size_t colon = line.find(':');
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    fields.emplace_back(lower(line.substr(0, colon)), std::string(value));
    lines.remove_prefix(end == std::string_view::npos ? lines.size() : end + 2);
  }
  auto nv = [](const std::string& n, const std::string& v) {
    return nghttp2_nv{reinterpret_cast<std::uint8_t*>(const_cast<char*>(n.data())),
                      reinterpret_cast<std::uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                      NGHTTP2_NV_FLAG_NONE};
  };
  static const std::string kStatus = ":status", kLength = "content-length";
  std::vector<nghttp2_nv> nva;
  nva.reserve(fields.size() + 2);
  nva.push_back(nv(kStatus, status));
  const bool bodyless = s.res.status == 204 || s.res.status == 304;
  if (!bodyless) nva.push_back(nv(kLength, length));
  for (const auto& [n, v] : fields) nva.push_back(nv(n, v));
  const bool send_body = !bodyless && s.value(s.method) != "HEAD" && !s.res.body.empty();
  nghttp2_data_provider provider{};
  provider.source.ptr = &s;
  provider.read_callback = &Connection::read_body;
  // nghttp2 copies the fields; the body is read from the stream as the
  // windows allow, and the stream stays until nghttp2 closes it.
  if (nghttp2_submit_response(session_, s.id, nva.data(), nva.size(), send_body ? &provider : nullptr) != 0) {
    (void)nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_INTERNAL_ERROR);
  }
}

Task<void> Connection::flush() {
  for (;;) {
    const std::uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) throw std::runtime_error(std::string("shoal::http2: ") + nghttp2_strerror(static_cast<int>(n)));
    if (n == 0) break;
    out_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
  if (out_.empty()) co_return;
  co_await conn_.write_all(out_);
  out_.clear();
}

Task<void> Connection::run(TaskSet& set, std::string preread) {
  const http::ServerOptions& o = server_.options();
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, o.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(kInitialWindow)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(o.max_head)},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
  };
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0) throw std::bad_alloc();
  std::string in = std::move(preread);
  std::vector<Stream*> done;  // swapped with done_, so that neither allocates per turn
  const std::chrono::milliseconds stream_idle = conn_.idle_timeout();
  for (;;) {
    if (!in.empty()) {
      const ssize_t n =
          nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(in.data()), in.size());
      in.clear();
      // A protocol error: nghttp2 has queued GOAWAY; send it and end.
      if (n < 0) {
        co_await flush();
        break;
      }
    }
    {
      const std::lock_guard<std::mutex> hold(done_lock_);
      done.swap(done_);
    }
    for (Stream* s : done) {
      s->handler_live = false;
      --running_;
      if (s->closed) {
        forget(*s);  // reset while its handler ran
      } else {
        respond(*s);
      }
    }
    done.clear();
    if (!waiting_.empty()) {
      if (handler_.call != nullptr) {
        run_waiting();
      } else {
        co_await start_waiting(set);
      }
    }
    co_await flush();
    if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) break;
    // A connection with no open stream may stay silent for the header
    // timeout before its first request and the idle timeout after it;
    // then it ends with GOAWAY (NO_ERROR). One with streams waits on them.
    const std::chrono::milliseconds limit = served_ ? o.idle_timeout : o.header_timeout;
    std::size_t woke = 0;  // the case: readable, a handler done, the deadline
    if (open() == 0) {
      // No handler is running (a reset stream stays open until its handler
      // ends), so only the client can wake it. Idle: it holds no buffer and
      // no stream object, and the deadline is the stream's own, whose
      // timer exists only if the wait has to wait.
      streams_.clear();
      spare_ = 0;
      std::string().swap(in);
      std::string().swap(out_);
      std::vector<Stream*>().swap(done);
      conn_.set_idle_timeout(limit);
      try {
        co_await conn_.wait_readable();
      } catch (const net::IdleTimeout&) {
        woke = 2;
      }
      conn_.set_idle_timeout(stream_idle);
    } else {
      const auto r = co_await select(conn_.readable_case(), on_notify(done_notify_));
      woke = r.index();
    }
    if (woke == 2) {
      (void)nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
    } else if (woke == 0) {
      // Read straight into `in`, which is given back once nghttp2 has
      // taken it: an idle connection holds no buffer.
      in.resize(16384);
      const std::size_t n = co_await conn_.read_some(std::as_writable_bytes(std::span(in)));
      if (n == 0) break;  // the client is gone: its streams' tasks are cancelled below
      in.resize(n);
    }
  }
  set.cancel();
}

}  // namespace

Task<void> serve_connection(http::Server& server, shoal::detail::ByteStreamRef conn, http::detail::HandlerRef handler,
                            std::string preread) {
  Connection c(server, conn, handler);
  co_await task_set(c.limit(), [&c, &preread](TaskSet& set) -> Task<void> { co_await c.run(set, std::move(preread)); });
  if (c.fault()) std::rethrow_exception(c.fault());
}

}  // namespace shoal::http2::detail
