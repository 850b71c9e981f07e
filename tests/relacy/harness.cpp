// The scheduler entry points for the Relacy binary (see harness.hpp).
#include "harness.hpp"

#include <cstdlib>

#include "runtime/injector.hpp"
#include "runtime/placement.hpp"
#include "shoal/detail/thread_wake.hpp"

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
void schedule(TaskRecord* f) noexcept { static_cast<relacy::Record*>(f)->wakes.fetch_add(1, std::memory_order_release); }
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
// A record's label is libshoal's (runtime.cpp); no record here is named.
void TaskRecord::drop_name() noexcept { std::abort(); }
// No Relacy test blocks a plain thread (the wait queue's thread half is
// checked by the model tests).
void ThreadWake::wait() noexcept { std::abort(); }
bool ThreadWake::wait_until(std::chrono::steady_clock::time_point) noexcept { std::abort(); }
void ThreadWake::notify() noexcept { std::abort(); }
}  // namespace detail
}  // namespace shoal
