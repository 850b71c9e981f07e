// TLS with OpenSSL over memory BIOs: OpenSSL never touches the socket. Each
// call (handshake, read, write, shutdown) runs until OpenSSL wants bytes it
// does not have; its output is written with net::Stream::write_all, its
// input read with net::Stream::read_some. So every wait is a net::Stream
// wait: a checkpoint, under an idle limit if one is set.
//
// OpenSSL's error queue is per thread, and a task may resume on another
// worker after a wait: every call's error detail is taken before the next
// co_await.
#include "shoal/tls/tls.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "shoal/sync/mutex.hpp"
#include "shoal/time/sleep.hpp"
#include "src/net/drain.hpp"

namespace shoal::tls {

struct Context::Impl {
  std::string alpn_wire;  // the protocols, each prefixed by its length (RFC 7301)
};

namespace {

/// What OpenSSL's error queue says, oldest first; empties it.
std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

[[noreturn]] void fail(const std::string& what) {
  const std::string detail = openssl_errors();
  throw Error("shoal::tls: " + what + (detail.empty() ? "" : ": " + detail));
}

std::string alpn_wire(const std::vector<std::string>& protocols) {
  std::string wire;
  for (const std::string& p : protocols) {
    if (p.empty() || p.size() > 255) throw Error("shoal::tls: an ALPN protocol name must be 1 to 255 bytes: \"" + p + "\"");
    wire.push_back(static_cast<char>(p.size()));
    wire += p;
  }
  return wire;
}

/// The server's ALPN choice: its most preferred protocol that the client offers.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned inlen,
                void* arg) {
  const auto* impl = static_cast<const Context::Impl*>(arg);
  const auto* ours = reinterpret_cast<const unsigned char*>(impl->alpn_wire.data());
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, ours, static_cast<unsigned>(impl->alpn_wire.size()), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // no protocol in common: no_application_protocol (RFC 7301 §3.2)
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

std::shared_ptr<ssl_ctx_st> new_context(const SSL_METHOD* method, const Profile& p) {
  std::shared_ptr<ssl_ctx_st> ctx(SSL_CTX_new(method), SSL_CTX_free);
  if (!ctx) fail("cannot create a context");
  SSL_CTX_set_min_proto_version(ctx.get(), p.min_version == Version::tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION);
  // An empty or unknown list is refused by OpenSSL: say which setting it was.
  if (SSL_CTX_set_cipher_list(ctx.get(), p.tls12_ciphers.c_str()) != 1) {
    fail("Profile::tls12_ciphers \"" + p.tls12_ciphers + "\" names no cipher suite OpenSSL offers");
  }
  if (SSL_CTX_set_ciphersuites(ctx.get(), p.tls13_ciphersuites.c_str()) != 1) {
    fail("Profile::tls13_ciphersuites \"" + p.tls13_ciphersuites + "\" is not a valid TLS 1.3 suite list");
  }
  if (SSL_CTX_set1_groups_list(ctx.get(), p.groups.c_str()) != 1) {
    fail("Profile::groups \"" + p.groups + "\" is not a valid list of key-exchange groups");
  }
  // Idle connections give their record buffers back (34 KiB each otherwise).
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  // A renegotiation would make a write wait for a read, which a reader and a
  // writer running at once cannot share (TLS 1.3 has none; 1.2 peers get a
  // no_renegotiation alert).
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION);
  return ctx;
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

Context Context::client(const ClientOptions& o) {
  auto ctx = new_context(TLS_client_method(), o.profile);
  if (o.verify) {
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    if (!o.ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(ctx.get(), o.ca_file.c_str(), nullptr) != 1) {
        fail("cannot load the CA file " + o.ca_file);
      }
    } else if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
      fail("cannot load the system's trust store");
    }
  }
  auto impl = std::make_shared<Impl>();
  impl->alpn_wire = alpn_wire(o.alpn);
  if (!impl->alpn_wire.empty() &&
      SSL_CTX_set_alpn_protos(ctx.get(), reinterpret_cast<const unsigned char*>(impl->alpn_wire.data()),
                              static_cast<unsigned>(impl->alpn_wire.size())) != 0) {  // 0 is success here
    fail("cannot set the ALPN protocols");
  }
  return Context(std::move(ctx), std::move(impl));
}

Context Context::client() { return client(ClientOptions{}); }

