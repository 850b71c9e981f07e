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
#include <utility>

#include "shoal/time/sleep.hpp"

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

std::shared_ptr<ssl_ctx_st> new_context(const SSL_METHOD* method) {
  std::shared_ptr<ssl_ctx_st> ctx(SSL_CTX_new(method), SSL_CTX_free);
  if (!ctx) fail("cannot create a context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // Idle connections give their record buffers back (34 KiB each otherwise).
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  return ctx;
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

Context Context::client(const ClientOptions& o) {
  auto ctx = new_context(TLS_client_method());
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
  auto ctx = new_context(TLS_server_method());
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

Stream::Stream() noexcept = default;

Stream::Stream(net::Stream sock, const Context& ctx, bool client) : sock_(std::move(sock)), ctx_(ctx), client_(client) {
  ssl_ = SSL_new(ctx.native());
  if (ssl_ == nullptr) fail("cannot create a connection");
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  if (in == nullptr || out == nullptr) {
    BIO_free(in);
    BIO_free(out);
    SSL_free(std::exchange(ssl_, nullptr));
    fail("cannot create the connection's buffers");
  }
  BIO_set_mem_eof_return(in, -1);  // empty means "wait for more", not end of stream
  SSL_set_bio(ssl_, in, out);      // the connection owns both now
  if (client) {
    SSL_set_connect_state(ssl_);
  } else {
    SSL_set_accept_state(ssl_);
  }
}

Stream::Stream(Stream&& o) noexcept
    : sock_(std::move(o.sock_)),
      ctx_(std::move(o.ctx_)),
      ssl_(std::exchange(o.ssl_, nullptr)),
      host_(std::move(o.host_)),
      buf_(std::move(o.buf_)),
      deadline_ns_(o.deadline_ns_),
      client_(o.client_) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (ssl_ != nullptr) SSL_free(ssl_);
    sock_ = std::move(o.sock_);
    ctx_ = std::move(o.ctx_);
    ssl_ = std::exchange(o.ssl_, nullptr);
    host_ = std::move(o.host_);
    buf_ = std::move(o.buf_);
    deadline_ns_ = o.deadline_ns_;
    client_ = o.client_;
  }
  return *this;
}

Stream::~Stream() {
  if (ssl_ != nullptr) SSL_free(ssl_);
}

std::string Stream::describe() const {
  std::string peer;
  try {
    peer = sock_.peer_address().to_string();
  } catch (const std::exception&) {
    peer = "an unknown peer";
  }
  return client_ ? host_ + " (" + peer + ")" : peer;
}

std::string Stream::alpn() const {
  if (ssl_ == nullptr) return {};
  const unsigned char* p = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(ssl_, &p, &len);
  return std::string(reinterpret_cast<const char*>(p), len);
}

Task<void> Stream::flush() {
  BIO* out = SSL_get_wbio(ssl_);
  char* data = nullptr;
  const long pending = BIO_get_mem_data(out, &data);
  if (pending <= 0) co_return;
  co_await sock_.write_all(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data),
                                                      static_cast<std::size_t>(pending)));
  (void)BIO_reset(out);
}

Task<int> Stream::drive(Op op, void* data, std::size_t size, std::size_t* done) {
  if (ssl_ == nullptr) throw std::logic_error("shoal::tls::Stream: used after a move or a failed handshake");
  for (;;) {
    ERR_clear_error();
    int r = 0;
    std::size_t n = 0;
    switch (op) {
      case Op::handshake: r = SSL_do_handshake(ssl_); break;
      case Op::read: r = SSL_read_ex(ssl_, data, size, &n); break;
      case Op::write: r = SSL_write_ex(ssl_, data, size, &n); break;
      case Op::shutdown: r = SSL_shutdown(ssl_) >= 0 ? 1 : -1; break;
    }
    const int err = r > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_, r);
    // Before any wait: the error queue belongs to this thread.
    const std::string detail = err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL ? openssl_errors() : std::string();
    const long verify = SSL_get_verify_result(ssl_);
    co_await flush();  // what the call produced: handshake messages, records, alerts
    if (err == SSL_ERROR_NONE) {
      if (done != nullptr) *done = n;
      co_return 1;
    }
    if (err == SSL_ERROR_ZERO_RETURN) co_return 0;  // close_notify
    if (err == SSL_ERROR_WANT_WRITE) continue;      // flushed above
    if (err == SSL_ERROR_WANT_READ) {
      if (deadline_ns_ != 0) {  // a handshake: each wait gets only the time left
        const auto left = std::chrono::nanoseconds(deadline_ns_) - shoal::now().time_since_epoch();
        sock_.set_idle_timeout(std::max(std::chrono::milliseconds(1),
                                        std::chrono::ceil<std::chrono::milliseconds>(left)));
      }
      buf_.resize(17 * 1024);  // a whole record and its header
      const std::size_t got = co_await sock_.read_some(buf_);
      if (got == 0) {
        throw Error("shoal::tls: " + std::string(op == Op::handshake ? "handshake with " : "connection to ") +
                    describe() + ": the peer closed the connection" +
                    (op == Op::handshake ? "" : " without close_notify (the data may be truncated)"));
      }
      if (BIO_write(SSL_get_rbio(ssl_), buf_.data(), static_cast<int>(got)) != static_cast<int>(got)) {
        fail("cannot buffer received bytes");
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
  deadline_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>((shoal::now() + timeout).time_since_epoch()).count();
  try {
    (void)co_await drive(Op::handshake, nullptr, 0, nullptr);
  } catch (const net::IdleTimeout&) {
    throw Error("shoal::tls: handshake with " + describe() + " timed out after " + std::to_string(timeout.count()) +
                " ms");
  }
  deadline_ns_ = 0;
  sock_.set_idle_timeout(limit);
  std::vector<std::byte>().swap(buf_);
}

Task<std::size_t> Stream::read_some(std::span<std::byte> buf) {
  if (buf.empty()) co_return 0;
  std::size_t n = 0;
  const int r = co_await drive(Op::read, buf.data(), buf.size(), &n);
  std::vector<std::byte>().swap(buf_);  // an idle connection holds no buffer
  co_return r == 0 ? 0 : n;
}

Task<void> Stream::write_all(std::span<const std::byte> buf) {
  for (std::size_t off = 0; off < buf.size();) {
    std::size_t n = 0;
    (void)co_await drive(Op::write, const_cast<std::byte*>(buf.data() + off), buf.size() - off, &n);
    off += n;
  }
  std::vector<std::byte>().swap(buf_);
}

Task<void> Stream::shutdown() {
  (void)co_await drive(Op::shutdown, nullptr, 0, nullptr);
  sock_.shutdown(net::Shutdown::write);
}

Task<Stream> connect(net::Stream sock, const Context& ctx, std::string host, std::chrono::milliseconds timeout) {
  Stream s(std::move(sock), ctx, true);
  s.host_ = std::move(host);
  const bool ip = is_ip_address(s.host_);
  if (!ip && SSL_set_tlsext_host_name(s.ssl_, s.host_.c_str()) != 1) fail("cannot set the server name " + s.host_);
  X509_VERIFY_PARAM* param = SSL_get0_param(s.ssl_);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if ((ip ? X509_VERIFY_PARAM_set1_ip_asc(param, s.host_.c_str()) : X509_VERIFY_PARAM_set1_host(param, s.host_.c_str(), 0)) != 1) {
    fail("cannot check certificates against " + s.host_);
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
