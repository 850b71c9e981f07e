// The runtime's handle (see scheduler.hpp): its lifecycle, the executor
// seam, and the runtime ABI's scheduling entry points.
#include "src/runtime/scheduler.hpp"

#include "src/runtime/deterministic.hpp"
#include "src/runtime/wait_inspect.hpp"
#include "src/runtime/worker_pool.hpp"

namespace shoal::detail {

Scheduler::Scheduler(RuntimeOptions options)
    : options_(std::move(options)), driver_(*this, options_.manual_clock, options_.workers + 1) {
  long_poll_ms_ = static_cast<std::uint32_t>(options_.long_poll_warning.count());
  if (options_.dump_signal != 0) install_dump_signal(options_.dump_signal);
  if (options_.deterministic_seed) {
    det_ = std::make_unique<DeterministicExecutor>(*this, *options_.deterministic_seed);
  } else {
    pool_ = std::make_unique<WorkerPool>(*this, options_.workers);
  }
  // One worker has nobody to hand the driver to (see watch.cpp).
  watch_enabled_ = pool_ != nullptr && options_.workers > 1;
  try {
    register_runtime(this);
    if (options_.dump_signal != 0) listen_for_dump_signal(this);
    if (options_.track_waits) track_waits(true);
  } catch (...) {
    stop_listening_for_dump_signal(this);
    unregister_runtime(this);
    begin_shutdown();
    pool_.reset();
    det_.reset();
    throw;
  }
}

Scheduler::~Scheduler() {
  if (options_.track_waits) track_waits(false);
  stop_listening_for_dump_signal(this);
  unregister_runtime(this);
  begin_shutdown();
  // The threads stop here; the executors themselves outlive the blocking
  // pool (a job that finishes late still wakes through them).
  if (pool_) pool_->stop();
  if (det_) det_->stop();
}

const std::vector<std::unique_ptr<Worker>>& Scheduler::workers() const noexcept {
  return pool_ ? pool_->workers() : det_->workers();
}

std::uint32_t Scheduler::unparked_workers() const noexcept {
  return pool_ ? pool_->unparked() : static_cast<std::uint32_t>(options_.workers);
}

// ---- the executor seam: one branch per call, as Tokio's Handle matches ------

void Scheduler::schedule(TaskRecord* f) noexcept {
  if (pool_) [[likely]] {
    pool_->schedule(own_worker(), f);
  } else {
    det_->schedule(f);
  }
}

void Scheduler::schedule_spawn(TaskRecord* f) noexcept {
  Worker* w = own_worker();
  if (w != nullptr) {
    bump(w->spawns);
  } else {
    foreign_spawns_.fetch_add(1, std::memory_order_relaxed);
  }
  if (pool_) [[likely]] {
    pool_->push_ready(w, f);
  } else {
    det_->schedule(f);
  }
}

void Scheduler::schedule_yield(TaskRecord* f) noexcept {
  Worker* w = own_worker();
  if (w != nullptr) bump(w->yields);
  if (pool_) [[likely]] {
    pool_->schedule_yield(w, f);
  } else {
    det_->schedule(f);
  }
}

void Scheduler::schedule_batch(TaskBatch& batch) noexcept {
  if (batch.empty()) return;
  if (pool_) [[likely]] {
    pool_->schedule_batch(own_worker(), batch);
  } else {
    det_->schedule_batch(own_worker() != nullptr, batch);
  }
}

bool Scheduler::migrate(TaskRecord* f, std::uint8_t slot, bool end_at_long_poll) noexcept {
  return pool_ != nullptr && pool_->migrate(own_worker(), f, slot, end_at_long_poll);
}

void Scheduler::pin_to_current_worker(TaskRecord* f) noexcept {
  if (pool_ == nullptr) return;  // one worker: nowhere else to run
  if (const Worker* w = own_worker()) placement::pin_hard(f, w->index);
}

void Scheduler::task_finished() noexcept {
  if (Worker* w = own_worker()) {
    bump(w->finishes);
  } else {
    foreign_finishes_.fetch_add(1, std::memory_order_relaxed);
  }
}

void Scheduler::blocking_started() noexcept {
  if (det_ && driver_.manual_clock()) det_->blocking_started();
}

void Scheduler::blocking_finished() noexcept {
  // A pool thread, after its wake: safe, the pool (a member) joins it first.
  if (det_ && driver_.manual_clock()) det_->blocking_finished();
}

// ---- the runtime ABI (runtime_abi.hpp) ----------------------------------------

void schedule(TaskRecord* f) noexcept { f->sched->schedule(f); }
void schedule_spawn(TaskRecord* f) noexcept { f->sched->schedule_spawn(f); }
void task_finished(TaskRecord& f) noexcept { f.sched->task_finished(); }
void schedule_yield(TaskRecord* f) noexcept { f->sched->schedule_yield(f); }
void yield_from(TaskRecord* f, std::coroutine_handle<> h, const void* /*awaiter: see the header*/) noexcept {
  f->resume = h;
  f->sched->schedule_yield(f);
}
void schedule_batch(Scheduler* s, TaskBatch& batch) noexcept { s->schedule_batch(batch); }
TaskRecord* current_record() noexcept { return tls_record; }
bool on_worker_thread() noexcept { return tls_worker != nullptr; }

Clock::time_point clock_now() noexcept {
  const Worker* w = tls_worker;
  if (w == nullptr || !w->sched->driver().manual_clock()) return Clock::now();
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(w->sched->driver().now_ns())));
}

void report_suppressed_fault(Scheduler* s, const std::exception_ptr& e) noexcept { s->report_suppressed(e); }

}  // namespace shoal::detail
