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
// Caches are never destroyed: a thread that exits
// hands its cache back to a pool and a later thread adopts it, so a frame
// freed after its allocating thread exited still has a live cache to go to.
// Under ASan the cache is off, so frame use-after-free is still caught.
#include "shoal/detail/frame_alloc.hpp"
#include "shoal/detail/task_record.hpp"
#include "src/runtime/frame_slabs.hpp"
#include "src/runtime/push_stack.hpp"
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

[[maybe_unused]] constexpr std::size_t kGranule = 16;
[[maybe_unused]] constexpr std::size_t kClasses = 64;  // up to 1 KiB
[[maybe_unused]] constexpr std::size_t kLocalCap = 4096;

/// The size class of a cache block of `size` bytes (kClasses or more: too big).
[[maybe_unused]] constexpr std::size_t class_of(std::size_t size) noexcept { return (size + kGranule - 1) / kGranule - 1; }


// Free slabs a cache keeps resident when idle (2 MiB). More are kept,
// warm, while the thread stays busy: until it has nothing to run
// (frame_cache_trim_batch, from Scheduler::park), or once it has been
// freeing slabs past kSpareSlabs for this long. Giving pages back costs the
// kernel about as much as faulting them in; a one-worker spawn_join paid
// 12 % for it in its run.
constexpr std::size_t kSpareSlabs = 32;
constexpr std::chrono::nanoseconds kKeepWarm = std::chrono::seconds(1);

}  // namespace

// The hook links an idle cache into the pool (guarded by g_pool_mu).
struct FrameCache : ListHook<> {
  FreeBlock* local[kClasses] = {};
  std::size_t local_count[kClasses] = {};
  PushStack<FreeBlock, &FreeBlock::next> remote[kClasses];

  void* pop(std::size_t c) noexcept {
    FreeBlock* b = local[c];
    if (b == nullptr) {
      // The whole remote list at once, not walked: its blocks are not
      // counted against the cap (they are this thread's own allocations
      // coming back, so they cannot grow the cache past what it handed out).
      b = remote[c].take_all();
      if (b == nullptr) return nullptr;
    }
    local[c] = b->next;
    // The next pop's block: usually freed by another core, so the load of
    // its link misses (75 % of frame_allocate's samples in spawn_join).
    // Fetched now, it arrives while this frame is set up.
    __builtin_prefetch(b->next, 1);
    if (local_count[c] > 0) --local_count[c];
    return b;
  }
  void push_local(std::size_t c, void* p) noexcept {
    if (local_count[c] >= kLocalCap) {
      give_back(p);
      return;
    }
    auto* b = static_cast<FreeBlock*>(p);
    b->next = local[c];
    local[c] = b;
    ++local_count[c];
  }
  /// Pushes the chain first..last (linked through next) in one CAS.
  void push_remote(std::size_t c, FreeBlock* first, FreeBlock* last) noexcept { (void)remote[c].push(first, last); }
  void release_local() noexcept {
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = local[c]) {
        local[c] = b->next;
        give_back(b);
      }
      local_count[c] = 0;
    }
    slab_source().give_back(spares);  // an exited thread's cache keeps no free slab resident
    spare_count = 0;
  }

  /// A block from a slab: one given back to a slab, else a new one carved.
  /// Called when the local and remote lists are empty.
  void* refill(std::size_t c) {
    if (Slab* s = partial[c].front()) {
      FreeBlock* b = s->free;
      if (b->next == nullptr) partial[c].remove(s);  // its last: it leaves the list
      s->free = b->next;
      ++s->in_use;
      return b;
    }
    const std::size_t size = (c + 1) * kGranule;
    Slab* s = carving[c];
    if (s == nullptr || s->bump + size > slab_end(s)) {
      // A class that used up a slab is in a burst: its next slab is faulted
      // in by one call rather than a page fault per 4 KiB.
      s = new_slab(c, /*populate=*/s != nullptr);
      // The slab carved before stays where its blocks are: handed out, or
      // in the partial list; it is released when its last block comes back.
      carving[c] = s;
    }
    char* p = s->bump;
    s->bump += size;
    ++s->in_use;
    return p;
  }

  /// Returns a block to its slab (owner thread only): a slab whose blocks
  /// are all back is released, unless new blocks are still carved from it.
  void give_back(void* p) noexcept {
    Slab* s = slab_of(p);
    const std::size_t c = s->size_class;
    auto* b = static_cast<FreeBlock*>(p);
    if (s->free == nullptr) partial[c].push_front(s);
    b->next = s->free;
    s->free = b;
    if (--s->in_use != 0) return;
    partial[c].remove(s);
    s->free = nullptr;
    if (s == carving[c]) {
      s->bump = s->start;  // carve it again from the start
      return;
    }
    release(s);
  }

 private:
  Slab* new_slab(std::size_t c, bool populate) {
    Slab* s = spares.pop_front();
    if (s != nullptr) {
      --spare_count;
    } else {
      s = slab_source().take();
      if (populate) ::madvise(s, kSlabBytes, kMadvPopulateWrite);  // a kernel without it: faults as usual
    }
    s->owner = this;
    s->next = nullptr;  // unlinked (a slab from the source is not in any list)
    s->free = nullptr;
    // Colour: each slab starts its blocks at a different line, so that the
    // first blocks of different classes and slabs do not all sit at one
    // offset in their pages (the same L1 sets, and 4 KiB aliasing between
    // a store to one and a load from another).
    s->start = reinterpret_cast<char*>(s) + kSlabHeader + (next_colour++ % kColours) * 64;
    s->bump = s->start;
    s->in_use = 0;
    s->size_class = static_cast<std::uint32_t>(c);
    return s;
  }
  // A free slab is kept, warm, for the next burst. Past kSpareSlabs the
  // clock is read once a batch: once spares have been kept past
  // kSpareSlabs for kKeepWarm while the thread never parked, each check
  // gives two batches back, so they drain while the frees go on, a batch
  // at a time rather than all at once on one task's path.
  void release(Slab* s) noexcept {
    spares.push_front(s);
    ++spare_count;
    if (spare_count < kSpareSlabs || (spare_count - kSpareSlabs) % kGiveBackBatch != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (spare_count == kSpareSlabs) {
      warm_since = now;
    } else if (now - warm_since >= kKeepWarm) {
      if (trim_batch()) trim_batch();
    }
  }

 public:
  /// Gives back up to a batch of the free slabs past kSpareSlabs, coldest
  /// first (the most recently freed, warmest, are kept); true if more are
  /// left to give.
  bool trim_batch() noexcept {
    if (spare_count <= kSpareSlabs) return false;
    IntrusiveList<Slab> batch;
    std::size_t n = 0;
    for (; n < kGiveBackBatch && spare_count - n > kSpareSlabs; ++n) {
      Slab* coldest = spares.back();
      spares.remove(coldest);
      batch.push_back(coldest);
    }
    slab_source().give_back(batch);
    spare_count -= n;
    if (spare_count > kSpareSlabs) return true;
    warm_since = std::chrono::steady_clock::now();
    return false;
  }

  Slab* carving[kClasses] = {};  // where new blocks of each class are carved
  IntrusiveList<Slab> partial[kClasses];  // slabs with blocks given back
  IntrusiveList<Slab> spares;             // free slabs, the most recently freed first
  std::size_t spare_count = 0;
  std::size_t next_colour = 0;
  std::chrono::steady_clock::time_point warm_since{};  // since the spares last reached kSpareSlabs
};

