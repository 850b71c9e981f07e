// Stream sockets: each operation is its syscall inside the readiness loop
// (IoOp, an awaiter: no frame per call); accept runs the same loop through
// async_io.
#include "shoal/net/stream.hpp"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <system_error>

#include "src/runtime/driver/io/async_io.hpp"
#include "src/runtime/driver/io/completion.hpp"
#include "src/runtime/scheduler.hpp"
#include "shoal/scope/timeout.hpp"
#include "shoal/time/sleep.hpp"
#include "src/net/peer.hpp"
#include "src/net/sys.hpp"
#include "src/platform/platform.hpp"

namespace shoal::detail::sys {
Accept accept = platform::accept_connection;
RingAccepted ring_accepted = nullptr;
Poll poll = ::poll;
}  // namespace shoal::detail::sys

namespace shoal::net {
namespace {

using detail::IoSource;
namespace io = detail::io;

using detail::io_check_cancelled;

std::string peer_of(int fd) {
  if (const std::optional<Address> peer = detail::peer_address_of(fd)) return peer->to_string();
  if (errno == ENOTSOCK) return "a pipe";
  // After a reset the peer's address is gone; the local one still names
  // the connection.
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "an unconnected socket";
  return "disconnected peer of " + Address::from_native(reinterpret_cast<sockaddr*>(&ss), len).to_string();
}

[[noreturn]] void io_error(const char* op, int fd, int err) {
  throw std::system_error(err, std::generic_category(), std::string("shoal::net: ") + op + " (" + peer_of(fd) + ")");
}

}  // namespace

// ---- Stream -------------------------------------------------------------

Stream::Stream(Stream&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), src_(std::move(o.src_)), idle_timeout_(o.idle_timeout_) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = std::exchange(o.fd_, -1);
    src_ = std::move(o.src_);
    idle_timeout_ = o.idle_timeout_;
  }
  return *this;
}

Stream::~Stream() { close(); }

void Stream::close() noexcept {
  src_.release();
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

Task<void> Stream::linger_close(std::chrono::milliseconds limit) {
  struct Closer {  // closed on every way out, a cancellation included
    Stream& s;
    ~Closer() { s.close(); }
  } closer{*this};
  if (fd_ < 0) co_return;
  if (::shutdown(fd_, SHUT_WR) != 0) co_return;  // not connected any more: nothing to linger for
  // detail::drain_input's loop with recv(2) in place of read_some: the usual
  // end here, a peer that resets once it has our last bytes, is no error,
  // and a throw per connection cost churn CPU and unwind-table pages.
  set_idle_timeout(limit);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::byte sink[4096];
  for (std::size_t total = 0; total < (std::size_t{1} << 20);) {
    try {
      co_await wait_readable();
    } catch (const IdleTimeout&) {
      co_return;  // silent for `limit`
    }
    const ssize_t n = ::recv(fd_, sink, sizeof sink, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0 || std::chrono::steady_clock::now() >= deadline) co_return;  // ended, reset, or long enough
    total += static_cast<std::size_t>(n);
  }
}

IoSource* Stream::source(std::uint32_t ready_hint, bool* registered) {
  if (fd_ < 0) throw std::logic_error("shoal::net::Stream: used after close (or moved from)");
  return src_.get(fd_, ready_hint, registered);
}

namespace {
[[noreturn]] void idle_expired(int fd, const char* op, std::chrono::milliseconds limit) {
  throw IdleTimeout("shoal::net: " + std::string(op) + " (" + peer_of(fd) + "): idle for " +
                    std::to_string(limit.count()) + " ms");
}

using Kind = detail::StreamOp::Kind;
constexpr int kEndOfStream = -1;  // read_exact's err_: the peer ended the stream first

const char* op_name(Kind k) noexcept {
  switch (k) {
    case Kind::read_some:
    case Kind::read_exact:
      return "read";
    case Kind::write_some:
    case Kind::write_all:
      return "write";
    case Kind::wait_readable:
      break;
  }
  return "wait_readable";
}

std::uint8_t interest_of(Kind k) noexcept {
  return k == Kind::write_some || k == Kind::write_all ? io::writable : io::readable;
}
}  // namespace

}  // namespace shoal::net

