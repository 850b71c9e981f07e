// shoal::Runtime: the facade over a Scheduler; its options, root tasks and
// run/block_on, and the report of a fault nobody can rethrow.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>

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
    const char* env = std::getenv("SHOAL_THREADS");
    o.workers = (env != nullptr) ? parse_thread_count(env) : default_workers();
  } else if (o.workers > 1024) {
    throw std::invalid_argument("shoal: RuntimeOptions::workers = " + std::to_string(o.workers) +
                                " is out of range (expected 1..1024)");
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

void RootOwner::start(Scheduler* s, PromiseBase& p, std::coroutine_handle<> h) noexcept {
  sched_ = s;
  attach_root(s);
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
    sched_->add_root(&root.node());
  } catch (...) {
    h.destroy();
    throw;
  }
  root.start(sched_.get(), p, h);
}

void Runtime::finish_root(detail::RootOwner& root) noexcept { sched_->remove_root(&root.node()); }

void Runtime::cancel() noexcept { sched_->cancel_roots(); }

std::size_t Runtime::worker_count() const noexcept { return sched_->worker_count(); }

void Runtime::dump_state(std::ostream& out) const { sched_->dump(out); }

void Runtime::dump_all(std::ostream& out) { detail::dump_all_runtimes(out); }

namespace this_task {
bool cancellation_requested() noexcept {
  if (detail::TaskRecord* f = detail::current_record()) return f->cancelled();
  if (detail::BlockingJob* job = detail::current_blocking_job()) return job->cancelled();
  return false;
}
}  // namespace this_task

}  // namespace shoal
