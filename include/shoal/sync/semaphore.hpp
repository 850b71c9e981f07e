// A counting semaphore as a scoped combinator: permits are held for a
// body's duration and given back on return, throw and cancellation.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "shoal/sync/detail/sync_ops.hpp"
#include "shoal/sync/mutex.hpp"

namespace shoal {

/// At most `permits` bodies (counting with_permits(n) as n) run at once.
/// Fair like Mutex. Destroying it while permits are out or someone waits
/// aborts with a message naming it.
class Semaphore {
 public:
  /// A semaphore of `permits` permits in all; `name` is how errors and the
  /// abort message refer to it (empty: by its address).
  explicit Semaphore(std::uint32_t permits, std::string name = {})
      : core_(permits, sync_object_name("Semaphore", name, reinterpret_cast<std::uintptr_t>(this))), name_(std::move(name)) {}
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;
  /// The number of permits in all, as given at construction.
  std::uint32_t permits() const noexcept { return core_.permits(); }
  /// Free right now (a snapshot, for diagnostics).
  std::uint32_t available() const noexcept { return core_.available(); }
  /// The name given at construction (empty if none), used in error messages.
  const std::string& name() const noexcept { return name_; }

 private:
  friend struct detail::SyncAccess;
  // SyncError{invalid_argument} naming this semaphore if n > permits():
  // such a wait could never end.
  detail::LockSpec spec(std::uint32_t n, const char* call) {
    if (n > core_.permits()) {
      throw SyncError(SyncError::Code::invalid_argument,
                      "shoal::" + std::string(call) + ": " + std::to_string(n) + " permits asked of " + core_.what() +
                          ", which has " + std::to_string(core_.permits()));
    }
    return {&core_, n, nullptr, nullptr};
  }
  detail::PermitCore core_;
  std::string name_;
};

namespace detail {
inline LockSpec SyncAccess::permits(Semaphore& s, std::uint32_t n, const char* call) { return s.spec(n, call); }
}  // namespace detail

/// Runs `body` holding `n` permits (given back on return, throw and
/// cancellation); returns its value.
/// Checkpoint: yes; with permits free it still yields once per budget.
/// Cancellation: the body did not run and no permit is held.
/// Thread-safety: any task; plain threads use blocking::with_permits.
/// Throws: Cancelled; SyncError{invalid_argument} if n > permits() (at the
///   call, before co_await); what the body throws; std::bad_alloc (the
///   wait's frame); std::logic_error when awaited outside a shoal task. No
///   self-deadlock check: permits are not tracked per task.
template <class F>
auto with_permits(Semaphore& s, std::uint32_t n, F body) {
  return detail::lock_call(detail::SyncAccess::permits(s, n, "with_permits"), std::move(body), "with_permits");
}
/// with_permits(s, 1, body). Checkpoint, Cancellation, Thread-safety,
/// Throws: as with_permits.
template <class F>
auto with_permit(Semaphore& s, F body) {
  return detail::lock_call(detail::SyncAccess::permits(s, 1, "with_permit"), std::move(body), "with_permit");
}
/// Runs `body` holding one permit if one is free right now; else
/// SyncError::Code::busy, body not run.
/// Checkpoint, Cancellation, Thread-safety, Throws: as with_try_lock.
template <class F>
auto with_try_permit(Semaphore& s, F body) {
  return detail::try_lock_call(detail::SyncAccess::permits(s, 1, "with_try_permit"), std::move(body), "with_try_permit");
}

namespace blocking {
/// with_permits and with_permit for plain threads: block the thread.
/// Checkpoint, Cancellation, Thread-safety: as blocking::with_lock.
/// Throws: SyncError{invalid_argument} if n > permits(); what the body
///   throws; std::logic_error on a runtime worker.
template <class F>
std::invoke_result_t<F&> with_permits(Semaphore& s, std::uint32_t n, F body) {
  return detail::blocking_locked(detail::SyncAccess::permits(s, n, "with_permits"), body, "with_permits");
}
/// blocking::with_permits(s, 1, body).
template <class F>
std::invoke_result_t<F&> with_permit(Semaphore& s, F body) {
  return detail::blocking_locked(detail::SyncAccess::permits(s, 1, "with_permit"), body, "with_permit");
}
}  // namespace blocking

}  // namespace shoal
