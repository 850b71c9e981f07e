// Where the frame cache's memory comes from: 64 KiB slabs, each of one
// size class, carved from 2 MiB chunks mapped once and never unmapped, and
// given back to the system (MADV_DONTNEED) slab by slab. A block finds its
// slab by masking its address; a bitmap of chunks says whether an address
// lies in one. The cache itself is src/runtime/frame_alloc.cpp. Internal.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "shoal/detail/intrusive_list.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "src/runtime/frame_slabs.hpp"

namespace shoal::detail {

struct FrameCache;

/// A block given back, linked through its own first word.
struct FreeBlock {
  FreeBlock* next;
};

// A slab is kSlabBytes aligned to its size, so a block finds its slab by
// masking its address; the header takes the first line. Only the owning
// cache's thread writes a slab's header, so nothing in it is atomic: a
// thread freeing a block reads `owner` and `size_class`, written before the
// block was carved and ordered by whatever handed the frame over; they
// change only once every block is back (a block on a remote list is not).
constexpr std::size_t kSlabBytes = std::size_t{64} << 10;
constexpr std::size_t kSlabHeader = 64;
constexpr std::size_t kColours = 16;  // start offsets, a line apart (at most 960 bytes of a slab)
constexpr std::size_t kChunkSlabs = 32;  // slabs are mapped 2 MiB at a time
constexpr std::size_t kGiveBackBatch = 32;  // how many go back to the system at once

/// The hook links it into one of its cache's lists: the slabs of its
/// class with returned blocks, or the free slabs kept as spares.
struct Slab : ListHook<> {
  FrameCache* owner;  // the cache its blocks belong to
  FreeBlock* free;    // blocks given back to this slab
  char* bump;         // the next block never handed out
  std::uint32_t in_use;  // handed out and not given back here
  std::uint32_t size_class;
  char* start;        // the first block: past the header and the slab's colour
};
static_assert(sizeof(Slab) <= kSlabHeader);

#ifdef MADV_POPULATE_WRITE
constexpr int kMadvPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kMadvPopulateWrite = 23;  // Linux 5.14; older kernels return EINVAL
#endif

inline Slab* slab_of(void* block) noexcept {
  return reinterpret_cast<Slab*>(reinterpret_cast<std::uintptr_t>(block) & ~(kSlabBytes - 1));
}
inline char* slab_end(Slab* s) noexcept { return reinterpret_cast<char*>(s) + kSlabBytes; }

// Which 2 MiB of the address space hold chunks of slabs: a bit each, for
// the 128 TiB a process's mappings live in without asking for more. 8 MiB
// of zero pages; a page of it is touched per 64 GiB of addresses looked up.
constexpr unsigned kChunkShift = 21;
constexpr std::size_t kChunkBytes = std::size_t{1} << kChunkShift;
constexpr unsigned kAddressBits = 47;
extern std::atomic<std::uint64_t> g_chunk_bits[(std::size_t{1} << (kAddressBits - kChunkShift)) / 64];

/// True if `p` lies in a chunk of slabs. Relaxed is enough: a block
/// reaches the thread that frees it through whatever handed it over, after
/// its chunk was marked.
inline bool in_chunk(const void* p) noexcept {
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  if ((a >> kAddressBits) != 0) return false;
  const std::uintptr_t i = a >> kChunkShift;
  return ((g_chunk_bits[i / 64].load(std::memory_order_relaxed) >> (i % 64)) & 1) != 0;
}

// Where slabs come from and where their pages go back: chunks mapped once
// and never unmapped (address space only), and the slabs whose pages were
// given back (MADV_DONTNEED), reused before a new chunk is mapped. Those
// are kept in an array of their own, not linked through themselves: a
// write into a given-back slab would fault a page of it back in.
class SlabSource {
 public:
  /// A slab: a given-back one first, else the next of the current chunk,
  /// else from a new chunk. Throws std::bad_alloc (out of address space or
  /// memory).
  Slab* take();
  /// Gives the pages of the slabs in `list` back to the system (and empties
  /// it): sorted, so that slabs carved side by side, and freed side by side
  /// after a burst, go in one madvise (and one TLB shootdown) per run.
  void give_back(IntrusiveList<Slab>& list) noexcept;
  FrameSlabStats stats() {
    shim::lock_guard<shim::mutex> g(mu_);
    const auto uncarved = static_cast<std::size_t>(chunk_end_ - chunk_next_) / kSlabBytes;
    return FrameSlabStats{mapped_, mapped_ - cold_count_ - uncarved};
  }

 private:
  // Room for a pointer to every slab there can be (64 GiB of them): 8 MiB
  // of address space, a page resident per 512 slabs given back.
  static constexpr std::size_t kMaxSlabs = std::size_t{1} << 20;
  static Slab** map_cold_array() noexcept {
    void* m = ::mmap(nullptr, kMaxSlabs * sizeof(Slab*), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m == MAP_FAILED ? nullptr : static_cast<Slab**>(m);
  }

  shim::mutex mu_;
  Slab** cold_ = nullptr;
  std::size_t cold_count_ = 0;
  std::size_t mapped_ = 0;
  char* chunk_next_ = nullptr;
  char* chunk_end_ = nullptr;
};

/// The process's slab source.
SlabSource& slab_source() noexcept;

}  // namespace shoal::detail