namespace shoal::detail {

// An empty buffer moves nothing and never waits (cached readiness would
// otherwise make it wait for an edge); it is still a checkpoint.
StreamOp::StreamOp(IoSource* s, Kind kind, const void* data, std::size_t size, std::chrono::milliseconds limit,
                   bool fresh) noexcept
    : IoOp(s, net::interest_of(kind), size == 0 && kind != Kind::wait_readable ? nullptr : &StreamOp::attempt, limit),
      kind_(kind),
      fresh_(fresh),
      data_(static_cast<std::byte*>(const_cast<void*>(data))),
      size_(size) {}

bool StreamOp::attempt(IoOp& base) noexcept {
  auto& op = static_cast<StreamOp&>(base);
  const int fd = op.fd();
  switch (op.kind_) {
    case Kind::read_some:
    case Kind::read_exact:
      for (;;) {
        const std::size_t want = op.size_ - op.done_;
        const ssize_t n = ::read(fd, op.data_ + op.done_, want);  // sockets and pipes alike
        if (n > 0) {
          op.done_ += static_cast<std::size_t>(n);
          const bool short_read = static_cast<std::size_t>(n) < want;
          if (op.kind_ == Kind::read_exact) return !short_read;  // short: drained, wait for the rest
          if (short_read) op.drain();
          return true;
        }
        if (n == 0) {  // the end of the stream stays readable
          if (op.kind_ == Kind::read_exact) op.err_ = net::kEndOfStream;
          return true;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
        op.err_ = static_cast<std::int16_t>(errno);
        return true;
      }
    case Kind::write_some:
    case Kind::write_all:
      for (;;) {
        const std::size_t want = op.size_ - op.done_;
        // A pipe behind a Stream takes write(2) (SIGPIPE is ignored: EPIPE instead).
        const ssize_t n = op.pipe_ ? ::write(fd, op.data_ + op.done_, want)
                                   : ::send(fd, op.data_ + op.done_, want, platform::kSendNoSigpipe);
        if (n >= 0) {
          op.done_ += static_cast<std::size_t>(n);
          const bool short_write = static_cast<std::size_t>(n) < want;
          if (op.kind_ == Kind::write_all) return !short_write;  // short: full, wait for room
          if (short_write) op.drain();
          return true;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
        if (errno == ENOTSOCK && !op.pipe_) {
          op.pipe_ = true;
          continue;
        }
        op.err_ = static_cast<std::int16_t>(errno);
        return true;
      }
    case Kind::wait_readable:
      break;
  }
  // An event set the bit (a wake, or the bit of a source this wait
  // registered without assuming it readable): no poll. Otherwise the bit
  // may be an assumption, or left by a read that took everything.
  if (op.woken() || op.fresh_) return true;
  for (;;) {
    pollfd p{fd, POLLIN, 0};  // sockets and pipes alike; no data is consumed
    const int n = sys::poll(&p, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    return n != 0;  // data, the end of the stream, or an error the read will report
  }
}

std::size_t StreamOp::finish() {
  switch (end()) {
    case End::done:
      break;
    case End::cancelled:
      detail::raise_cancelled();
    case End::idle_expired:
      net::idle_expired(fd(), net::op_name(kind_), limit());
    case End::no_memory:
      throw std::bad_alloc();
  }
  if (err_ == net::kEndOfStream) {
    throw net::EndOfStream("shoal::net: the peer (" + net::peer_of(fd()) + ") ended the stream after " +
                           std::to_string(done_) + " of " + std::to_string(size_) + " bytes");
  }
  if (err_ != 0) net::io_error(net::op_name(kind_), fd(), err_);
  return done_;
}

}  // namespace shoal::detail

namespace shoal::net {

StreamCall<std::size_t> Stream::read_some(std::span<std::byte> buf) {
  return StreamCall<std::size_t>(source(io::readable | io::writable), Kind::read_some, buf.data(), buf.size(),
                                 idle_timeout_);
}

StreamCall<void> Stream::read_exact(std::span<std::byte> buf) {
  return StreamCall<void>(source(io::readable | io::writable), Kind::read_exact, buf.data(), buf.size(),
                          idle_timeout_);
}

StreamCall<std::size_t> Stream::write_some(std::span<const std::byte> buf) {
  return StreamCall<std::size_t>(source(io::readable | io::writable), Kind::write_some, buf.data(), buf.size(),
                                 idle_timeout_);
}

StreamCall<void> Stream::write_all(std::span<const std::byte> buf) {
  return StreamCall<void>(source(io::readable | io::writable), Kind::write_all, buf.data(), buf.size(),
                          idle_timeout_);
}

StreamCall<void> Stream::wait_readable() {
  // A first wait registers the fd without assuming it readable: the
  // registration itself reports data already there (an epoll add queues a
  // ready fd; poll is level-triggered), so no poll(2) is needed to find out.
  // The driver may deliver that event before the wait first looks: `fresh`
  // says the bit is then still the registration's report.
  bool fresh = false;
  IoSource* s = source(io::writable, &fresh);
  return StreamCall<void>(s, Kind::wait_readable, nullptr, 0, idle_timeout_, fresh);
}

detail::ReadableCase on_readable(Stream& s) {
  // Registered as wait_readable registers: readability is the kernel's report.
  return detail::ReadableCase(s.source(io::writable), false);
}

void Stream::shutdown(Shutdown how) {
  const int h = how == Shutdown::read ? SHUT_RD : how == Shutdown::write ? SHUT_WR : SHUT_RDWR;
  if (::shutdown(fd_, h) != 0 && errno != ENOTCONN) io_error("shutdown", fd_, errno);
}

void Stream::set_nodelay(bool on) {
  int v = on ? 1 : 0;
  if (::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) != 0) io_error("set_nodelay", fd_, errno);
}

Address Stream::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) io_error("getsockname", fd_, errno);
  return Address::from_native(reinterpret_cast<sockaddr*>(&ss), len);
}

Address Stream::peer_address() const {
  std::optional<Address> peer = detail::peer_address_of(fd_);
  if (!peer) io_error("getpeername", fd_, errno);
  return *peer;
}

// ---- Listener -----------------------------------------------------------

Listener Listener::bind(const Address& address, ListenOptions options) {
  const int fd = shoal::detail::platform::make_socket(address.family(), SOCK_STREAM);
  auto fail = [&](const char* what, int err) {
    if (fd >= 0) ::close(fd);
    throw std::system_error(err, std::generic_category(),
                            std::string("shoal::net::Listener::bind ") + address.to_string() + ": " + what);
  };
  if (fd < 0) fail("socket", errno);
  if (!address.is_unix()) {
    int one = 1;
    if (options.reuse_address && ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
      fail("SO_REUSEADDR", errno);
    }
    if (options.reuse_port && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
      fail("SO_REUSEPORT", errno);
    }
  }
  if (::bind(fd, address.native(), address.native_size()) != 0) fail("bind", errno);
  if (::listen(fd, options.backlog) != 0) fail("listen", errno);
  Listener l;
  l.fd_ = fd;
  return l;
}

Listener::Listener(Listener&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), src_(std::move(o.src_)), warned_(o.warned_) {}

Listener& Listener::operator=(Listener&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = std::exchange(o.fd_, -1);
    src_ = std::move(o.src_);
    warned_ = o.warned_;
  }
  return *this;
}

