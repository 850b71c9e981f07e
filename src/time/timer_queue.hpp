// The runtime's timer queue: a binary min-heap of (deadline, seq, entry)
// under one mutex. Keys live in the heap array itself, so sifting compares
// contiguous memory instead of chasing a pointer into a coroutine frame per
// comparison (that chase was a fifth of the 100k-sleepers profile). Entries
// record their heap index, so removal (a cancelled sleep, a finished
// deadline scope) is O(log n). 100,000 sleepers cost 2.3 MiB here.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/frame_alloc.hpp"
#include "shoal/detail/timer.hpp"
#include "src/runtime/injector.hpp"

namespace shoal::detail {

class TimerQueue {
 public:
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

  TimerInsert insert(TimerEntry* e, const TaskRecord* unless) noexcept;
  bool remove(TimerEntry* e) noexcept;
  /// Pops every entry due at `now` (marking them firing) and runs their
  /// callbacks outside the lock. Returns how many fired.
  std::size_t fire_due(std::int64_t now) noexcept;
  /// The earliest deadline (kNever if none). Lock-free read.
  std::int64_t next_deadline() const noexcept { return next_.load(std::memory_order_seq_cst); }
  std::size_t size() const noexcept;

 private:
  struct Node {
    std::int64_t deadline;
    std::uint64_t seq;
    TimerEntry* entry;
  };
  bool less(std::size_t a, std::size_t b) const noexcept {
    const Node& x = heap_[a];
    const Node& y = heap_[b];
    return x.deadline < y.deadline || (x.deadline == y.deadline && x.seq < y.seq);
  }
  void place(std::size_t i, const Node& n) noexcept {
    heap_[i] = n;
    n.entry->index = i;
  }
  void sift_up(std::size_t i) noexcept;
  void sift_down(std::size_t i) noexcept;
  void erase_at(std::size_t i) noexcept;
  // seq_cst: pairs with the driver announcing its sleep (scheduler.cpp).
  void publish_next() noexcept { next_.store(heap_.empty() ? kNever : heap_[0].deadline, std::memory_order_seq_cst); }

  mutable shim::mutex mu_;
  std::vector<Node, FrameAllocator<Node>> heap_;
  std::uint64_t seq_ = 0;
  shim::atomic<std::int64_t> next_{kNever};
};

}  // namespace shoal::detail
