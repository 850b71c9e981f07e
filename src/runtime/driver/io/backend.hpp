// The reactor seam: the one small interface every I/O backend implements.
// Workers park inside `wait` (whoever holds the driver) and are woken by
// `wake`, so parking and I/O readiness share one blocking call.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

namespace shoal::detail {
class CompletionOp;
struct TaskRecord;
}  // namespace shoal::detail

namespace shoal::detail::io {

enum Interest : std::uint32_t { readable = 1, writable = 2 };
/// A direction was closed (the peer's end of stream: reads; an error or a
/// hang-up: both): final, never cleared, so an operation in that direction
/// always tries its syscall afterwards (the end of a stream that came with
/// the last data is still there after a short read drained the data).
inline constexpr std::uint32_t read_closed = 4, write_closed = 8;
/// The closed bit of each direction in `interest`.
constexpr std::uint32_t closed(std::uint32_t interest) noexcept { return (interest & (readable | writable)) << 2; }

/// In an Event's `ready`: the token is a CompletionOp whose operation the
/// kernel finished (its result is stored in it), not a source.
inline constexpr std::uint32_t completed = 16;

struct Event {
  void* token;           // what was registered with `add`, or a CompletionOp
  std::uint32_t ready;   // Interest and closed bits; an error or hang-up sets all; or `completed`
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const noexcept = 0;
  /// Registers `fd` once for its lifetime (edge-triggered where supported).
  virtual void add(int fd, std::uint32_t interest, void* token) = 0;
  virtual void remove(int fd) noexcept = 0;
  /// True for a backend that reports a readiness once and must be re-armed
  /// (`rearm`) before it reports that direction again (poll(2)). Edge-
  /// triggered epoll needs nothing.
  virtual bool needs_rearm() const noexcept { return false; }
  virtual void rearm(int /*fd*/, std::uint32_t /*interest*/, void* /*token*/) {}
  /// True for a backend that reports a child's exit by its pid (kqueue's
  /// EVFILT_PROC), for where there is no pidfd to watch as an fd.
  virtual bool watches_processes() const noexcept { return false; }
  /// Reports `pid`'s exit as `readable | read_closed` for `token`, once. A
  /// child that is gone already (ESRCH) registers nothing: the caller's
  /// first attempt reaps it. Throws std::system_error otherwise.
  virtual void add_process(int /*pid*/, void* /*token*/) {}
  virtual void remove_process(int /*pid*/) noexcept {}
  /// True for a backend that runs operations itself (io_uring): `submit`
  /// and `cancel` work, and `wait` reports their completions.
  virtual bool runs_operations() const noexcept { return false; }
  /// Hands `op` to the kernel; its completion comes out of a later `wait`
  /// as an Event{&op, completed}, and `op` must live until then. If `f` is
  /// cancelled by the time it is queued (read under the submission lock, so
  /// a canceller that came earlier is seen), its cancel is queued behind it.
  /// False if it could not be queued (the submission queue stayed full:
  /// the kernel refused to take entries); once queued it is handed over,
  /// now or (a failed submit leaves it) with the next submit or wait.
  virtual bool submit(CompletionOp& /*op*/, const TaskRecord* /*f*/) noexcept { return false; }
  /// Asks the kernel to cancel `op` (it then completes with -ECANCELED, or
  /// with its result if it had finished). Any thread; handed over before it
  /// returns, so a later reuse of `op`'s memory cannot be mistaken for it.
  virtual void cancel(const CompletionOp& /*op*/) noexcept {}
  /// Blocks until an event, a `wake`, or `timeout` (negative: forever).
  /// Returns the number of events written to `out`.
  virtual std::size_t wait(std::chrono::nanoseconds timeout, std::span<Event> out) = 0;
  /// Makes a concurrent or the next `wait` return. Any thread;
  /// async-signal-safe except over libkqueue (its kevent takes locks).
  virtual void wake() noexcept = 0;
};

/// The backend named by `SHOAL_IO_BACKEND` (epoll, kqueue, uring, poll:
/// those built), else the platform default. `uring` falls back to epoll,
/// with one line on stderr naming why, where the kernel refuses io_uring.
/// Throws std::invalid_argument naming the variable for an unknown value.
std::unique_ptr<Backend> make_backend();

}  // namespace shoal::detail::io
