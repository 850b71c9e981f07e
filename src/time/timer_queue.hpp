// The runtime's timer queue: an intrusive binary min-heap of TimerEntry
// (deadline, seq) under one mutex. Entries record their heap index, so
// removal (a cancelled sleep, a deadline scope that finished) is O(log n).
// 100,000 pending sleepers cost 100,000 pointers here and nothing else.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "shoal/detail/fiber.hpp"
#include "shoal/detail/timer.hpp"
#include "src/runtime/injector.hpp"

namespace shoal::detail {

class TimerQueue {
 public:
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

  /// False (not queued) if `unless` is already cancelled.
  bool insert(TimerEntry* e, const Fiber* unless) noexcept;
  bool remove(TimerEntry* e) noexcept;
  /// Pops every entry due at `now` (marking them firing) and runs their
  /// callbacks outside the lock. Returns how many fired.
  std::size_t fire_due(std::int64_t now) noexcept;
  /// The earliest deadline (kNever if none). Lock-free read.
  std::int64_t next_deadline() const noexcept { return next_.load(std::memory_order_seq_cst); }
  std::size_t size() const noexcept;

 private:
  bool less(std::size_t a, std::size_t b) const noexcept {
    const TimerEntry* x = heap_[a];
    const TimerEntry* y = heap_[b];
    return x->deadline < y->deadline || (x->deadline == y->deadline && x->seq < y->seq);
  }
  void place(std::size_t i, TimerEntry* e) noexcept {
    heap_[i] = e;
    e->index = i;
  }
  void sift_up(std::size_t i) noexcept;
  void sift_down(std::size_t i) noexcept;
  void erase_at(std::size_t i) noexcept;
  // seq_cst: pairs with the driver announcing its sleep (scheduler.cpp).
  void publish_next() noexcept { next_.store(heap_.empty() ? kNever : heap_[0]->deadline, std::memory_order_seq_cst); }

  mutable shim::mutex mu_;
  std::vector<TimerEntry*> heap_;
  std::uint64_t seq_ = 0;
  shim::atomic<std::int64_t> next_{kNever};
};

}  // namespace shoal::detail
