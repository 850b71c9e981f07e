// The runtime's ABI: the calls that the public templates and the rooms in
// src/ make into the runtime (src/runtime/) to schedule, place and yield
// tasks, report faults, read the clock and file timers, in one place. A
// Scheduler* is only ever passed back through calls like these. (Frame
// allocation is frame_alloc.hpp's; a task's names and dumps, task_record.hpp's.)
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>

namespace shoal::detail {

class Scheduler;
struct TaskRecord;
struct TimerEntry;

using Clock = std::chrono::steady_clock;

// ---- scheduling (src/runtime/scheduler.cpp) and placement (placement.cpp) --

/// Placement's wait event: `f` starts a wait. A lock's contention move ends
/// here (whatever wakes it may run it anywhere); a channel's lasts, counted
/// as a budget yield, since its wakes come from the peers it moved to join.
void placement_at_wait(TaskRecord* f) noexcept;

/// Ready to run: from a wake. Goes to the worker's LIFO slot when called on a worker.
void schedule(TaskRecord* f) noexcept;
/// A new child: to the back of the local queue (or the injector off-worker).
void schedule_spawn(TaskRecord* f) noexcept;
/// A spawned task is done (for RuntimeMetrics::tasks_live).
void task_finished(TaskRecord& f) noexcept;
/// A yield: to the back of the local queue, behind what is ready.
void schedule_yield(TaskRecord* f) noexcept;

/// Reschedules `f` at `h` behind the ready tasks, from inside an inline
/// await_suspend; `awaiter` is that awaiter. Handing it to this opaque call
/// pins the awaiter's stores before the hand-off: clang 14 may otherwise
/// sink them past an inlined await_suspend (llvm#56301), into a frame that
/// another worker is already running (a race TSan caught on
/// CheckpointAwaiter). Every inline await_suspend that hands its coroutine
/// on without first publishing `this` must yield through here.
void yield_from(TaskRecord* f, std::coroutine_handle<> h, const void* awaiter) noexcept;
/// Placement's contention event: moves `f` (suspending at `h`; `awaiter` as
/// for yield_from) to worker
/// `to`, soft-pinned there until its next wait or 64 budget yields, or
/// (`end_at_long_poll`) a budget yield after a poll that took long. False
/// (nothing done) off a worker, on the deterministic executor, for a
/// hard-pinned task, or when `to` is the current worker.
bool migrate_from(TaskRecord* f, std::coroutine_handle<> h, std::uint8_t to, bool end_at_long_poll,
                  const void* awaiter) noexcept;
/// Placement's spawn_local event: pins `f` (not yet scheduled) to the
/// calling worker: it will only ever run there. No effect off a worker or
/// on the deterministic executor.
void pin_to_current_worker(TaskRecord* f) noexcept;
/// The task the current thread is running (null outside a task). Out of
/// line on purpose: never cache a thread_local across a suspension.
TaskRecord* current_record() noexcept;

/// True on one of a runtime's worker threads (where blocking is a bug).
bool on_worker_thread() noexcept;

/// Reports `e` to the runtime's on_suppressed_fault (default: one line on
/// stderr). Out of line, noexcept, allocation-free by default.
void report_suppressed_fault(Scheduler* s, const std::exception_ptr& e) noexcept;

// ---- the clock and the timers (src/runtime/scheduler.cpp, driver/time/) ----

/// The current time of the runtime whose worker calls this (its manual
/// clock, if it has one); Clock::now() on any other thread.
Clock::time_point clock_now() noexcept;

enum class TimerInsert { queued, cancelled };

/// Queues `e` (state idle -> queued) on the calling worker's shard unless
/// `unless_cancelled` is given and already cancelled (checked under the
/// shard's lock, which a canceller's timer_remove also takes, so a cancel is
/// never missed). O(1), no allocation. Wakes the driver if it sleeps past
/// the deadline.
/// `e` must be bound first (timer_bind).
TimerInsert timer_insert(Scheduler* s, TimerEntry* e, const TaskRecord* unless_cancelled = nullptr) noexcept;
/// Chooses the wheel `e` will be filed on (the calling worker's). Before
/// anyone else can reach `e`: a canceller reads it to find the wheel's lock.
void timer_bind(Scheduler* s, TimerEntry* e) noexcept;
/// Takes `e` out if it has not started firing. True if removed.
bool timer_remove(Scheduler* s, TimerEntry* e) noexcept;
/// Removes `e`, or waits until an in-progress firing of it has finished, so
/// the caller may destroy it.
void timer_cancel_and_wait(Scheduler* s, TimerEntry* e) noexcept;

}  // namespace shoal::detail
