// The frame cache's slabs (src/runtime/frame_alloc.cpp): blocks come from
// 64 KiB slabs of one size class; a burst's free slabs stay warm while the
// thread is busy and go back to the system, but for a few, when it parks
// (or has been freeing for a second); slabs given back are reused before
// new ones are mapped. The cache is off under ASan, where these tests skip.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory_resource>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "shoal/detail/frame_alloc.hpp"
#include "shoal/shoal.hpp"
#include "src/runtime/frame_slabs.hpp"

namespace {

using shoal::detail::frame_allocate;
using shoal::detail::frame_cache_trim;
using shoal::detail::frame_deallocate;
using shoal::detail::frame_slab_stats;
using shoal::detail::FrameSlabStats;

constexpr std::size_t kBlock = 128;  // the 128-byte class (a cache block has no header)
constexpr std::size_t kBurst = 200'000;  // about 390 slabs
constexpr std::size_t kSlabBlocks = (64 * 1024 - 64) / 128;

// Bounds from the cache's constants: the free slabs it keeps warm when
// idle (32), the slabs holding the local list's 4,096 blocks (a slab holds
// 504 to 511 of them, by its colour), and the slab it carves from.
constexpr std::size_t kMinSlabBlocks = (64 * 1024 - 64 - 15 * 64) / 128;
constexpr std::size_t kMaxKeptSlabs = 32 + (4096 / kMinSlabBlocks + 2) + 1;

std::size_t grown(const FrameSlabStats& now, const FrameSlabStats& before) {
  return now.resident - std::min(now.resident, before.resident);
}

// Runs fn on a thread of its own, so it has a cache of its own, and the
// cache's thread exit runs before the caller looks.
template <class Fn>
void on_own_thread(Fn&& fn) {
  std::thread t(std::forward<Fn>(fn));
  t.join();
}

std::vector<void*> allocate_burst() {
  std::vector<void*> blocks(kBurst);
  for (auto& p : blocks) p = frame_allocate(kBlock);
  return blocks;
}

bool cache_is_on() {
  bool on = false;
  on_own_thread([&] {
    void* p = frame_allocate(kBlock);
    on = frame_slab_stats().mapped != 0;
    frame_deallocate(p, kBlock);
  });
  return on;
}

TEST(FrameCache, ABurstsFreeSlabsStayWarmUntilTheThreadTrimsThenGoBack) {
  if (!cache_is_on()) GTEST_SKIP() << "the frame cache is off in this build (ASan)";
  on_own_thread([] {
    const FrameSlabStats before = frame_slab_stats();
    std::vector<void*> blocks = allocate_burst();
    const std::size_t took = grown(frame_slab_stats(), before);
    EXPECT_GE(took, kBurst / kSlabBlocks);
    for (void* p : blocks) frame_deallocate(p, kBlock);
    EXPECT_GT(grown(frame_slab_stats(), before), took / 2) << "kept warm while the thread is busy";
    frame_cache_trim();
    EXPECT_LE(grown(frame_slab_stats(), before), kMaxKeptSlabs) << "of " << took << " slabs the burst took";
  });
}

// The process's resident bytes (/proc/self/statm).
std::size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

TEST(FrameCache, SlabsGivenBackLeaveNoPageResident) {
  if (!cache_is_on()) GTEST_SKIP() << "the frame cache is off in this build (ASan)";
  on_own_thread([] {
    std::vector<void*> blocks = allocate_burst();
    for (void* p : blocks) frame_deallocate(p, kBlock);
    const std::size_t slabs_before = frame_slab_stats().resident;
    const std::size_t bytes_before = resident_bytes();
    frame_cache_trim();
    const std::size_t given = slabs_before - frame_slab_stats().resident;
    const std::size_t dropped = bytes_before - std::min(bytes_before, resident_bytes());
    ASSERT_GT(given, 300u);
    // All of each slab: a page kept per slab (a list linked through the
    // slabs themselves, written after their pages went) would be 1/16.
    EXPECT_GE(dropped, given * 64 * 1024 / 100 * 98) << given << " slabs given back";
  });
}

TEST(FrameCache, AThreadFreeingForOverASecondGivesBackWithoutParking) {
  if (!cache_is_on()) GTEST_SKIP() << "the frame cache is off in this build (ASan)";
  on_own_thread([] {
    const FrameSlabStats before = frame_slab_stats();
    std::vector<void*> blocks = allocate_burst();
    // Half now: past the 32 kept, the spares start their second.
    std::size_t i = 0;
    for (; i < kBurst / 2; ++i) frame_deallocate(blocks[i], kBlock);
    const std::size_t warm = grown(frame_slab_stats(), before);
    EXPECT_GT(warm, kMaxKeptSlabs + 32);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the condition under test is time
    // The next check of the clock (within 32 more slabs freed) gives two
    // batches back.
    const std::size_t at_sleep = frame_slab_stats().resident;
    std::size_t freed_after = 0;
    for (; i < kBurst && frame_slab_stats().resident >= at_sleep; ++i, ++freed_after) {
      frame_deallocate(blocks[i], kBlock);
    }
    EXPECT_LE(freed_after, 33 * kSlabBlocks) << "freed with " << warm << " slabs resident, and none went back";
    EXPECT_LE(frame_slab_stats().resident + 2 * 32, at_sleep + 1);
    for (; i < kBurst; ++i) frame_deallocate(blocks[i], kBlock);
  });
}

TEST(FrameCache, AWorkerGivesABurstsSlabsBackWhenItParks) {
  if (!cache_is_on()) GTEST_SKIP() << "the frame cache is off in this build (ASan)";
  const FrameSlabStats before = frame_slab_stats();
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(1));
  std::size_t took = 0;
  rt.block_on([&]() -> shoal::Task<void> {
    co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
      for (std::size_t i = 0; i < kBurst; ++i) s.spawn([]() -> shoal::Task<void> { co_return; });
      took = grown(frame_slab_stats(), before);
      co_return;
    });
  }());
  EXPECT_GE(took, kBurst / kSlabBlocks);
  // The worker parks once the burst is over; wait for its trim, bounded.
  // What it keeps: 32 spares, the slabs its two classes' local lists hold
  // (4,096 blocks each, at most 16 slabs), and two slabs it carves from.
  constexpr std::size_t kKept = 32 + 2 * 16 + 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (grown(frame_slab_stats(), before) > kKept && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_LE(grown(frame_slab_stats(), before), kKept) << "of " << took << " slabs the burst took";
}