Context Context::server(const ServerOptions& o) {
  auto ctx = new_context(TLS_server_method(), o.profile);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), o.certificate_chain_file.c_str()) != 1) {
    fail("cannot load the certificate chain " + o.certificate_chain_file);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), o.private_key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    fail("cannot load the private key " + o.private_key_file);
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    fail("the private key " + o.private_key_file + " does not match the certificate " + o.certificate_chain_file);
  }
  auto impl = std::make_shared<Impl>();
  impl->alpn_wire = alpn_wire(o.alpn);
  if (!impl->alpn_wire.empty()) SSL_CTX_set_alpn_select_cb(ctx.get(), select_alpn, const_cast<Impl*>(impl.get()));
  return Context(std::move(ctx), std::move(impl));
}

namespace detail {

/// A connection's OpenSSL state. On the heap: a Stream moves, and OpenSSL's
/// BIO holds this address. A reader and a writer may run at once on
/// different workers: `mu` serializes every OpenSSL call and guards the
/// buffers the BIO reads and writes; `send_mu` orders the socket writes, so
/// the bytes OpenSSL produced go out in the order it produced them (a
/// read's alert or key update between a write's records).
struct Conn {
  Context ctx;
  SSL* ssl = nullptr;
  std::string host;            // clients: the name verified and sent as SNI
  std::int64_t deadline_ns = 0;  // the handshake's end (shoal::now()), 0 if none
  bool client = false;

  std::mutex mu;
  std::vector<std::byte> in;   // received, not yet taken by OpenSSL: in[in_pos..]
  std::size_t in_pos = 0;
  std::vector<std::byte> out;  // produced by OpenSSL, not yet taken to the socket
  bool broken = false;         // a socket write was cut: the record stream is corrupt

  std::vector<std::byte> rx;   // the reader's: socket bytes on their way to `in`
  Mutex send_mu{"shoal::tls::Stream's writes"};

  ~Conn() {
    if (ssl != nullptr) SSL_free(ssl);
  }
};

}  // namespace detail

namespace {

using detail::Conn;

// A BIO over Conn's buffers: OpenSSL reads `in` and appends to `out`; the
// Stream moves bytes between them and the socket. (A memory BIO would clear
// its whole buffer on each reset and keep its largest size forever.)
int bio_write(BIO* b, const char* data, int len) {
  auto* c = static_cast<Conn*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  const auto* p = reinterpret_cast<const std::byte*>(data);
  c->out.insert(c->out.end(), p, p + len);
  return len;
}

int bio_read(BIO* b, char* data, int len) {
  auto* c = static_cast<Conn*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  const std::size_t have = c->in.size() - c->in_pos;
  if (have == 0) {
    BIO_set_retry_read(b);  // "wait for more", not end of stream
    return -1;
  }
  const std::size_t n = std::min(have, static_cast<std::size_t>(len));
  std::memcpy(data, c->in.data() + c->in_pos, n);
  c->in_pos += n;
  return static_cast<int>(n);
}

long bio_ctrl(BIO* b, int cmd, long, void*) {
  const auto* c = static_cast<const Conn*>(BIO_get_data(b));
  switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_PENDING: return static_cast<long>(c->in.size() - c->in_pos);
    case BIO_CTRL_WPENDING: return static_cast<long>(c->out.size());
    default: return 0;
  }
}

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

BIO_METHOD* conn_bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "shoal::tls");
    if (m == nullptr || BIO_meth_set_write(m, bio_write) != 1 || BIO_meth_set_read(m, bio_read) != 1 ||
        BIO_meth_set_ctrl(m, bio_ctrl) != 1 || BIO_meth_set_create(m, bio_create) != 1) {
      fail("cannot create the connection's BIO method");
    }
    return m;
  }();
  return method;
}

}  // namespace

Stream::Stream() noexcept = default;
Stream::Stream(Stream&&) noexcept = default;
Stream& Stream::operator=(Stream&&) noexcept = default;
Stream::~Stream() = default;

Stream::Stream(net::Stream sock, const Context& ctx, bool client)
    : sock_(std::move(sock)), conn_(std::make_unique<Conn>()) {
  conn_->ctx = ctx;
  conn_->client = client;
  conn_->ssl = SSL_new(ctx.native());
  if (conn_->ssl == nullptr) fail("cannot create a connection");
  BIO* bio = BIO_new(conn_bio_method());
  if (bio == nullptr) fail("cannot create the connection's BIO");
  BIO_set_data(bio, conn_.get());
  SSL_set_bio(conn_->ssl, bio, bio);  // one BIO both ways; the connection owns it now
  if (client) {
    SSL_set_connect_state(conn_->ssl);
  } else {
    SSL_set_accept_state(conn_->ssl);
  }
}

