// SlabSource: mapping chunks of slabs and giving their pages back
// (src/runtime/slab_source.hpp).
#include "src/runtime/slab_source.hpp"

#include <algorithm>
#include <new>

namespace shoal::detail {

std::atomic<std::uint64_t> g_chunk_bits[(std::size_t{1} << (kAddressBits - kChunkShift)) / 64];

namespace {
void mark_chunk(const char* base) noexcept {
  const std::uintptr_t i = reinterpret_cast<std::uintptr_t>(base) >> kChunkShift;
  g_chunk_bits[i / 64].fetch_or(std::uint64_t{1} << (i % 64), std::memory_order_relaxed);
}
}  // namespace

Slab* SlabSource::take() {
  {
    shim::lock_guard<shim::mutex> g(mu_);
    if (cold_count_ != 0) return cold_[--cold_count_];
    if (chunk_next_ != chunk_end_) {
      auto* s = reinterpret_cast<Slab*>(chunk_next_);
      chunk_next_ += kSlabBytes;
      return s;
    }
  }
  // Map outside the lock; aligned to its size (one bit of g_chunk_bits)
  // by over-mapping and trimming.
  constexpr std::size_t bytes = kChunkSlabs * kSlabBytes;
  static_assert(bytes == kChunkBytes);
  void* m = ::mmap(nullptr, 2 * bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  auto* raw = static_cast<char*>(m);
  auto* base = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw) + bytes - 1) & ~(bytes - 1));
  if (base != raw) ::munmap(raw, static_cast<std::size_t>(base - raw));
  if (char* tail = base + bytes; tail != raw + 2 * bytes) ::munmap(tail, static_cast<std::size_t>(raw + 2 * bytes - tail));
  if ((reinterpret_cast<std::uintptr_t>(base) >> kAddressBits) != 0) {  // Linux maps above 128 TiB only on request
    ::munmap(base, bytes);
    throw std::bad_alloc();
  }
  mark_chunk(base);
  shim::lock_guard<shim::mutex> g(mu_);
  if (cold_ == nullptr) cold_ = map_cold_array();
  if (cold_ == nullptr || mapped_ + kChunkSlabs > kMaxSlabs) {
    ::munmap(base, bytes);
    throw std::bad_alloc();
  }
  mapped_ += kChunkSlabs;
  // A chunk left by a racing thread is dropped from carving, not lost:
  // its remaining slabs go with the cold ones (never touched: not resident).
  for (char* p = chunk_next_; p != chunk_end_; p += kSlabBytes) cold_[cold_count_++] = reinterpret_cast<Slab*>(p);
  chunk_next_ = base + kSlabBytes;
  chunk_end_ = base + bytes;
  return reinterpret_cast<Slab*>(base);
}

void SlabSource::give_back(IntrusiveList<Slab>& list) noexcept {
  Slab* batch[kGiveBackBatch];
  while (!list.empty()) {
    std::size_t n = 0;
    while (n < kGiveBackBatch && !list.empty()) batch[n++] = list.pop_front();
    std::sort(batch, batch + n);
    for (std::size_t i = 0; i < n;) {
      std::size_t j = i + 1;
      while (j < n && reinterpret_cast<char*>(batch[j]) == slab_end(batch[j - 1])) ++j;
      ::madvise(batch[i], (j - i) * kSlabBytes, MADV_DONTNEED);
      i = j;
    }
    shim::lock_guard<shim::mutex> g(mu_);
    for (std::size_t i = 0; i < n; ++i) cold_[cold_count_++] = batch[i];  // room for every mapped slab
  }
}

SlabSource& slab_source() noexcept {
  static SlabSource source;  // never destroyed before the caches that use it: caches are never destroyed
  return source;
}

}  // namespace shoal::detail