Listener::~Listener() { close(); }

void Listener::close() noexcept {
  if (accepting_.load(std::memory_order_acquire)) {
    // The ring's accept holds the socket: it would wait on, unseen.
    std::fputs("shoal: a listener was closed while a task was waiting in accept; cancel the task first\n", stderr);
    std::abort();
  }
  src_.release();
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

Address Listener::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) io_error("getsockname", fd_, errno);
  return Address::from_native(reinterpret_cast<sockaddr*>(&ss), len);
}

Task<Stream> Listener::accept() { return accept_into(nullptr); }

Task<Stream> Listener::accept(Address& peer) { return accept_into(&peer); }

Task<Stream> Listener::accept_into(Address* peer) {
  if (fd_ < 0) throw std::logic_error("shoal::net::Listener::accept: the listener is closed (or moved from)");
  if (detail::TaskRecord* f = detail::current_record(); f != nullptr && f->sched->driver().runs_operations()) {
    return accept_on_ring(peer);
  }
  auto attempt = [this, peer](detail::IoAttempt& a) -> std::optional<Stream> {
    for (;;) {
      sockaddr_storage ss;
      socklen_t len = sizeof ss;
      const int fd = shoal::detail::sys::accept(fd_, peer != nullptr ? reinterpret_cast<sockaddr*>(&ss) : nullptr,
                                                peer != nullptr ? &len : nullptr);
      if (fd >= 0) {
        if (peer != nullptr) *peer = Address::from_native(reinterpret_cast<sockaddr*>(&ss), len);
        return Stream(fd);
      }
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return std::nullopt;
      if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM) {
        io_error("accept", fd_, err);
      }
      // Out of descriptors or memory: the pending connection stays in
      // the backlog. Back off (a checkpoint) instead of spinning.
      warn_backing_off(err);
      a.back_off = true;
      return std::nullopt;
    }
  };
  return detail::async_io<true>(src_.get(fd_, io::readable), io::readable, std::move(attempt));
}

