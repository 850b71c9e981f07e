// Frame allocation hooks: every coroutine frame shoal creates (and the
// runtime's own growable structures: the timer heap, reactor sources) is
// allocated through them while they are installed.
#pragma once

#include "shoal/version.hpp"

#include <cstddef>

namespace shoal::testing {

/// When installed, every frame allocation and free calls these; `allocate`
/// may throw std::bad_alloc to simulate exhaustion.
struct FrameHooks {
  /// Returns `size` bytes or throws std::bad_alloc.
  void* (*allocate)(std::size_t size, void* ctx);
  /// Frees `p`, which `allocate` returned for `size` bytes.
  void (*deallocate)(void* p, std::size_t size, void* ctx) noexcept;
  /// Passed back to both functions.
  void* ctx;
};

/// Installs `hooks` (nullptr restores the default). Not thread-safe against
/// allocations in flight: install while no runtime is running.
void set_frame_hooks(const FrameHooks* hooks) noexcept;

}  // namespace shoal::testing
