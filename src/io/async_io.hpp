// The one readiness loop every I/O operation runs (the shape of Tokio's
// Registration::async_io): wait until the cached readiness says the
// syscall may succeed, try it, and on EAGAIN drop the readiness and wait
// for the next edge. Sockets, pipes, the signal pipe and pidfds all go
// through it; an operation supplies only its syscall.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "shoal/runtime/task.hpp"
#include "src/io/io_source.hpp"

namespace shoal::detail {

/// What an operation's attempt sees and may ask of the loop.
struct IoAttempt {
  std::uint32_t seen = 0;  // the source's state, read before this attempt
  bool woken = false;      // a readiness event (not a retry) led to this attempt
  bool back_off = false;   // set by the attempt: try again after a pause, not an edge
  bool yield = true;       // cleared by the attempt: no budget yield after it
  bool drained = false;    // set by a successful attempt: see drain()
  std::uint8_t backed_off = 0;  // pauses so far (each doubles)

  /// The attempt succeeded but left its direction not ready (a short read
  /// drained the socket, a short write filled it): the next call waits for
  /// an edge instead of making a syscall that would say EAGAIN.
  void drain() noexcept { drained = true; }
};

/// No limit on an operation's waits: nothing in its frame.
struct NoIdleLimit {};

/// A limit on each wait of one operation (Stream::set_idle_timeout).
struct IdleLimit {
  std::chrono::milliseconds limit;
  const char* op;  // named in the error
  /// Throws the error for `fd`'s operation `op` having waited `limit` (it must throw).
  void (*expired)(int fd, const char* op, std::chrono::milliseconds limit);
};

/// Sleeps the `times`-th back-off pause (5 ms doubling to 640 ms) and counts
/// it. Its own frame: operations that never back off carry no sleep.
Task<void> io_back_off(std::uint8_t& times);

template <class Attempt, class Made = std::invoke_result_t<Attempt&, IoAttempt&>>
struct IoResultOf {
  using type = typename Made::value_type;  // a std::optional
};
template <class Attempt>
struct IoResultOf<Attempt, bool> {
  using type = void;
};

/// `attempt(a)` makes the syscall: it returns the result (a std::optional
/// holding it, or true for an operation without one), or nullopt/false on
/// EAGAIN (EINTR it retries itself); it throws on an error. Before the
/// first side effect the task's cancellation is checked; after an attempt
/// that succeeds without waiting the task yields once per budget.
/// Checkpoint: yes. Cancellation: nothing was done. Throws: Cancelled,
/// std::bad_alloc (an idle limit's timer), what `attempt` and `idle.expired` throw.
/// `kBacksOff`: the attempt may ask for a pause (only then is the back-off
/// in the frame).
template <bool kBacksOff = false, class Limit, class Attempt, class R = typename IoResultOf<Attempt>::type>
Task<R> async_io(IoSource* s, std::uint32_t interest, Limit idle, Attempt attempt) {
  io_check_cancelled();
  IoAttempt a;
  for (;;) {
    a.seen = s->state.load(std::memory_order_acquire);
    // Cached readiness is trusted: a clear bit means an attempt found
    // nothing (EAGAIN, or a short read) and no event came since, so the
    // syscall would only say EAGAIN. A source starts out ready (io_register);
    // once its direction is closed, every attempt is made.
    if ((a.seen & (interest | io::closed(interest))) != 0) {
      if (auto r = attempt(a)) {
        if (a.drained) io_clear(s, a.seen, interest);
        if (a.yield) co_await YieldIfOutOfBudget{};
        if constexpr (std::is_void_v<R>) {
          co_return;
        } else {
          co_return std::move(*r);
        }
      }
      a.woken = false;
      if constexpr (kBacksOff) {
        if (a.back_off) {  // e.g. accept out of descriptors: the backlog keeps the connection
          a.back_off = false;
          co_await io_back_off(a.backed_off);
          continue;
        }
      }
      if (!io_clear(s, a.seen, interest)) continue;  // an event came in meanwhile: try again
    }
    if constexpr (std::is_same_v<Limit, IdleLimit>) {
      if (!co_await IoReadyWithinAwaiter(s, interest, idle.limit)) idle.expired(s->fd, idle.op, idle.limit);
    } else {
      co_await IoReadyAwaiter(s, interest);
    }
    a.woken = true;
  }
}

}  // namespace shoal::detail
