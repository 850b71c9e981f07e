// The tasks pinned to one worker (spawn_local, or moved there by contention):
// an owner-only FIFO, plus an inbox (a lock-free stack) for wakes from other
// threads; the push that makes the inbox non-empty tells the caller to
// unpark the owner. Only the driver watch takes from another's inbox, to
// free the contention moves of a worker stuck in one step (watch.cpp).
//
// Orderings: none of its own. The inbox's push releases and its take
// acquires the tasks (push_stack.hpp). The owner's look at the inbox is a
// relaxed empty() and nothing else tells it of a pinned task, so a push onto
// an empty inbox must unpark it (the caller does): the Parker's release and
// acquire make the push visible to the owner's next look. Checked under
// Relacy: tests/relacy/pinned_lane_relacy_test.cpp.
#pragma once

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "src/runtime/injector.hpp"
#include "src/runtime/push_stack.hpp"

namespace shoal::detail {

class PinnedLane {
 public:
  /// Owner only.
  void push(TaskRecord* f) noexcept { fifo_.push(f); }
  /// Owner only.
  TaskRecord* pop() noexcept { return fifo_.pop_front(); }
  bool empty() const noexcept { return fifo_.empty(); }

  /// Any thread. True if the inbox was empty: the owner may be parked.
  bool push_remote(TaskRecord* f) noexcept { return inbox_.push(f); }
  /// Any thread: takes the whole inbox, oldest first (linked by `next`).
  /// Safe beside the owner's drain: each takes what its exchange got.
  TaskRecord* take_remote() noexcept { return inbox_.empty() ? nullptr : inbox_.take_all_oldest_first(); }
  /// Owner only: moves the inbox into the FIFO, oldest first.
  void drain_remote() noexcept {
    TaskRecord* rev = take_remote();
    while (rev != nullptr) {
      TaskRecord* next = rev->next;
      push(rev);
      rev = next;
    }
  }

 private:
  TaskBatch fifo_;  // owner only
  PushStack<TaskRecord, &TaskRecord::next> inbox_;
};

}  // namespace shoal::detail
