// State dumps: what a watchdog, Runtime::dump_tasks and the dump signal
// print about live runtimes. Best effort and never blocking: a node whose
// lock is held (perhaps by a hung thread) is reported as such.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "src/runtime/scheduler.hpp"
#include "src/runtime/wait_inspect.hpp"
#include "src/runtime/worker_pool.hpp"

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

namespace {

/// The type in callable_origin<F>()'s text: after "F = ", to the closing
/// bracket (g++: "... [with F = main()::<lambda()>]"; clang: "... [F = ...]").
std::string_view callable_name(std::string_view pretty) noexcept {
  const auto at = pretty.find("F = ");
  if (at == std::string_view::npos) return pretty;
  pretty.remove_prefix(at + 4);
  if (!pretty.empty() && pretty.back() == ']') pretty.remove_suffix(1);
  return pretty;
}

/// g++ names a lambda inside a coroutine after the coroutine's actor,
/// whose parameter is its frame ("operator()(...::_ZZ...Frame*)"): drop
/// such parameter lists, which say nothing to a reader.
std::string readable_callable(std::string_view name) {
  std::string s(name);
  for (auto end = s.find(".Frame*)"); end != std::string::npos; end = s.find(".Frame*)")) {
    int depth = 0;
    std::size_t open = end;
    for (; open-- > 0;) {
      if (s[open] == ')') ++depth;
      if (s[open] == '(' && depth-- == 0) break;
    }
    if (open == std::string::npos) break;
    s.replace(open, end + 8 - open, "()");
  }
  return s;
}

}  // namespace

TaskLabel TaskLabel::of(const TaskRecord& f) {
  TaskLabel l;
  if (const TaskDescriber* d = f.described()) {
    d->describe(*d, l.name);
  } else {
    const char* name = f.name();
    l.name = name != nullptr ? name : "";
  }
  l.origin = f.origin();
  l.line = f.origin_line();
  l.root = l.origin == nullptr && f.home != nullptr && f.home->parent == nullptr && f.home->body == nullptr;
  return l;
}

void write_label(std::ostream& out, const TaskLabel& l) {
  out << "task";
  if (!l.name.empty()) out << " \"" << l.name << '"';
  if (l.origin == nullptr) {
    if (l.root) out << " (a root task: run or block_on)";
  } else if (l.line != 0) {
    out << " (spawned at " << l.origin << ':' << l.line << ')';
  } else {
    out << " (spawned callable " << readable_callable(callable_name(l.origin)) << ')';
  }
}

namespace {

void write_label(std::ostream& out, const TaskRecord* f) { write_label(out, TaskLabel::of(*f)); }

}  // namespace

void write_duration(std::ostream& out, std::uint32_t ms) {
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%u ms", ms);
  } else if (ms < 120'000) {
    std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000.0);
  } else if (ms < 7'200'000) {
    std::snprintf(buf, sizeof buf, "%.1f min", ms / 60'000.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f h", ms / 3'600'000.0);
  }
  out << buf;
}

namespace {

/// One task's line: its label, then what it waits on or that it runs.
/// Called under the lock of the node whose list holds `f`, which keeps the
/// record alive; the hook is claimed while it is read.
void write_task(std::ostream& out, TaskRecord* f, const std::string& indent, bool timed, std::uint32_t now_ms) {
  out << indent;
  write_label(out, f);
  WaitHook* h = nullptr;
  if (!inspect_hook(f, h)) {
    out << ": running or ready to run\n";
    return;
  }
  const char* kind = h->wait_kind();
  const std::uint32_t since = f->wait_since;
  end_inspect(f, h);
  out << ": waiting";
  if (timed) {
    out << ' ';
    write_duration(out, now_ms - since);
  }
  out << " on " << kind << '\n';
}

}  // namespace

void Scheduler::dump(std::ostream& out) const {
  static const char* const kActivity[] = {"running", "searching", "parked"};
  auto& d = const_cast<Driver&>(driver_);
  out << "shoal runtime " << static_cast<const void*>(this) << ": " << workers().size() << " workers";
  if (pool_) {
    out << ", injector " << pool_->injector_size() << ", searching " << pool_->searching() << ", unparked "
        << pool_->unparked();
  } else {
    out << " (deterministic)";
  }
  out << ", backend " << d.backend_name() << ", timers " << d.timer_count() << "\n";
  for (auto& w : workers()) {
    out << "  worker " << w->index << ": " << kActivity[w->activity.load(std::memory_order_relaxed)]
        << ", local queue " << w->local.size() << ", polls " << w->polls.load(std::memory_order_relaxed)
        << ", parker " << w->parker.state() << "\n";
  }
  dump_tree(out);
}

void Scheduler::dump_tasks(std::ostream& out) const {
  out << "shoal runtime " << static_cast<const void*>(this) << ": tasks that have waited at least once, by scope"
      << (options_.track_waits ? "" : " (RuntimeOptions::track_waits is off: no wait durations)") << "\n";
  dump_tree(out);
}

