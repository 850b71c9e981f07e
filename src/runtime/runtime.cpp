// shoal::Runtime: the facade over a Scheduler; its options, root tasks and
// run/block_on, and the report of a fault nobody can rethrow.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "shoal/runtime/run.hpp"
#include "shoal/scope/scope.hpp"
#include "src/runtime/scheduler.hpp"

namespace shoal {
namespace detail {
namespace {

std::size_t default_workers() {
  long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  return static_cast<std::size_t>(std::clamp<long>(cores, 2, 32));
}

RuntimeOptions normalize(RuntimeOptions o) {
  if (o.manual_clock && !o.deterministic_seed) {
    throw std::invalid_argument(
        "shoal: RuntimeOptions::manual_clock requires deterministic_seed (use RuntimeOptions::simulated(seed))");
  }
  if (o.deterministic_seed) {
    o.workers = 1;
  } else if (o.workers == 0) {
    // Set but empty (as container and CI templates often leave it) is unset.
    const char* env = std::getenv("SHOAL_THREADS");
    o.workers = (env != nullptr && *env != '\0') ? parse_thread_count(env) : default_workers();
  } else if (o.workers > 1024) {
    throw std::invalid_argument("shoal: RuntimeOptions::workers = " + std::to_string(o.workers) +
                                " is out of range (expected 1..1024)");
  }
  if (o.long_poll_warning.count() < 0 || o.long_poll_warning > std::chrono::hours(24)) {
    throw std::invalid_argument("shoal: RuntimeOptions::long_poll_warning = " +
                                std::to_string(o.long_poll_warning.count()) +
                                " ms is out of range (expected 0, off, to 24 h)");
  }
  if (o.dump_signal != 0) {
    if (o.dump_signal < 1 || o.dump_signal >= NSIG || o.dump_signal == SIGKILL || o.dump_signal == SIGSTOP) {
      throw std::invalid_argument("shoal: RuntimeOptions::dump_signal = " + std::to_string(o.dump_signal) +
                                  " is not a signal a handler can catch (e.g. SIGUSR1)");
    }
    o.track_waits = true;
  }
  return o;
}

// A write to a closed socket or pipe must be an EPIPE error, never a signal
// that kills the process (Rust's std and Go do the same).
void ignore_sigpipe() noexcept {
  struct sigaction old_action {};
  if (::sigaction(SIGPIPE, nullptr, &old_action) == 0 && old_action.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
}

/// The options a Scheduler runs with, and the process set up for a runtime.
RuntimeOptions prepare(RuntimeOptions o) {
  o = normalize(std::move(o));
  ignore_sigpipe();
  return o;
}

}  // namespace

void dump_all_runtimes(std::ostream& out);

void Scheduler::add_root(CancelNode* n) {
  shim::lock_guard<shim::mutex> g(roots_mu_);
  roots_.push_back(n);
}

void Scheduler::remove_root(CancelNode* n) noexcept {
  shim::lock_guard<shim::mutex> g(roots_mu_);
  roots_.erase(std::find(roots_.begin(), roots_.end(), n));
}

void Scheduler::cancel_roots() noexcept {
  shim::lock_guard<shim::mutex> g(roots_mu_);
  for (CancelNode* n : roots_) n->cancel(false);
}

void Scheduler::report_suppressed(const std::exception_ptr& e) noexcept {
  if (options_.on_suppressed_fault) {
    try {
      options_.on_suppressed_fault(e);
    } catch (...) {
      std::fputs("shoal: on_suppressed_fault threw; ignored\n", stderr);
    }
    return;
  }
  print_fault("shoal: suppressed fault (its scope already had one): ", e);
}

void RootOwner::attach(Scheduler* s) noexcept {
  sched_ = s;
  attach_root(s);
}

void RootOwner::start(PromiseBase& p, std::coroutine_handle<> h) noexcept {
  launch(*p.record_, h, 0, false);  // not on a worker: injected
}

std::coroutine_handle<> RootOwner::task_done(TaskRecord& f, PromiseBase&, std::coroutine_handle<>) noexcept {
  Scheduler* s = sched_;
  (void)child_ended(f, nullptr);  // unlinks it; its result (or fault) stays in its promise
  s->root_done(done_);
  return std::noop_coroutine();
}

void RootOwner::wait() noexcept { sched_->wait_root(done_); }

}  // namespace detail

std::size_t parse_thread_count(const char* value) {
  const std::string v = value == nullptr ? "" : value;
  std::size_t n = 0;
  bool ok = !v.empty() && v.size() <= 4;
  for (char c : v) {
    if (c < '0' || c > '9') {
      ok = false;
      break;
    }
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  if (!ok || n < 1 || n > 1024) {
    throw std::invalid_argument("shoal: SHOAL_THREADS=\"" + v +
                                "\" is not valid: expected an integer in the range 1..1024");
  }
  return n;
}

Runtime::Runtime(RuntimeOptions options)
    : sched_(std::make_unique<detail::Scheduler>(detail::prepare(std::move(options)))) {}
Runtime::~Runtime() = default;

void Runtime::start_root(detail::RootOwner& root, detail::PromiseBase& p, std::coroutine_handle<> h) {
  if (sched_->on_own_worker()) {
    h.destroy();
    throw std::logic_error("shoal::Runtime::block_on: called from one of the runtime's own workers (would deadlock)");
  }
  try {
    (void)detail::root_record(p);
    // Attached before it is listed: a dump (roots_mu_) sees it whole.
    root.attach(sched_.get());
    sched_->add_root(&root.node());
  } catch (...) {
    h.destroy();
    throw;
  }
  root.start(p, h);
}

void Runtime::finish_root(detail::RootOwner& root) noexcept { sched_->remove_root(&root.node()); }

void Runtime::cancel() noexcept { sched_->cancel_roots(); }

std::size_t Runtime::worker_count() const noexcept { return sched_->worker_count(); }

void Runtime::dump_state(std::ostream& out) const { sched_->dump(out); }

void Runtime::dump_tasks(std::ostream& out) const { sched_->dump_tasks(out); }

void Runtime::dump_all(std::ostream& out) { detail::dump_all_runtimes(out); }

namespace detail {

struct TaskName {
  const char* origin;
  std::uint32_t line;
  std::unique_ptr<char[]> name;
};

void TaskRecord::drop_name() noexcept { delete named(); }

const char* TaskRecord::origin() const noexcept {
  if (const TaskName* n = named()) return n->origin;
  if (const TaskDescriber* d = described()) return d->origin;
  return static_cast<const char*>(label_);
}

std::uint32_t TaskRecord::origin_line() const noexcept {
  if (const TaskName* n = named()) return n->line;
  if (const TaskDescriber* d = described()) return d->line;
  return origin_line_;
}

const char* TaskRecord::name() const noexcept {
  const TaskName* n = named();
  return n != nullptr ? n->name.get() : nullptr;
}

void TaskRecord::set_label_origin(const char* where, std::uint32_t line) noexcept {
  if (origin_line_ == kNamed) {
    auto* n = static_cast<TaskName*>(const_cast<void*>(label_));
    n->origin = where;
    n->line = line;
  } else {
    auto* d = static_cast<TaskDescriber*>(const_cast<void*>(label_));
    d->origin = where;
    d->line = line;
  }
}

namespace {
// Replaces `f`'s label with `label` (a TaskName, a TaskDescriber, or the
// origin's text, as `line` says) and deletes the TaskName it replaces. A
// task in its scope's list can be in a dump, which reads labels under that
// scope's lock; before that, nobody else sees the record.
void relabel(TaskRecord& f, const void* label, std::uint32_t line) noexcept {
  std::unique_ptr<const TaskName> old(f.named());
  CancelNode* listed = (f.flags & TaskRecord::kLinked) != 0 ? f.home : nullptr;
  if (listed != nullptr) listed->lock.lock();
  f.label_ = label;
  f.origin_line_ = line;
  if (listed != nullptr) listed->lock.unlock();
}
}  // namespace

void set_task_name(TaskRecord& f, const char* name, std::size_t size) {
  if (size == 0) {
    relabel(f, f.origin(), f.origin_line());
    return;
  }
  std::unique_ptr<char[]> copy(new char[size + 1]);
  std::memcpy(copy.get(), name, size);
  copy[size] = '\0';
  relabel(f, new TaskName{f.origin(), f.origin_line(), std::move(copy)}, TaskRecord::kNamed);
}

void describe_task(TaskDescriber* d) noexcept {
  TaskRecord* f = current_record();
  if (f == nullptr) return;
  if (d == nullptr) {
    relabel(*f, f->origin(), f->origin_line());
    return;
  }
  d->origin = f->origin();
  d->line = f->origin_line();
  relabel(*f, d, TaskRecord::kDescribed);
}
}  // namespace detail

namespace this_task {
void set_name(std::string_view name) {
  detail::TaskRecord* f = detail::current_record();
  if (f == nullptr) throw std::logic_error("shoal::this_task::set_name: called outside a shoal task");
  detail::set_task_name(*f, name.data(), name.size());
}

bool cancellation_requested() noexcept {
  if (detail::TaskRecord* f = detail::current_record()) return f->cancelled();
  if (detail::BlockingJob* job = detail::current_blocking_job()) return job->cancelled();
  return false;
}
}  // namespace this_task

}  // namespace shoal
