// Cell<T>: a value only ever touched under its lock, by replacing it.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "shoal/detail/view_traits.hpp"
#include "shoal/sync/mutex.hpp"

namespace shoal {

/// A value only ever touched under its lock, by replacing it (with_cell): no
/// task can reach it unguarded. What a T points to is not covered, so T that
/// only points at data elsewhere is refused at compile time.
template <class T>
class Cell {
  static_assert(!std::is_reference_v<T>, "shoal::Cell<T>: T must not be a reference (the cell would guard the reference, not the object)");
  static_assert(!std::is_pointer_v<T>, "shoal::Cell<T>: T must not be a pointer (the cell would guard the pointer, not the pointee)");
  static_assert(!detail::IsStringView<T>::value, "shoal::Cell<T>: T must not be a std::string_view (it views data the cell does not guard); use std::string");
  static_assert(!detail::IsSpan<T>::value, "shoal::Cell<T>: T must not be a std::span (it views data the cell does not guard); use a container");
  static_assert(!detail::IsRefWrapper<T>::value, "shoal::Cell<T>: T must not be a std::reference_wrapper (the cell would guard the reference, not the object)");

 public:
  /// A cell holding `value`. `name` names the cell's lock in errors (empty:
  /// by its address).
  explicit Cell(T value = T{}, std::string name = {}) : m_(std::move(name)), value_(std::move(value)) {}
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

 private:
  template <class U, class F>
  friend Task<void> with_cell(Cell<U>& cell, F fn);
  template <class U, class F>
  friend void blocking_with_cell(Cell<U>& cell, F& fn);
  // fn's argument: a copy when T is copyable, so a throwing fn leaves the
  // value as it was; a move-only T is moved in (and lost if fn throws).
  T take() {
    if constexpr (std::is_copy_constructible_v<T>) {
      return value_;
    } else {
      return std::move(value_);
    }
  }
  Mutex m_;
  T value_;
};

/// Replaces the value with `fn(value)` (fn returns T, or Task<T>) under the
/// cell's lock. `fn` gets a copy when T is copyable, else the moved value.
/// Checkpoint: yes (as with_lock: cancellation first; a yield once per budget).
/// Cancellation: before the lock, fn did not run and the value is unchanged;
///   a Task fn cancelled inside leaves a copyable T unchanged and a
///   move-only T lost (moved-from), as a throw does.
/// Thread-safety: any task; plain threads use blocking::with_cell.
/// Throws: Cancelled; what `fn` throws (value unchanged for a copyable T,
///   lost for a move-only one); SyncError{self_deadlock} for a nested
///   with_cell on the same cell; std::bad_alloc; std::logic_error when
///   awaited outside a shoal task.
template <class T, class F>
Task<void> with_cell(Cell<T>& cell, F fn) {
  static_assert(std::is_invocable_v<F&, T>, "shoal::with_cell: fn must be callable as fn(T) returning T or Task<T>");
  auto body = [&]() -> Task<void> {
    using R = std::invoke_result_t<F&, T>;
    if constexpr (detail::IsTask<R>::value) {
      cell.value_ = co_await std::invoke(fn, cell.take());
    } else {
      cell.value_ = std::invoke(fn, cell.take());
    }
  };
  co_await with_lock(cell.m_, body);
}

template <class T, class F>
void blocking_with_cell(Cell<T>& cell, F& fn) {
  shoal::blocking::with_lock(cell.m_, [&] { cell.value_ = std::invoke(fn, cell.take()); });
}

namespace blocking {
/// with_cell for plain threads: blocks the thread; `fn` must return T.
/// Checkpoint, Cancellation, Thread-safety: as blocking::with_lock.
/// Throws: what `fn` throws (value as in with_cell); SyncError{self_deadlock};
///   std::logic_error on a runtime worker.
template <class T, class F>
void with_cell(Cell<T>& cell, F fn) {
  blocking_with_cell(cell, fn);
}
}  // namespace blocking

}  // namespace shoal
