// An HTTP/2 connection: one task owns the socket and the nghttp2 session
// (nghttp2 is I/O-free: bytes in through mem_recv, out through mem_send),
// and each request's handler is a child of the connection's task set.
// Handlers never touch the session: a finished one queues its stream and
// notifies, and the connection task submits the response.
#include "shoal/http2/server.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "shoal/channel/select.hpp"
#include "shoal/detail/raise.hpp"
#include "shoal/detail/runtime_abi.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/http/stats.hpp"
#include "shoal/net/connections.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/scope/cancel.hpp"
#include "shoal/scope/cancel_scope.hpp"
#include "shoal/scope/task_set.hpp"
#include "shoal/sync/event.hpp"
#include "shoal/time/sleep.hpp"
#include "src/http/stats_tally.hpp"
#include "src/http2/body_budget.hpp"
#include "src/http2/memory.hpp"

namespace shoal::http2::detail {
namespace {

/// The receive window a stream opens with: a whole-body request is read
/// into memory anyway (up to max_body), so one round trip's worth.
constexpr std::int32_t kInitialWindow = 1 << 20;
/// Streamed request bytes a connection holds for its handlers to read,
/// all streams together: eight stream windows. Past it the connection's
/// window reopens only as handlers read.
constexpr std::size_t kMaxBufferedBodies = 8 * static_cast<std::size_t>(kInitialWindow);
/// The most a connection reads at once.
constexpr std::size_t kReadSize = 16384;

/// The flood limits (docs/http2.md has why each, and what it ends with).
/// RST_STREAM frames from the client that reset a stream still open: a
/// burst, then so many a second (nghttp2's own defaults). nghttp2's bucket
/// counts every RST_STREAM, those for streams already closed too, which
/// cost nothing: Python's h2 sends one for each frame that was in flight
/// on a stream it reset, thousands after a handler's small writes. So
/// nghttp2's is set far looser, a backstop only.
constexpr double kResetBurst = 1000, kResetRate = 33;
constexpr std::uint64_t kBackstopResetBurst = 1u << 16, kBackstopResetRate = 1u << 10;
/// Empty DATA frames that do not end their stream: they move nothing and
/// cost a frame's work each (CVE-2019-9518).
constexpr double kEmptyBurst = 1000, kEmptyRate = 100;
/// CONTINUATION frames after one HEADERS (nghttp2's default).
constexpr std::size_t kMaxContinuations = 8;
/// SETTINGS and PING acknowledgements queued and not yet written.
constexpr std::size_t kMaxOutboundAcks = 1000;

/// A token bucket: `burst` at once, refilled at `rate` a second.
class Bucket {
 public:
  Bucket(double burst, double rate) noexcept : tokens_(burst), burst_(burst), rate_(rate) {}
  /// Takes a token; false if there is none.
  bool take() noexcept {
    const auto t = std::chrono::steady_clock::now();
    tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(t - last_).count() * rate_);
    last_ = t;
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

