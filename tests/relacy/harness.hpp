// What the Relacy binary provides in place of libshoal, as the model
// harness does for the SC checker: the scheduler entry points the protocol
// code calls, which here count wakes on the record instead of running
// tasks. Relacy's threads are fibers of one OS thread, so the current
// record is kept per Relacy thread, not in a thread_local.
#pragma once

#include "relacy_support.hpp"
#include "shoal/detail/task_record.hpp"

namespace shoal::relacy {

/// A task whose wakes are counted (schedule() casts to it).
struct Record : detail::TaskRecord {
  detail::shim::atomic<int> wakes{0};
  /// Waits (as a parked task would) until scheduled once.
  void wait_scheduled() {
    while (wakes.load(std::memory_order_acquire) == 0) rl::yield(1, RL_INFO);
  }
};

/// The record current_record() returns on the calling Relacy thread.
void set_current_record(detail::TaskRecord* f) noexcept;

}  // namespace shoal::relacy
