// Stream sockets (TCP and Unix-domain) on the runtime's reactor. An idle
// connection costs a registration and a suspended frame, never a thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "shoal/detail/io_op.hpp"
#include "shoal/detail/io_slot.hpp"
#include "shoal/net/address.hpp"
#include "shoal/net/byte_stream.hpp"
#include "shoal/runtime/task.hpp"

namespace shoal::detail {
/// A stream operation: its syscall on the one readiness loop (IoOp).
class StreamOp : public IoOp {
 public:
  enum class Kind : std::uint8_t { read_some, read_exact, write_some, write_all, wait_readable };
  /// `fresh`: this operation registered the source (its readable bit can
  /// only have come from an event).
  StreamOp(IoSource* s, Kind kind, const void* data, std::size_t size, std::chrono::milliseconds limit,
           bool fresh = false) noexcept;
  StreamOp(StreamOp&& o) noexcept = default;
  /// After the await: the bytes moved, or the operation's error thrown.
  std::size_t finish();

 private:
  static bool attempt(IoOp& op) noexcept;
  std::int16_t err_ = 0;  // errno, or kEndOfStream (these three first: they fill IoOp's tail)
  Kind kind_;
  bool pipe_ = false;  // send said ENOTSOCK: write(2) from then on
  bool fresh_;
  std::byte* data_;
  std::size_t size_;
  std::size_t done_ = 0;
};
}  // namespace shoal::detail

/// Sockets on the runtime's reactor: TCP and Unix-domain streams and
/// listeners, UDP, and a connection loop with graceful shutdown (serve()).
namespace shoal::net {

class Stream;

/// What a stream operation returns. `co_await` it: it runs in the awaiting
/// frame and allocates nothing. Or pass it where a Task is taken
/// (move_on_after, with_timeout, spawn): it becomes one. Await it once.
template <class T>
class [[nodiscard]] StreamCall {
 public:
  /// The type `co_await` on the call yields.
  using value_type = T;
  /// The Task this call becomes where a Task is taken.
  using task_type = Task<T>;
  /// Moves a call that was not awaited yet.
  StreamCall(StreamCall&&) noexcept = default;  // before it is awaited
  StreamCall& operator=(StreamCall&&) = delete;

  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    return op_.await_suspend(h);
  }
  T await_resume() {
    if constexpr (std::is_void_v<T>) {
      (void)op_.finish();
    } else {
      return op_.finish();
    }
  }
  /// Wraps the call in a Task (allocates its frame), for APIs that take a Task.
  operator task_type() && { return as_task(std::move(*this)); }

 private:
  friend class Stream;
  template <class... A>
  explicit StreamCall(A&&... a) noexcept : op_(std::forward<A>(a)...) {}
  static task_type as_task(StreamCall call) { co_return co_await call; }
  detail::StreamOp op_;
};

/// `read_exact` hit the end of the stream before the buffer was full.
class EndOfStream : public std::runtime_error {
 public:
  /// An error whose what() is `what`.
  explicit EndOfStream(const std::string& what) : std::runtime_error(what) {}
};

/// A wait on a stream with an idle timeout (Stream::set_idle_timeout,
/// ServeOptions::idle_timeout) saw no progress for that long. `serve` ends
/// such a handler quietly; it is not reported as a fault.
class IdleTimeout : public std::runtime_error {
 public:
  /// An error whose what() is `what`.
  explicit IdleTimeout(const std::string& what) : std::runtime_error(what) {}
};

/// Which direction Stream::shutdown ends: `read` (SHUT_RD), `write` (SHUT_WR:
/// the peer reads end of stream) or `both` (SHUT_RDWR).
enum class Shutdown { read, write, both };

