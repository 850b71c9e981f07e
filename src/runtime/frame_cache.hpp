// The per-thread frame cache (src/runtime/frame_alloc.cpp): its size
// classes, its local and remote free lists, and the batches a thread
// gathers of another thread's frees. Which cache a thread uses (its
// thread_local slot) is frame_alloc.cpp's; this header is the cache itself,
// so that tests/relacy/frame_cache_relacy_test.cpp drives the real remote
// free path. Internal.
//
// Orderings: a freer's writes to a block (the frame's last contents, and
// the FreeBlock links of its batch) happen before the owner reuses it: the
// remote list is a PushStack, whose push (release CAS) and take_all
// (acquire exchange) hand the chain over. Everything else here is touched
// by one thread: the owner's lists and slab headers by the owner, a
// RemoteBatch by the freeing thread. A block reaches its freer through
// whatever handed the frame over (a run queue), after the owner carved it.
// Checked under Relacy: tests/relacy/frame_cache_relacy_test.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "shoal/detail/intrusive_list.hpp"
#include "src/runtime/push_stack.hpp"
#include "src/runtime/slab_source.hpp"

namespace shoal::detail {

inline constexpr std::size_t kGranule = 16;
inline constexpr std::size_t kClasses = 64;  // up to 1 KiB
inline constexpr std::size_t kLocalCap = 4096;

/// The size class of a cache block of `size` bytes (kClasses or more: too big).
inline constexpr std::size_t class_of(std::size_t size) noexcept { return (size + kGranule - 1) / kGranule - 1; }

// Free slabs a cache keeps resident when idle (2 MiB). More are kept,
// warm, while the thread stays busy: until it has nothing to run
// (frame_cache_trim_batch, from Scheduler::park), or once it has been
// freeing slabs past kSpareSlabs for this long. Giving pages back costs the
// kernel about as much as faulting them in; a one-worker spawn_join paid
// 12 % for it in its run.
inline constexpr std::size_t kSpareSlabs = 32;
inline constexpr std::chrono::nanoseconds kKeepWarm = std::chrono::seconds(1);

// The hook links an idle cache into frame_alloc.cpp's pool (guarded by g_pool_mu).
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

// Frees of another thread's blocks, gathered per size class for one owner
// and handed over kRemoteBatch at a time: a spawn loop's children finish on
// another worker, and one CAS per free on the spawner's list moved that
// cache line back and forth once per child (the spawner's exchange took it
// back each time its local list ran dry). At most kRemoteBatch - 1 blocks
// per class wait here; a change of owner, the thread's exit, or the thread
// going to sleep (frame_cache_flush_remote) flushes them.
inline constexpr std::uint32_t kRemoteBatch = 32;

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

}  // namespace shoal::detail
