// The handle's side of a join word (detail::JoinCell) as it goes without
// the result; the child's side is finish_join (src/scope/join_word.hpp).
// Its own header, included by join_handle.hpp only, so a change here (a
// Relacy mutant) rebuilds only what uses JoinHandle.
#pragma once

#include <cstdint>

#include "shoal/detail/task_record.hpp"

namespace shoal::detail {

/// The handle's side of a join word (JoinCell) as it goes without the
/// result (JoinHandle's drop): true if the child finished, and the cell
/// (its result, its fault) is the caller's to free; false if the child still
/// runs: the word now says kAbandoned, and the child frees the cell as it
/// finishes (finish_join, src/scope/join_word.hpp). Not while a waiter is
/// registered (a handle is not awaited as it goes). Checked under Relacy by
/// tests/relacy/join_relacy_test.cpp.
inline bool abandon_join(JoinCell& c) noexcept {
  // acquire: a child that already finished wrote its result, fault and
  // `next` before its exchange; the caller reads and frees them.
  std::uint64_t w = c.join.load(std::memory_order_acquire);
  // Running and nobody waiting; a canceller's kCancelPending, left for an
  // awaiter that is gone, goes with the word.
  while ((w & ~WordWaiter::kCancelPending) == 0) {
    // release: the handle's own use of the cell before it goes (a cancel's
    // look at `record`, an await's marks) happens before the child, which
    // acquires it in finish_join, frees the cell. acquire: the failure
    // order of this form; a CAS that fails because the child just finished
    // acquires its result, as the load above does.
    if (c.join.compare_exchange_weak(w, JoinCell::kAbandoned, std::memory_order_acq_rel)) return false;
  }
  return true;
}

}  // namespace shoal::detail
