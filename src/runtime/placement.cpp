// Placement's rules (see placement.hpp), and the runtime ABI's placement
// entry points: one per event (a wait, a contention move, a pin at spawn).
#include "src/runtime/placement.hpp"

#include "src/runtime/scheduler.hpp"

namespace shoal::detail {
namespace {

// 128 awaits (a budget) at ~64 ns each, about a cache line's one-way trip
// between two cores here: see at_yield.
constexpr std::int64_t kLongPinnedPoll = 8000;

// One more budget yield (or, for a channel's move, a wait) pinned through;
// ends the pin at the 64th, or when the poll ending here was long.
// A channel's move that runs out by count was trading, not computing: it
// is free for a worker that is up anyway, but its next push wakes nobody
// (kLapsed). Waking the idle worker for it cost a wake, a steal and a move
// back each time: 540 wakes and 10 % of chan_throughput.
void count(TaskRecord* f, unsigned awaits, const Worker* w) noexcept {
  const bool channel = (f->place.soft & placement::kPolls) != 0;
  if (channel && (w == nullptr || (to_ns(Clock::now()) - w->pinned_poll_start) * kBudget >
                                      kLongPinnedPoll * static_cast<std::int64_t>(awaits))) {
    placement::end_soft_pin(f);
  } else if ((f->place.soft & placement::kYields) == placement::kYields) {
    placement::end_soft_pin(f);
    if (channel) f->place.soft = placement::kLapsed;
  } else {
    f->place.soft = static_cast<std::uint16_t>(f->place.soft + placement::kYield);
  }
}

}  // namespace

// A task that moved to where its lock's holder runs is free again after
// 64 budget yields (~8,000 awaits) even if it never waits: tasks that took
// a lock together but mostly compute must not stay crowded onto one
// worker. Sooner costs the contended case: at every yield the idle worker
// steals a contender and the gathering starts over (8 tasks x 100k
// increments on 2 workers: 61 M/s pinned until a wait, 59 M/s with 64
// yields, 49 with 16, 28 with 1).
// A task that moved to its channel's home (kPolls) is also freed by a long
// poll: 128 awaits in more than kLongPinnedPoll, i.e. more work between its
// awaits than a cache line's trip between cores costs, so it computes more
// than it trades and spreading it pays. Numbers in docs/scheduler.md.
void placement::at_yield(TaskRecord* f, const Worker* w) noexcept { count(f, kBudget, w); }

// ---- the runtime ABI (runtime_abi.hpp) ----------------------------------------

void placement_at_wait(TaskRecord* f) noexcept {
  if (!placement::soft_pinned(f)) return;
  if (!placement::times_polls(f)) {  // a lock's move
    placement::end_soft_pin(f);
    return;
  }
  // The awaits of the poll that ends here (its budget counts them down), at
  // least 16: a poll under 1 us is never long, as the clock reads and the
  // wait's own set-up are a good part of it.
  const unsigned done = f->budget == 0 ? 1u : static_cast<unsigned>(kBudget - f->budget + 1);
  const unsigned awaits = done < 16 ? 16u : done;
  count(f, awaits, tls_worker);
}

bool migrate_from(TaskRecord* f, std::coroutine_handle<> h, std::uint8_t to, bool end_at_long_poll,
                  const void* /*awaiter: see yield_from*/) noexcept {
  if (f->sched == nullptr) return false;
  f->resume = h;
  return f->sched->migrate(f, to, end_at_long_poll);
}

void pin_to_current_worker(TaskRecord* f) noexcept { f->sched->pin_to_current_worker(f); }

}  // namespace shoal::detail
