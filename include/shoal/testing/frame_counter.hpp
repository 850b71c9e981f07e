// Counts live coroutine frames and can fail the N-th allocation (once, or
// from then on): leak checks and allocation-failure sweeps.
#pragma once

#include <atomic>
#include <cstddef>
#include <new>

#include "shoal/testing/frame_hooks.hpp"

namespace shoal::testing {

/// Installs frame hooks (set_frame_hooks) that count allocations and can
/// fail chosen ones with std::bad_alloc; the destructor uninstalls them.
/// One at a time; create and destroy it while no runtime is running.
class FrameCounter {
 public:
  FrameCounter() {
    hooks_ = FrameHooks{&FrameCounter::alloc, &FrameCounter::dealloc, this};
    set_frame_hooks(&hooks_);
  }
  ~FrameCounter() { set_frame_hooks(nullptr); }
  FrameCounter(const FrameCounter&) = delete;
  FrameCounter& operator=(const FrameCounter&) = delete;

  /// Allocations made through the hooks and not yet freed (0 when nothing leaked).
  long live() const noexcept { return live_.load(); }
  /// Allocation attempts since construction, failed ones included.
  long allocations() const noexcept { return count_.load(); }
  /// Allocations this counter failed (threw std::bad_alloc for).
  long failures() const noexcept { return failures_.load(); }

  /// Fails the n-th allocation from now (1 = the next one); with `forever`,
  /// that one and every later one.
  void fail_at(long n, bool forever = false) noexcept {
    fail_forever_.store(forever);
    fail_at_.store(count_.load() + n);
  }
  /// Cancels fail_at: later allocations succeed.
  void stop_failing() noexcept { fail_at_.store(0); }

 private:
  static void* alloc(std::size_t size, void* ctx) {
    auto* self = static_cast<FrameCounter*>(ctx);
    long n = self->count_.fetch_add(1) + 1;
    long at = self->fail_at_.load();
    if (at != 0 && (n == at || (self->fail_forever_.load() && n > at))) {
      self->failures_.fetch_add(1);
      throw std::bad_alloc();
    }
    void* p = ::operator new(size);
    self->live_.fetch_add(1);
    return p;
  }
  static void dealloc(void* p, std::size_t size, void* ctx) noexcept {
    static_cast<FrameCounter*>(ctx)->live_.fetch_sub(1);
    (void)size;
    ::operator delete(p);
  }

  FrameHooks hooks_{};
  std::atomic<long> live_{0};
  std::atomic<long> count_{0};
  std::atomic<long> failures_{0};
  std::atomic<long> fail_at_{0};
  std::atomic<bool> fail_forever_{false};
};

}  // namespace shoal::testing
