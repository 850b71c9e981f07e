// Frame allocation. Every frame carries a 16-byte header recording where it
// came from, so frees go back to the right place even if the hooks or the
// thread's resource changed in between.
//
// The default source is a per-thread frame cache: size classes of 16 bytes
// up to 1 KiB, a local free list owned by the thread, and a lock-free remote
// list that other threads push frees onto (a frame spawned on one worker
// usually finishes on another). The owner drains its remote list when its
// local list runs dry, so spawn+join never reaches malloc's arena locks in
// steady state. Caches are never destroyed: a thread that exits hands its
// cache back to a pool and a later thread adopts it, so a frame freed after
// its allocating thread exited still has a live cache to go to.
// Under ASan the cache is off, so frame use-after-free is still caught.
#include "shoal/detail/frame_alloc.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/runtime/task.hpp"

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

enum class Source : std::uint32_t { heap, hooks, resource, cache };

struct alignas(16) Header {
  void* owner;  // the FrameHooks, memory_resource or FrameCache it came from
  Source source;
  std::uint32_t size_class;
};
static_assert(sizeof(Header) == 16);

[[maybe_unused]] constexpr std::size_t kGranule = 16;
[[maybe_unused]] constexpr std::size_t kClasses = 64;  // up to 1 KiB
[[maybe_unused]] constexpr std::size_t kLocalCap = 4096;

struct FreeBlock {
  FreeBlock* next;
};

struct FrameCache {
  FreeBlock* local[kClasses] = {};
  std::size_t local_count[kClasses] = {};
  shim::atomic<FreeBlock*> remote[kClasses] = {};
  FrameCache* next_free = nullptr;  // pool link (guarded by g_pool_mu)

  void* pop(std::size_t c) noexcept {
    FreeBlock* b = local[c];
    if (b == nullptr) {
      // The whole remote list at once, not walked: its blocks are not
      // counted against the cap (they are this thread's own allocations
      // coming back, so they cannot grow the cache past what it handed out).
      b = remote[c].exchange(nullptr, std::memory_order_acquire);
      if (b == nullptr) return nullptr;
    }
    local[c] = b->next;
    if (local_count[c] > 0) --local_count[c];
    return b;
  }
  void push_local(std::size_t c, void* p) noexcept {
    if (local_count[c] >= kLocalCap) {
      ::operator delete(p);
      return;
    }
    auto* b = static_cast<FreeBlock*>(p);
    b->next = local[c];
    local[c] = b;
    ++local_count[c];
  }
  void push_remote(std::size_t c, void* p) noexcept {
    auto* b = static_cast<FreeBlock*>(p);
    FreeBlock* head = remote[c].load(std::memory_order_relaxed);
    do {
      b->next = head;
    } while (!remote[c].compare_exchange_weak(head, b, std::memory_order_release, std::memory_order_relaxed));
  }
  void release_local() noexcept {
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = local[c]) {
        local[c] = b->next;
        ::operator delete(b);
      }
      local_count[c] = 0;
    }
  }
};

shim::mutex g_pool_mu;
FrameCache* g_pool = nullptr;

// Adopts a cache on first use; hands it back to the pool at thread exit.
thread_local bool tls_cache_dead = false;  // set once the slot is destroyed

struct CacheSlot {
  FrameCache* cache = nullptr;
  FrameCache* get() {
    if (cache == nullptr) {
      shim::lock_guard<shim::mutex> g(g_pool_mu);
      if (g_pool != nullptr) {
        cache = g_pool;
        g_pool = cache->next_free;
      } else {
        cache = new FrameCache();  // never freed; see the note at the top
      }
    }
    return cache;
  }
  ~CacheSlot();
};

CacheSlot::~CacheSlot() {
    tls_cache_dead = true;  // frees after this point go to the owner's remote list
    if (cache == nullptr) return;
    cache->release_local();
    shim::lock_guard<shim::mutex> g(g_pool_mu);
    cache->next_free = g_pool;
    g_pool = cache;
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
#if SHOAL_FRAME_CACHE
  const std::size_t c = (total + kGranule - 1) / kGranule - 1;
  if (c < kClasses && !tls_cache_dead) {
    FrameCache* cache = tls_cache.get();
    void* raw = cache->pop(c);
    if (raw == nullptr) raw = ::operator new((c + 1) * kGranule);
    return ::new (raw) Header{cache, Source::cache, static_cast<std::uint32_t>(c)} + 1;
  }
#endif
  void* raw = ::operator new(total);
  return ::new (raw) Header{nullptr, Source::heap, 0} + 1;
}

