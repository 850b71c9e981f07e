// State dumps: what a watchdog prints about every live runtime. Best effort:
// a node whose lock is held (perhaps by a hung thread) is reported as such
// instead of blocking the dump.
#include <algorithm>
#include <string>
#include <vector>

#include "src/runtime/scheduler.hpp"

namespace shoal::detail {
namespace {
shim::mutex g_registry_mu;
std::vector<const Scheduler*> g_registry;
}  // namespace

void register_runtime(const Scheduler* s) {
  shim::lock_guard<shim::mutex> g(g_registry_mu);
  g_registry.push_back(s);
}

void unregister_runtime(const Scheduler* s) noexcept {
  shim::lock_guard<shim::mutex> g(g_registry_mu);
  auto it = std::find(g_registry.begin(), g_registry.end(), s);
  if (it != g_registry.end()) g_registry.erase(it);
}

void dump_all_runtimes(std::ostream& out) {
  shim::lock_guard<shim::mutex> g(g_registry_mu);
  for (const Scheduler* s : g_registry) s->dump(out);
}

void Scheduler::dump(std::ostream& out) const {
  static const char* const kActivity[] = {"running", "searching", "parked"};
  auto& d = const_cast<Driver&>(driver_);
  out << "shoal runtime " << static_cast<const void*>(this) << ": " << workers_.size() << " workers"
      << (det_ ? " (deterministic)" : "") << ", injector " << injector_.size() << ", searching "
      << idle_.searching() << ", unparked " << idle_.unparked() << ", backend " << d.backend_name() << ", timers "
      << d.timer_count() << "\n";
  for (auto& w : workers_) {
    out << "  worker " << w->index << ": " << kActivity[w->activity.load(std::memory_order_relaxed)]
        << ", local queue " << w->local.size() << ", polls " << w->polls.load(std::memory_order_relaxed)
        << ", parker " << w->parker.state() << "\n";
  }
  shim::lock_guard<shim::mutex> g(roots_mu_);
  for (CancelNode* n : roots_) dump_node(out, n, 1);
}

void Scheduler::dump_node(std::ostream& out, CancelNode* n, int depth) const {
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  out << indent << (depth == 1 ? "root" : "scope") << (n->cancelled.load() ? " [cancelled]" : "")
      << (n->shielded ? " [shielded]" : "");
  if (!n->lock.try_lock()) {
    out << " (locked)\n";
    return;
  }
  std::size_t waiting = 0, children = 0;
  for (TaskRecord* f = n->records.front(); f != nullptr; f = n->records.next(f)) {
    if (f->hook.load(std::memory_order_relaxed) != nullptr) ++waiting;
  }
  for (CancelNode* c = n->children.front(); c != nullptr; c = n->children.next(c)) ++children;
  out << ": body " << (n->body != nullptr && n->body->hook.load(std::memory_order_relaxed) ? "waiting" : "not waiting")
      << ", " << waiting << " children suspended at a wait, " << children << " nested scopes\n";
  for (CancelNode* c = n->children.front(); c != nullptr; c = n->children.next(c)) dump_node(out, c, depth + 1);
  n->lock.unlock();
}

}  // namespace shoal::detail
