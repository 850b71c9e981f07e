// Signals as awaitables: the usual trigger for a graceful shutdown.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>

#include "shoal/runtime/task.hpp"

/// POSIX signals as awaitables (wait()): the usual trigger for a graceful shutdown.
namespace shoal::signal {

/// Up to 16 signal numbers: `wait({SIGINT, SIGTERM})`. Built from the
/// numbers themselves, not a std::initializer_list: g++ 12 cannot compile a
/// braced list inside a co_await expression in a coroutine.
class SignalSet {
 public:
  /// The set of `signals` (not checked here: wait() rejects bad numbers).
  template <std::convertible_to<int>... S>
    requires(sizeof...(S) <= 16)
  SignalSet(S... signals) noexcept : n_(sizeof...(S)), s_{static_cast<int>(signals)...} {}
  /// The first signal number, for iterating over the set.
  const int* begin() const noexcept { return s_.data(); }
  /// One past the last signal number.
  const int* end() const noexcept { return s_.data() + n_; }
  /// How many signal numbers the set holds (0 to 16).
  std::size_t size() const noexcept { return n_; }

 private:
  std::size_t n_;
  std::array<int, 16> s_;
};

/// Waits until one of `signals` arrives and returns its number.
/// The first wait for a signal installs shoal's handler for it, process-wide
/// and for good (its default action, e.g. terminating on SIGINT, no longer
/// happens), at the call itself, before the Task is awaited. From then on a
/// delivery that arrives while no task waits is kept (up to the internal
/// pipe's capacity: 65,536 deliveries by default on Linux) and returned by
/// the next wait that asks for it; each delivery goes to one wait.
/// Checkpoint: yes (cancellation is checked before any delivery is taken);
///   with a delivery pending it returns at once, without a budget yield.
/// Cancellation: no delivery was consumed.
/// Thread-safety: any task, on any runtime; several may wait at once (but
///   waits for different sets can race: one may drain a delivery another
///   wants just as that one goes back to sleep, and it then stays asleep
///   until the next delivery; one wait per process for all the signals it
///   handles avoids this).
/// Throws: std::invalid_argument (at the call) for an empty set, a number
///   out of range, or SIGKILL/SIGSTOP (which cannot be caught), naming it;
///   std::system_error if the pipe or handler cannot be set up; Cancelled.
Task<int> wait(SignalSet signals);

}  // namespace shoal::signal
