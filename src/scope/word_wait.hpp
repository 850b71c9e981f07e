// WordWaiter::register_wait (shoal/detail/task_record.hpp): the waiting
// side of the single-waiter word, for the rooms that register on one (a
// TaskSet's body, a join); its canceller's side is cancel_protocol.cpp's.
#pragma once

#include <cstdint>

#include "shoal/detail/task_record.hpp"

namespace shoal::detail {

template <class Check>
WordWaiter::Registered WordWaiter::register_wait(shim::atomic<std::uint64_t>& word, TaskRecord* f,
                                              Check&& check) noexcept {
  word_ = &word;
  waiter = f;
  // A mark left by a canceller of an earlier wait (no hook is armed now,
  // so nobody sets it concurrently).
  if ((word_->load(std::memory_order_relaxed) & kCancelPending) != 0) clear_pending();
  if (!arm_wait(f, this)) return Registered::cancelled;
  std::uint64_t v = word_->load(std::memory_order_acquire);
  for (;;) {
    Registered r = Registered::not_needed;
    if ((v & kCancelPending) != 0) {
      clear_pending();
      r = Registered::cancelled;
    } else if (bit_ == 0 && in(v) != nullptr) {
      // Another task waits on the word: this one does not (not_needed).
    } else if (const int c = check(v); c < 0) {
      continue;
    } else if (c == 0) {
      if (word_->compare_exchange_weak(v, v | mark(), std::memory_order_acq_rel)) return Registered::waiting;
      continue;
    }
    disarm_wait(f, this);
    return r;
  }
}


}  // namespace shoal::detail
