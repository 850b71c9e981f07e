// The frame cache's remote frees (src/runtime/frame_cache.hpp) under
// Relacy's memory model: threads that free frames of another thread's cache
// hand them back in batches (RemoteBatch: one chain per size class, pushed
// at kRemoteBatch blocks or on a flush) or one at a time (a thread past its
// exit), while the owner allocates (pop: its local list, else the whole
// remote list at once; else refill from its slab) and frees locally. The
// real FrameCache and RemoteBatch run here; what frame_alloc.cpp adds is
// which cache a thread uses (a thread_local slot, which Relacy's fibers
// cannot have) and the routing by address, both single-threaded.
// Each block carries a frame's contents as rl::vars: the freer's last
// writes before the free and the owner's writes after it reuses the block
// are a data race unless the remote list's push (release) and take
// (acquire) order them. Invariants: a block is handed out only while
// nobody holds it (never twice at a time), every block carved is either
// held or in the cache at the end (none lost, none listed twice).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <new>

#include "relacy_support.hpp"
#include "runtime/frame_cache.hpp"

namespace {

using shoal::detail::FrameCache;
using shoal::detail::FreeBlock;
using shoal::detail::RemoteBatch;
using shoal::detail::Slab;

// A frame in a block: the first word is the cache's link while the block
// is free (FreeBlock::next, plain memory), the rest its contents.
struct Frame {
  void* link;
  rl::var<int> data;    // what the frame's last user wrote
  rl::var<int> holder;  // who holds it: 0 when free, else the holder's id + 1
};

constexpr std::size_t kClass = shoal::detail::class_of(sizeof(Frame));
constexpr std::size_t kBlock = (kClass + 1) * shoal::detail::kGranule;
static_assert(kClass < shoal::detail::kClasses);
constexpr int kBlocks = 48;  // the block positions a test may carve

// The owner's one slab, mapped once for the process (a slab is aligned to
// its size: a block finds its header by masking). Each test sets its header
// up as new_slab does and makes it the class's carving slab, so refill
// carves from it and never reaches the process's slab source.
char* slab_memory() {
  static char* m = static_cast<char*>(std::aligned_alloc(shoal::detail::kSlabBytes, shoal::detail::kSlabBytes));
  return m;
}

struct Cache {
  FrameCache* cache = nullptr;
  alignas(FrameCache) unsigned char storage[sizeof(FrameCache)];
  char* start = nullptr;

  Frame* frame(int i) { return reinterpret_cast<Frame*>(start + static_cast<std::size_t>(i) * kBlock); }
  int index(void* p) { return static_cast<int>((static_cast<char*>(p) - start) / static_cast<std::ptrdiff_t>(kBlock)); }

