// Errors of the sync library, and the expected-like result of the calls that
// may decline to run their body (with_try_lock, with_lock_timeout).
#pragma once

#include "shoal/version.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace shoal {

/// What the sync library throws: for misuse (a self-deadlock, an impossible
/// request), for a failed Once, and from SyncResult::value when the body did
/// not run. code() says which; what() names the call and, for misuse and
/// Once, the object.
class SyncError : public std::runtime_error {
 public:
  /// Why a sync call failed or declined to run its body:
  /// - `out_of_memory`: not used by shoal today (out of memory throws std::bad_alloc);
  /// - `init_failed`: the init of a Once threw; every later once_do on it throws
  ///   this, and init never runs again;
  /// - `busy`: a with_try_... call found the lock or permits taken (body not run);
  /// - `self_deadlock`: the task or thread holding a Mutex asked for it again,
  ///   or one holding an RwLock's write lock asked for either lock (it would
  ///   wait forever);
  /// - `timed_out`: with_lock_timeout gave up before the lock was free (body not run);
  /// - `invalid_argument`: an impossible request, e.g. more permits than a
  ///   Semaphore has.
  enum class Code { out_of_memory, init_failed, busy, self_deadlock, timed_out, invalid_argument };
  /// An error with `code`; `what` is the message what() returns.
  SyncError(Code code, const std::string& what) : std::runtime_error(what), code_(code) {}
  /// Why the call failed, for code that handles the cases differently.
  Code code() const noexcept { return code_; }

 private:
  Code code_;
};

/// The body's value, or why the body did not run (SyncError::Code::busy or
/// SyncError::Code::timed_out). A `void` body gives SyncResult<void>.
template <class T>
class [[nodiscard]] SyncResult {
 public:
  /// A result without a value: the body did not run because of `error`.
  SyncResult(SyncError::Code error) : v_(std::in_place_index<1>, error) {}  // NOLINT: implicit by design
  /// A result holding the value constructed from `a...`.
  template <class... A>
  explicit SyncResult(std::in_place_t, A&&... a) : v_(std::in_place_index<0>, std::forward<A>(a)...) {}

  /// True if the body ran and this holds its value.
  bool has_value() const noexcept { return v_.index() == 0; }
  /// Same as has_value().
  explicit operator bool() const noexcept { return has_value(); }
  /// Throws SyncError (naming the code) when the body did not run.
  T& value() & {
    check();
    return std::get<0>(v_);
  }
  /// Throws SyncError (naming the code) when the body did not run.
  const T& value() const& {
    check();
    return std::get<0>(v_);
  }
  /// Moves the value out; throws SyncError (naming the code) when the body did not run.
  T&& value() && {
    check();
    return std::get<0>(std::move(v_));
  }
  /// Same as value(): throws SyncError when the body did not run.
  T& operator*() & { return value(); }
  /// Same as value(): throws SyncError when the body did not run.
  const T& operator*() const& { return value(); }
  /// Same as std::move(*this).value(): throws SyncError when the body did not run.
  T&& operator*() && { return std::move(*this).value(); }
  /// Access to the value's members; throws SyncError when the body did not run.
  T* operator->() { return &value(); }
  /// Access to the value's members; throws SyncError when the body did not run.
  const T* operator->() const { return &value(); }
  /// Meaningful only without a value.
  SyncError::Code error() const noexcept { return std::get<1>(v_); }

 private:
  void check() const {
    if (!has_value()) throw SyncError(error(), "shoal::SyncResult::value: the body did not run");
  }
  std::variant<T, SyncError::Code> v_;
};

/// Whether a `void` body ran, or why it did not (SyncError::Code::busy or
/// SyncError::Code::timed_out).
template <>
class [[nodiscard]] SyncResult<void> {
 public:
  /// A result saying the body did not run because of `error`.
  SyncResult(SyncError::Code error) : ok_(false), error_(error) {}  // NOLINT: implicit by design
  /// A result saying the body ran.
  explicit SyncResult(std::in_place_t) : ok_(true) {}
  /// True if the body ran.
  bool has_value() const noexcept { return ok_; }
  /// Same as has_value().
  explicit operator bool() const noexcept { return ok_; }
  /// Throws SyncError (naming the code) when the body did not run; else does nothing.
  void value() const {
    if (!ok_) throw SyncError(error_, "shoal::SyncResult::value: the body did not run");
  }
  /// Why the body did not run; meaningful only without a value.
  SyncError::Code error() const noexcept { return error_; }

 private:
  bool ok_;
  SyncError::Code error_ = SyncError::Code::busy;
};

}  // namespace shoal
