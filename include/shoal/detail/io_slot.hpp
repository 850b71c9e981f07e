// The lazily registered reactor source of one fd, as a socket or pipe holds
// it. The source itself (readiness cache, waiters) is private to the
// reactor (src/runtime/driver/io/io_source.hpp).
#pragma once

#include "shoal/version.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace shoal::detail {

struct IoSource;

/// The lazily registered source of one fd. A reader and a writer may reach
/// their first operation at the same moment on two workers: exactly one of
/// them registers (a second add of the same fd would fail), the other waits
/// the few microseconds that takes. Not for use while being moved.
/// Its word is a std::atomic, not the sync shim's, so the model and Relacy
/// tests cannot see it: only TSan checks it.
class IoSlot {
 public:
  IoSlot() noexcept = default;
  IoSlot(IoSlot&& o) noexcept : v_(o.v_.exchange(0, std::memory_order_acq_rel)) {}
  /// The caller released this slot first.
  IoSlot& operator=(IoSlot&& o) noexcept {
    v_.store(o.v_.exchange(0, std::memory_order_acq_rel), std::memory_order_release);
    return *this;
  }
  IoSlot(const IoSlot&) = delete;
  IoSlot& operator=(const IoSlot&) = delete;
  /// The source, registering `fd` with `ready` at the first call (see
  /// io_register); `*registered`, if given, is set when this call did.
  IoSource* get(int fd, std::uint32_t ready, bool* registered = nullptr) {
    const std::uintptr_t v = v_.load(std::memory_order_acquire);
    if (v > kRegistering) return reinterpret_cast<IoSource*>(v);
    return get_slow(fd, ready, registered);
  }
  /// Deregisters the source if there is one (before the fd is closed).
  void release() noexcept;

 private:
  static constexpr std::uintptr_t kRegistering = 1;
  IoSource* get_slow(int fd, std::uint32_t ready, bool* registered);
  std::atomic<std::uintptr_t> v_{0};
};

}  // namespace shoal::detail
