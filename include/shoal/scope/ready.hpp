// Scope::start_ready: start a child and wait until it says it is ready (a
// server bound, a connection made), getting what it hands over. Included
// by scope.hpp.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "shoal/scope/scope.hpp"
#include "shoal/sync/event.hpp"

namespace shoal {

namespace detail {

template <class T>
struct ReadyState {
  shim::mutex mu;
  bool settled = false;
  std::optional<Stored<T>> value;
  std::exception_ptr error;
  Event event;

  template <class... V>
  bool settle_value(V&&... v) {
    {
      shim::lock_guard<shim::mutex> g(mu);
      if (settled) return false;
      if constexpr (std::is_void_v<T>) {
        value.emplace(true);
      } else {
        value.emplace(std::forward<V>(v)...);
      }
      settled = true;
    }
    event.set();
    return true;
  }
  void settle_error(std::exception_ptr e) {
    {
      shim::lock_guard<shim::mutex> g(mu);
      if (settled) return;
      error = std::move(e);
      settled = true;
    }
    event.set();
  }
};

template <class T, class F, class... Args>
Task<void> ready_child(std::shared_ptr<ReadyState<T>> st, F fn, Args... args);

}  // namespace detail

/// The start_ready handshake, handed to the child. Signal once; later calls
/// are ignored; never waits. Thread-safety: the child task.
template <class T>
class Ready {
 public:
  /// Signals the value built from `v...` (nothing for Ready<void>): start_ready
  /// returns it. Throws what T's constructor throws (then nothing is signalled).
  template <class... V>
  void operator()(V&&... v) {
    st_->settle_value(std::forward<V>(v)...);
  }

 private:
  template <class U, class F, class... Args>
  friend Task<void> detail::ready_child(std::shared_ptr<detail::ReadyState<U>>, F, Args...);
  explicit Ready(std::shared_ptr<detail::ReadyState<T>> st) noexcept : st_(std::move(st)) {}
  std::shared_ptr<detail::ReadyState<T>> st_;
};

namespace detail {
template <class T, class F, class... Args>
Task<void> ready_child(std::shared_ptr<ReadyState<T>> st, F fn, Args... args) {
  Ready<T> ready(st);
  std::exception_ptr error;
  try {
    co_await std::invoke(fn, ready, args...);
  } catch (...) {
    error = std::current_exception();
  }
  if (error) {
    st->settle_error(error);
    std::rethrow_exception(error);
  }
  st->settle_error(std::make_exception_ptr(
      std::logic_error("shoal::Scope::start_ready: the child finished without signalling ready")));
}
}  // namespace detail

template <class T, class F, class... Args>
Task<T> Scope::start_ready(F fn, Args... args) {
  detail::TaskRecord* f = co_await detail::CurrentRecord{};
  if (f != nullptr && f->cancelled()) detail::raise_cancelled();  // a cancel point before any side effect
  auto st = std::make_shared<detail::ReadyState<T>>();
  launch_task(detail::ready_child<T>(st, std::move(fn), std::move(args)...), 0, nullptr,
              {detail::callable_origin<F>(), 0, {}});
  try {
    co_await st->event.wait();
  } catch (const Cancelled&) {
    // A child that faults before `ready` cancels this scope, and the cancel
    // can reach this wait first: the caller is owed the fault, not Cancelled.
    if (!st->event.is_set() || !st->error) throw;
  }
  if (st->error) std::rethrow_exception(st->error);
  if constexpr (!std::is_void_v<T>) co_return std::move(*st->value);
}

}  // namespace shoal
