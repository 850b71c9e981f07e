// StealQueue: a worker's bounded FIFO run queue. The owner pushes at the
// tail; the owner pops and thieves steal from the head, both by CAS on it.
//
// Memory-order argument: only the owner writes `tail_` (release after the
// slot store), so a reader that acquires `tail_` sees the slot contents.
// Thieves read slots *before* claiming them with a CAS on `head_`; a slot may
// be overwritten by the owner only after `head_` moved past it, in which case
// the thief's CAS fails and its copies are discarded. Slots are atomics so
// those discarded racy reads are not data races. Indices wrap; `Index` is a
// template parameter so model tests can force wrap-around with uint8_t, and
// tests can start the indices just below the wrap point. As in every
// CAS-on-index queue, a thief preempted for 2^bits owner operations could
// see its CAS succeed on a recycled index (ABA): with uint32_t that is four
// billion operations inside one steal, which is why small index types are
// for single-threaded and model tests only.
//
// Checked under Relacy's memory model by tests/relacy/steal_queue_relacy_test.cpp;
// the three release/acquire pairs above are each weakened there in turn
// (tests/relacy/mutants.txt) and caught.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "shoal/detail/sync_shim.hpp"

namespace shoal::detail {

template <class T, class Index = std::uint32_t, std::size_t Capacity = 256>
class StealQueue {
  static_assert(std::is_pointer_v<T>);
  static_assert(std::is_unsigned_v<Index>);
  static_assert(Capacity >= 2 && (Capacity & (Capacity - 1)) == 0);
  static_assert(Capacity <= std::size_t{std::numeric_limits<Index>::max()} / 2 + 1);
  static constexpr std::size_t kMask = Capacity - 1;

 public:
  StealQueue() = default;
  /// Tests: start both indices at `start` (e.g. just below the wrap point).
  explicit StealQueue(Index start) noexcept : head_(start), tail_(start) {}

  static constexpr std::size_t capacity() noexcept { return Capacity; }

  /// Owner only. The length after the push (as the owner saw the head), or
  /// 0 when full (the caller moves half out and retries).
  std::size_t push(T v) noexcept {
    const Index t = tail_.load(std::memory_order_relaxed);
    const Index h = head_.load(std::memory_order_acquire);
    const auto len = static_cast<Index>(t - h);
    if (len >= Capacity) return 0;
    slots_[t & kMask].store(v, std::memory_order_relaxed);
    tail_.store(static_cast<Index>(t + 1), std::memory_order_release);
    return std::size_t{len} + 1;
  }

  /// Owner only: the oldest item, or nullptr.
  T pop() noexcept {
    Index h = head_.load(std::memory_order_acquire);
    for (;;) {
      const Index t = tail_.load(std::memory_order_relaxed);
      if (h == t) return nullptr;
      T v = slots_[h & kMask].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(h, static_cast<Index>(h + 1), std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        return v;
      }
    }
  }

  /// Owner only: claims the older half (for overflow to the injector) and
  /// hands each to `sink`. Returns how many moved.
  template <class Sink>
  std::size_t take_half(Sink&& sink) noexcept {
    Index h = head_.load(std::memory_order_acquire);
    for (;;) {
      const Index t = tail_.load(std::memory_order_relaxed);
      const Index n = static_cast<Index>(static_cast<Index>(t - h) / 2);
      if (n == 0) return 0;
      T buf[Capacity / 2 + 1];
      for (Index i = 0; i < n; ++i) buf[i] = slots_[static_cast<Index>(h + i) & kMask].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(h, static_cast<Index>(h + n), std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        for (Index i = 0; i < n; ++i) sink(buf[i]);
        return n;
      }
    }
  }

  /// Thief: moves about half of this queue into `dst` (owned by the caller,
  /// and empty) and returns one more item to run at once, or nullptr.
  T steal_into(StealQueue& dst) noexcept {
    Index h = head_.load(std::memory_order_acquire);
    const Index dt = dst.tail_.load(std::memory_order_relaxed);
    for (;;) {
      const Index t = tail_.load(std::memory_order_acquire);
      const Index avail = static_cast<Index>(t - h);
      if (avail == 0) return nullptr;
      if (avail > Capacity) {  // stale head; reload
        h = head_.load(std::memory_order_acquire);
        continue;
      }
      const Index n = static_cast<Index>(avail - avail / 2);
      for (Index i = 0; i < n; ++i) {
        dst.slots_[static_cast<Index>(dt + i) & kMask].store(
            slots_[static_cast<Index>(h + i) & kMask].load(std::memory_order_relaxed), std::memory_order_relaxed);
      }
      if (head_.compare_exchange_weak(h, static_cast<Index>(h + n), std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        T last = dst.slots_[static_cast<Index>(dt + n - 1) & kMask].load(std::memory_order_relaxed);
        if (n > 1) dst.tail_.store(static_cast<Index>(dt + n - 1), std::memory_order_release);
        return last;
      }
    }
  }

  /// Any thread; approximate.
  bool empty() const noexcept {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  std::size_t size() const noexcept {
    return static_cast<Index>(tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire));
  }

 private:
  alignas(64) shim::atomic<Index> head_{0};
  alignas(64) shim::atomic<Index> tail_{0};
  alignas(64) shim::atomic<T> slots_[Capacity] = {};
};

}  // namespace shoal::detail
