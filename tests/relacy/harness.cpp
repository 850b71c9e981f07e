// The scheduler entry points for the Relacy binary (see harness.hpp).
#include "harness.hpp"

#include <coroutine>
#include <cstdint>
#include <cstdlib>
#include <exception>

#include "runtime/injector.hpp"
#include "runtime/placement.hpp"
#include "shoal/detail/frame_alloc.hpp"
#include "shoal/detail/runtime_abi.hpp"
#include "shoal/detail/thread_wake.hpp"

// Relacy's operator new and delete are inline (context.hpp): a copy is
// emitted, and exported to libstdc++, only where one is not inlined. delete
// always was, new not: a std::runtime_error built in libstdc++ inside a test
// took malloc's memory and gave it to Relacy's free. Taking their addresses
// emits both, so libstdc++ allocates and frees through Relacy alike.
[[gnu::used]] void* (*const g_relacy_new)(std::size_t) = &::operator new;
[[gnu::used]] void* (*const g_relacy_new_array)(std::size_t) = &::operator new[];

namespace shoal {
namespace {
detail::TaskRecord* g_current[8] = {};  // by Relacy thread
}  // namespace

namespace relacy {
void set_current_record(detail::TaskRecord* f) noexcept { g_current[rl::ctx().current_thread()] = f; }
}  // namespace relacy

namespace detail {
// release: the waker's writes happen before the woken task runs, as the run
// queue's hand-off makes them in libshoal.
// A waiter sleeps on the count (Record::wait_scheduled) rather than spin:
// Relacy's bounded search counts every spin's yield as a switch.
void schedule(TaskRecord* f) noexcept {
  auto* r = static_cast<relacy::Record*>(f);
  r->wakes.fetch_add(1, std::memory_order_release);
  r->wakes.notify_all();
}
void schedule_batch(Scheduler*, TaskBatch& batch) noexcept {
  for (TaskRecord* f = batch.head; f != nullptr;) {
    TaskRecord* next = f->next;
    schedule(f);
    f = next;
  }
  batch = TaskBatch{};
}
void placement_at_wait(TaskRecord* f) noexcept { placement::end_soft_pin(f); }
TaskRecord* current_record() noexcept { return g_current[rl::ctx().current_thread()]; }
bool on_worker_thread() noexcept { return false; }
// A frame is Relacy's memory, so a touch after its free is reported.
void* frame_allocate(std::size_t size) { return rl::rl_malloc(size, RL_INFO); }
void frame_deallocate(void* p, std::size_t size) noexcept {
  if (relacy::before_frame_free != nullptr) relacy::before_frame_free(p, size);
  rl::rl_free(p, RL_INFO);
}
// The runtime's clock stands at its epoch: every deadline a test files is
// ahead, so a sleep or an idle limit always goes through the timer queue.
Clock::time_point clock_now() noexcept { return Clock::time_point{}; }
// A child's end needs no bookkeeping here; a suppressed fault is not reported.
void task_finished(TaskRecord&) noexcept {}
void report_suppressed_fault(Scheduler*, const std::exception_ptr&) noexcept {}
// What no Relacy test reaches: no task here has a record of its own to
// free, is spawned, pinned, yields or moves.
void free_record(TaskRecord*) noexcept { std::abort(); }
void schedule_spawn(TaskRecord*) noexcept { std::abort(); }
void pin_to_current_worker(TaskRecord*) noexcept { std::abort(); }
void schedule_yield(TaskRecord*) noexcept { std::abort(); }
void yield_from(TaskRecord*, std::coroutine_handle<>, const void*) noexcept { std::abort(); }
bool migrate_from(TaskRecord*, std::coroutine_handle<>, std::uint8_t, bool, const void*) noexcept { std::abort(); }
// A record's label is libshoal's (runtime.cpp); no record here is named.
void TaskRecord::drop_name() noexcept { std::abort(); }
// No Relacy test blocks a plain thread (the wait queue's thread half is
// checked by the model tests).
void ThreadWake::wait() noexcept { std::abort(); }
bool ThreadWake::wait_until(std::chrono::steady_clock::time_point) noexcept { std::abort(); }
void ThreadWake::notify() noexcept { std::abort(); }
}  // namespace detail
}  // namespace shoal
