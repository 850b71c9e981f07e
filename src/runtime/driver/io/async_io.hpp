// The readiness loop (IoOp, shoal/detail/io_op.hpp) for operations whose
// syscall is a lambda that returns its result and may throw: UDP, accept,
// the signal pipe, pidfds. Streams use IoOp directly, with no frame.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "shoal/detail/io_op.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/task.hpp"
#include "src/runtime/driver/io/io_source.hpp"

namespace shoal::detail {

/// What an operation's attempt sees and may ask of the loop.
struct IoAttempt {
  bool back_off = false;  // set by the attempt: try again after a pause, not an edge
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
/// EAGAIN (EINTR it retries itself); it throws on an error.
/// Checkpoint: yes. Cancellation: nothing was done. Throws: Cancelled, what
/// `attempt` throws. `kBacksOff`: the attempt may ask for a pause (only then
/// is the back-off in the frame).
template <bool kBacksOff = false, class Attempt, class R = typename IoResultOf<Attempt>::type>
Task<R> async_io(IoSource* s, std::uint32_t interest, Attempt attempt) {
  using Result = std::conditional_t<std::is_void_v<R>, bool, R>;
  struct Op : IoOp {
    Op(IoSource* src, std::uint32_t bits, Attempt* fn) noexcept
        : IoOp(src, static_cast<std::uint8_t>(bits), &Op::thunk, {}), attempt(fn) {}
    Attempt* attempt;
    std::optional<Result> result;
    std::exception_ptr error;
    bool back_off = false;
    static bool thunk(IoOp& base) noexcept {
      Op& op = static_cast<Op&>(base);
      IoAttempt a;
      try {
        if (auto r = (*op.attempt)(a)) {
          if constexpr (std::is_void_v<R>) {
            op.result.emplace(true);
          } else {
            op.result.emplace(std::move(*r));
          }
          return true;
        }
      } catch (...) {
        op.error = std::current_exception();
        return true;
      }
      if (a.back_off) op.back_off = true;
      return a.back_off;
    }
  };
  [[maybe_unused]] std::uint8_t backed_off = 0;
  for (;;) {
    Op op(s, interest, &attempt);
    co_await op;
    if (op.end() == IoOp::End::cancelled) detail::raise_cancelled();
    if (op.error) std::rethrow_exception(op.error);
    if constexpr (kBacksOff) {
      if (op.back_off) {  // e.g. accept out of descriptors: the backlog keeps the connection
        co_await io_back_off(backed_off);
        continue;
      }
    }
    if constexpr (std::is_void_v<R>) {
      co_return;
    } else {
      co_return std::move(*op.result);
    }
  }
}

}  // namespace shoal::detail
