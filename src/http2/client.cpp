// shoal::http2::connect: an HTTP/2 client on libnghttp2. One task owns the
// socket and the session, as the server's connection task does; requesters
// hand it calls through a locked queue and wait on each call's Event.
#include "shoal/http2/client.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "shoal/channel/select.hpp"
#include "shoal/http/parser.hpp"
#include "shoal/net/stream.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/scope/scope.hpp"
#include "shoal/sync/event.hpp"

namespace shoal::http2 {

std::string_view ClientResponse::header(std::string_view name) const noexcept {
  for (const Field& f : headers) {
    if (http::iequals(f.name, name)) return f.value;
  }
  return {};
}

namespace detail {

/// One request, from Client::request to the end of its stream. Shared by
/// the requester and the connection task, so that a requester cancelled
/// mid-flight can go while the connection still holds its stream.
struct ClientCall {
  // The requester's, fixed once submitted.
  std::string method, path, body;
  std::vector<Field> fields;
  // The connection task's until `done` is set; then the requester's.
  std::size_t body_at = 0;  // of `body`, taken by nghttp2
  std::int32_t id = -1;
  ClientResponse response;
  std::size_t head_bytes = 0;
  int refusals = 0;  // REFUSED_STREAM answers so far (each is sent again, up to kMaxRefusals)
  bool failed = false;
  bool retryable = false;
  std::string error;
  Event done;

  void fail(std::string why, bool may_retry) {
    if (failed) return;
    failed = true;
    retryable = may_retry;
    error = std::move(why);
  }
};

namespace {

constexpr std::int32_t kWindow = 1 << 20;
/// A request the server refused (REFUSED_STREAM: not processed) is sent
/// again this many times. Requests made before the server's SETTINGS
/// arrive may pass its stream limit, which the server may enforce at once.
constexpr int kMaxRefusals = 3;  // each stream's receive window; the connection's is 16 of them

std::string code_name(std::uint32_t code) {
  const char* name = nghttp2_http2_strerror(code);
  return std::string(name) + " (" + std::to_string(code) + ")";
}

}  // namespace

class ClientConnection {
 public:
  ClientConnection(shoal::detail::ByteStreamRef conn, ClientOptions options)
      : conn_(conn), options_(std::move(options)) {
    nghttp2_session_callbacks* cbs = nullptr;
    if (nghttp2_session_callbacks_new(&cbs) != 0) throw std::bad_alloc();
    nghttp2_session_callbacks_set_on_header_callback(cbs, &ClientConnection::on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &ClientConnection::on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &ClientConnection::on_stream_close);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(cbs, &ClientConnection::on_not_sent);
    const int rv = nghttp2_session_client_new(&session_, cbs, this);
    nghttp2_session_callbacks_del(cbs);
    if (rv != 0) throw std::bad_alloc();
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(kWindow)},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(options_.max_head)},
    };
    if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0 ||
        nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 16 * kWindow) != 0) {
      nghttp2_session_del(session_);
      throw std::bad_alloc();
    }
  }
  ~ClientConnection() { nghttp2_session_del(session_); }
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  /// The requests' side, for connect's body.
  Client client() noexcept { return Client(*this); }

  /// From a requester: queues `c` for the connection task.
  void submit(std::shared_ptr<ClientCall> c) {
    {
      const std::lock_guard<std::mutex> hold(lock_);
      if (!ended_.empty()) {
        c->fail(ended_, false);
        c->done.set();
        return;
      }
      submitted_.push_back(std::move(c));
    }
    wake_.notify_one();
  }
  /// From a cancelled requester: its stream is reset.
  void abandon(std::shared_ptr<ClientCall> c) {
    {
      const std::lock_guard<std::mutex> hold(lock_);
      abandoned_.push_back(std::move(c));
    }
    wake_.notify_one();
  }
  /// The body returned: GOAWAY once no request is left.
  void stop() noexcept {
    {
      const std::lock_guard<std::mutex> hold(lock_);
      stopping_ = true;
    }
    wake_.notify_one();
  }

  Task<void> run();

 private:
  static ClientConnection& of(void* user) noexcept { return *static_cast<ClientConnection*>(user); }
  ClientCall* call(std::int32_t id) noexcept { return static_cast<ClientCall*>(nghttp2_session_get_stream_user_data(session_, id)); }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name, std::size_t namelen,
                       const std::uint8_t* value, std::size_t valuelen, std::uint8_t, void* user) noexcept;
  static int on_data(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data, std::size_t len,
                     void* user) noexcept;
  static int on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) noexcept;
  static int on_not_sent(nghttp2_session*, const nghttp2_frame* frame, int error, void* user) noexcept;
  static ssize_t read_body(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source* src, void*) noexcept;

  /// Takes the queues: starts submitted calls, resets abandoned ones.
  /// False once the body has returned and nothing is left.
  bool take();
  void start(std::shared_ptr<ClientCall> c);
  Task<void> flush();
  /// The connection is over: every call still waiting fails with `why`.
  void end(const std::string& why);

  shoal::detail::ByteStreamRef conn_;
  ClientOptions options_;
  nghttp2_session* session_ = nullptr;
  std::vector<std::shared_ptr<ClientCall>> open_;   // submitted to nghttp2, not yet closed
  std::vector<std::shared_ptr<ClientCall>> retry_;  // refused, to be sent again
  std::string out_;
  std::mutex lock_;  // guards the four below
  std::vector<std::shared_ptr<ClientCall>> submitted_, abandoned_;
  bool stopping_ = false;
  std::string ended_;  // why the connection ended (empty: it has not)
  Notify wake_;
};