/// A connected stream socket. Move-only; the destructor closes it.
/// Thread-safety: one task may read while another writes; closing (or
/// destroying) it while another task waits on it is a bug that aborts with a
/// message (cancel that task instead). Every operation that can wait is a
/// checkpoint: cancelled, it throws before touching the socket. I/O errors
/// throw std::system_error naming the operation and the peer (a reset is
/// ECONNRESET). Writes never raise SIGPIPE (EPIPE). Reads, writes and waits
/// throw std::logic_error on a closed or moved-from stream, and
/// std::system_error if the reactor refuses the fd at its first such call.
class Stream {
 public:
  Stream() noexcept = default;
  /// Adopts a connected, non-blocking socket or pipe end (set_nodelay,
  /// shutdown and the addresses are for sockets only).
  explicit Stream(int fd) noexcept : fd_(fd) {}
  /// Takes over `o`'s socket and idle timeout; `o` is left closed.
  Stream(Stream&& o) noexcept;
  /// Closes this stream's socket, then takes over `o`'s; `o` is left closed.
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  /// Reads what is available (waits if nothing is); 0 at end of stream
  /// (and for an empty `buf`).
  /// Checkpoint: yes; a read that need not wait yields once per budget
  ///   after it (the bytes are returned even if cancelled then).
  /// Cancellation: nothing was read; the data stays in the socket.
  /// Thread-safety: one reading task at a time (a second one would get an
  ///   arbitrary share of the bytes); a writer may run beside it.
  /// Throws: Cancelled; IdleTimeout (an idle limit is set and no byte came
  ///   for that long: nothing read); std::system_error; std::bad_alloc (the
  ///   idle limit's timer).
  StreamCall<std::size_t> read_some(std::span<std::byte> buf);
  /// Fills `buf` with read_some calls (an idle limit applies to each wait).
  /// Checkpoint: yes (each read_some is one).
  /// Cancellation: the bytes read so far are consumed from the stream and
  ///   sit at the front of `buf`, but how many is not reported: the stream
  ///   is then mid-message (the same after IdleTimeout or an error).
  /// Thread-safety: as read_some.
  /// Throws: EndOfStream if the peer ends the stream first (its message says
  ///   how many bytes came); as read_some.
  StreamCall<void> read_exact(std::span<std::byte> buf);
  /// Writes what the socket takes now (waits if it takes nothing); returns
  /// how many bytes went out (0 for an empty `buf`).
  /// Checkpoint: yes; a write that need not wait yields once per budget
  ///   after it (the count is returned even if cancelled then).
  /// Cancellation: nothing was written.
  /// Thread-safety: one writing task at a time (two would interleave their
  ///   bytes); a reader may run beside it.
  /// Throws: Cancelled; IdleTimeout (nothing written); std::system_error
  ///   (EPIPE once the peer closed, ECONNRESET); std::bad_alloc (the idle
  ///   limit's timer).
  StreamCall<std::size_t> write_some(std::span<const std::byte> buf);
  /// Writes all of `buf`, with write_some calls.
  /// Checkpoint: yes (each write_some is one; a cancelled task writes nothing).
  /// Cancellation: it stops at the next write_some; how many bytes already
  ///   went out is not reported (the peer may have a prefix: close the
  ///   stream). The same after IdleTimeout or an error.
  /// Thread-safety: as write_some.
  /// Throws: as write_some.
  StreamCall<void> write_all(std::span<const std::byte> buf);
  /// Writes all of `text` (as write_all of its bytes).
  StreamCall<void> write_all(std::string_view text) { return write_all(std::as_bytes(std::span(text.data(), text.size()))); }
  /// Waits until a read would not wait (data, end of stream or an error),
  /// without reading: an idle connection then holds no buffer.
  /// Checkpoint: yes (cancellation is checked first); when already readable
  ///   it yields once per budget, like a read that need not wait.
  /// Cancellation: nothing was consumed.
  /// Thread-safety: as read_some.
  /// Throws: Cancelled; IdleTimeout; std::bad_alloc (the idle limit's timer).
  StreamCall<void> wait_readable();

  /// From now on, a read or write that waits longer than `t` for the socket
  /// (no byte could move for `t`) throws IdleTimeout. Zero (the default):
  /// no limit. A wait costs a timer only while a limit is set.
  void set_idle_timeout(std::chrono::milliseconds t) noexcept { idle_timeout_ = t; }
  /// The idle limit set with set_idle_timeout (zero: none).
  std::chrono::milliseconds idle_timeout() const noexcept { return idle_timeout_; }

  /// Shuts down one or both directions of the socket (shutdown(2)); the
  /// default ends our writing side, so the peer reads end of stream. A peer
  /// already gone (ENOTCONN) is not an error. Throws std::system_error.
  void shutdown(Shutdown how = Shutdown::write);
  /// TCP only: disables Nagle's algorithm.
  void set_nodelay(bool on);
  /// The address of our end (getsockname). Throws std::system_error (e.g.
  /// for a pipe or a closed stream).
  Address local_address() const;
  /// The address of the peer (getpeername). Throws std::system_error (e.g.
  /// for a pipe, or a socket no longer connected).
  Address peer_address() const;
  /// True if this holds a file descriptor (false once closed or moved from).
  bool is_open() const noexcept { return fd_ >= 0; }
  /// The file descriptor, or -1; still owned by the stream.
  int native_handle() const noexcept { return fd_; }
  /// Closes the socket now (idempotent); the destructor does the same.
  /// Another task must not be waiting on the stream (that aborts).
  void close() noexcept;
  /// Ends the conversation without destroying what we sent: shuts our
  /// writing side, then reads and drops what the peer still sends until it
  /// closes, at most `limit` and 1 MiB, then closes. Use it instead of
  /// close() when the peer may still be sending (an early refusal, "line too
  /// long"): a close with unread input makes the kernel send a reset, which
  /// can discard our last reply before the peer reads it.
  /// Checkpoint: yes (its reads). Cancellation: the socket is closed all
  ///   the same. Thread-safety: no other task may use the stream.
  /// Throws: Cancelled; nothing else (a peer that resets or stays silent
  ///   just ends the wait).
  Task<void> linger_close(std::chrono::milliseconds limit = std::chrono::seconds(2));

 private:
  friend Task<Stream> connect(Address address, std::chrono::milliseconds timeout);
  friend detail::ReadableCase on_readable(Stream& s);
  static Task<Stream> connect_now(Address address);
  detail::IoSource* source(std::uint32_t ready_hint, bool* registered = nullptr);
  int fd_ = -1;
  detail::IoSlot src_;  // registered at the first operation
  std::chrono::milliseconds idle_timeout_{0};
};

