// A bounded lock-free MPMC ring (Vyukov's sequence-stamped slots, with the
// close bit in the tail as crossbeam's array channel does): the buffered fast
// path of Channel<T>. Each slot's stamp says whose turn it is: `lap+index`
// free for the sender of that lap, `+1` holding a value for the receiver.
// Closing sets a mark bit in the tail, so a send either claimed its slot
// before the close (and will be received) or sees the close: a value is never
// accepted after the last receiver saw "closed and empty".
//
// Orderings: a slot's stamp is its hand-over. A sender's release store of
// the stamp publishes the value it wrote, which the receiver's acquire load
// of it sees; a receiver's release store publishes that it has moved the
// value out, which the next lap's sender acquires before it writes. The
// head and tail CASes are seq_cst for Channel's wait protocol (channel.hpp):
// the completer of an operation reads the waiter count after its CAS, and a
// waiter reads head or tail after announcing itself, with the full and
// empty checks' seq_cst loads: all four seq_cst, one of the two sides sees
// the other (no fence needed; on x86 a fence here was an mfence on every
// would-block). close()'s fetch_or releases, and the empty check's load
// acquires it: what the closer wrote before close() happens before a
// receive that ends because the channel is closed (Go's rule); a receive
// woken by the close is ordered by the channel's lock.
// Checked under Relacy (weak memory): tests/relacy/channel_relacy_test.cpp.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <utility>

#include "shoal/detail/sync_shim.hpp"

namespace shoal::detail {

template <class T>
class Ring {
  // Only for nothrow-movable T (Channel creates one only then): a throw
  // after a slot is claimed would leave the ring stuck at that slot.

 public:
  static constexpr int kDone = 0, kClosed = 1, kWouldBlock = 2;

  explicit Ring(std::size_t capacity) : cap_(capacity), slots_(std::make_unique<Slot[]>(capacity)) {
    std::size_t p = 1;
    while (p < cap_ + 1) p <<= 1;
    mark_bit_ = p;
    one_lap_ = p << 1;
    for (std::size_t i = 0; i < cap_; ++i) slots_[i].stamp.store(i, std::memory_order_relaxed);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring() {
    std::optional<T> drop;
    while (try_pop(drop) == kDone) drop.reset();
  }

  /// Moves from `v` only on kDone. `contended` is set when another operation
  /// got in the way (a lost CAS, or a slot still being written or read).
  int try_push(T& v) noexcept {
    bool contended = false;
    return try_push(v, contended);
  }
  int try_push(T& v, bool& contended) noexcept {
    std::size_t tail = tail_.load(std::memory_order_relaxed);
    SpinWait wait(kSpins);
    for (;;) {
      if ((tail & mark_bit_) != 0) return kClosed;
      const std::size_t index = tail & (mark_bit_ - 1);
      const std::size_t lap = tail & ~(one_lap_ - 1);
      const std::size_t next = index + 1 < cap_ ? tail + 1 : lap + one_lap_;
      Slot& s = slots_[index];
      const std::size_t stamp = s.stamp.load(std::memory_order_acquire);
      if (tail == stamp) {
        if (tail_.compare_exchange_weak(tail, next, std::memory_order_seq_cst, std::memory_order_relaxed)) {
          ::new (static_cast<void*>(s.storage)) T(std::move(v));
          s.stamp.store(tail + 1, std::memory_order_release);
          return kDone;
        }
        contended = true;
        continue;
      }
      if (stamp + one_lap_ == tail + 1) {  // the slot still holds last lap's value
        if (head_.load(std::memory_order_seq_cst) + one_lap_ == tail) return kWouldBlock;  // full
      }
      contended = true;
      wait.pause();  // another sender or receiver is mid-operation
      tail = tail_.load(std::memory_order_relaxed);
    }
  }

  int try_pop(std::optional<T>& out) noexcept {
    bool contended = false;
    return try_pop(out, contended);
  }
  int try_pop(std::optional<T>& out, bool& contended) noexcept {
    std::size_t head = head_.load(std::memory_order_relaxed);
    SpinWait wait(kSpins);
    for (;;) {
      const std::size_t index = head & (mark_bit_ - 1);
      const std::size_t lap = head & ~(one_lap_ - 1);
      Slot& s = slots_[index];
      const std::size_t stamp = s.stamp.load(std::memory_order_acquire);
      if (head + 1 == stamp) {
        const std::size_t next = index + 1 < cap_ ? head + 1 : lap + one_lap_;
        if (head_.compare_exchange_weak(head, next, std::memory_order_seq_cst, std::memory_order_relaxed)) {
          T* p = std::launder(reinterpret_cast<T*>(s.storage));
          out.emplace(std::move(*p));
          p->~T();
          s.stamp.store(head + one_lap_, std::memory_order_release);
          return kDone;
        }
        contended = true;
        continue;
      }
      if (stamp == head) {  // the slot is empty: is the ring?
        const std::size_t tail = tail_.load(std::memory_order_seq_cst);
        if ((tail & ~mark_bit_) == head) return (tail & mark_bit_) != 0 ? kClosed : kWouldBlock;
      }
      contended = true;
      wait.pause();  // a sender claimed the slot and is still writing
      head = head_.load(std::memory_order_relaxed);
    }
  }

  /// Marks the ring closed; true the first time.
  bool close() noexcept { return (tail_.fetch_or(mark_bit_, std::memory_order_release) & mark_bit_) == 0; }

 private:
  struct Slot {
    shim::atomic<std::size_t> stamp{0};
    alignas(T) unsigned char storage[sizeof(T)];
  };
  static constexpr unsigned kSpins = 16;

  const std::size_t cap_;
  std::size_t mark_bit_ = 0;
  std::size_t one_lap_ = 0;
  std::unique_ptr<Slot[]> slots_;
  alignas(64) shim::atomic<std::size_t> head_{0};
  alignas(64) shim::atomic<std::size_t> tail_{0};
};

}  // namespace shoal::detail
