// PushStack: the one push-then-drain stack. Any thread pushes (one node or
// a chain, one CAS); a taker takes everything at once (one exchange).
// Holds the pinned lanes' inboxes, the frame cache's remote frees and the
// driver's released I/O sources. Intrusive: a node links through `Next`.
// Internal. The push's release and the take's acquire hand the nodes' contents
// over; both are checked by tests/relacy/push_stack_relacy_test.cpp (weakened
// in tests/relacy/mutants.txt, and caught).
#pragma once

#include "shoal/detail/sync_shim.hpp"

namespace shoal::detail {

template <class T, T* T::*Next>
class PushStack {
 public:
  /// Any thread: pushes the chain first..last (already linked through
  /// Next, first to last). True if the stack was empty (a taker may sleep).
  bool push(T* first, T* last) noexcept {
    T* head = head_.load(std::memory_order_relaxed);
    do {
      last->*Next = head;
    } while (!head_.compare_exchange_weak(head, first, std::memory_order_release, std::memory_order_relaxed));
    return head == nullptr;
  }
  /// Any thread: pushes one node. True if the stack was empty.
  bool push(T* node) noexcept { return push(node, node); }

  /// Takes everything, newest first (null if empty). One exchange, no
  /// load before it: on a line another core owns, a load then an exchange
  /// would cost two transfers (call empty() first where empty is common).
  T* take_all() noexcept { return head_.exchange(nullptr, std::memory_order_acquire); }
  /// Takes everything, oldest first.
  T* take_all_oldest_first() noexcept {
    T* n = take_all();
    T* rev = nullptr;
    while (n != nullptr) {
      T* next = n->*Next;
      n->*Next = rev;
      rev = n;
      n = next;
    }
    return rev;
  }
  /// A hint: nothing pushed (relaxed).
  bool empty() const noexcept { return head_.load(std::memory_order_relaxed) == nullptr; }

 private:
  shim::atomic<T*> head_{nullptr};
};

}  // namespace shoal::detail
