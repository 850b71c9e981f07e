// Placement: which worker a ready task may run on (TaskRecord::place).
//
// A task runs anywhere unless pinned. A hard pin (spawn_local) lasts for the
// task's life. A soft pin is set by a contention move: a task that met a
// lock's holder, or its channel's peers, on another worker moves there
// (migrate_from), and stays until an event ends the pin:
// - a wait (placement_at_wait): a lock's pin ends (whatever wakes it may
//   run it anywhere); a channel's pin counts the wait as a budget yield,
//   since its wakes come from the peers it moved to join;
// - a budget yield (at_yield): counted; the 64th ends the pin, and so does,
//   for a channel's move, a yield after a long poll;
// - the driver watch finding the worker stuck in one step (watch.cpp).
// The mechanism (the pinned lanes, the move itself) is the pool's
// (worker_pool.cpp); the rules are here. Numbers in docs/scheduler.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shoal/detail/task_record.hpp"

namespace shoal::detail {

struct Worker;

namespace placement {

// TaskRecord::place.soft: bit 0 set while soft-pinned; kPolls: a channel's
// move (it also ends at a long poll); kLapsed: a channel's pin ran out by
// count; bits 3..8 count the yields pinned through.
inline constexpr std::uint16_t kSoft = 1, kPolls = 2, kLapsed = 4;
inline constexpr std::uint16_t kYield = 8, kYields = 0x1f8;  // 63 counted; the 64th ends it

/// 1 + the worker `f` is pinned to, or 0.
inline std::uint32_t pin(const TaskRecord* f) noexcept { return f->place.pin; }
inline bool soft_pinned(const TaskRecord* f) noexcept { return (f->place.soft & kSoft) != 0; }
/// The step about to run is timed for the long-poll rule (a channel's move).
inline bool times_polls(const TaskRecord* f) noexcept { return (f->place.soft & kPolls) != 0; }

/// Ends a soft pin: the task may run anywhere again. By the task itself, or
/// by whoever holds it suspended and unqueued (the watch).
inline void end_soft_pin(TaskRecord* f) noexcept {
  if (soft_pinned(f)) f->place = Placement{};
}

/// A hard pin to the worker whose index is `index` (spawn_local).
inline void pin_hard(TaskRecord* f, std::size_t index) noexcept {
  f->place.pin = static_cast<std::uint16_t>(index + 1);
}

/// A contention move to the worker whose index is `index`: soft-pinned
/// there, a channel's move (`end_at_long_poll`) also ending at a long poll.
/// A task moved again while soft-pinned keeps its count: stealing the
/// contenders back apart at once would only make them contend again.
inline void pin_soft(TaskRecord* f, std::size_t index, bool end_at_long_poll) noexcept {
  f->place.pin = static_cast<std::uint16_t>(index + 1);
  f->place.soft = static_cast<std::uint16_t>((f->place.soft & kYields) | kSoft | (end_at_long_poll ? kPolls : 0));
}

/// As `f` is queued: true if its channel pin just ran out by count, so its
/// push should wake nobody (and forgets that).
inline bool take_lapsed(TaskRecord* f) noexcept {
  if ((f->place.soft & kLapsed) == 0) return false;
  f->place.soft = 0;
  return true;
}

/// A budget yield of `f`, a task of this runtime, on worker `w` (null off
/// the workers): counted against its soft pin.
void at_yield(TaskRecord* f, const Worker* w) noexcept;

}  // namespace placement
}  // namespace shoal::detail
