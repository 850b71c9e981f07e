// What the Relacy binary provides in place of libshoal, as the model
// harness does for the SC checker: the scheduler entry points the protocol
// code calls, which here count wakes on the record instead of running
// tasks. Relacy's threads are fibers of one OS thread, so the current
// record is kept per Relacy thread, not in a thread_local.
#pragma once

#include <cstddef>

#include "relacy_support.hpp"
#include "shoal/detail/task_record.hpp"

namespace shoal::relacy {

/// A task whose wakes are counted (schedule() casts to it).
struct Record : detail::TaskRecord {
  detail::shim::atomic<int> wakes{0};
  /// Waits (as a parked task would) until scheduled once.
  void wait_scheduled() { wakes.wait(0, std::memory_order_acquire); }
};

/// The record current_record() returns on the calling Relacy thread.
void set_current_record(detail::TaskRecord* f) noexcept;

/// Called by frame_deallocate (Relacy's free) before it frees a block: a
/// test whose code under test frees an object without destroying it (a
/// trivial destructor with std::atomic, not with Relacy's) destroys it here.
inline void (*before_frame_free)(void* p, std::size_t size) = nullptr;

}  // namespace shoal::relacy