  void before() {
    cache = new (storage) FrameCache;  // its remote lists are Relacy atomics: made in the test
    char* m = slab_memory();
    auto* s = new (m) Slab;
    s->owner = cache;
    s->free = nullptr;
    s->in_use = 0;
    s->size_class = static_cast<std::uint32_t>(kClass);
    start = s->start = m + shoal::detail::kSlabHeader;
    s->bump = s->start;
    cache->carving[kClass] = s;
    for (int i = 0; i < kBlocks; ++i) {
      Frame* f = new (frame(i)) Frame;
      f->data($) = 0;
      f->holder($) = 0;
    }
  }
  // The owner allocates, as frame_allocate does: its lists, else its slab.
  Frame* allocate(int who) {
    void* p = cache->pop(kClass);
    if (p == nullptr) p = cache->refill(kClass);
    RL_ASSERT(index(p) < kBlocks);
    auto* f = static_cast<Frame*>(p);
    RL_ASSERT(f->holder($) == 0);  // nobody holds it: not handed out twice
    f->holder($) = who + 1;
    (void)f->data($);  // the last user's contents (a race unless its free was acquired)
    f->data($) = 1000 + who;  // the new frame's
    return f;
  }
  // Any holder, before it frees: the frame's last contents.
  static void last_writes(Frame* f, int who) {
    RL_ASSERT(f->holder($) == who + 1);
    f->data($) = 2000 + who;
    f->holder($) = 0;
  }
  // After every thread: each carved block is held (per `held`) or in the
  // cache's lists exactly once.
  void check(const bool* held) {
    int seen[kBlocks] = {};
    for (int i = 0; i < kBlocks; ++i) seen[i] = held[i] ? 1 : 0;
    while (void* p = cache->pop(kClass)) {
      RL_ASSERT(index(p) < kBlocks);
      ++seen[index(p)];
    }
    Slab* s = shoal::detail::slab_of(start);
    const int carved = static_cast<int>((s->bump - s->start) / static_cast<std::ptrdiff_t>(kBlock));
    for (int i = 0; i < kBlocks; ++i) RL_ASSERT(seen[i] == (i < carved ? 1 : 0));
    for (int i = 0; i < kBlocks; ++i) frame(i)->~Frame();
    cache->~FrameCache();
  }
};

// Blocks 0..n-1 of a freeing thread, carved by the owner before the test
// starts (as frames it spawned that run elsewhere): held by `who`.
void hand_out(Cache& c, int from, int n, int who) {
  for (int i = from; i < from + n; ++i) {
    void* p = c.cache->refill(kClass);
    RL_ASSERT(c.index(p) == i);
    c.frame(i)->holder($) = who + 1;
  }
}

// The owner allocates three frames while two threads free its blocks: one
// a full batch (kRemoteBatch frees, pushed by the batch itself as one
// chain), the other a batch flushed early (a thread going to sleep) and a
// single free (a thread past its exit). The owner frees one frame locally
// and allocates again.
struct RemoteFreesVsOwner : rl::test_suite<RemoteFreesVsOwner, 3> {
  static constexpr int kFull = static_cast<int>(shoal::detail::kRemoteBatch);
  Cache c;
  bool held[kBlocks] = {};
  void before() {
    c.before();
    hand_out(c, 0, kFull, 1);
    hand_out(c, kFull, 2, 2);
  }
  void after() { c.check(held); }
  void thread(unsigned id) {
    if (id == 0) {
      Frame* mine[4];
      for (int i = 0; i < 3; ++i) mine[i] = c.allocate(0);
      Cache::last_writes(mine[1], 0);
      c.cache->push_local(kClass, mine[1]);
      mine[3] = c.allocate(0);
      for (int i : {0, 2, 3}) held[c.index(mine[i])] = true;
    } else if (id == 1) {
      RemoteBatch batch;
      for (int i = 0; i < kFull; ++i) {
        Cache::last_writes(c.frame(i), 1);
        batch.add(c.cache, kClass, c.frame(i));
      }
      RL_ASSERT(batch.owner == c.cache && batch.count[kClass] == 0);  // the 32nd pushed the chain
    } else {
      RemoteBatch batch;
      Cache::last_writes(c.frame(kFull), 2);
      batch.add(c.cache, kClass, c.frame(kFull));
      batch.flush();
      Frame* last = c.frame(kFull + 1);
      Cache::last_writes(last, 2);
      auto* b = reinterpret_cast<FreeBlock*>(last);
      c.cache->push_remote(kClass, b, b);
    }
  }
};

// One batch, two owners: the freeing thread frees frames of cache `a` and
// one of another cache in between, so its batch pushes a's first chain
// when the owner changes and a's last frame on the flush, while a's owner
// allocates (from its remote list as the chains arrive, else its slab).
struct OwnerChange : rl::test_suite<OwnerChange, 2> {
  Cache a;
  bool held[kBlocks] = {};
  FrameCache* other = nullptr;
  alignas(FrameCache) unsigned char other_storage[sizeof(FrameCache)];
  void before() {
    a.before();
    other = new (other_storage) FrameCache;
    hand_out(a, 0, 3, 1);
  }
  void after() {
    a.check(held);
    other->~FrameCache();
  }
  void thread(unsigned id) {
    if (id == 0) {
      // The owner of `a`: allocates twice (from its remote list once the
      // frees arrive, else from its slab).
      Frame* f1 = a.allocate(0);
      Frame* f2 = a.allocate(0);
      held[a.index(f1)] = held[a.index(f2)] = true;
    } else {
      // Frees a's frames; a free into the other cache between them makes
      // the batch flush a's chain first, then a's last one on the flush.
      RemoteBatch batch;
      Cache::last_writes(a.frame(0), 1);
      batch.add(a.cache, kClass, a.frame(0));
      Cache::last_writes(a.frame(1), 1);
      batch.add(a.cache, kClass, a.frame(1));
      alignas(16) static FreeBlock elsewhere;  // a block of the other cache (never dereferenced by it here)
      batch.add(other, kClass, &elsewhere);
      Cache::last_writes(a.frame(2), 1);
      batch.add(a.cache, kClass, a.frame(2));
      batch.flush();
      RL_ASSERT(other->remote[kClass].take_all() == &elsewhere);
    }
  }
};

TEST(RelacyFrameCache, RemoteFreeBatchesRaceTheOwnersAllocations) {
  EXPECT_TRUE(shoal::relacy::check<RemoteFreesVsOwner>(shoal::relacy::search_or("bound")));
}
TEST(RelacyFrameCache, ABatchThatChangesOwnerHandsEachChainToItsOwner) {
  EXPECT_TRUE(shoal::relacy::check<OwnerChange>(shoal::relacy::search_or("bound")));
}

}  // namespace
