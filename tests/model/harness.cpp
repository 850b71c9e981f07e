// The scheduler entry points of fiber.hpp and injector.hpp, for the model
// binary (it does not link libshoal): a wake is counted on the TestFiber and
// its thread, blocked in wait_until_scheduled(), goes on.
#include "harness.hpp"

#include "shoal/runtime/errors.hpp"
#include "src/runtime/injector.hpp"

namespace shoal {
namespace {
thread_local detail::Fiber* tls_fiber = nullptr;
}  // namespace

namespace detail {

void schedule(Fiber* f) noexcept {
  auto* t = static_cast<model::TestFiber*>(f);
  t->wakes.fetch_add(1);
  t->wakes.notify_all();
}
void schedule_spawn(Fiber* f) noexcept { schedule(f); }
void schedule_yield(Fiber* f) noexcept { schedule(f); }
void yield_from(Fiber* f, std::coroutine_handle<> h, const void*) noexcept {
  f->resume = h;
  schedule(f);
}
void schedule_batch(Scheduler*, FiberBatch& batch) noexcept {
  for (Fiber* f = batch.head; f != nullptr;) {
    Fiber* next = f->next;  // f may run (and be reused) once scheduled
    schedule(f);
    f = next;
  }
  batch = FiberBatch{};
}
Fiber* current_fiber() noexcept { return tls_fiber; }
bool on_worker_thread() noexcept { return false; }
void throw_cancelled() { throw Cancelled{}; }

}  // namespace detail

namespace model {

void set_current_fiber(detail::Fiber* f) noexcept { tls_fiber = f; }

void wait_until_scheduled(TestFiber& f) noexcept {
  f.wakes.wait(f.resumed);
  ++f.resumed;
}

}  // namespace model
}  // namespace shoal