int ClientConnection::on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name_p,
                                std::size_t namelen, const std::uint8_t* value_p, std::size_t valuelen,
                                std::uint8_t, void* user) noexcept {
  ClientConnection& c = of(user);
  ClientCall* k = c.call(frame->hd.stream_id);
  if (k == nullptr || frame->hd.type != NGHTTP2_HEADERS) return 0;
  const std::string_view name(reinterpret_cast<const char*>(name_p), namelen);
  const std::string_view value(reinterpret_cast<const char*>(value_p), valuelen);
  k->head_bytes += namelen + valuelen + 32;
  if (k->head_bytes > c.options_.max_head) {
    k->fail("shoal::http2::Client: the response's header list is past max_head (" +
                std::to_string(c.options_.max_head) + " bytes)",
            false);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets the stream
  }
  try {
    ClientResponse& r = k->response;
    if (name == ":status") {
      int status = 0;
      for (const char ch : value) status = status * 10 + (ch - '0');
      r.status = status;
      r.headers.clear();  // an informational (1xx) head came before
    } else if (frame->headers.cat == NGHTTP2_HCAT_HEADERS && r.status >= 200) {
      r.trailers.push_back(Field{std::string(name), std::string(value)});
    } else {
      r.headers.push_back(Field{std::string(name), std::string(value)});
    }
  } catch (const std::bad_alloc&) {
    k->fail("shoal::http2::Client: out of memory for the response's headers", false);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  return 0;
}

int ClientConnection::on_data(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                              std::size_t len, void* user) noexcept {
  ClientConnection& c = of(user);
  ClientCall* k = c.call(id);
  if (k == nullptr || k->failed) return 0;
  if (k->response.body.size() + len > c.options_.max_body) {
    k->fail("shoal::http2::Client: the response body is past max_body (" + std::to_string(c.options_.max_body) +
                " bytes)",
            false);
    (void)nghttp2_submit_rst_stream(c.session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    return 0;
  }
  try {
    k->response.body.append(reinterpret_cast<const char*>(data), len);
  } catch (const std::bad_alloc&) {
    k->fail("shoal::http2::Client: out of memory for the response body", false);
    (void)nghttp2_submit_rst_stream(c.session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  }
  return 0;
}

int ClientConnection::on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) noexcept {
  ClientConnection& c = of(user);
  ClientCall* k = c.call(id);
  if (k == nullptr) return 0;
  const auto it = std::find_if(c.open_.begin(), c.open_.end(), [k](const auto& p) { return p.get() == k; });
  std::shared_ptr<ClientCall> keep;
  if (it != c.open_.end()) {
    keep = std::move(*it);
    *it = std::move(c.open_.back());
    c.open_.pop_back();
  }
  if (code == NGHTTP2_REFUSED_STREAM && !k->failed && keep != nullptr && k->refusals < kMaxRefusals) {
    // Not processed: sent again on a new stream, now within the limit.
    ++k->refusals;
    k->response = ClientResponse{};
    k->head_bytes = k->body_at = 0;
    k->id = -1;
    c.retry_.push_back(std::move(keep));
    return 0;
  }
  if (code == NGHTTP2_REFUSED_STREAM) {
    k->fail("shoal::http2::Client: the server refused the stream (REFUSED_STREAM): not processed, may be retried",
            true);
  } else if (code != NGHTTP2_NO_ERROR) {
    k->fail("shoal::http2::Client: the server reset the stream: " + code_name(code), false);
  } else if (k->response.status < 200) {
    k->fail("shoal::http2::Client: the stream ended without a response", false);
  }
  k->done.set();
  return 0;
}

int ClientConnection::on_not_sent(nghttp2_session*, const nghttp2_frame* frame, int error, void* user) noexcept {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  ClientCall* k = of(user).call(frame->hd.stream_id);
  if (k == nullptr) return 0;
  // Never sent (the server's GOAWAY came first, say): not processed.
  k->fail(std::string("shoal::http2::Client: the request was not sent: ") + nghttp2_strerror(error),
          error == NGHTTP2_ERR_START_STREAM_NOT_ALLOWED || error == NGHTTP2_ERR_STREAM_CLOSING);
  return 0;  // nghttp2 closes the stream: on_stream_close ends the call
}

ssize_t ClientConnection::read_body(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                                    std::uint32_t* flags, nghttp2_data_source* src, void*) noexcept {
  ClientCall& k = *static_cast<ClientCall*>(src->ptr);
  const std::size_t n = std::min(length, k.body.size() - k.body_at);
  std::memcpy(buf, k.body.data() + k.body_at, n);
  k.body_at += n;
  if (k.body_at == k.body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

void ClientConnection::start(std::shared_ptr<ClientCall> c) {
  auto nv = [](std::string_view name, std::string_view value) {
    return nghttp2_nv{reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
                      reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
                      NGHTTP2_NV_FLAG_NONE};
  };
  std::vector<nghttp2_nv> nva;
  nva.reserve(4 + c->fields.size());
  nva.push_back(nv(":method", c->method));
  nva.push_back(nv(":scheme", options_.scheme.empty() ? std::string_view("http") : std::string_view(options_.scheme)));
  nva.push_back(nv(":authority", options_.authority));
  nva.push_back(nv(":path", c->path));
  for (const Field& f : c->fields) nva.push_back(nv(f.name, f.value));
  nghttp2_data_provider provider{};
  provider.source.ptr = c.get();
  provider.read_callback = &ClientConnection::read_body;
  const std::int32_t id =
      nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(), c->body.empty() ? nullptr : &provider, c.get());
  if (id < 0) {
    c->fail(std::string("shoal::http2::Client: the request could not be submitted: ") + nghttp2_strerror(id),
            id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE);
    c->done.set();
    return;
  }
  c->id = id;
  open_.push_back(std::move(c));
}

bool ClientConnection::take() {
  std::vector<std::shared_ptr<ClientCall>> submitted, abandoned;
  bool stopping = false;
  {
    const std::lock_guard<std::mutex> hold(lock_);
    submitted.swap(submitted_);
    abandoned.swap(abandoned_);
    stopping = stopping_;
  }
  for (auto& c : retry_) start(std::move(c));
  retry_.clear();
  for (auto& c : submitted) start(std::move(c));
  for (const auto& c : abandoned) {
    if (c->id > 0 && nghttp2_session_get_stream_user_data(session_, c->id) == c.get()) {
      (void)nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, c->id, NGHTTP2_CANCEL);
    }
  }
  return !(stopping && open_.empty() && retry_.empty());
}

Task<void> ClientConnection::flush() {
  for (;;) {
    const std::uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) throw std::runtime_error(std::string("shoal::http2::Client: ") + nghttp2_strerror(static_cast<int>(n)));
    if (n == 0) break;
    out_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    if (out_.size() >= 65536) {
      co_await conn_.write_all(out_);
      out_.clear();
    }
  }
  if (!out_.empty()) {
    co_await conn_.write_all(out_);
    out_.clear();
  }
}

void ClientConnection::end(const std::string& why) {
  std::vector<std::shared_ptr<ClientCall>> waiting;
  {
    const std::lock_guard<std::mutex> hold(lock_);
    ended_ = why;
    waiting.swap(submitted_);
  }
  for (auto& c : open_) waiting.push_back(std::move(c));
  for (auto& c : retry_) waiting.push_back(std::move(c));
  open_.clear();
  retry_.clear();
  for (const auto& c : waiting) {
    c->fail(why, false);
    c->done.set();
  }
}

Task<void> ClientConnection::run() {
  std::string why = "shoal::http2::Client: the connection has ended";
  std::string in;
  try {
    for (;;) {
      const bool go_on = take();
      if (!go_on) (void)nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
      co_await flush();
      if (!go_on) break;
      if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
        why = "shoal::http2::Client: the server ended the connection (GOAWAY)";
        break;
      }
      const auto r = co_await select(conn_.readable_case(), on_notify(wake_));
      if (r.index() != 0) continue;
      in.resize(16384);
      const std::size_t n = co_await conn_.read_some(std::as_writable_bytes(std::span(in)));
      if (n == 0) {
        why = "shoal::http2::Client: the server closed the connection";
        break;
      }
      const ssize_t used = nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(in.data()), n);
      if (used < 0) {
        why = std::string("shoal::http2::Client: the server broke the protocol: ") +
              nghttp2_strerror(static_cast<int>(used));
        co_await flush();  // the GOAWAY nghttp2 queued, if it can
        break;
      }
    }
  } catch (const std::exception& e) {
    if (is_cancellation(std::current_exception())) throw;
    why = std::string("shoal::http2::Client: the connection failed: ") + e.what();
  }
  end(why);
}