TEST(FrameCache, ALiveFrameKeepsItsOwnSlabOnly) {
  if (!cache_is_on()) GTEST_SKIP() << "the frame cache is off in this build (ASan)";
  on_own_thread([] {
    const FrameSlabStats before = frame_slab_stats();
    std::vector<void*> blocks = allocate_burst();
    void* survivor = std::exchange(blocks[kBurst / 2], nullptr);
    std::memset(survivor, 0x5a, kBlock);
    for (void* p : blocks) {
      if (p != nullptr) frame_deallocate(p, kBlock);
    }
    frame_cache_trim();
    EXPECT_LE(grown(frame_slab_stats(), before), kMaxKeptSlabs + 1);
    // Its slab was not given back under it.
    for (std::size_t i = 0; i < kBlock; ++i) ASSERT_EQ(static_cast<unsigned char*>(survivor)[i], 0x5a);
    frame_deallocate(survivor, kBlock);
  });
}

TEST(FrameCache, SlabsGivenBackAreReusedBeforeNewOnesAreMapped) {
  if (!cache_is_on()) GTEST_SKIP() << "the frame cache is off in this build (ASan)";
  auto burst = [] {
    std::vector<void*> blocks = allocate_burst();
    for (void* p : blocks) frame_deallocate(p, kBlock);
  };
  on_own_thread(burst);
  const FrameSlabStats first = frame_slab_stats();
  on_own_thread(burst);
  on_own_thread(burst);
  const FrameSlabStats third = frame_slab_stats();
  EXPECT_LE(third.mapped - first.mapped, 32u) << "at most one new chunk: the slabs of the first burst are reused";
}

