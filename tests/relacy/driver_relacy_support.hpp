// What the driver's Relacy tests (timer_relacy_test.cpp,
// io_source_relacy_test.cpp) share besides the harness: a runtime as the
// driver's files see it.
#pragma once

#include <cstdlib>
#include <memory>

#include "harness.hpp"
#include "shoal/detail/frame_alloc.hpp"
#include "shoal/runtime/task.hpp"
#include "src/runtime/scheduler.hpp"  // the Relacy stand-in (tests/relacy/src/runtime/scheduler.hpp)

namespace shoal::relacy {
// The only block these tests free through frame_deallocate is an idle
// limit's entry (IoOp::release_limit), which goes without its destructor:
// trivial with std::atomic, but Relacy's atomics must be destroyed.
inline void destroy_idle_entry(void* p, std::size_t size) {
  if (size == sizeof(detail::IoIdleEntry)) static_cast<detail::IoIdleEntry*>(p)->~IoIdleEntry();
}

/// A runtime as the driver's files see it: one timer wheel, and a task in a
/// scope's node (a task always runs in one). Build it in the suite's
/// before() and drop it in after(): its atomics need Relacy's context.
struct DriverWorld {
  detail::Scheduler sched;
  std::unique_ptr<detail::TimerQueue> timers;
  detail::CancelNode node;
  Record f;
  void build() {
    timers = std::make_unique<detail::TimerQueue>(1, 0);
    sched.driver().timers = timers.get();
    before_frame_free = destroy_idle_entry;
    f.sched = &sched;
    f.node.store(&node, std::memory_order_relaxed);
    f.home = &node;
  }
  void drop() {
    before_frame_free = nullptr;
    sched.driver().timers = nullptr;
    timers.reset();
  }
  /// The task's end: out of its scope's list if its first wait linked it.
  void leave() {
    if ((f.flags & detail::TaskRecord::kLinked) != 0) node.remove_record(&f);
    set_current_record(nullptr);
    over.store(true, std::memory_order_release);
  }
  detail::shim::atomic<bool> over{false};  // the task is done: the driver stops waiting
};

/// The driver's turn: once a timer is filed (or the task is over, `over`),
/// fires what is due at a time past every deadline. Once is enough: in
/// every test something else (a canceller, another case) also ends the
/// wait, so the turn may come at any point after the filing.
inline void fire_timers(detail::TimerQueue& q, const detail::shim::atomic<bool>& over) {
  while (q.next_deadline() == detail::TimerQueue::kNever) {
    if (over.load(std::memory_order_acquire)) return;
    rl::yield(1, RL_INFO);
  }
  (void)q.fire_due(std::int64_t{1} << 40);
}

}  // namespace shoal::relacy
