// The exceptions shoal throws: cancellation (not a std::exception) and the
// ordinary faults the runtime itself reports.
#pragma once

#include "shoal/detail/raise.hpp"
#include "shoal/version.hpp"

#include <exception>
#include <stdexcept>
#include <string>

namespace shoal {

/// Thrown at a checkpoint when the enclosing scope was cancelled.
/// Deliberately NOT derived from std::exception, so that
/// `catch (const std::exception&)` cannot swallow it. A scope absorbs the
/// Cancelled it requested itself and lets any other pass upward.
struct Cancelled final {
  /// "shoal::Cancelled", for handlers and logs that print exceptions.
  const char* what() const noexcept { return "shoal::Cancelled"; }
};

/// A scope whose body returns a value was cancelled (by `Scope::cancel()`)
/// before the body produced that value. An ordinary fault.
class ScopeCancelled : public std::runtime_error {
 public:
  ScopeCancelled() : std::runtime_error("shoal: scope cancelled before the body produced its value") {}
};

/// A `JoinHandle`'s child was cut off by a cancellation (it ended with
/// `Cancelled`) before it produced its value, and the awaiter is not itself
/// cancelled (say, it awaits inside `shielded`). An ordinary fault: the
/// cancellation belongs to the child's context, never to the awaiter's.
class ChildCancelled : public std::runtime_error {
 public:
  ChildCancelled() : std::runtime_error("shoal: the awaited child was cancelled before it produced its value") {}
};

/// True when `e` holds a `shoal::Cancelled`. For `catch (...)` handlers that
/// must let cancellation continue: `if (is_cancellation(std::current_exception())) throw;`
bool is_cancellation(const std::exception_ptr& e) noexcept;

}  // namespace shoal
