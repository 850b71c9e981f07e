// The scheduler entry points of task.hpp and injector.hpp, for the model
// binary (it does not link libshoal): a wake is counted on the TestRecord and
// its thread, blocked in wait_until_scheduled(), goes on.
#include "harness.hpp"

#include <cstdlib>

#include "shoal/detail/thread_wake.hpp"
#include "shoal/runtime/errors.hpp"
#include "src/runtime/injector.hpp"
#include "src/runtime/placement.hpp"

namespace shoal {
namespace {
thread_local detail::TaskRecord* tls_record = nullptr;
}  // namespace

namespace detail {

void schedule(TaskRecord* f) noexcept {
  auto* t = static_cast<model::TestRecord*>(f);
  t->wakes.fetch_add(1);
  t->wakes.notify_all();
}
void schedule_spawn(TaskRecord* f) noexcept { schedule(f); }
void schedule_yield(TaskRecord* f) noexcept { schedule(f); }
// The model's moves set no pin, so a wait has none to end or count.
void placement_at_wait(TaskRecord* f) noexcept { placement::end_soft_pin(f); }
void yield_from(TaskRecord* f, std::coroutine_handle<> h, const void*) noexcept {
  f->resume = h;
  schedule(f);
}
// A move to another worker: the task's worker changes, and it is scheduled.
bool migrate_from(TaskRecord* f, std::coroutine_handle<> h, std::uint8_t to, bool, const void*) noexcept {
  if (to == f->worker) return false;
  ++static_cast<model::TestRecord*>(f)->moves;
  f->worker = to;
  f->resume = h;
  schedule(f);
  return true;
}
void schedule_batch(Scheduler*, TaskBatch& batch) noexcept {
  for (TaskRecord* f = batch.head; f != nullptr;) {
    TaskRecord* next = f->next;  // f may run (and be reused) once scheduled
    schedule(f);
    f = next;
  }
  batch = TaskBatch{};
}
TaskRecord* current_record() noexcept { return tls_record; }
bool on_worker_thread() noexcept { return false; }
// A named record's label is libshoal's (src/runtime/runtime.cpp); the
// model's records are never named.
void TaskRecord::drop_name() noexcept { std::abort(); }

// A plain thread's wake-up over the model's atomic (libshoal's is a futex):
// the model has no clock, so a timed wait is an untimed one.
void ThreadWake::wait() noexcept {
  while (flag_.load(std::memory_order_acquire) == 0) flag_.wait(0, std::memory_order_acquire);
}
bool ThreadWake::wait_until(std::chrono::steady_clock::time_point) noexcept {
  wait();
  return true;
}
void ThreadWake::notify() noexcept {
  flag_.store(1, std::memory_order_release);
  flag_.notify_one();
}

}  // namespace detail

namespace model {

void set_current_record(detail::TaskRecord* f) noexcept { tls_record = f; }

void wait_until_scheduled(TestRecord& f) noexcept {
  f.wakes.wait(f.resumed);
  ++f.resumed;
}

}  // namespace model
}  // namespace shoal
