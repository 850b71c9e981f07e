// The frame cache's slabs, as tests and diagnostics see them
// (src/runtime/frame_alloc.cpp).
#pragma once

#include <cstddef>

namespace shoal::detail {

struct FrameSlabStats {
  std::size_t mapped = 0;    // slabs ever mapped (64 KiB each)
  std::size_t resident = 0;  // slabs handed to a cache and not given back to the system
};

/// Zero everywhere when the cache is off (ASan builds).
FrameSlabStats frame_slab_stats();

/// Gives a batch (2 MiB) of the calling thread's free slabs back to the
/// system, keeping a few warm; true if more are left to give. A worker
/// calls it, batch by batch, when it has nothing to run: a burst's memory
/// goes back once the burst is over, not on the path of the tasks that
/// end it, and new work waits one batch at most.
bool frame_cache_trim_batch() noexcept;

/// All the batches at once (tests, and threads outside the scheduler).
void frame_cache_trim() noexcept;

/// Hands the calling thread's pending frees of other threads' blocks (up to
/// 31 per size class, gathered for one owner) to their owner now. A thread
/// about to sleep calls it: a parked worker or an idle blocking thread
/// holding them would keep the owner's slabs from ever being given back.
void frame_cache_flush_remote() noexcept;

}  // namespace shoal::detail