namespace {

shim::mutex g_pool_mu;
// The caches of exited threads, for the next thread to adopt. Never
// destroyed, as the caches themselves are not: a thread may exit after it.
IntrusiveList<FrameCache>& idle_caches() {
  static auto* pool = new IntrusiveList<FrameCache>();
  return *pool;
}

// Adopts a cache on first use; hands it back to the pool at thread exit.
thread_local bool tls_cache_dead = false;  // set once the slot is destroyed

// Frees of another thread's blocks, gathered per size class for one owner
// and handed over kRemoteBatch at a time: a spawn loop's children finish on
// another worker, and one CAS per free on the spawner's list moved that
// cache line back and forth once per child (the spawner's exchange took it
// back each time its local list ran dry). At most kRemoteBatch - 1 blocks
// per class wait here; a change of owner, the thread's exit, or the thread
// going to sleep (frame_cache_flush_remote) flushes them.
constexpr std::uint32_t kRemoteBatch = 32;

struct RemoteBatch {
  FrameCache* owner = nullptr;
  FreeBlock* first[kClasses] = {};
  FreeBlock* last[kClasses] = {};
  std::uint32_t count[kClasses] = {};

  void add(FrameCache* to, std::size_t c, void* p) noexcept {
    if (to != owner) {
      flush();
      owner = to;
    }
    auto* b = static_cast<FreeBlock*>(p);
    b->next = first[c];
    if (first[c] == nullptr) last[c] = b;
    first[c] = b;
    if (++count[c] == kRemoteBatch) flush_class(c);
  }
  void flush_class(std::size_t c) noexcept {
    owner->push_remote(c, first[c], last[c]);
    first[c] = last[c] = nullptr;
    count[c] = 0;
  }
  void flush() noexcept {
    if (owner == nullptr) return;
    for (std::size_t c = 0; c < kClasses; ++c) {
      if (count[c] != 0) flush_class(c);
    }
    owner = nullptr;
  }
};

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
  const std::size_t c = class_of(size);
  if (c < kClasses && !tls_cache_dead) {
    FrameCache* cache = tls_cache.get();
    void* block = cache->pop(c);
    return block != nullptr ? block : cache->refill(c);
  }
#endif
  void* raw = ::operator new(total);
  return ::new (raw) Header{nullptr, Source::heap, 0} + 1;
}

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
