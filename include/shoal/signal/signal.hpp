// Signals as awaitables: the usual trigger for a graceful shutdown.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>

#include "shoal/runtime/task.hpp"

namespace shoal::signal {

/// Up to 16 signal numbers: `wait({SIGINT, SIGTERM})`. Built from the
/// numbers themselves, not a std::initializer_list: g++ 12 cannot compile a
/// braced list inside a co_await expression in a coroutine.
class SignalSet {
 public:
  template <std::convertible_to<int>... S>
    requires(sizeof...(S) <= 16)
  SignalSet(S... signals) noexcept : n_(sizeof...(S)), s_{static_cast<int>(signals)...} {}
  const int* begin() const noexcept { return s_.data(); }
  const int* end() const noexcept { return s_.data() + n_; }
  std::size_t size() const noexcept { return n_; }

 private:
  std::size_t n_;
  std::array<int, 16> s_;
};

/// Waits until one of `signals` arrives and returns its number.
/// The first wait for a signal installs shoal's handler for it, process-wide
/// and for good (its default action, e.g. terminating on SIGINT, no longer
/// happens). From then on no delivery is lost: one that arrives while no
/// task waits is kept and returned by the next wait that asks for it.
/// Checkpoint: yes. Throws std::invalid_argument for an empty set, a number
/// out of range, or SIGKILL/SIGSTOP (which cannot be caught), naming it.
Task<int> wait(SignalSet signals);

}  // namespace shoal::signal