 private:
  double tokens_, burst_, rate_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

/// A GOAWAY frame (RFC 9113 §6.8), written without the session: after a
/// fatal error nghttp2's session may not be used again.
std::string goaway_frame(std::int32_t last_stream, std::uint32_t code, std::string_view debug) {
  std::string f;
  const std::size_t n = 8 + debug.size();
  const auto put32 = [&f](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) f.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  f.push_back(static_cast<char>(n >> 16));
  f.push_back(static_cast<char>(n >> 8));
  f.push_back(static_cast<char>(n));
  f.push_back(static_cast<char>(NGHTTP2_GOAWAY));
  f.push_back(0);
  put32(0);
  put32(static_cast<std::uint32_t>(std::max(last_stream, 0)));
  put32(code);
  f.append(debug);
  return f;
}

/// A buffer kept for the next stream only up to this: one large body does
/// not pin its memory for the connection's life.
constexpr std::size_t kKeepCapacity = 16384;
/// Response::write returns while what nghttp2 has not yet taken of a
/// stream's body is at most this (a DATA frame's default payload), so that
/// small writes leave together; past it the handler waits for the client.
constexpr std::size_t kWriteAhead = 16384;
/// A spare stream object waiting for any connection on its thread keeps
/// buffers up to this, and header lists up to kSpareFields long.
constexpr std::size_t kSpareCapacity = 4096;
constexpr std::size_t kSpareFields = 64;

class Connection;
struct Stream;

/// Response::write on an HTTP/2 stream: the bytes go to the connection's
/// task, which alone touches the session.
struct StreamSink final : http::detail::BodySink {
  Connection* conn = nullptr;
  Stream* stream = nullptr;
  Task<void> write(http::Response& res, std::string_view chunk) override;
};

/// Request::read_some on an HTTP/2 stream whose body is streamed
/// (ServerOptions::stream_request_body).
struct StreamSource final : http::detail::BodySource {
  Connection* conn = nullptr;
  Stream* stream = nullptr;
  Task<std::size_t> read_some(std::span<std::byte> buf) override;
};

/// One request, from its HEADERS to the end of its response. A connection
/// reuses its streams' objects (and their strings' memory) while any is
/// open, and gives them to its thread's spares (SpareStreams) when none is.
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
  // The response body on its way to nghttp2: a whole body moved in, or
  // what Response::write hands over (then shared with the handler's task,
  // under the connection's done_lock_).
  std::string pending;
  std::size_t pending_at = 0;  // taken by nghttp2 up to here
  std::size_t sent = 0;        // body bytes taken in all
  bool request_done = false;   // its request ended (or was refused): nothing more is awaited from the client
  std::size_t stall_mark = 0;  // its progress when the connection last looked (reset_stuck)
  std::chrono::steady_clock::time_point stalled_since{};  // its window shut since, with bytes to send
  bool ended = false;          // no more body comes: EOF once `pending` is taken
  bool submitted = false;      // the head is with nghttp2
  bool deferred = false;       // read_body said DEFERRED: resume when more comes
  bool queued = false;         // in Connection::ready_
  bool head_out = false;       // (under done_lock_) a streamed head is with nghttp2: the handler may write ahead
  Notify taken;                // `pending` was taken: a writer may go on
  bool wrote = false;          // (under done_lock_) the handler queued bytes to send
  bool send = false;           // take_done: `wrote` was set
  StreamSink sink;
  // A streamed request body: DATA lands in `body` (read up to `body_at`)
  // and the handler takes it under done_lock_; the stream's window reopens
  // as it reads (the connection's as the DATA comes).
  bool body_streamed = false;
  bool body_ended = false;     // END_STREAM came (under done_lock_)
  bool body_dropped = false;   // the handler ended before the body: the rest is dropped
  std::size_t body_at = 0;
  std::size_t unconsumed = 0;  // (under done_lock_) read, not yet given back to the window
  Notify arrived;              // more of the body, or its end
  StreamSource source;
  std::optional<CancelScope> scope;  // a peer's RST_STREAM cancels the handler
  std::exception_ptr fault;
  bool client_fault = false;  // `fault` is a BodyError: reset the stream, report nothing
  std::int64_t started = -1;   // when its handler started (steady clock ticks), if counted
  std::int64_t finished = -1;  // when it ended, if known before its answer is counted
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
    if (pending.capacity() > kKeepCapacity) std::string().swap(pending);
    pending.clear();
    pending_at = sent = stall_mark = 0;
    request_done = false;
    stalled_since = {};
    ended = submitted = deferred = queued = head_out = wrote = send = false;
    body_streamed = body_ended = body_dropped = false;
    body_at = unconsumed = 0;
    scope.emplace();
    fault = nullptr;
    client_fault = false;
    started = finished = -1;
    handler_live = false;
    closed = false;
  }
  /// Ready to wait among a worker's spares (SpareStreams): no scope, since
  /// the runtime may be gone by the time the thread ends, and no buffer
  /// larger than a typical request's or answer's.
  void shed() noexcept {
    scope.reset();
    fault = nullptr;
    if (text.capacity() > kSpareCapacity) std::string().swap(text);
    if (body.capacity() > kSpareCapacity) std::string().swap(body);
    if (pending.capacity() > kSpareCapacity) std::string().swap(pending);
    if (res.body.capacity() > kSpareCapacity) res.release();
    if (fields.capacity() > kSpareFields) std::vector<Field>().swap(fields);
    if (head.headers.capacity() > kSpareFields) std::vector<http::Header>().swap(head.headers);
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

/// The stream objects a thread's connections have given back, for the
/// next stream opened on that thread (any connection's). A connection
/// with no open stream gives its objects here at once: kept by each
/// connection, 256 busy connections held 25,600 objects (36 MB) that went
/// cold in the cache between their batches, where a thread's spares are
/// the ones its last connection just used (docs/http2.md has the numbers).
/// What a busy connection reads into and writes from. An idle one holds
/// none: they go to its thread's spares with its stream objects, so that
/// a client's next batch, or another connection's on the thread, takes
/// them back rather than allocating them again (each batch allocated its
/// read buffer and grew its write buffer and field lists anew).
struct Buffers {
  std::unique_ptr<std::uint8_t[]> in;  // kReadSize bytes; not zero-filled
  std::string out;                     // frames for one write
  std::string nv_text;                 // a response's field names and values (respond)
  std::vector<nghttp2_nv> nva;

  /// Within what a thread keeps for a spare.
  void shed() noexcept {
    if (out.capacity() > kKeepCapacity) std::string().swap(out);
    if (nv_text.capacity() > kSpareCapacity) std::string().swap(nv_text);
    if (nva.capacity() > kSpareFields) std::vector<nghttp2_nv>().swap(nva);
    out.clear();
    nv_text.clear();
    nva.clear();
  }
};

class SpareStreams {
 public:
  /// A spare, or a new object. Throws std::bad_alloc.
  std::unique_ptr<Stream> take() {
    if (spares_.empty()) return std::make_unique<Stream>();
    std::unique_ptr<Stream> s = std::move(spares_.back());
    spares_.pop_back();
    return s;
  }
  /// Keeps `s` if there is room (kMax a thread), else frees it.
  void give(std::unique_ptr<Stream> s) noexcept {
    if (spares_.size() == kMax) return;
    if (spares_.capacity() == 0) {
      try {
        spares_.reserve(kMax);
      } catch (const std::bad_alloc&) {
        return;
      }
    }
    s->shed();
    spares_.push_back(std::move(s));
  }
  /// A spare set of buffers, or empty ones (allocated as they are used).
  Buffers take_buffers() noexcept {
    if (buffers_.empty()) return {};
    Buffers b = std::move(buffers_.back());
    buffers_.pop_back();
    return b;
  }
  /// Keeps `b` if there is room (kMaxBuffers a thread), else frees it.
  void give(Buffers&& b) noexcept {
    if (buffers_.size() == kMaxBuffers || !b.in) return;  // one never busy has nothing worth keeping
    if (buffers_.capacity() == 0) {
      try {
        buffers_.reserve(kMaxBuffers);
      } catch (const std::bad_alloc&) {
        return;
      }
    }
    b.shed();
    buffers_.push_back(std::move(b));
  }

 private:
  static constexpr std::size_t kMax = 128;  // a connection's default stream limit, and some
  /// A thread serves one connection at a time: the others busy at once
  /// are those waiting on a write or a handler.
  static constexpr std::size_t kMaxBuffers = 8;
  std::vector<std::unique_ptr<Stream>> spares_;
  std::vector<Buffers> buffers_;
};

/// This thread's spares. Not inlined: a coroutine that inlined a
/// thread_local's address could keep it across a suspension and use
/// another thread's after resuming there.
[[gnu::noinline]] SpareStreams& spare_streams() noexcept {
  thread_local SpareStreams spares;
  return spares;
}

class Connection {
 public:
  Connection(http::Server& server, shoal::detail::ByteStreamRef conn, http::detail::HandlerRef handler)
      : server_(server),
        conn_(conn),
        handler_(handler),
        limit_(std::max<std::size_t>(1, server.options().max_concurrent_streams)),
        entry_(server.connections(), conn.native_handle()),
        tally_(server.options().stats) {
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
    nghttp2_option_set_max_continuations(opt, kMaxContinuations);
    nghttp2_option_set_max_outbound_ack(opt, kMaxOutboundAcks);
    nghttp2_option_set_stream_reset_rate_limit(opt, kBackstopResetBurst, kBackstopResetRate);
    nghttp2_mem mem = session_memory(&memory_failed_);  // copied by nghttp2
    const int rv = nghttp2_session_server_new3(&session_, cbs, this, opt, &mem);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    if (rv != 0) throw std::bad_alloc();
    if (http::ServerStats* stats = server.options().stats) stats->http2_connection_opened();
  }
  ~Connection() {
    nghttp2_session_del(session_);
    for (std::size_t i = 0; i < open(); ++i) tally_.stream_closed();  // those the connection's end cut
    tally_.publish();
    if (http::ServerStats* stats = server_.options().stats) stats->http2_connection_closed();
    release_idle();
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Task<void> run(TaskSet& set, std::string preread);
  std::exception_ptr fault() const noexcept {
    return first_fault_ || !memory_failed_ ? first_fault_ : std::make_exception_ptr(std::bad_alloc());
  }
  /// The server ended it (a GOAWAY is out): the client may still be
  /// sending (mid-flood, or a request that crossed the GOAWAY), and a close
  /// with its bytes unread would reset the connection, which can destroy
  /// our last frames in its buffers before it reads them.
  bool lingers() const noexcept { return lingers_; }
  std::size_t limit() const noexcept { return limit_; }

 private:
  static Connection& of(void* user) noexcept { return *static_cast<Connection*>(user); }
  Stream* stream(std::int32_t id) noexcept {
    // A request's fields all come for the stream just opened: no map
    // lookup for each (it was 2% of a small request's CPU).
    if (opened_ != nullptr && opened_->id == id) return opened_;
    return static_cast<Stream*>(nghttp2_session_get_stream_user_data(session_, id));
  }
  Stream* opened_ = nullptr;  // the stream last opened, until nghttp2 closes it

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
  std::chrono::steady_clock::time_point reset_stuck();
  /// `n` bytes of streamed bodies left memory: the connection's window
  /// gets back what the budget held off.
  void unbuffer(std::size_t n) noexcept {
    if (const std::size_t now = budget_.left(n); now != 0) (void)nghttp2_session_consume_connection(session_, now);
  }
  struct Taken {  // the other sides of the swaps in take_done, kept so neither allocates per turn
    std::vector<Stream*> ready, done;
  };
  /// Answers the streams whose handlers finished and sends what streamed
  /// handlers wrote.
  void take_done(Taken& taken);
  void send_more(Stream& s);
  void add_field(std::string_view name, std::string_view value) {
    const std::size_t at = buf_.nv_text.size();
    buf_.nv_text.append(name).append(value);
    auto* p = reinterpret_cast<std::uint8_t*>(buf_.nv_text.data() + at);
    buf_.nva.push_back(nghttp2_nv{p, p + name.size(), name.size(), value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  void add_fields(std::string_view lines);
  /// ServerOptions::stats, for an answered stream.
  void count(const Stream& s);

 public:
  Task<void> write_body(Stream& s, http::Response& res, std::string_view chunk);
  Task<std::size_t> read_request(Stream& s, std::span<std::byte> buf);

 private:
  void run_waiting();
  /// Now, for ServerOptions::stats' handler times; -1 when nothing counts.
  std::int64_t stats_now() const noexcept {
    return tally_.counting() ? std::chrono::steady_clock::now().time_since_epoch().count() : -1;
  }
  Task<void> start_waiting(TaskSet& set);
  Task<void> handle(Stream& s);
  void finished(Stream& s);
  void respond(Stream& s);
  Stream& open_stream(std::int32_t id);
  void forget(Stream& s);
  Task<void> flush();
  Task<void> end_with(int error);
  /// The graceful shutdown's GOAWAY (NO_ERROR): the streams opened so far
  /// are answered, later ones are not processed (the client may retry them
  /// elsewhere).
  void go_away() noexcept {
    going_away_ = true;
    (void)nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                                NGHTTP2_NO_ERROR, nullptr, 0);
  }
  /// A flood limit was passed: the connection ends with ENHANCE_YOUR_CALM.
  int calm(const char* why) noexcept {
    calm_ = why;
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  /// An allocation failed: the connection's fault (a bad_alloc when it
  /// ends), so that none goes unreported, whatever stream it cost.
  void out_of_memory() noexcept {
    if (!first_fault_) first_fault_ = std::make_exception_ptr(std::bad_alloc());
  }

  http::Server& server_;
  shoal::detail::ByteStreamRef conn_;
  http::detail::HandlerRef handler_;
  nghttp2_session* session_ = nullptr;
  std::size_t limit_ = 1;    // handlers at once: the advertised stream limit
  std::size_t running_ = 0;  // handlers started and not yet reported back
  std::vector<std::unique_ptr<Stream>> streams_;  // every stream object: open ones, then `spare_` of them
  std::size_t spare_ = 0;
  std::size_t open() const noexcept { return streams_.size() - spare_; }
  /// With no stream open: gives every stream object to the thread's
  /// spares and frees the write buffers (an idle connection holds none).
  void release_idle() noexcept {
    for (std::unique_ptr<Stream>& s : streams_) spare_streams().give(std::move(s));
    streams_.clear();
    spare_ = 0;
    spare_streams().give(std::move(buf_));
    buf_ = Buffers{};
  }
  std::deque<Stream*> waiting_;  // requests ended, no slot yet
  std::mutex done_lock_;
  std::vector<Stream*> done_;  // handlers finished (from their tasks)
  std::vector<Stream*> ready_;  // streamed bodies with bytes to send (from their tasks)
  Notify done_notify_;
  Buffers buf_;  // while busy (release_idle)
  std::exception_ptr first_fault_;
  bool memory_failed_ = false;  // an nghttp2 allocation failed (session_memory)
  bool lingers_ = false;
  bool served_ = false;  // a request came (the idle timeout applies, not the header one)
  net::Connections::Entry entry_;  // the graceful shutdown's reach
  http::detail::StatsTally tally_;  // ServerOptions::stats, added up at each flush
  bool going_away_ = false;       // GOAWAY submitted: the open streams finish, no new one starts
  BodyBudget budget_{kMaxBufferedBodies};  // streamed request bytes waiting for handlers
  Bucket resets_{kResetBurst, kResetRate};
  Bucket empty_frames_{kEmptyBurst, kEmptyRate};
  const char* calm_ = nullptr;  // why the connection ends with ENHANCE_YOUR_CALM
};

int Connection::on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) noexcept {
  Connection& c = of(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  try {
    c.served_ = true;
    Stream& s = c.open_stream(frame->hd.stream_id);
    s.body_streamed = c.server_.options().stream_request_body && c.handler_.call_async != nullptr;
    nghttp2_session_set_stream_user_data(c.session_, s.id, &s);
    c.opened_ = &s;
  } catch (const std::bad_alloc&) {
    c.out_of_memory();
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
    c.out_of_memory();
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  return 0;
}

int Connection::on_data(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
                        void* user) noexcept {
  Connection& c = of(user);
  Stream* s = c.stream(id);
  if (s != nullptr && s->body_streamed && !s->body_dropped) {
    // The connection's window reopens now, the stream's as its handler
    // reads: a stream whose handler reads slowly stalls only itself. Past
    // kMaxBufferedBodies waiting in all, the connection's window too
    // reopens only as handlers read.
    if (const std::size_t now = c.budget_.arrived(len); now != 0) {
      (void)nghttp2_session_consume_connection(c.session_, now);
    }
    try {
      const std::lock_guard<std::mutex> hold(c.done_lock_);
      s->body.append(reinterpret_cast<const char*>(data), len);
    } catch (const std::bad_alloc&) {
      c.out_of_memory();
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    s->arrived.notify_one();
    return 0;
  }
  // Taken off the windows at once: the body is read into memory, bounded
  // by max_body (a stream past it is answered 413 and its data dropped).
  (void)nghttp2_session_consume(c.session_, id, len);
  if (s == nullptr || s->too_large || s->body_streamed) return 0;
  if (s->body.size() + len > c.server_.options().max_body) {
    s->too_large = true;
    std::string().swap(s->body);
    return 0;
  }
  try {
    s->body.append(reinterpret_cast<const char*>(data), len);
  } catch (const std::bad_alloc&) {
    c.out_of_memory();
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  return 0;
}

int Connection::on_frame(nghttp2_session*, const nghttp2_frame* frame, void* user) noexcept {
  Connection& c = of(user);
  // nghttp2 closes the stream after this call: still ours if it was open.
  if (frame->hd.type == NGHTTP2_RST_STREAM && c.stream(frame->hd.stream_id) != nullptr && !c.resets_.take()) {
    return c.calm("the client reset streams faster than the stream reset rate limit (1000, then 33 a second)");
  }
  if (frame->hd.type == NGHTTP2_DATA && frame->hd.length == 0 && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0 &&
      !c.empty_frames_.take()) {
    return c.calm("the client sent empty frames faster than the empty frames limit (1000, then 100 a second)");
  }
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  Stream* s = c.stream(frame->hd.stream_id);
  if (s == nullptr) return 0;
  const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (s->body_streamed) {
    if (end) {
      {
        const std::lock_guard<std::mutex> hold(c.done_lock_);
        s->body_ended = true;
      }
      s->arrived.notify_one();
    }
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    // The handler starts with the head and reads the body as it comes.
  } else if (!end) {
    return 0;
  }
  try {
    c.request_ended(*s);
  } catch (const std::bad_alloc&) {
    c.out_of_memory();
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  return 0;
}

int Connection::on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t, void* user) noexcept {
  Connection& c = of(user);
  Stream* s = c.stream(id);
  if (s == nullptr) return 0;
  if (c.opened_ == s) c.opened_ = nullptr;  // nghttp2 forgets it now
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
                              std::uint32_t* flags, nghttp2_data_source* src, void* user) noexcept {
  Connection& c = of(user);
  Stream& s = *static_cast<Stream*>(src->ptr);
  bool wake_writer = false;
  std::size_t n = 0;
  {
    // A streamed body's bytes are the handler's too until taken.
    std::unique_lock<std::mutex> hold(c.done_lock_, std::defer_lock);
    if (!s.ended) hold.lock();
    n = std::min(length, s.pending.size() - s.pending_at);
    std::memcpy(buf, s.pending.data() + s.pending_at, n);
    s.pending_at += n;
    s.sent += n;
    const std::size_t left = s.pending.size() - s.pending_at;
    if (left == 0) {
      s.pending.clear();
      s.pending_at = 0;
    } else if (s.pending_at >= kWriteAhead && s.pending_at >= left) {
      // The taken front goes once it is as large as the rest: writes that
      // run ahead of a slow client do not grow the buffer, and each byte
      // moves about once.
      s.pending.erase(0, s.pending_at);
      s.pending_at = 0;
    }
    if (!s.ended) {
      wake_writer = n != 0 && left <= kWriteAhead;
      if (n == 0) s.deferred = true;
    }
  }
  if (wake_writer) s.taken.notify_one();
  if (s.deferred) return NGHTTP2_ERR_DEFERRED;
  if (s.ended && s.pending_at == s.pending.size()) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!s.res.trailer_lines().empty()) {
      // The trailers end the stream, in a HEADERS frame of their own.
      try {
        c.buf_.nv_text.clear();
        c.buf_.nv_text.reserve(s.res.trailer_lines().size());
        c.buf_.nva.clear();
        c.add_fields(s.res.trailer_lines());
      } catch (const std::bad_alloc&) {
        c.out_of_memory();
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // RST_STREAM: no answer without its trailers
      }
      if (nghttp2_submit_trailer(c.session_, s.id, c.buf_.nva.data(), c.buf_.nva.size()) == 0) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      }
    }
  }
  return static_cast<ssize_t>(n);
}

/// A write that did not wait still yields once per cooperative budget (the
/// checkpoint contract), and does not throw Cancelled there: its bytes are
/// already queued, and what was sent stays sent.
struct BudgetYield {
  shoal::detail::TaskRecord* f = shoal::detail::current_record();
  bool await_ready() const noexcept { return f == nullptr || !shoal::detail::consume_budget(f); }
  void await_suspend(std::coroutine_handle<> h) const noexcept { shoal::detail::yield_from(f, h, this); }
  void await_resume() const noexcept {}
};

Task<void> StreamSink::write(http::Response& res, std::string_view chunk) {
  return conn->write_body(*stream, res, chunk);
}

Task<void> Connection::write_body(Stream& s, http::Response& res, std::string_view chunk) {
  // A cancelled write sends nothing (the checkpoint contract).
  if (this_task::cancellation_requested()) shoal::detail::throw_cancelled();
  const bool head_only = s.value(s.method) == "HEAD";
  {
    const std::lock_guard<std::mutex> hold(done_lock_);
    if (!head_only) {
      s.pending.append(res.body);
      s.pending.append(chunk);
    }
    // Marked once, at the first write (queued below; the connection
    // submits the head): later writes do not touch what the connection reads.
    if (!res.streaming()) http::detail::begin_streaming(res);
    s.wrote = true;
    if (!s.queued) {
      s.queued = true;
      ready_.push_back(&s);
    }
  }
  res.body.clear();
  done_notify_.notify_one();
  // Back to the handler once the head is submitted (until then the
  // connection reads the response's fields) and while what nghttp2 has
  // not taken fits in a frame, so that small writes leave together; past
  // that it waits as the stream's window lets nghttp2 take more: the
  // client's pace.
  for (;;) {
    {
      const std::lock_guard<std::mutex> hold(done_lock_);
      if (s.head_out && s.pending.size() - s.pending_at <= kWriteAhead) break;
    }
    co_await s.taken.wait();  // a reset cancels the handler here
  }
  co_await BudgetYield{};
}

Task<std::size_t> StreamSource::read_some(std::span<std::byte> buf) { return conn->read_request(*stream, buf); }

Task<std::size_t> Connection::read_request(Stream& s, std::span<std::byte> buf) {
  for (;;) {
    if (this_task::cancellation_requested()) shoal::detail::throw_cancelled();
    std::size_t n = 0;
    {
      const std::lock_guard<std::mutex> hold(done_lock_);
      n = std::min(buf.size(), s.body.size() - s.body_at);
      if (n == 0 && (s.body_ended || buf.empty())) co_return 0;
      if (n != 0) {
        std::memcpy(buf.data(), s.body.data() + s.body_at, n);
        s.body_at += n;
        if (s.body_at == s.body.size()) {
          s.body.clear();
          s.body_at = 0;
        }
        // The connection gives these bytes back to the stream's window.
        s.unconsumed += n;
        if (!s.queued) {
          s.queued = true;
          ready_.push_back(&s);
        }
      }
    }
    if (n != 0) {
      done_notify_.notify_one();
      co_return n;
    }
    // A reset cancels the handler here. Each wait is bounded as HTTP/1.1's
    // is (header_timeout): a client that stops sending mid-body gets 408.
    if (!co_await move_on_after(server_.options().header_timeout, s.arrived.wait())) {
      throw http::BodyError(408, "shoal::http2: the request body did not arrive in time (header_timeout)");
    }
  }
}

Stream& Connection::open_stream(std::int32_t id) {
  if (spare_ == 0) {
    streams_.push_back(spare_streams().take());
  } else {
    --spare_;
  }
  Stream& s = *streams_[open() - 1];
  s.slot = open() - 1;
  tally_.stream_opened();
  s.open(id);
  s.sink.conn = this;
  s.source.conn = this;
  s.source.stream = &s;
  s.sink.stream = &s;
  http::detail::attach(s.res, nullptr);  // a void handler cannot stream (as over HTTP/1.1)
  return s;
}

void Connection::forget(Stream& s) {
  tally_.stream_closed();
  if (s.body_streamed) {  // what no handler will read (a reset stream's)
    unbuffer(s.body.size() - s.body_at);
    s.body.clear();
    s.body_at = 0;
  }
  // Swapped with the last open one, and then the first spare.
  const std::size_t last = open() - 1;
  std::swap(streams_[s.slot], streams_[last]);
  streams_[s.slot]->slot = s.slot;
  s.slot = last;
  ++spare_;
}

void Connection::request_ended(Stream& s) {
  s.request_done = true;
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

void Connection::take_done(Taken& taken) {
  // Both lists in one critical section: a handler queues its writes before
  // it ends, so a stream's writes are taken in the same turn as its end or
  // an earlier one, never after forget() made its object a spare (which
  // the next stream may already be using).
  {
    const std::lock_guard<std::mutex> hold(done_lock_);
    taken.ready.swap(ready_);
    taken.done.swap(done_);
    for (Stream* s : taken.ready) {
      s->queued = false;
      s->send = std::exchange(s->wrote, false);
      if (s->unconsumed != 0) {
        if (!s->closed) (void)nghttp2_session_consume_stream(session_, s->id, s->unconsumed);
        unbuffer(s->unconsumed);
        s->unconsumed = 0;
      }
    }
  }
  for (Stream* s : taken.ready) {
    if (!s->closed && s->send) send_more(*s);
  }
  taken.ready.clear();
  std::vector<Stream*>& done = taken.done;
  for (Stream* s : done) {
    s->handler_live = false;
    --running_;
    if (s->body_streamed && !s->body_ended && !s->closed) {
      // The handler left the body unread: what is buffered and what still
      // comes is dropped, and the window stays open for it, so that the
      // client can end the stream.
      s->body_dropped = true;
      (void)nghttp2_session_consume_stream(session_, s->id, s->body.size() - s->body_at);
      unbuffer(s->body.size() - s->body_at);
      std::string().swap(s->body);
      s->body_at = 0;
    }
    if (s->closed) {
      forget(*s);  // reset while its handler ran
    } else if (s->submitted) {
      if (s->fault) {  // a streamed body cut short: no 500 can follow its head
        if (!first_fault_ && !s->client_fault) first_fault_ = s->fault;
        (void)nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        continue;
      }
      s->ended = true;  // the handler is gone: no lock needed from here
      if (s->value(s->method) != "HEAD") s->pending.append(s->res.body);
      count(*s);
      send_more(*s);
    } else {
      respond(*s);
    }
  }
  done.clear();
}

/// Resets (RST_STREAM CANCEL) the streams that are stuck on the client,
/// so that none can hold its slot, its handler and its bytes for ever:
/// - an answer that has not moved for idle_timeout because the client
///   keeps a window shut (the zero-window stall);
/// - a request read whole whose headers or body have not moved for
///   header_timeout (as HTTP/1.1 bounds each wait for a body).
/// Returns when the next would be due (max: none is stuck).
std::chrono::steady_clock::time_point Connection::reset_stuck() {
  const http::ServerOptions& o = server_.options();
  auto next = std::chrono::steady_clock::time_point::max();
  const auto now = std::chrono::steady_clock::now();
  const bool connection_shut = nghttp2_session_get_remote_window_size(session_) <= 0;
  const std::lock_guard<std::mutex> hold(done_lock_);  // `pending` is a streaming handler's too
  for (std::size_t i = 0; i < open(); ++i) {
    Stream& s = *streams_[i];
    std::size_t progress = 0;
    std::chrono::milliseconds limit{0};
    if (s.closed) {
      // a reset stream's handler has not ended yet: nothing to wait for
    } else if (s.submitted && s.pending_at < s.pending.size()) {
      if (connection_shut || nghttp2_session_get_stream_remote_window_size(session_, s.id) <= 0) {
        progress = s.sent;
        limit = o.idle_timeout;
      }
    } else if (!s.request_done && !s.body_streamed) {
      progress = s.field_bytes + s.body.size();
      limit = o.header_timeout;
    }
    if (limit.count() == 0) {
      s.stalled_since = {};
      continue;
    }
    if (progress != s.stall_mark || s.stalled_since == std::chrono::steady_clock::time_point{}) {
      s.stall_mark = progress;  // it moved since the last look: stuck from now
      s.stalled_since = now;
    }
    if (now - s.stalled_since >= limit) {
      (void)nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_CANCEL);
      s.stalled_since = {};
    } else {
      next = std::min(next, s.stalled_since + limit);
    }
  }
  return next;
}

/// A streamed body's head, or its next bytes.
void Connection::send_more(Stream& s) {
  if (!s.submitted) {
    respond(s);
  } else if (s.deferred) {
    s.deferred = false;
    (void)nghttp2_session_resume_data(session_, s.id);
  }
}

void Connection::run_waiting() {
  // A void handler has no checkpoint, so a task of its own would buy it
  // nothing but a second worker, and would cost a spawn, a hand-back and a
  // write per stream: it runs here, in the order the requests ended, and
  // the answers to one read's requests leave in one write (docs/http2.md).
  // One clock read a handler: each one's end is the next one's start.
  std::int64_t now = stats_now();
  while (!waiting_.empty()) {
    Stream& s = *waiting_.front();
    waiting_.pop_front();
    s.started = now;
    try {
      http::Request req(s.head, s.body);
      http::detail::set_connection(req, conn_.native_handle());
      handler_.call(handler_.self, req, s.res);
    } catch (...) {
      s.fault = std::current_exception();
      if (is_cancellation(s.fault)) throw;
    }
    now = stats_now();
    s.finished = now;
    respond(s);
  }
}

Task<void> Connection::start_waiting(TaskSet& set) {
  // running_ counts the handlers that have not reported back; one that
  // has may not have left the set yet, so spawn waits for its slot.
  while (!waiting_.empty() && running_ < limit_) {
    Stream* s = waiting_.front();
    waiting_.pop_front();
    s->started = stats_now();
    s->handler_live = true;
    http::detail::attach(s->res, &s->sink);
    ++running_;
    const SpawnStatus st = co_await set.spawn([this, s]() -> Task<void> { return handle(*s); });
    if (st != SpawnStatus::started) {  // out of memory for the task: this stream only
      s->handler_live = false;
      --running_;
      (void)nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
    }
  }
}

/// A stream handler's label in the task dump, "HTTP/2 stream 5: GET /a":
/// kept in the task's frame and written only when a dump asks (the
/// stream's method and path stay put while its handler runs).
struct StreamLabel : shoal::detail::TaskDescriber {
  const Stream* stream;
  explicit StreamLabel(const Stream* s) noexcept : stream(s) {
    describe = &write;
    shoal::detail::describe_task(this);
  }
  ~StreamLabel() { shoal::detail::describe_task(nullptr); }
  StreamLabel(const StreamLabel&) = delete;
  StreamLabel& operator=(const StreamLabel&) = delete;
  static void write(const TaskDescriber& self, std::string& out) {
    const Stream& s = *static_cast<const StreamLabel&>(self).stream;
    out.assign("HTTP/2 stream ");
    out.append(std::to_string(s.id)).append(": ").append(s.value(s.method)).append(" ");
    out.append(s.value(s.path).substr(0, 256));
  }
};

Task<void> Connection::handle(Stream& s) {
  {
    // Gone before finished(): the connection may reuse the stream's
    // object from then on, while a dump could still read the label.
    const StreamLabel label(&s);
    try {
      http::Request req = s.body_streamed ? http::Request(s.head, s.source) : http::Request(s.head, s.body);
      http::detail::set_connection(req, conn_.native_handle());
      (void)co_await s.scope->run(handler_.call_async(handler_.self, req, s.res));
    } catch (const http::BodyError& e) {
      // The client's doing, not the handler's: its status, unless the
      // response has begun (then the stream is reset). Not reported.
      if (s.res.streaming()) {
        s.fault = std::current_exception();
        s.client_fault = true;
      } else {
        s.res.reset();
        s.res.status = e.status();
        s.res.body.assign(e.what()).append("\n");
      }
    } catch (...) {
      std::exception_ptr e = std::current_exception();
      if (is_cancellation(e)) throw;  // the connection is going: nobody waits for this stream
      s.fault = std::move(e);
    }
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

/// Appends "Name: value\r\n" lines (validated by set_header and
/// set_trailer) to buf_.nva, names lowercased (RFC 9113 §8.2.1). buf_.nv_text must
/// have room for `lines`, so that the views already in buf_.nva stay put.
void Connection::add_fields(std::string_view lines) {
  while (!lines.empty()) {
    const std::size_t end = lines.find("\r\n");
    const std::string_view line = lines.substr(0, end);
    const std::size_t colon = line.find(':');
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    const std::size_t at = buf_.nv_text.size();
    add_field(line.substr(0, colon), value);
    for (std::size_t i = at; i < at + colon; ++i) {
      if (buf_.nv_text[i] >= 'A' && buf_.nv_text[i] <= 'Z') buf_.nv_text[i] = static_cast<char>(buf_.nv_text[i] - 'A' + 'a');
    }
    lines.remove_prefix(end == std::string_view::npos ? lines.size() : end + 2);
  }
}

void Connection::respond(Stream& s) {
  // Streamed: the handler is still writing, or ended after it wrote.
  const bool streamed = s.res.streaming();
  if (!streamed) {
    if (!s.fault && (s.res.status < 200 || s.res.status > 999)) {
      s.fault = std::make_exception_ptr(std::invalid_argument(
          "shoal::http2: response status " + std::to_string(s.res.status) + " is not a final status (200..999)"));
    }
    if (s.fault) {
      if (!first_fault_) first_fault_ = s.fault;
      s.res.reset();
      s.res.status = 500;
      s.res.body = "the handler failed\n";
    }
    s.pending.swap(s.res.body);  // a whole body, sent from where a streamed one is
    s.ended = true;
  }
  s.submitted = true;
  const bool bodyless = s.res.status == 204 || s.res.status == 304;
  const bool head_request = s.value(s.method) == "HEAD";
  // Every name and value into one buffer, reserved first so that the
  // views nghttp2 gets stay put; nghttp2 copies them.
  const std::string_view lines = s.res.header_lines();
  const std::string_view date = http::http_date();
  buf_.nv_text.clear();
  buf_.nv_text.reserve(lines.size() + date.size() + 64);
  buf_.nva.clear();
  const auto number = [](char (&digits)[24], std::size_t n) {
    return std::string_view(digits, static_cast<std::size_t>(std::to_chars(digits, digits + 24, n).ptr - digits));
  };
  char status[24], length[24];
  add_field(":status", number(status, static_cast<std::size_t>(s.res.status)));
  add_field("date", date);
  if (!bodyless && !streamed) add_field("content-length", number(length, s.pending.size()));
  add_fields(lines);
  // A streamed HEAD answer still waits for its handler: a provider that
  // sends nothing ends it then.
  const bool send_body =
      !bodyless && (streamed || (!head_request && (!s.pending.empty() || !s.res.trailer_lines().empty())));
  if (head_request && !streamed) s.pending.clear();
  nghttp2_data_provider provider{};
  provider.source.ptr = &s;
  provider.read_callback = &Connection::read_body;
  // The body is read from the stream as the windows allow, and the stream
  // stays until nghttp2 closes it.
  if (nghttp2_submit_response(session_, s.id, buf_.nva.data(), buf_.nva.size(), send_body ? &provider : nullptr) != 0) {
    (void)nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_INTERNAL_ERROR);
  }
  if (streamed) {
    {
      const std::lock_guard<std::mutex> hold(done_lock_);
      s.head_out = true;
    }
    s.taken.notify_one();  // the writer waiting for its head
  } else {
    count(s);
  }
}

void Connection::count(const Stream& s) {
  if (tally_.counting()) {
    const std::int64_t end = s.finished >= 0 ? s.finished : stats_now();
    const std::int64_t took = s.started < 0 ? -1 : end - s.started;
    tally_.response(s.res.status, s.field_bytes + s.body.size(), s.sent + (s.pending.size() - s.pending_at), took);
  }
}

Task<void> Connection::flush() {
  for (;;) {
    const std::uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n == NGHTTP2_ERR_NOMEM) throw std::bad_alloc();
    if (n < 0) throw std::runtime_error(std::string("shoal::http2: ") + nghttp2_strerror(static_cast<int>(n)));
    if (n == 0) break;
    buf_.out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
  tally_.publish();  // before the client can have the answers counted
  if (buf_.out.empty()) co_return;
  co_await conn_.write_all(buf_.out);
  buf_.out.clear();
}

/// After a fatal error from nghttp2 (a protocol error it has answered
/// itself is not one): a GOAWAY naming what was wrong, then the end.
Task<void> Connection::end_with(int error) {
  std::uint32_t code = NGHTTP2_ENHANCE_YOUR_CALM;
  std::string why;
  if (calm_ != nullptr) {
    why = calm_;
  } else if (error == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS) {
    why = "a header block came in more than 8 CONTINUATION frames (the CONTINUATION limit)";
  } else if (error == NGHTTP2_ERR_FLOODED) {
    why = "the client let more than 1000 SETTINGS and PING acknowledgements queue (the outbound ACK limit)";
  } else if (error == NGHTTP2_ERR_NOMEM || error == NGHTTP2_ERR_CALLBACK_FAILURE) {
    code = NGHTTP2_INTERNAL_ERROR;
    why = "the server ran out of memory";
  } else {
    code = NGHTTP2_PROTOCOL_ERROR;
    why = nghttp2_strerror(error);
  }
  buf_.out = goaway_frame(nghttp2_session_get_last_proc_stream_id(session_), code, "shoal::http2: " + why);
  co_await conn_.write_all(buf_.out);
}

Task<void> Connection::run(TaskSet& set, std::string preread) {
  const http::ServerOptions& o = server_.options();
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, o.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(kInitialWindow)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(o.max_head)},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      // RFC 9218: no RFC 7540 priority tree, so nghttp2 keeps no closed
      // streams for it (memory that grew with a connection's streams).
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0) throw std::bad_alloc();
  // A shutdown wakes the loop as a finished handler does.
  entry_.notify_on_shutdown(done_notify_);
  // Frames leave when written, not behind the client's delayed ACK of the
  // last write (Nagle): answers and streamed bodies come in small writes.
  if (const int fd = conn_.native_handle(); fd >= 0) {
    const int on = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  }
  // What to give nghttp2 next: the bytes a caller read first, then each
  // read's (into buf_.in, held only while the connection is busy).
  std::string first = std::move(preread);
  std::span<const std::uint8_t> got(reinterpret_cast<const std::uint8_t*>(first.data()), first.size());
  Taken taken;
  const std::chrono::milliseconds stream_idle = conn_.idle_timeout();
  bool client_gone = false;
  for (;;) {
    if (!got.empty()) {
      const ssize_t n = nghttp2_session_mem_recv(session_, got.data(), got.size());
      got = {};
      if (n < 0) {
        co_await end_with(static_cast<int>(n));
        break;
      }
    }
    take_done(taken);
    if (!waiting_.empty()) {
      if (handler_.call != nullptr) {
        run_waiting();
      } else {
        co_await start_waiting(set);
      }
    }
    if (running_ > 0) {
      // Handlers spawned or woken on this worker wait in its queue behind
      // this task (a wake runs first): let them run before the write, so
      // that the answers of those that finish leave in it together rather
      // than one write each.
      co_await checkpoint();
      take_done(taken);
    }
    if (!going_away_ && server_.shutting_down()) go_away();
    // A stream stuck on the client (a window kept shut, a request that
    // stopped arriving) is reset after its limit.
    const auto stall_deadline = open() != 0 ? reset_stuck() : std::chrono::steady_clock::time_point::max();
    co_await flush();
    if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) break;
    if (going_away_ && open() == 0) break;  // GOAWAY is out and every stream it let finish has
    // A connection with no open stream may stay silent for the header
    // timeout before its first request and the idle timeout after it;
    // then it ends with GOAWAY (NO_ERROR). One with streams waits on them.
    const std::chrono::milliseconds limit = served_ ? o.idle_timeout : o.header_timeout;
    std::size_t woke = 0;  // the case: readable, a handler done, the deadline
    if (open() == 0) {
      // No handler is running (a reset stream stays open until its handler
      // ends), so only the client can wake it.
      if (!entry_.go_idle()) {
        go_away();  // the shutdown began as the last stream ended
        continue;
      }
      // Idle, it holds no buffer and no stream object, even between a
      // busy client's batches: its stream objects go to the thread's
      // spares (SpareStreams has why). The deadline is the stream's own,
      // whose timer exists only if the wait has to wait.
      std::string().swap(first);
      release_idle();
      taken = Taken{};
      conn_.set_idle_timeout(limit);
      try {
        co_await conn_.wait_readable();
      } catch (const net::IdleTimeout&) {
        woke = 2;
      }
      conn_.set_idle_timeout(stream_idle);
      if (!entry_.go_busy()) {
        go_away();  // the shutdown shut the read side: nothing more is read
        continue;
      }
    } else if (stall_deadline == std::chrono::steady_clock::time_point::max()) {
      const auto r = co_await select(conn_.readable_case(), on_notify(done_notify_));
      woke = r.index();
    } else {
      const auto r = co_await select(conn_.readable_case(), on_notify(done_notify_), on_deadline(stall_deadline));
      woke = r.index() == 2 ? 3 : r.index();  // 3: look at the stalled streams again
    }
    if (woke == 2) {
      (void)nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
    } else if (woke == 0) {
      if (!buf_.in) {
        buf_ = spare_streams().take_buffers();  // this thread's: the wait may have moved the task
        if (!buf_.in) buf_.in.reset(new std::uint8_t[kReadSize]);  // not make_unique: that zero-fills
      }
      std::size_t n = 0;
      try {
        n = co_await conn_.read_some(std::as_writable_bytes(std::span(buf_.in.get(), kReadSize)));
      } catch (const std::bad_alloc&) {
        throw;
      } catch (const std::exception&) {
        // The client's transport ended badly: a reset, or TLS without
        // close_notify (curl and browsers end h2 so; HTTP/2 frames its own
        // end, so nothing is truncated unnoticed). It is gone, not a fault.
        n = 0;
      }
      got = std::span<const std::uint8_t>(buf_.in.get(), n);
      if (n == 0) {
        client_gone = true;  // its streams' tasks are cancelled below
        break;
      }
    }
  }
  lingers_ = !client_gone;
  set.cancel();
}

}  // namespace

Task<void> serve_connection(http::Server& server, shoal::detail::ByteStreamRef conn, http::detail::HandlerRef handler,
                            std::string preread) {
  bool lingers = false;
  std::exception_ptr fault;
  {
    Connection c(server, conn, handler);
    co_await task_set(c.limit(), [&c, &preread](TaskSet& set) -> Task<void> { co_await c.run(set, std::move(preread)); });
    lingers = c.lingers();
    fault = c.fault();
  }  // the session and the streams are freed before the linger
  // Once the set is over: inside it, its own cancellation (which ends the
  // streams' handlers) would cut the linger short at its first wait.
  if (lingers) co_await conn.linger_close(std::chrono::milliseconds(2000));
  if (fault) std::rethrow_exception(fault);
}

}  // namespace shoal::http2::detail