Task<void> run_client(shoal::detail::ByteStreamRef conn, ClientOptions options, void* body, ClientBody call) {
  ClientConnection c(conn, std::move(options));
  Client client = c.client();
  co_await scope([&](Scope& s) -> Task<void> {
    s.spawn(c.run());
    struct Stop {  // the body is done, whichever way: GOAWAY once its requests are
      ClientConnection& c;
      ~Stop() { c.stop(); }
    } stop{c};
    co_await call(body, client);
  });
}

Task<void> connect_client(net::Address address, ClientOptions options, void* body, ClientBody call) {
  net::Stream stream = co_await net::connect(address);
  stream.set_nodelay(true);  // requests leave when made, not behind the server's delayed ACK
  if (options.authority.empty()) options.authority = address.to_string();
  shoal::detail::ByteStreamRef ref(stream);
  co_await run_client(ref, std::move(options), body, call);
}

}  // namespace detail

Task<ClientResponse> Client::request(std::string method, std::string path, std::string body, std::vector<Field> fields) {
  auto c = std::make_shared<detail::ClientCall>();
  c->method = std::move(method);
  c->path = std::move(path);
  c->body = std::move(body);
  c->fields = std::move(fields);
  c_->submit(c);
  try {
    co_await c->done.wait();
  } catch (const Cancelled&) {
    c_->abandon(c);
    throw;
  }
  if (c->failed) throw RequestError(c->error, c->retryable);
  co_return std::move(c->response);
}

}  // namespace shoal::http2