std::string Stream::describe() const {
  std::string peer;
  try {
    peer = sock_.peer_address().to_string();
  } catch (const std::exception&) {
    peer = "an unknown peer";
  }
  return conn_ != nullptr && conn_->client ? conn_->host + " (" + peer + ")" : peer;
}

std::string Stream::alpn() const {
  if (conn_ == nullptr) return {};
  std::lock_guard lock(conn_->mu);
  const unsigned char* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(conn_->ssl, &p, &len);
  return std::string(reinterpret_cast<const char*>(p), len);
}

Task<void> Stream::send(std::vector<std::byte>& bytes) {
  try {
    co_await sock_.write_all(bytes);
  } catch (...) {
    // Cut part-way (cancelled, timed out, failed): the peer may hold part
    // of a record, so nothing more can be sent on this connection.
    std::lock_guard lock(conn_->mu);
    conn_->broken = true;
    throw;
  }
  bytes.clear();
}

Task<void> Stream::flush() {
  auto body = [this]() -> Task<void> {
    std::vector<std::byte> sending;
    for (;;) {
      {
        std::lock_guard lock(conn_->mu);
        if (conn_->out.empty()) co_return;
        sending.swap(conn_->out);  // what OpenSSL produced so far, in order
      }
      co_await send(sending);
    }
  };
  co_await with_lock(conn_->send_mu, std::move(body));
}

Task<int> Stream::drive(Op op, void* data, std::size_t size, std::size_t* done) {
  if (conn_ == nullptr) throw std::logic_error("shoal::tls::Stream: used after a move or a failed handshake");
  Conn& c = *conn_;
  for (;;) {
    int err = SSL_ERROR_NONE;
    std::size_t n = 0;
    std::string detail;
    long verify = X509_V_OK;
    bool produced = false;
    {
      std::lock_guard lock(c.mu);
      if (c.broken) {
        throw Error("shoal::tls: connection to " + describe() +
                    ": a write was cut off part-way (cancelled or failed), so the connection cannot be used");
      }
      ERR_clear_error();
      const std::size_t out_before = c.out.size();
      int r = 0;
      switch (op) {
        case Op::handshake: r = SSL_do_handshake(c.ssl); break;
        case Op::read: r = SSL_read_ex(c.ssl, data, size, &n); break;
        case Op::write: r = SSL_write_ex(c.ssl, data, size, &n); break;
        case Op::shutdown: r = SSL_shutdown(c.ssl) >= 0 ? 1 : -1; break;
      }
      err = r > 0 ? SSL_ERROR_NONE : SSL_get_error(c.ssl, r);
      // Before any wait: OpenSSL's error queue belongs to this thread.
      if (err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL) detail = openssl_errors();
      verify = SSL_get_verify_result(c.ssl);
      if (c.in_pos == c.in.size()) {
        c.in.clear();
        c.in_pos = 0;
      }
      // Only what this call produced: a reader must not wait to send bytes a
      // writer produced (the writer sends them), or a writer blocked on a
      // full socket would block the reader that lets the peer drain it.
      produced = c.out.size() > out_before;
    }
    // What the call produced (handshake messages, records, alerts) goes out
    // first, even when it failed: an alert tells the peer why.
    if (produced) {
      if (err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL) {
        try {
          co_await flush();
        } catch (const std::system_error&) {
          // the alert was a courtesy; the error below says what failed
        }
      } else {
        co_await flush();
      }
    }
    if (err == SSL_ERROR_NONE) {
      if (done != nullptr) *done = n;
      co_return 1;
    }
    if (err == SSL_ERROR_ZERO_RETURN) co_return 0;  // close_notify
    if (err == SSL_ERROR_WANT_READ) {
      if (c.deadline_ns != 0) {  // a handshake: each wait gets only the time left
        const auto left = std::chrono::nanoseconds(c.deadline_ns) - shoal::now().time_since_epoch();
        sock_.set_idle_timeout(std::max(std::chrono::milliseconds(1),
                                        std::chrono::ceil<std::chrono::milliseconds>(left)));
      }
      c.rx.resize(17 * 1024);  // a whole record and its header
      const std::size_t got = co_await sock_.read_some(c.rx);
      if (got == 0) {
        throw Error("shoal::tls: " + std::string(op == Op::handshake ? "handshake with " : "connection to ") +
                    describe() + ": the peer closed the connection" +
                    (op == Op::handshake ? "" : " without close_notify (the data may be truncated)"));
      }
      c.rx.resize(got);
      std::lock_guard lock(c.mu);
      if (c.in.empty()) {
        c.in.swap(c.rx);  // the common case: no copy
      } else {
        c.in.insert(c.in.end(), c.rx.begin(), c.rx.end());
      }
      continue;
    }
    std::string why = detail.empty() ? "error " + std::to_string(err) : detail;
    if (op == Op::handshake && verify != X509_V_OK) {
      why = std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify);
    }
    throw Error("shoal::tls: " + std::string(op == Op::handshake ? "handshake with " : "connection to ") + describe() +
                " failed: " + why);
  }
}

