// The finishing child's side of a join word (detail::JoinCell): one
// exchange publishes kDone and hands over the result; a waiter's mark found
// in the old value means the wake is the child's (a task's wait, or an
// on_join case's select: WordWaiter::wake_taken). The handle's side of a
// drop is abandon_join (shoal/detail/join_drop.hpp: a public header's
// JoinHandle calls it). Checked under Relacy by
// tests/relacy/join_relacy_test.cpp.
#pragma once

#include <atomic>
#include <cstdint>

#include "shoal/detail/task_record.hpp"

namespace shoal::detail {

/// Publishes that the child finished (its result is in the cell). True if
/// the handle went first: nobody will take the result, and the cell is the
/// child's to free.
inline bool finish_join(JoinCell& c) noexcept {
  // acq_rel: release publishes the result to the handle; acquire orders the
  // waiter's registration (its record, its case's claim) before its wake,
  // and a handle's use of the cell before it went (abandon_join's release)
  // before the caller frees the cell.
  const std::uint64_t w = c.join.exchange(JoinCell::kDone, std::memory_order_acq_rel);
  if ((w & JoinCell::kAbandoned) != 0) return true;
  if (WordWaiter* jw = WordWaiter::in(w)) jw->wake_taken();
  return false;
}

}  // namespace shoal::detail
