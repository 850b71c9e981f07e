// Coroutine frame allocation: every shoal frame goes through here so that
// task sets can place frames in a pmr resource and tests can fail the N-th
// allocation and count live frames (shoal/testing/frame_hooks.hpp).
#pragma once

#include "shoal/version.hpp"

#include <cstddef>
#include <memory_resource>

namespace shoal::detail {

/// Frames created by the current thread while a guard is alive come from
/// `resource`. Only held across the synchronous call that creates a frame.
class FrameResourceGuard {
 public:
  explicit FrameResourceGuard(std::pmr::memory_resource* resource) noexcept;
  ~FrameResourceGuard();
  FrameResourceGuard(const FrameResourceGuard&) = delete;
  FrameResourceGuard& operator=(const FrameResourceGuard&) = delete;

 private:
  std::pmr::memory_resource* previous_;
};

void* frame_allocate(std::size_t size);
void frame_deallocate(void* p, std::size_t size) noexcept;
/// A block from the calling thread's frame cache (the heap past its size
/// classes, or under ASan), never from a FrameResourceGuard's resource or
/// the test hooks; freed with frame_deallocate. For a library's own
/// memory (nghttp2's), whose failure paths are not ours to sweep.
/// Throws: std::bad_alloc.
void* block_allocate(std::size_t size);

/// A std allocator over frame_allocate, for the runtime's own growable
/// structures (the timer heap), so allocation-failure tests reach them too.
template <class T>
struct FrameAllocator {
  using value_type = T;
  FrameAllocator() noexcept = default;
  template <class U>
  FrameAllocator(const FrameAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(frame_allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { frame_deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const FrameAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace shoal::detail