TEST(FrameCache, BlocksFreedOnAnotherThreadComeBackToTheirOwner) {
  if (!cache_is_on()) GTEST_SKIP() << "the frame cache is off in this build (ASan)";
  on_own_thread([] {
    constexpr std::size_t kN = 10'000;
    std::vector<void*> blocks(kN);
    for (auto& p : blocks) p = frame_allocate(kBlock);
    std::vector<void*> freed = blocks;
    std::sort(freed.begin(), freed.end());
    on_own_thread([&] {
      for (void* p : blocks) frame_deallocate(p, kBlock);
    });
    const FrameSlabStats before = frame_slab_stats();
    std::size_t reused = 0;
    for (auto& p : blocks) {
      p = frame_allocate(kBlock);
      reused += std::binary_search(freed.begin(), freed.end(), p) ? 1 : 0;
    }
    EXPECT_EQ(reused, kN) << "every block freed elsewhere is handed out again by its owner";
    EXPECT_EQ(frame_slab_stats().mapped, before.mapped);
    for (void* p : blocks) frame_deallocate(p, kBlock);
  });
}

// Allocates until it is handed one of `freed` (the owner's remote list,
// drained when its local list is empty), at most 10 s: true if it was.
// What it carves meanwhile stays allocated, so each try reaches the remote
// list again; all of it is freed before returning.
bool owner_gets_one_back(const std::vector<void*>& freed) {
  std::vector<void*> carved;
  bool back = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!back && std::chrono::steady_clock::now() < deadline) {
    void* p = frame_allocate(kBlock);
    back = std::binary_search(freed.begin(), freed.end(), p);
    carved.push_back(p);
    if (!back) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (void* p : carved) frame_deallocate(p, kBlock);
  return back;
}

// Fewer frees than a batch (32) of another thread's blocks wait on the
// freeing thread. A worker that then parks, or a blocking thread that goes
// idle, hands them home first: held while it sleeps, they would keep the
// owner's slabs from ever being given back.
// Ten blocks of the calling thread's (fewer than a batch), for another
// thread to free, and their addresses sorted, to know them when they come back.
struct ForeignFrees {
  std::vector<void*> blocks = std::vector<void*>(10);
  std::vector<void*> sorted;
  ForeignFrees() {
    for (auto& p : blocks) p = frame_allocate(kBlock);
    sorted = blocks;
    std::sort(sorted.begin(), sorted.end());
  }
  void free_all() const {
    for (void* p : blocks) frame_deallocate(p, kBlock);
  }
};

TEST(FrameCache, FreesHeldForAnotherOwnerGoHomeWhenTheWorkerParks) {
  if (!cache_is_on()) GTEST_SKIP() << "the frame cache is off in this build (ASan)";
  on_own_thread([] {
    const ForeignFrees f;
    shoal::Runtime rt(shoal::RuntimeOptions::with_workers(1));
    const std::uint64_t parks = rt.metrics().workers[0].parks;
    rt.block_on([&]() -> shoal::Task<void> {
      f.free_all();
      co_return;
    }());
    // The worker counts a park after it has flushed: wait for that, bounded.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (rt.metrics().workers[0].parks == parks && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(owner_gets_one_back(f.sorted)) << "the parked worker kept the owner's blocks";
  });
}

TEST(FrameCache, FreesHeldForAnotherOwnerGoHomeWhenABlockingThreadIdles) {
  if (!cache_is_on()) GTEST_SKIP() << "the frame cache is off in this build (ASan)";
  on_own_thread([] {
    const ForeignFrees f;
    shoal::Runtime rt(shoal::RuntimeOptions::with_workers(1));
    rt.block_on([&]() -> shoal::Task<void> { co_await shoal::spawn_blocking([&] { f.free_all(); }); }());
    EXPECT_TRUE(owner_gets_one_back(f.sorted)) << "the idle blocking thread kept the owner's blocks";
  });
}