// The kernel waits for the connection (it polls the listener itself): no
// registration, no readiness, one submission per connection. Cancelled,
// the kernel withdraws the accept; one it completed as the cancel came
// closes its connection (CompletionOp::await_resume).
Task<Stream> Listener::accept_on_ring(Address* peer) {
  struct Accepting {  // Listener::close aborts while it is set
    std::atomic<bool>& flag;
    explicit Accepting(std::atomic<bool>& f) noexcept : flag(f) { flag.store(true, std::memory_order_release); }
    ~Accepting() { flag.store(false, std::memory_order_release); }
  } accepting{accepting_};
  std::uint8_t backed_off = 0;
  for (;;) {
    sockaddr_storage ss;
    socklen_t len = sizeof ss;
    io::Submission sub;
    sub.op = io::OpCode::accept;
    sub.fd = fd_;
    sub.addr = peer != nullptr ? &ss : nullptr;
    sub.addr2 = peer != nullptr ? &len : nullptr;
    sub.flags = SOCK_NONBLOCK | SOCK_CLOEXEC;
    detail::CompletionOp op(sub, true);
    const int r = co_await op;
    if (detail::sys::ring_accepted != nullptr) detail::sys::ring_accepted(r);
    if (r >= 0) {
      if (peer != nullptr) *peer = Address::from_native(reinterpret_cast<sockaddr*>(&ss), len);
      co_return Stream(r);
    }
    const int err = -r;
    if (err == EINTR || err == ECONNABORTED) continue;
    if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM) io_error("accept", fd_, err);
    warn_backing_off(err);  // as the readiness path does: the backlog keeps the connection
    co_await detail::io_back_off(backed_off);
  }
}

void Listener::warn_backing_off(int err) noexcept {
  if (warned_) return;
  warned_ = true;
  try {
    std::fprintf(stderr, "shoal: accept on %s: %s; backing off until resources free up\n",
                 local_address().to_string().c_str(), std::generic_category().message(err).c_str());
  } catch (...) {  // the text needs memory too: the back-off must not fail for it
    std::fputs("shoal: accept: out of descriptors or memory; backing off until resources free up\n", stderr);
  }
}

// ---- connect ------------------------------------------------------------

Task<Stream> Stream::connect_now(Address address) {
  io_check_cancelled();
  const int fd = shoal::detail::platform::make_socket(address.family(), SOCK_STREAM);
  if (fd < 0) {
    throw std::system_error(errno, std::generic_category(), "shoal::net::connect " + address.to_string() + ": socket");
  }
  Stream s(fd);
  int r;
  do {
    r = ::connect(fd, address.native(), address.native_size());
  } while (r != 0 && errno == EINTR);
  if (r == 0) co_return s;
  if (errno != EINPROGRESS && errno != EAGAIN) {
    throw std::system_error(errno, std::generic_category(), "shoal::net::connect " + address.to_string());
  }
  // In progress: the first writable event says it finished (either way).
  co_await detail::IoReadyAwaiter(s.source(0), io::writable);
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) throw std::system_error(err, std::generic_category(), "shoal::net::connect " + address.to_string());
  co_return s;
}

Task<Stream> connect(Address address, std::chrono::milliseconds timeout) {
  co_return co_await with_timeout(timeout, Stream::connect_now(std::move(address)));
}

}  // namespace shoal::net
