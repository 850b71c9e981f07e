// The deterministic executor (see deterministic.hpp).
#include "src/runtime/deterministic.hpp"

#include <thread>

#include "shoal/testing/step_hook.hpp"
#include "src/runtime/frame_slabs.hpp"
#include "src/runtime/scheduler.hpp"

namespace shoal::detail {
namespace {
shim::atomic<const testing::StepHook*> g_step_hook{nullptr};
}  // namespace
}  // namespace shoal::detail

namespace shoal::testing {
void set_step_hook(const StepHook* hook) noexcept { detail::g_step_hook.store(hook, std::memory_order_release); }
}  // namespace shoal::testing

namespace shoal::detail {

DeterministicExecutor::DeterministicExecutor(Scheduler& sched, std::uint64_t seed) : sched_(sched), rng_(seed) {
  auto w = std::make_unique<Worker>();
  w->sched = &sched;
  w->slot = 0;
  Worker* wp = w.get();
  workers_.push_back(std::move(w));
  wp->thread = std::thread([this, wp] {
    tls_worker = wp;
    run(*wp);
    tls_worker = nullptr;
  });
}

DeterministicExecutor::~DeterministicExecutor() { stop(); }

void DeterministicExecutor::stop() noexcept {
  Worker& w = *workers_[0];
  sched_.unpark(w);
  if (w.thread.joinable()) w.thread.join();
  ForeignWake::wait_out(foreign_wakes_);
}

void DeterministicExecutor::schedule(TaskRecord* f) noexcept {
  ForeignWake guard(foreign_wakes_);
  push(f);
  sched_.unpark(*workers_[0]);
}

void DeterministicExecutor::schedule_batch(bool own, TaskBatch& batch) noexcept {
  if (own) {
    push_all(batch);
    return;
  }
  ForeignWake guard(foreign_wakes_);
  push_all(batch);
  sched_.unpark(*workers_[0]);
}

void DeterministicExecutor::blocking_finished() noexcept {
  // A pool thread, after its wake: safe, the blocking pool joins it before
  // this executor goes.
  if (in_flight_.fetch_sub(1, std::memory_order_seq_cst) == 1) sched_.unpark(*workers_[0]);
}

void DeterministicExecutor::push_locked(TaskRecord* f) noexcept {
  try {
    ready_.push_back(f);
  } catch (...) {  // no memory to grow the ready list: it waits in an intrusive one
    overflow_.push(f);
  }
}

void DeterministicExecutor::push(TaskRecord* f) noexcept {
  shim::lock_guard<shim::mutex> g(mu_);
  push_locked(f);
}

void DeterministicExecutor::push_all(TaskBatch& batch) noexcept {
  shim::lock_guard<shim::mutex> g(mu_);
  for (TaskRecord* f = batch.head; f != nullptr;) {
    TaskRecord* next = f->next;
    push_locked(f);
    f = next;
  }
  batch = TaskBatch{};
}

TaskRecord* DeterministicExecutor::pick() noexcept {
  shim::lock_guard<shim::mutex> g(mu_);
  if (!ready_.empty()) {
    const std::size_t i = rng_() % ready_.size();
    TaskRecord* f = ready_[i];
    ready_[i] = ready_.back();
    ready_.pop_back();
    return f;
  }
  return overflow_.pop_front();
}

void DeterministicExecutor::run(Worker& w) noexcept {
  Scheduler& s = sched_;
  Driver& d = s.driver();
  std::uint32_t steps = 0;
  for (;;) {
    if (TaskRecord* f = pick()) {
      s.run_task(w, f);
      if (const testing::StepHook* h = g_step_hook.load(std::memory_order_acquire)) h->after_step(h->ctx);
      // As a busy work-stealing worker does: due timers and ready I/O are
      // taken every 61st step, not only when nothing can run, or a task
      // looping over checkpoints would starve its own deadline. By step
      // count, so a seed still reproduces the schedule with a manual clock.
      if (++steps % kDriverPollTicks == 0) {
        d.fire_timers();
        d.poll_io_now();
      }
      continue;
    }
    if (s.shutting_down()) break;
    // Ready I/O first: the manual clock must not jump past a wait whose
    // event is already in the kernel (a connect would time out at once).
    if (d.poll_io_now() || d.fire_timers()) continue;
    // Auto-advance: nothing can run. Jump to the earliest timer unless
    // blocking work or a kernel operation (io_uring) is in flight (its
    // completion might come "earlier" in virtual time; the last one to
    // finish unparks us instead, or the parked driver reaps it).
    if (d.manual_clock() && in_flight_.load(std::memory_order_seq_cst) == 0 && d.ops_in_flight() == 0 &&
        d.advance_manual_clock()) {
      continue;
    }
    frame_cache_flush_remote();
    w.activity.store(2, std::memory_order_relaxed);
    w.parker.park(d);
    w.activity.store(0, std::memory_order_relaxed);
  }
}

}  // namespace shoal::detail
