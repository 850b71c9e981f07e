// on_join's select case (shoal/scope/join_handle.hpp), apart from its result
// type: the case marks the child's join word as a waiting awaiter does; the
// finishing child that takes the mark claims the select through it
// (wake_taken, called by finish_join in join_word.hpp) and then settles it,
// which a select that ended another way waits for before the case goes.
// Checked under Relacy by tests/relacy/join_relacy_test.cpp.
#include <cstdint>
#include <utility>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/scope/join_handle.hpp"

namespace shoal::detail {

bool JoinCaseCore::link(JoinCell* c, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept {
  claim_ = &claim;
  index_ = index;
  waiter = f;
  busy_ = false;
  settled_.store(false, std::memory_order_relaxed);
  std::uint64_t v = c->join.load(std::memory_order_acquire);
  for (;;) {
    if ((v & JoinCell::kDone) != 0) return true;
    if (in(v) != nullptr) {  // an Awaiter's mark: one awaiter at a time
      busy_ = true;
      return true;
    }
    if (c->join.compare_exchange_weak(v, v | reinterpret_cast<std::uintptr_t>(static_cast<WordWaiter*>(this)),
                                      std::memory_order_acq_rel)) {
      cell_ = c;
      return false;
    }
  }
}

void JoinCaseCore::disarm_locked() noexcept {
  JoinCell* c = std::exchange(cell_, nullptr);
  if (c == nullptr) return;
  std::uint64_t v = c->join.load(std::memory_order_acquire);
  while (in(v) == this) {
    if (c->join.compare_exchange_weak(v, v & kLowBits, std::memory_order_acq_rel)) return;
  }
  // The child exchanged the mark away: it claims through this case until it settles.
  SpinWait wait;
  while (!settled_.load(std::memory_order_acquire)) wait.pause();
}

void JoinCaseCore::wake_taken() noexcept {
  SelectClaim* claim = claim_;
  TaskRecord* f = waiter;
  bool wake = false;
  const bool won = claim->try_win(index_, wake);
  // From here the select may finish and the case go; a won, parked select
  // waits for the schedule below, so the claim outlives it.
  settled_.store(true, std::memory_order_release);
  if (won && wake) {
    disarm_wait(f, claim);
    schedule(f);
  }
}

}  // namespace shoal::detail
