// Runtime metrics: a snapshot of the workers' own counters, the driver's,
// the blocking pool's and the scope tree; and the Prometheus text format.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "src/runtime/scheduler.hpp"
#include "src/runtime/worker_pool.hpp"

namespace shoal {
namespace detail {
namespace {

/// Open cancel nodes under `n`, itself included. Takes each node's lock in
/// the tree's order (parent before child), briefly.
std::size_t count_nodes(CancelNode* n) noexcept {
  std::size_t count = 1;
  n->lock.lock();
  for (CancelNode* c = n->children.front(); c != nullptr; c = n->children.next(c)) count += count_nodes(c);
  n->lock.unlock();
  return count;
}

}  // namespace

RuntimeMetrics Scheduler::metrics() const {
  RuntimeMetrics m;
  m.workers.reserve(workers().size());
  std::uint64_t spawned = foreign_spawns_.load(std::memory_order_relaxed);
  std::uint64_t finished = foreign_finishes_.load(std::memory_order_relaxed);
  for (const auto& w : workers()) {
    WorkerMetrics wm;
    wm.polls = w->polls.load(std::memory_order_relaxed);
    wm.spawns = w->spawns.load(std::memory_order_relaxed);
    wm.steals = w->steals.load(std::memory_order_relaxed);
    wm.injector_pulls = w->injector_pulls.load(std::memory_order_relaxed);
    wm.lifo_hits = w->lifo_hits.load(std::memory_order_relaxed);
    wm.yields = w->yields.load(std::memory_order_relaxed);
    wm.parks = w->parks.load(std::memory_order_relaxed);
    wm.local_queue = w->local.size();
    spawned += wm.spawns;
    finished += w->finishes.load(std::memory_order_relaxed);
    m.workers.push_back(wm);
  }
  m.tasks_spawned = spawned;
  // Read one after another, a finish may be counted before its spawn.
  m.tasks_live = spawned > finished ? spawned - finished : 0;
  {
    shim::lock_guard<shim::mutex> g(roots_mu_);
    // The roots themselves are the runtime's, not scopes a user opened.
    for (CancelNode* n : roots_) m.scopes_live += count_nodes(n) - 1;
  }
  m.injector_queue = pool_ ? pool_->injector_size() : 0;
  auto& d = const_cast<Driver&>(driver_);
  m.io_events = d.io_events();
  m.timers_fired = d.timers_fired();
  m.timers_pending = d.timer_count();
  auto& pool = const_cast<BlockingPool&>(blocking_);
  m.blocking_threads = pool.threads();
  m.blocking_queue = pool.queued();
  return m;
}

}  // namespace detail

RuntimeMetrics Runtime::metrics() const { return sched_->metrics(); }

namespace this_task {
RuntimeMetrics runtime_metrics() {
  detail::TaskRecord* f = detail::current_record();
  if (f == nullptr || f->sched == nullptr) {
    throw std::logic_error("shoal::this_task::runtime_metrics: called outside a shoal task");
  }
  return f->sched->metrics();
}
}  // namespace this_task

namespace {
void metric(std::string& out, std::string_view prefix, const char* name, const char* type, const char* help,
            std::uint64_t value) {
  out.append("# HELP ").append(prefix).append("_").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(prefix).append("_").append(name).append(" ").append(type).append("\n");
  out.append(prefix).append("_").append(name).append(" ").append(std::to_string(value)).append("\n");
}

template <class Get>
void per_worker(std::string& out, std::string_view prefix, const RuntimeMetrics& m, const char* name,
                const char* type, const char* help, Get get) {
  out.append("# HELP ").append(prefix).append("_worker_").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(prefix).append("_worker_").append(name).append(" ").append(type).append("\n");
  for (std::size_t i = 0; i < m.workers.size(); ++i) {
    out.append(prefix).append("_worker_").append(name).append("{worker=\"").append(std::to_string(i)).append("\"} ");
    out.append(std::to_string(get(m.workers[i]))).append("\n");
  }
}
}  // namespace

std::string to_prometheus(const RuntimeMetrics& m, std::string_view prefix) {
  std::string out;
  out.reserve(2048 + m.workers.size() * 512);
  metric(out, prefix, "workers", "gauge", "Worker threads.", m.workers.size());
  metric(out, prefix, "tasks_spawned_total", "counter", "Tasks spawned, root tasks included.", m.tasks_spawned);
  metric(out, prefix, "tasks_live", "gauge", "Tasks spawned and not finished.", m.tasks_live);
  metric(out, prefix, "scopes_live", "gauge", "Scopes, cancel scopes and timeouts open.", m.scopes_live);
  metric(out, prefix, "injector_queue", "gauge", "Tasks in the shared queue.", m.injector_queue);
  metric(out, prefix, "io_events_total", "counter", "Readiness events handed to tasks.", m.io_events);
  metric(out, prefix, "timers_fired_total", "counter", "Timers fired.", m.timers_fired);
  metric(out, prefix, "timers_pending", "gauge", "Timers armed.", m.timers_pending);
  metric(out, prefix, "blocking_threads", "gauge", "spawn_blocking threads alive.", m.blocking_threads);
  metric(out, prefix, "blocking_queue", "gauge", "spawn_blocking jobs waiting for a thread.", m.blocking_queue);
  per_worker(out, prefix, m, "polls_total", "counter", "Task steps run.", [](const WorkerMetrics& w) { return w.polls; });
  per_worker(out, prefix, m, "spawns_total", "counter", "Tasks spawned from the worker.",
             [](const WorkerMetrics& w) { return w.spawns; });
  per_worker(out, prefix, m, "steals_total", "counter", "Steals that found work.",
             [](const WorkerMetrics& w) { return w.steals; });
  per_worker(out, prefix, m, "injector_pulls_total", "counter", "Batches taken from the shared queue.",
             [](const WorkerMetrics& w) { return w.injector_pulls; });
  per_worker(out, prefix, m, "lifo_hits_total", "counter", "Woken tasks run next from the LIFO slot.",
             [](const WorkerMetrics& w) { return w.lifo_hits; });
  per_worker(out, prefix, m, "yields_total", "counter", "Yields (spent budget or checkpoint).",
             [](const WorkerMetrics& w) { return w.yields; });
  per_worker(out, prefix, m, "parks_total", "counter", "Times the worker slept.",
             [](const WorkerMetrics& w) { return w.parks; });
  per_worker(out, prefix, m, "local_queue", "gauge", "Tasks in the worker's queue.",
             [](const WorkerMetrics& w) { return static_cast<std::uint64_t>(w.local_queue); });
  return out;
}

}  // namespace shoal