void frame_deallocate(void* p, std::size_t size) noexcept {
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
    case Source::cache: {
      auto* owner = static_cast<FrameCache*>(header->owner);
      const std::size_t c = header->size_class;
      if (!tls_cache_dead && tls_cache.cache == owner) {
        owner->push_local(c, header);
      } else {
        owner->push_remote(c, header);
      }
      return;
    }
    case Source::heap:
      ::operator delete(header);  // unsized: clang 14 lacks sized delete by default
      return;
  }
}

// A spawned plain Task's record (task.hpp: root_record). Records come from
// slabs of ten: a thread carves its current slab front to back and moves on
// when it is full, and whichever thread frees a slab's last record (or the
// carving thread, retiring a slab with records it never carved) frees the
// slab. One malloc per ten records instead of one each: with a million
// started tasks alive the frame cache is cold and every record was a fresh
// malloc (spawn_join_handles 0.80x Tokio against 0.98x with the record in
// the frame). A slab is 1 KiB, so a long-lived record keeps at most 1 KiB
// alive. Counting hooks, a frame resource and ASan (no cache) take the frame
// path, so tests still see, fail and check every record allocation.
namespace {
#if SHOAL_FRAME_CACHE
constexpr std::size_t kSlabBytes = 1024;
constexpr std::uint32_t kSlabRecords = 10;
struct alignas(16) RecordSlab {
  shim::atomic<std::uint32_t> live;  // records not yet freed, counting those never carved
};
static_assert(sizeof(RecordSlab) + kSlabRecords * sizeof(TaskRecord) <= kSlabBytes);
static_assert(alignof(TaskRecord) <= alignof(RecordSlab) && sizeof(TaskRecord) % alignof(TaskRecord) == 0);

shim::atomic<std::size_t> g_slabs_live{0};  // for testing::record_slabs_live

void release_slab(RecordSlab* slab, std::uint32_t n) noexcept {
  if (slab->live.fetch_sub(n, std::memory_order_acq_rel) == n) {
    g_slabs_live.fetch_sub(1, std::memory_order_relaxed);
    slab->~RecordSlab();
    ::operator delete(slab, std::align_val_t{kSlabBytes});
  }
}

struct SlabCursor {
  RecordSlab* slab = nullptr;
  std::uint32_t next = kSlabRecords;  // records carved from `slab`
  ~SlabCursor() {
    tls_slab_dead = true;
    if (slab != nullptr && next < kSlabRecords) release_slab(slab, kSlabRecords - next);
  }
  static thread_local bool tls_slab_dead;
};
thread_local bool SlabCursor::tls_slab_dead = false;
thread_local SlabCursor tls_slab;

void* carve_record() {
  SlabCursor& c = tls_slab;
  if (c.next == kSlabRecords) {
    // The full slab is not ours to touch any more: its records free it.
    void* raw = ::operator new(kSlabBytes, std::align_val_t{kSlabBytes});
    c.slab = ::new (raw) RecordSlab{kSlabRecords};
    g_slabs_live.fetch_add(1, std::memory_order_relaxed);
    c.next = 0;
  }
  return reinterpret_cast<char*>(c.slab) + sizeof(RecordSlab) + c.next++ * sizeof(TaskRecord);
}
#endif
}  // namespace

TaskRecord* allocate_record(std::uint8_t& kind) {
#if SHOAL_FRAME_CACHE
  if (tls_resource == nullptr && g_hooks.load(std::memory_order_acquire) == nullptr &&
      !SlabCursor::tls_slab_dead) {
    TaskRecord* f = ::new (carve_record()) TaskRecord;
    kind = kRecordFromSlab;
    return f;
  }
#endif
  TaskRecord* f = ::new (frame_allocate(sizeof(TaskRecord))) TaskRecord;
  kind = kRecordFromFrames;
  return f;
}

void free_record(TaskRecord* f, std::uint8_t kind) noexcept {
  f->~TaskRecord();
#if SHOAL_FRAME_CACHE
  if (kind == kRecordFromSlab) {
    const auto at = reinterpret_cast<std::uintptr_t>(f) & ~std::uintptr_t{kSlabBytes - 1};
    release_slab(reinterpret_cast<RecordSlab*>(at), 1);
    return;
  }
#endif
  (void)kind;
  frame_deallocate(f, sizeof(TaskRecord));
}

}  // namespace shoal::detail

namespace shoal::testing {
void set_frame_hooks(const FrameHooks* hooks) noexcept {
  detail::g_hooks.store(hooks, std::memory_order_release);
}

bool frame_cache_enabled() noexcept { return SHOAL_FRAME_CACHE != 0; }

std::size_t record_slabs_live() noexcept {
#if SHOAL_FRAME_CACHE
  return detail::g_slabs_live.load(std::memory_order_relaxed);
#else
  return 0;
#endif
}
}  // namespace shoal::testing
