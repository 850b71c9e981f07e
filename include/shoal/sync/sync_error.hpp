// Errors of the sync library, and the expected-like result of the calls that
// may decline to run their body (with_try_lock, with_lock_timeout).
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace shoal {

class SyncError : public std::runtime_error {
 public:
  enum class Code { out_of_memory, init_failed, busy, self_deadlock, timed_out, invalid_argument };
  SyncError(Code code, const std::string& what) : std::runtime_error(what), code_(code) {}
  Code code() const noexcept { return code_; }

 private:
  Code code_;
};

/// The body's value, or why the body did not run (SyncError::Code::busy or
/// ::timed_out). A `void` body gives SyncResult<void>.
template <class T>
class [[nodiscard]] SyncResult {
 public:
  SyncResult(SyncError::Code error) : v_(std::in_place_index<1>, error) {}  // NOLINT: implicit by design
  template <class... A>
  explicit SyncResult(std::in_place_t, A&&... a) : v_(std::in_place_index<0>, std::forward<A>(a)...) {}

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  /// Throws SyncError (naming the code) when the body did not run.
  T& value() & {
    check();
    return std::get<0>(v_);
  }
  const T& value() const& {
    check();
    return std::get<0>(v_);
  }
  T&& value() && {
    check();
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  /// Meaningful only without a value.
  SyncError::Code error() const noexcept { return std::get<1>(v_); }

 private:
  void check() const {
    if (!has_value()) throw SyncError(error(), "shoal::SyncResult::value: the body did not run");
  }
  std::variant<T, SyncError::Code> v_;
};

template <>
class [[nodiscard]] SyncResult<void> {
 public:
  SyncResult(SyncError::Code error) : ok_(false), error_(error) {}  // NOLINT: implicit by design
  explicit SyncResult(std::in_place_t) : ok_(true) {}
  bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  void value() const {
    if (!ok_) throw SyncError(error_, "shoal::SyncResult::value: the body did not run");
  }
  SyncError::Code error() const noexcept { return error_; }

 private:
  bool ok_;
  SyncError::Code error_ = SyncError::Code::busy;
};

}  // namespace shoal
