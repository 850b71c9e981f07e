// Frame allocation. A frame from the cache carries nothing: its slab (found
// by masking its address) says which cache and class it belongs to. Every
// other frame carries a 16-byte header recording where it came from, so
// frees go back to the right place even if the hooks or the thread's
// resource changed in between. A free tells them apart by address and size:
// a cache block lies in a chunk of slabs and is of its slab's class. A block
// with a header lies in a chunk only if its memory is inside a cache block
// (a frame's own buffer given to a memory resource); it then starts at
// least 16 bytes into that block and ends within it, so it is of a smaller
// class than the slab's.
//
// The default source is a per-thread frame cache: size classes of 16 bytes
// up to 1 KiB, a local free list owned by the thread, and a lock-free remote
// list that other threads push frees onto, in batches (a frame spawned on
// one worker usually finishes on another). The owner drains its remote list
// when its local list runs dry, so spawn+join never reaches malloc's arena
// locks in steady state. Blocks come from 64 KiB slabs of one size class,
// carved in order, not from malloc: a burst of a million children cost a
// malloc, a free and (on a worker's arena) an mprotect per 4 KiB each, half
// of a one-worker spawn_join. A block past the local list's cap goes back
// to its slab, and a slab whose blocks are all back is kept as a spare;
// spares past a few go back to the system when the thread parks
// (docs/scheduler.md, "Slabs").
// The cache itself (its lists and the remote batches) is
// src/runtime/frame_cache.hpp, checked under Relacy by
// tests/relacy/frame_cache_relacy_test.cpp; this file picks a thread's
// cache (thread_local, which Relacy cannot run) and routes each free.
// Caches are never destroyed: a thread that exits
// hands its cache back to a pool and a later thread adopts it, so a frame
// freed after its allocating thread exited still has a live cache to go to.
// Under ASan the cache is off, so frame use-after-free is still caught.
#include "shoal/detail/frame_alloc.hpp"
#include "shoal/detail/task_record.hpp"
#include "src/runtime/frame_cache.hpp"
#include "src/runtime/frame_slabs.hpp"
#include "src/runtime/slab_source.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#include "shoal/detail/sync_shim.hpp"
#include "shoal/testing/frame_hooks.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define SHOAL_FRAME_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHOAL_FRAME_CACHE 0
#endif
#endif
#ifndef SHOAL_FRAME_CACHE
#define SHOAL_FRAME_CACHE 1
#endif

