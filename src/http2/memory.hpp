// nghttp2's memory, from the runtime's per-thread block caches.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstring>
#include <new>

#include "shoal/detail/frame_alloc.hpp"

namespace shoal::http2::detail {

/// session_memory's functions.
struct SessionBlocks {
  static constexpr std::size_t kHeader = 16;  // keeps the block 16-byte aligned

  static void* allocate(std::size_t size, void* failed) noexcept {
    if (size <= static_cast<std::size_t>(-1) - kHeader) {
      try {
        auto* base = static_cast<unsigned char*>(shoal::detail::block_allocate(size + kHeader));
        std::memcpy(base, &size, sizeof size);
        return base + kHeader;
      } catch (const std::bad_alloc&) {
      }
    }
    *static_cast<bool*>(failed) = true;
    return nullptr;
  }
  static std::size_t size_of(const void* p) noexcept {
    std::size_t size = 0;
    std::memcpy(&size, static_cast<const unsigned char*>(p) - kHeader, sizeof size);
    return size;
  }
  static void release(void* p, void*) noexcept {
    if (p == nullptr) return;
    shoal::detail::frame_deallocate(static_cast<unsigned char*>(p) - kHeader, size_of(p) + kHeader);
  }
  static void* zeroed(std::size_t n, std::size_t size, void* failed) noexcept {
    if (size != 0 && n > static_cast<std::size_t>(-1) / size) {
      *static_cast<bool*>(failed) = true;
      return nullptr;
    }
    void* p = allocate(n * size, failed);
    if (p != nullptr) std::memset(p, 0, n * size);
    return p;
  }
  static void* resize(void* p, std::size_t size, void* failed) noexcept {
    if (p == nullptr) return allocate(size, failed);
    const std::size_t old = size_of(p);
    if (size <= old) return p;  // the block stays as large as it was
    void* q = allocate(size, failed);
    if (q == nullptr) return nullptr;  // `p` stays, as realloc leaves it
    std::memcpy(q, p, old);
    release(p, nullptr);
    return q;
  }
};

/// An nghttp2_mem whose blocks come from the small-block caches coroutine
/// frames use (block_allocate: per thread, sized classes, a free from
/// another thread handed back in batches). nghttp2 allocates and frees a
/// few blocks per stream; glibc's per-thread cache keeps 7 blocks of a
/// size, so a batch of ten streams freed most of them through the arena's
/// slow path (5% of a small request's CPU, docs/http2.md). Each block
/// carries its size in a 16-byte header, since nghttp2's free does not
/// pass it.
///
/// The allocation-failure sweep's hooks do not reach these blocks:
/// failing them one by one found nghttp2 1.52 (Debian 12's) freeing a
/// DATA item twice when a stream's queue cannot grow (nghttp2_submit_data
/// frees it while the stream still holds it; TSan: heap-use-after-free in
/// nghttp2_session_del), which no caller can work around.
///
/// `*failed` is set when an allocation fails, however nghttp2 reports it:
/// one in the HPACK encoder's table ends the session with a GOAWAY and
/// returns no error to the caller (the sweep found that too).
/// Thread-safety: any thread (a session is used by one at a time).
inline nghttp2_mem session_memory(bool* failed) noexcept {
  return nghttp2_mem{failed, &SessionBlocks::allocate, &SessionBlocks::release, &SessionBlocks::zeroed,
                     &SessionBlocks::resize};
}

}  // namespace shoal::http2::detail