void Scheduler::dump_tree(std::ostream& out) const {
  shim::lock_guard<shim::mutex> g(roots_mu_);
  for (CancelNode* n : roots_) dump_node(out, n, 1);
}

void Scheduler::dump_node(std::ostream& out, CancelNode* n, int depth) const {
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  const std::string inner = indent + "  ";
  out << indent << (n->parent == nullptr ? "root" : "scope") << (n->cancelled.load() ? " [cancelled]" : "")
      << (n->shielded ? " [shielded]" : "");
  if (!n->lock.try_lock()) {
    out << " (locked; not shown)\n";
    return;
  }
  if (n->body != nullptr) {
    out << ", the body of ";
    write_label(out, n->body);
  }
  out << '\n';
  const bool timed = options_.track_waits;
  const std::uint32_t now_ms = wait_clock_ms();
  for (TaskRecord* f = n->records.front(); f != nullptr; f = n->records.next(f)) {
    write_task(out, f, inner, timed, now_ms);
  }
  for (CancelNode* c = n->children.front(); c != nullptr; c = n->children.next(c)) dump_node(out, c, depth + 1);
  n->lock.unlock();
}

// ---- the dump signal ---------------------------------------------------------
// The handler marks each runtime that chose the signal and wakes its
// block_on threads (an atomic store and a futex wake: async-signal-safe);
// the first to wake writes the dump to stderr (wait_root). That thread only
// sleeps while the root runs, so a runtime whose workers are all stuck still
// answers, and the signal costs no thread of its own (threads = workers + 1).
//
// The handler walks a list of those runtimes without a lock. A runtime
// leaves it under the writers' lock, then waits until no handler is inside
// the list: a handler counts itself in before it reads the head, the
// leaver unlinks before it reads the count (both seq_cst), so either the
// handler never sees the leaver or the leaver waits for it.
namespace {
std::mutex g_dump_list_mu;  // the writers
std::atomic<Scheduler*> g_dump_head{nullptr};
std::atomic<int> g_dump_handlers{0};
std::mutex g_dump_install_mu;
bool g_dump_installed[NSIG] = {};
}  // namespace

struct DumpSignalList {
  static void add(Scheduler* s) {
    std::lock_guard<std::mutex> g(g_dump_list_mu);
    s->dump_next_.store(g_dump_head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    g_dump_head.store(s, std::memory_order_seq_cst);
  }

  static void remove(Scheduler* s) noexcept {
    std::lock_guard<std::mutex> g(g_dump_list_mu);
    std::atomic<Scheduler*>* link = &g_dump_head;
    for (Scheduler* at = link->load(std::memory_order_relaxed); at != s; at = link->load(std::memory_order_relaxed)) {
      if (at == nullptr) return;
      link = &at->dump_next_;
    }
    link->store(s->dump_next_.load(std::memory_order_relaxed), std::memory_order_seq_cst);
    while (g_dump_handlers.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  }

  static void ask(int sig) noexcept {
    g_dump_handlers.fetch_add(1, std::memory_order_seq_cst);
    for (Scheduler* s = g_dump_head.load(std::memory_order_seq_cst); s != nullptr;
         s = s->dump_next_.load(std::memory_order_seq_cst)) {
      if (s->dump_signal() == sig) s->dump_asked();
    }
    g_dump_handlers.fetch_sub(1, std::memory_order_seq_cst);
  }
};

namespace {
extern "C" void on_dump_signal(int sig) {
  const int saved = errno;
  DumpSignalList::ask(sig);
  errno = saved;
}
}  // namespace

void listen_for_dump_signal(Scheduler* s) { DumpSignalList::add(s); }
void stop_listening_for_dump_signal(Scheduler* s) noexcept { DumpSignalList::remove(s); }

void Scheduler::dump_asked() noexcept {
  dump_asked_.store(true, std::memory_order_release);
#if !defined(SHOAL_ROOT_SLEEPS_ON_CONDVAR)
  wake_block_on_threads();  // a futex wake (under TSan, or with no futex, they look every kDumpLook instead)
#endif
}

void Scheduler::answer_dump() noexcept {
  if (!dump_asked_.exchange(false, std::memory_order_acq_rel)) return;  // another block_on thread took it
  std::string text;
  try {
    std::ostringstream out;
    dump_tasks(out);
    text = out.str();
  } catch (...) {
    text = "shoal: the task dump failed (out of memory)\n";
  }
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t w = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += static_cast<std::size_t>(w);
  }
}

void install_dump_signal(int sig) {
  std::lock_guard<std::mutex> g(g_dump_install_mu);
  if (g_dump_installed[sig]) return;
  struct sigaction sa {};
  sa.sa_handler = on_dump_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (::sigaction(sig, &sa, nullptr) != 0) {
    throw std::system_error(errno, std::generic_category(),
                            "shoal: RuntimeOptions::dump_signal: sigaction(" + std::to_string(sig) + ")");
  }
  g_dump_installed[sig] = true;
}

}  // namespace shoal::detail