// A memory resource whose buffer is itself a block of the cache (a frame's
// own array, say): what it hands out lies inside a cache block.
class ResourceInABlock : public std::pmr::memory_resource {
 public:
  ResourceInABlock(unsigned char* buffer, std::size_t size) : buffer_(buffer), size_(size) {}
  int deallocated = 0;

 private:
  void* do_allocate(std::size_t n, std::size_t) override {
    if (used_ + n > size_) throw std::bad_alloc();
    void* p = buffer_ + used_;
    used_ += (n + 15) / 16 * 16;
    return p;
  }
  void do_deallocate(void*, std::size_t, std::size_t) override { ++deallocated; }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }

  unsigned char* buffer_;
  std::size_t size_;
  std::size_t used_ = 0;
};

TEST(FrameCache, AFrameFromAResourceInsideACacheBlockGoesBackToTheResource) {
  if (!cache_is_on()) GTEST_SKIP() << "the frame cache is off in this build (ASan)";
  on_own_thread([] {
    constexpr std::size_t kOuter = 1024;  // the largest class
    auto* outer = static_cast<unsigned char*>(frame_allocate(kOuter));
    ResourceInABlock resource(outer, kOuter);  // from the block's first byte on
    std::vector<std::pair<void*, std::size_t>> inner;
    {
      shoal::detail::FrameResourceGuard guard(&resource);
      for (std::size_t size : {16, 48, 112, 240, 496}) inner.emplace_back(frame_allocate(size), size);
    }
    for (auto [p, size] : inner) {
      EXPECT_TRUE(p > outer && p < outer + kOuter);
      frame_deallocate(p, size);  // after the guard: the frame itself says where it came from
    }
    EXPECT_EQ(resource.deallocated, 5) << "a frame from the resource was taken for a block of the cache";
    // Had one gone to the cache, it would be handed out again.
    std::vector<std::pair<void*, std::size_t>> fresh;
    for (auto [p, size] : inner) {
      for (int k = 0; k < 4; ++k) {
        void* q = frame_allocate(size);
        EXPECT_FALSE(q >= outer && q < outer + kOuter) << "the cache handed out memory inside a live block";
        fresh.emplace_back(q, size);
      }
    }
    for (auto [q, size] : fresh) frame_deallocate(q, size);
    frame_deallocate(outer, kOuter);
  });
}

TEST(FrameCache, EveryClassHandsOutAlignedBlocksThatDoNotOverlap) {
  if (!cache_is_on()) GTEST_SKIP() << "the frame cache is off in this build (ASan)";
  on_own_thread([] {
    struct Block {
      unsigned char* p;
      std::size_t size;
    };
    std::vector<Block> blocks;
    for (int round = 0; round < 3; ++round) {
      for (std::size_t size = 1; size <= 1008; size += 7) {
        for (int k = 0; k < 40; ++k) {
          auto* p = static_cast<unsigned char*>(frame_allocate(size));
          ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u) << "size " << size;
          std::memset(p, static_cast<int>(blocks.size() & 0xff), size);
          blocks.push_back({p, size});
        }
      }
      // Free every other block, so the next round mixes reused and new ones.
      std::vector<Block> kept;
      for (std::size_t i = 0; i < blocks.size(); ++i) {
        const Block& b = blocks[i];
        for (std::size_t j = 0; j < b.size; ++j) {
          ASSERT_EQ(b.p[j], static_cast<unsigned char>(i & 0xff)) << "block " << i << " was overwritten";
        }
        if (i % 2 == 0) {
          frame_deallocate(b.p, b.size);
        } else {
          kept.push_back(b);
        }
      }
      blocks.clear();
      for (const Block& b : kept) {
        std::memset(b.p, static_cast<int>(blocks.size() & 0xff), b.size);
        blocks.push_back(b);
      }
    }
    for (const Block& b : blocks) frame_deallocate(b.p, b.size);
  });
}

}  // namespace