Task<void> Stream::handshake(std::chrono::milliseconds timeout) {
  // The whole handshake within `timeout`: the socket's idle limit is the
  // time left, so a peer that stalls part-way is cut off too.
  const auto limit = sock_.idle_timeout();
  conn_->deadline_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>((shoal::now() + timeout).time_since_epoch()).count();
  try {
    (void)co_await drive(Op::handshake, nullptr, 0, nullptr);
  } catch (const net::IdleTimeout&) {
    throw Error("shoal::tls: handshake with " + describe() + " timed out after " + std::to_string(timeout.count()) +
                " ms");
  }
  conn_->deadline_ns = 0;
  sock_.set_idle_timeout(limit);
  std::vector<std::byte>().swap(conn_->rx);
}

Task<std::size_t> Stream::read_some(std::span<std::byte> buf) {
  if (buf.empty()) co_return 0;
  std::size_t n = 0;
  const int r = co_await drive(Op::read, buf.data(), buf.size(), &n);
  std::vector<std::byte>().swap(conn_->rx);  // an idle connection holds no buffer
  {
    std::lock_guard lock(conn_->mu);
    if (conn_->in.empty()) std::vector<std::byte>().swap(conn_->in);
  }
  co_return r == 0 ? 0 : n;
}

Task<void> Stream::write_all(std::span<const std::byte> buf) {
  // In pieces: OpenSSL encrypts a whole call into `out` before it goes out.
  constexpr std::size_t kPiece = 64 * 1024;
  for (std::size_t off = 0; off < buf.size();) {
    std::size_t n = 0;
    (void)co_await drive(Op::write, const_cast<std::byte*>(buf.data() + off), std::min(kPiece, buf.size() - off), &n);
    off += n;
  }
}

Task<void> Stream::wait_readable() {
  if (conn_ == nullptr) throw std::logic_error("shoal::tls::Stream: used after a move or a failed handshake");
  {
    std::lock_guard lock(conn_->mu);
    if (SSL_has_pending(conn_->ssl) == 1 || conn_->in.size() > conn_->in_pos) co_return;
  }
  co_await sock_.wait_readable();
}

shoal::detail::ReadableCase on_readable(Stream& s) {
  if (s.conn_ == nullptr) throw std::logic_error("shoal::tls::on_readable: used after a move or a failed handshake");
  shoal::detail::ReadableCase c = net::on_readable(s.sock_);
  std::lock_guard lock(s.conn_->mu);
  if (SSL_has_pending(s.conn_->ssl) == 1 || s.conn_->in.size() > s.conn_->in_pos) c.set_pending();
  return c;
}

Task<void> Stream::shutdown() {
  (void)co_await drive(Op::shutdown, nullptr, 0, nullptr);
  sock_.shutdown(net::Shutdown::write);
}

Task<void> Stream::linger_close(std::chrono::milliseconds limit) {
  struct Closer {  // closed on every way out, a cancellation included
    Stream& s;
    ~Closer() { s.close(); }
  } closer{*this};
  if (conn_ == nullptr) co_return;
  try {
    co_await shutdown();
  } catch (const std::exception&) {
    co_return;  // the peer is gone, or the stream is broken: nothing to linger for
  }
  co_await shoal::detail::drain_input(*this, limit);
}

void Stream::close() noexcept {
  conn_.reset();
  sock_.close();
}

Task<Stream> connect(net::Stream sock, const Context& ctx, std::string host, std::chrono::milliseconds timeout) {
  Stream s(std::move(sock), ctx, true);
  const std::string& name = s.conn_->host = std::move(host);
  SSL* ssl = s.conn_->ssl;
  const bool ip = is_ip_address(name);
  if (!ip && SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) fail("cannot set the server name " + name);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if ((ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0)) != 1) {
    fail("cannot check certificates against " + name);
  }
  co_await s.handshake(timeout);
  co_return s;
}

Task<Stream> accept(net::Stream sock, const Context& ctx, std::chrono::milliseconds timeout) {
  Stream s(std::move(sock), ctx, false);
  co_await s.handshake(timeout);
  co_return s;
}

}  // namespace shoal::tls
