// The fibers pinned to one worker (spawn_local): never stolen. An owner-only
// FIFO, plus an inbox (a lock-free stack) for wakes from other threads; the
// push that makes the inbox non-empty tells the caller to unpark the owner.
#pragma once

#include "shoal/detail/fiber.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "src/runtime/injector.hpp"

namespace shoal::detail {

class PinnedLane {
 public:
  /// Owner only.
  void push(Fiber* f) noexcept { fifo_.push(f); }
  /// Owner only.
  Fiber* pop() noexcept { return fifo_.pop_front(); }
  bool empty() const noexcept { return fifo_.empty(); }

  /// Any thread. True if the inbox was empty: the owner may be parked.
  bool push_remote(Fiber* f) noexcept {
    Fiber* head = inbox_.load(std::memory_order_relaxed);
    do {
      f->next = head;
    } while (!inbox_.compare_exchange_weak(head, f, std::memory_order_release, std::memory_order_relaxed));
    return head == nullptr;
  }
  /// Owner only: moves the inbox into the FIFO, oldest first.
  void drain_remote() noexcept {
    if (inbox_.load(std::memory_order_relaxed) == nullptr) return;
    Fiber* f = inbox_.exchange(nullptr, std::memory_order_acquire);
    Fiber* rev = nullptr;  // the stack is newest-first
    while (f != nullptr) {
      Fiber* next = f->next;
      f->next = rev;
      rev = f;
      f = next;
    }
    while (rev != nullptr) {
      Fiber* next = rev->next;
      push(rev);
      rev = next;
    }
  }

 private:
  FiberBatch fifo_;  // owner only
  shim::atomic<Fiber*> inbox_{nullptr};
};

}  // namespace shoal::detail