static_assert(ByteStream<Stream>);

/// A select case (shoal::select) that completes when a read of `s` would
/// not wait (data, the end of the stream or an error), reading nothing, so
/// that one loop waits for a client's next bytes, a room's message and a
/// shutdown at once and reads only once bytes are there:
///
///   auto r = co_await shoal::select(shoal::net::on_readable(in), shoal::on_recv(room),
///                                   shoal::on_event(stop));
///
/// Its outcome is std::monostate. Unlike wait_readable it has no idle limit
/// (add an on_timeout case). On a BufferedReader or a tls::Stream it
/// completes at once while bytes are read ahead.
/// Checkpoint, Cancellation: the select's (nothing is read either way).
/// Thread-safety: as read_some (the one reading task selects).
/// Throws: std::logic_error on a closed or moved-from stream;
///   std::system_error if the reactor refuses the fd.
detail::ReadableCase on_readable(Stream& s);

/// Socket options for Listener::bind.
struct ListenOptions {
  bool reuse_address = true;  ///< SO_REUSEADDR (TCP)
  bool reuse_port = false;    ///< SO_REUSEPORT (TCP)
  /// The listen(2) backlog: connections the kernel queues before accept
  /// (capped by the kernel's somaxconn).
  int backlog = 1024;
};

/// A listening socket. `bind` may be called outside a task (before `run`).
class Listener {
 public:
  Listener() noexcept = default;
  /// Binds and listens (TCP or Unix-domain, from the address). Port 0 picks
  /// a free port: see local_address(). Throws std::system_error naming the
  /// address (e.g. "address already in use").
  static Listener bind(const Address& address, ListenOptions options = {});
  /// Takes over `o`'s socket; `o` is left closed.
  Listener(Listener&& o) noexcept;
  /// Closes this listener's socket, then takes over `o`'s; `o` is left closed.
  Listener& operator=(Listener&& o) noexcept;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener();

  /// The next connection. Out of file descriptors or memory (EMFILE,
  /// ENFILE, ENOBUFS, ENOMEM), it backs off (sleeps of 5 ms doubling up to
  /// 640 ms, each a checkpoint) and retries, saying so once per listener on
  /// stderr, instead of spinning; ECONNABORTED is retried at once.
  /// Checkpoint: yes; an accept that need not wait yields once per budget
  ///   after it (the connection is returned even if cancelled then). On a
  ///   uring runtime every accept suspends until the ring completes it.
  /// Cancellation: no connection was taken: a pending one stays in the
  ///   kernel backlog for the next accept. A connection is never accepted and
  ///   then lost by accept itself, with one exception on a uring runtime
  ///   (SHOAL_IO_BACKEND=uring), where the kernel runs the accept: one it
  ///   completed as the cancel arrived is closed (its peer sees the
  ///   connection end) and Cancelled thrown.
  /// Thread-safety: any task, one accept at a time per listener. Closing the
  ///   listener while a task waits in accept aborts (cancel the task first).
  /// Throws: Cancelled; std::system_error for other accept errors (or if the
  ///   reactor refuses the fd); std::logic_error on a closed listener.
  Task<Stream> accept();
  /// The same, and stores the connecting peer's address in `peer` (the
  /// accept reports it: no getpeername). `peer` must outlive the await.
  Task<Stream> accept(Address& peer);
  /// The bound address, with the port picked for port 0 (getsockname).
  /// Throws std::system_error.
  Address local_address() const;
  /// The file descriptor, or -1; still owned by the listener.
  int native_handle() const noexcept { return fd_; }
  /// Stops listening and closes the socket (idempotent); the destructor
  /// does the same. No task may be waiting in accept (that aborts).
  void close() noexcept;

 private:
  void warn_backing_off(int err) noexcept;
  Task<Stream> accept_into(Address* peer);
  Task<Stream> accept_on_ring(Address* peer);
  int fd_ = -1;
  detail::IoSlot src_;  // registered at the first operation
  bool warned_ = false;
  std::atomic<bool> accepting_{false};  // an accept is in the ring (close must not come now)
};

/// Connects to `address` within `timeout` (the whole handshake, under
/// with_timeout: a timeout <= 0 always times out).
/// Checkpoint: yes: a cancelled task creates no socket. No budget yield.
/// Cancellation: a handshake in progress is abandoned and its socket closed.
/// Thread-safety: any task.
/// Throws: std::system_error naming the address (e.g. "connection
///   refused"); TimedOut after `timeout`; Cancelled; std::bad_alloc (the
///   deadline's timer).
Task<Stream> connect(Address address, std::chrono::milliseconds timeout = std::chrono::seconds(30));

/// A TCP connection: the same type as Stream (the address decides the family).
using TcpStream = Stream;
/// A TCP listener: the same type as Listener.
using TcpListener = Listener;
/// A Unix-domain connection: the same type as Stream.
using UnixStream = Stream;
/// A Unix-domain listener: the same type as Listener.
using UnixListener = Listener;

}  // namespace shoal::net
