// parallel and race: structured fan-out over a fixed set of tasks.
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/task.hpp"
#include "shoal/scope/scope.hpp"

namespace shoal {

namespace detail {

template <class T>
using Value = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <class T>
Task<void> store_result(std::optional<Value<T>>& slot, Task<T> task) {
  if constexpr (std::is_void_v<T>) {
    co_await std::move(task);
    slot.emplace();
  } else {
    slot.emplace(co_await std::move(task));
  }
}

template <class... Ts>
struct AllSame : std::false_type {};
template <class T>
struct AllSame<T> : std::true_type {};
template <class T, class... Ts>
struct AllSame<T, T, Ts...> : AllSame<T, Ts...> {};

template <class T0, class... Ts>
using RaceResult = std::conditional_t<AllSame<T0, Ts...>::value, T0, std::variant<Value<T0>, Value<Ts>...>>;

template <class V>
struct RaceState {
  std::atomic<bool> settled{false};
  std::optional<V> value;
  std::exception_ptr error;
};

// Settles the race if first; a fault after the race was settled is reported
// as suppressed, never lost and never the race's result.
template <std::size_t I, class V, class T>
Task<void> race_child(RaceState<V>& st, Scope& s, Task<T> task) {
  std::exception_ptr error;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(task);
      if (!st.settled.exchange(true)) {
        st.value.emplace(std::in_place_index<I>);
        s.cancel();
      }
    } else {
      auto v = co_await std::move(task);
      if (!st.settled.exchange(true)) {
        st.value.emplace(std::in_place_index<I>, std::move(v));
        s.cancel();
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  if (!error) co_return;
  if (is_cancelled_exception(error)) std::rethrow_exception(error);
  if (!st.settled.exchange(true)) {
    st.error = error;
    s.cancel();
  } else {
    TaskRecord* f = co_await CurrentRecord{};
    report_suppressed_fault(f->sched, error);
  }
}

}  // namespace detail

/// Runs every task concurrently (children of one scope) and returns all
/// results in order; a void result is std::monostate.
/// Checkpoint: yes (as a scope: in a cancelled context no task starts).
/// Cancellation: every task has finished; the values of those that
///   completed are destroyed.
/// Thread-safety: any task; the tasks may run on any worker.
/// Throws: the first fault (it cancels the rest and is rethrown once all have
///   finished; later ones go to on_suppressed_fault); Cancelled.
template <class... Ts>
Task<std::tuple<detail::Value<Ts>...>> parallel(Task<Ts>... tasks) {
  std::tuple<std::optional<detail::Value<Ts>>...> slots;
  co_await scope([&](Scope& s) -> Task<void> {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (s.spawn(detail::store_result<Ts>(std::get<I>(slots), std::move(tasks))), ...);
    }(std::index_sequence_for<Ts...>{});
    co_return;
  });
  const bool complete = std::apply([](auto&... o) { return (o.has_value() && ...); }, slots);
  if (!complete) detail::raise_cancelled();  // cut off by an outer cancellation
  co_return std::apply([](auto&... o) { return std::tuple<detail::Value<Ts>...>(std::move(*o)...); }, slots);
}

/// The same over a vector of tasks of one type (results in the same order).
/// Checkpoint, Cancellation, Thread-safety, Throws: as above.
template <class T>
Task<std::vector<detail::Value<T>>> parallel(std::vector<Task<T>> tasks) {
  std::vector<std::optional<detail::Value<T>>> slots(tasks.size());
  co_await scope([&](Scope& s) -> Task<void> {
    for (std::size_t i = 0; i < tasks.size(); ++i) s.spawn(detail::store_result<T>(slots[i], std::move(tasks[i])));
    co_return;
  });
  std::vector<detail::Value<T>> out;
  out.reserve(slots.size());
  for (auto& o : slots) {
    if (!o) detail::raise_cancelled();
    out.push_back(std::move(*o));
  }
  co_return out;
}

/// Runs every task concurrently; the first to settle (value or fault) wins,
/// the others are cancelled and awaited before race returns (a loser's late
/// value is destroyed). So racing operations that take values loses values:
/// in `race(a.recv(), b.recv())` a loser may already have taken a value when
/// it is cancelled, and that value is dropped. To wait on several channels,
/// use `select` (channel/select.hpp): it completes exactly one operation. Same result types give that type (or void);
/// different ones a std::variant indexed by argument position (void is
/// std::monostate).
/// Checkpoint: yes (as a scope: in a cancelled context no task starts).
/// Cancellation: an outside cancellation before anyone settled: every task
///   has finished and Cancelled is thrown; once one settled, its result wins.
/// Thread-safety: any task; the tasks may run on any worker.
/// Throws: the winner's fault; Cancelled. Faults of losers after the race
///   settled go to on_suppressed_fault (never the race's result).
template <class T0, class... Ts>
Task<detail::RaceResult<T0, Ts...>> race(Task<T0> first, Task<Ts>... rest) {
  using V = std::variant<detail::Value<T0>, detail::Value<Ts>...>;
  detail::RaceState<V> st;
  co_await scope([&](Scope& s) -> Task<void> {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      s.spawn(detail::race_child<0>(st, s, std::move(first)));
      (s.spawn(detail::race_child<I + 1>(st, s, std::move(rest))), ...);
    }(std::index_sequence_for<Ts...>{});
    co_return;
  });
  if (st.error) std::rethrow_exception(st.error);
  if (!st.value) detail::raise_cancelled();  // nobody settled: an outer cancellation
  if constexpr (detail::AllSame<T0, Ts...>::value) {
    if constexpr (!std::is_void_v<T0>) {
      co_return std::visit([](auto& v) -> T0 { return std::move(v); }, *st.value);
    }
  } else {
    co_return std::move(*st.value);
  }
}

}  // namespace shoal