namespace shoal::detail {
using testing::FrameHooks;
namespace {

enum class Source : std::uint32_t { heap, hooks, resource };

struct alignas(16) Header {
  void* owner;  // the FrameHooks or memory_resource it came from
  Source source;
  std::uint32_t reserved;
};
static_assert(sizeof(Header) == 16);

shim::mutex g_pool_mu;
// The caches of exited threads, for the next thread to adopt. Never
// destroyed, as the caches themselves are not: a thread may exit after it.
IntrusiveList<FrameCache>& idle_caches() {
  static auto* pool = new IntrusiveList<FrameCache>();
  return *pool;
}

// Adopts a cache on first use; hands it back to the pool at thread exit.
thread_local bool tls_cache_dead = false;  // set once the slot is destroyed

struct CacheSlot {
  FrameCache* cache = nullptr;
  RemoteBatch remote;
  FrameCache* get() {
    if (cache == nullptr) [[unlikely]] adopt();
    return cache;
  }
  // Out of line: the allocation path stays short.
  [[gnu::noinline]] void adopt() {
    shim::lock_guard<shim::mutex> g(g_pool_mu);
    cache = idle_caches().pop_front();
    if (cache == nullptr) cache = new FrameCache();  // never freed; see the note at the top
  }
  ~CacheSlot();
};

CacheSlot::~CacheSlot() {
    tls_cache_dead = true;  // frees after this point go to the owner's remote list
    remote.flush();
    if (cache == nullptr) return;
    cache->release_local();
    shim::lock_guard<shim::mutex> g(g_pool_mu);
    idle_caches().push_front(cache);
    cache = nullptr;
}

thread_local CacheSlot tls_cache;

shim::atomic<const FrameHooks*> g_hooks{nullptr};
thread_local std::pmr::memory_resource* tls_resource = nullptr;

}  // namespace



FrameResourceGuard::FrameResourceGuard(std::pmr::memory_resource* resource) noexcept
    : previous_(tls_resource) {
  tls_resource = resource;
}
FrameResourceGuard::~FrameResourceGuard() { tls_resource = previous_; }

namespace {
/// The thread's cache, or the heap: the default source of frame_allocate
/// (inlined there: it is every spawn's path) and all of block_allocate.
[[gnu::always_inline]] inline void* cached_or_heap(std::size_t size) {
#if SHOAL_FRAME_CACHE
  const std::size_t c = class_of(size);
  if (c < kClasses && !tls_cache_dead) {
    FrameCache* cache = tls_cache.get();
    void* block = cache->pop(c);
    return block != nullptr ? block : cache->refill(c);
  }
#endif
  void* raw = ::operator new(size + sizeof(Header));
  return ::new (raw) Header{nullptr, Source::heap, 0} + 1;
}
}  // namespace

void* frame_allocate(std::size_t size) {
  const std::size_t total = size + sizeof(Header);
  if (std::pmr::memory_resource* resource = tls_resource) {
    void* raw = resource->allocate(total, alignof(Header));
    return ::new (raw) Header{resource, Source::resource, 0} + 1;
  }
  if (const FrameHooks* hooks = g_hooks.load(std::memory_order_acquire)) {
    void* raw = hooks->allocate(total, hooks->ctx);
    if (raw == nullptr) throw std::bad_alloc();
    return ::new (raw) Header{const_cast<FrameHooks*>(hooks), Source::hooks, 0} + 1;
  }
  return cached_or_heap(size);
}

void* block_allocate(std::size_t size) { return cached_or_heap(size); }

#if SHOAL_FRAME_CACHE
namespace {
/// The cache `p` (a block of class `c`) belongs to, or null if it has a
/// header: one inside a cache block is of a smaller class than its slab
/// (see the top of the file).
[[gnu::always_inline]] inline FrameCache* cache_of(void* p, std::size_t c) noexcept {
  if (c >= kClasses || !in_chunk(p)) return nullptr;
  Slab* s = slab_of(p);
  return s->size_class == c ? s->owner : nullptr;
}
}  // namespace
#endif

void frame_deallocate(void* p, std::size_t size) noexcept {
#if SHOAL_FRAME_CACHE
  const std::size_t c = class_of(size);
  if (FrameCache* owner = cache_of(p, c)) {
    if (tls_cache_dead) {
      auto* b = static_cast<FreeBlock*>(p);
      owner->push_remote(c, b, b);
    } else if (tls_cache.cache == owner) {
      owner->push_local(c, p);
    } else {
      tls_cache.remote.add(owner, c, p);
    }
    return;
  }
#endif
  auto* header = static_cast<Header*>(p) - 1;
  const std::size_t total = size + sizeof(Header);
  switch (header->source) {
    case Source::resource:
      static_cast<std::pmr::memory_resource*>(header->owner)->deallocate(header, total, alignof(Header));
      return;
    case Source::hooks: {
      auto* hooks = static_cast<const FrameHooks*>(header->owner);
      hooks->deallocate(header, total, hooks->ctx);
      return;
    }
    case Source::heap:
      ::operator delete(header);  // unsized: clang 14 lacks sized delete by default
      return;
  }
}

// A spawned Task's record (task.hpp: root_record), from the same caches.
TaskRecord* allocate_record() { return ::new (frame_allocate(sizeof(TaskRecord))) TaskRecord; }

void free_record(TaskRecord* f) noexcept {
  f->~TaskRecord();
  frame_deallocate(f, sizeof(TaskRecord));
}

bool frame_cache_trim_batch() noexcept {
#if SHOAL_FRAME_CACHE
  return !tls_cache_dead && tls_cache.cache != nullptr && tls_cache.cache->trim_batch();
#else
  return false;
#endif
}

void frame_cache_trim() noexcept {
  while (frame_cache_trim_batch()) {
  }
}

void frame_cache_flush_remote() noexcept {
#if SHOAL_FRAME_CACHE
  if (!tls_cache_dead) tls_cache.remote.flush();
#endif
}

FrameSlabStats frame_slab_stats() {
#if SHOAL_FRAME_CACHE
  return slab_source().stats();
#else
  return {};
#endif
}

}  // namespace shoal::detail

namespace shoal::testing {
void set_frame_hooks(const FrameHooks* hooks) noexcept {
  detail::g_hooks.store(hooks, std::memory_order_release);
}
}  // namespace shoal::testing
