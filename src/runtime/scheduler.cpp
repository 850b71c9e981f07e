// Workers, work stealing and parking.
//
// Where a ready fiber goes:
// - woken by a task on a worker of the same runtime: that worker's LIFO slot
//   (runs next, no cross-core trip); the previous occupant moves to the local
//   queue. At most 3 LIFO runs in a row so a ping-pong pair cannot starve the
//   queue.
// - spawned or yielding on a worker: the back of its local queue.
// - from any other thread: the injector.
// - pinned (spawn_local): only ever its own worker. Woken there, like any
//   other fiber (LIFO slot) but queued on an owner-only list instead of the
//   stealable queue; woken anywhere else, pushed onto that worker's inbox
//   (the push that makes it non-empty unparks the owner).
// A worker takes, in order: the injector every 61st tick (fairness), its LIFO
// slot, its local queue, a batch from the injector, then (as a searcher)
// half of a random victim's queue. With nothing found it parks.
// Parking: the first worker to park holds the I/O driver and blocks in the
// backend's wait; others block on a futex. See idle.hpp for the wake protocol.
#include "src/runtime/scheduler.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "shoal/detail/test_hooks.hpp"
#include "shoal/scope/cancel.hpp"
#include "shoal/scope/scope.hpp"

namespace shoal {
namespace detail {
namespace {

thread_local Worker* tls_worker = nullptr;
thread_local Fiber* tls_fiber = nullptr;

shim::atomic<const StepHook*> g_step_hook{nullptr};

shim::mutex g_registry_mu;
std::vector<const Scheduler*> g_registry;

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

}  // namespace

Scheduler::Scheduler(RuntimeOptions options)
    : options_(normalize(std::move(options))),
      deterministic_(options_.deterministic_seed.has_value()),
      manual_clock_(options_.manual_clock),
      manual_now_(to_ns(Clock::now())),
      backend_(io::make_backend()),
      io_core_(new IoCore()),
      idle_(options_.workers),
      det_rng_(options_.deterministic_seed.value_or(0)) {
  // A write to a closed socket or pipe must be an EPIPE error, never a
  // signal that kills the process (Rust's std and Go do the same).
  {
    struct sigaction old_action {};
    if (::sigaction(SIGPIPE, nullptr, &old_action) == 0 && old_action.sa_handler == SIG_DFL) {
      ::signal(SIGPIPE, SIG_IGN);
    }
  }
  io_core_->sched = this;
  io_core_->rearm = backend_->needs_rearm();
  try {
    workers_.reserve(options_.workers);
    for (std::size_t i = 0; i < options_.workers; ++i) {
      auto w = std::make_unique<Worker>();
      w->sched = this;
      w->index = i;
      w->rng.seed(static_cast<unsigned>(i * 7919 + 17));
      workers_.push_back(std::move(w));
    }
    for (auto& w : workers_) {
      Worker* wp = w.get();
      wp->thread = std::thread([this, wp] {
        if (deterministic_) {
          deterministic_main(*wp);
        } else {
          worker_main(*wp);
        }
      });
    }
    shim::lock_guard<shim::mutex> g(g_registry_mu);
    g_registry.push_back(this);
  } catch (...) {
    // Out of threads or memory (a PID limit, a huge SHOAL_THREADS): stop and
    // join the workers already running before the members they use go.
    shutdown_.store(true, std::memory_order_seq_cst);
    for (auto& w : workers_) w->parker.unpark(*this);
    for (auto& w : workers_) {
      if (w->thread.joinable()) w->thread.join();
    }
    delete io_core_;
    throw;
  }
}

Scheduler::~Scheduler() {
  {
    shim::lock_guard<shim::mutex> g(g_registry_mu);
    g_registry.erase(std::find(g_registry.begin(), g_registry.end(), this));
  }
  shutdown_.store(true, std::memory_order_seq_cst);
  for (auto& w : workers_) w->parker.unpark(*this);
  for (auto& w : workers_) w->thread.join();
  reclaim_io();
  // Sockets still open (bound before run, closed after) free themselves
  // through the dead core; the last one frees it.
  io_core_->dead.store(true, std::memory_order_release);
  if (io_core_->live.load(std::memory_order_acquire) == 0) delete io_core_;
}

bool Scheduler::on_own_worker() const noexcept { return tls_worker != nullptr && tls_worker->sched == this; }

// Timer wake-up protocol: the driver announces it sleeps (seq_cst store),
// then reads the earliest deadline (seq_cst); an inserter publishes its
// deadline (seq_cst) and then reads the announcement. Either the driver sees
// the new timer or the inserter sees the driver and wakes it if it would
// sleep past the new deadline.
void Scheduler::drive() noexcept {
  driver_sleep_until_.store(TimerQueue::kNever, std::memory_order_seq_cst);
  const std::int64_t next = timers_.next_deadline();
  driver_sleep_until_.store(next, std::memory_order_seq_cst);
  std::chrono::nanoseconds timeout(-1);
  // A manual clock only moves by auto-advance (deterministic_main), never
  // while the driver sleeps.
  if (next != TimerQueue::kNever && !manual_clock_) timeout = std::chrono::nanoseconds(std::max<std::int64_t>(0, next - to_ns(Clock::now())));
  reclaim_io();
  io::Event events[64];
  std::size_t n = 0;
  if (timeout.count() != 0 || io_core_->live.load(std::memory_order_relaxed) != 0) n = backend_wait(timeout, events);
  driver_sleep_until_.store(-1, std::memory_order_seq_cst);
  dispatch_io(events, n);
  fire_timers();
}

// A backend that cannot wait (epoll_wait failing with EBADF or EINVAL: its
// fd was closed or replaced under us) will fail the same way on every call;
// looping on it would spin a core and starve every socket, timer and parked
// worker silently. Fail closed instead. Out of memory (the poll backend's
// snapshot) may pass: wait a moment and report no events.
std::size_t Scheduler::backend_wait(std::chrono::nanoseconds timeout, std::span<io::Event> out) noexcept {
  try {
    return backend_->wait(timeout, out);
  } catch (const std::bad_alloc&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shoal: the I/O backend (%s) cannot wait for events: %s; the runtime cannot go on\n",
                 backend_->name(), e.what());
  } catch (...) {
    std::fprintf(stderr, "shoal: the I/O backend (%s) cannot wait for events; the runtime cannot go on\n",
                 backend_->name());
  }
  std::abort();
}

TimerInsert Scheduler::add_timer(TimerEntry* e, const Fiber* unless) noexcept {
  // Once queued, `e` may fire or be cancelled at once and its owner's frame
  // resume and move on: never touch it after insert.
  const std::int64_t deadline = e->deadline;
  const TimerInsert r = timers_.insert(e, unless);
  if (r != TimerInsert::queued) return r;
  const std::int64_t sleeping_until = driver_sleep_until_.load(std::memory_order_seq_cst);
  if (sleeping_until != -1 && deadline < sleeping_until) backend_->wake();
  return r;
}

bool Scheduler::fire_timers() noexcept {
  if (timers_.next_deadline() == TimerQueue::kNever) return false;
  return timers_.fire_due(now_ns()) != 0;
}

// Auto-advance: called when no task can run. Jumps the manual clock to the
// earliest timer unless blocking work is in flight (its completion might
// come "earlier" in virtual time; blocking_finished wakes us instead).
bool Scheduler::advance_manual_clock() noexcept {
  if (!manual_clock_ || blocking_in_flight_.load(std::memory_order_seq_cst) != 0) return false;
  const std::int64_t next = timers_.next_deadline();
  if (next == TimerQueue::kNever) return false;
  if (next > manual_now_.load(std::memory_order_relaxed)) manual_now_.store(next, std::memory_order_release);
  return fire_timers();
}

void Scheduler::blocking_finished() noexcept {
  if (manual_clock_ && blocking_in_flight_.fetch_sub(1, std::memory_order_seq_cst) == 1) {
    workers_[0]->parker.unpark(*this);
  }
}

namespace {
inline std::uint32_t pin_of(const Fiber* f) noexcept { return f->flags >> Fiber::kPinShift; }
}  // namespace

void Scheduler::pin_to_current_worker(Fiber* f) noexcept {
  Worker* w = tls_worker;
  if (deterministic_ || w == nullptr || w->sched != this) return;
  f->flags |= static_cast<std::uint32_t>(w->index + 1) << Fiber::kPinShift;
}

void Scheduler::push_pinned_remote(Fiber* f) noexcept {
  Worker& owner = *workers_[pin_of(f) - 1];
  Fiber* head = owner.inbox.load(std::memory_order_relaxed);
  do {
    f->next = head;
  } while (!owner.inbox.compare_exchange_weak(head, f, std::memory_order_release, std::memory_order_relaxed));
  if (head == nullptr) owner.parker.unpark(*this);
}

void Scheduler::drain_inbox(Worker& w) noexcept {
  Fiber* f = w.inbox.exchange(nullptr, std::memory_order_acquire);
  Fiber* rev = nullptr;  // the stack is newest-first; queue oldest-first
  while (f != nullptr) {
    Fiber* next = f->next;
    f->next = rev;
    rev = f;
    f = next;
  }
  while (rev != nullptr) {
    Fiber* next = rev->next;
    push_local(w, rev);
    rev = next;
  }
}

Fiber* Scheduler::pop_pinned(Worker& w) noexcept {
  Fiber* f = w.pinned_head;
  if (f == nullptr) return nullptr;
  w.pinned_head = f->next;
  if (w.pinned_head == nullptr) w.pinned_tail = nullptr;
  f->next = nullptr;
  return f;
}

void Scheduler::push_local(Worker& w, Fiber* f) noexcept {
  if (const std::uint32_t pin = pin_of(f); pin != 0) {
    if (pin - 1 != w.index) {
      push_pinned_remote(f);
      return;
    }
    f->next = nullptr;
    if (w.pinned_tail != nullptr) {
      w.pinned_tail->next = f;
    } else {
      w.pinned_head = f;
    }
    w.pinned_tail = f;
    return;
  }
  while (!w.local.push(f)) {
    FiberBatch overflow;
    w.local.take_half([&](Fiber* x) { overflow.push(x); });
    injector_.push_batch(overflow);
  }
}

void Scheduler::notify_parked() noexcept {
  long idx = idle_.pick_sleeper_to_wake();
  if (idx >= 0) workers_[static_cast<std::size_t>(idx)]->parker.unpark(*this);
}

void Scheduler::inject(Fiber* f) noexcept {
  if (deterministic_) {
    {
      shim::lock_guard<shim::mutex> g(det_mu_);
      det_push_locked(f);
    }
    workers_[0]->parker.unpark(*this);
    return;
  }
  if (pin_of(f) != 0) {
    push_pinned_remote(f);
    return;
  }
  injector_.push(f);
  notify_parked();
}

void Scheduler::schedule(Fiber* f) noexcept {
  Worker* w = tls_worker;
  if (deterministic_ || w == nullptr || w->sched != this) {
    inject(f);
    return;
  }
  if (const std::uint32_t pin = pin_of(f); pin != 0 && pin - 1 != w->index) {
    push_pinned_remote(f);
    return;
  }
  Fiber* prev = w->lifo;
  w->lifo = f;
  if (prev != nullptr) {
    const bool pinned = pin_of(prev) != 0;  // read before publishing: prev may run elsewhere at once
    push_local(*w, prev);
    if (!pinned) notify_parked();  // a pinned fiber is no work for anyone else
  }
}

void Scheduler::schedule_spawn(Fiber* f) noexcept {
  Worker* w = tls_worker;
  if (deterministic_ || w == nullptr || w->sched != this) {
    schedule(f);
    return;
  }
  const bool pinned = pin_of(f) != 0;  // read before publishing: f may run elsewhere at once
  push_local(*w, f);
  if (!pinned) notify_parked();  // a pinned fiber is no work for anyone else
}

void Scheduler::schedule_yield(Fiber* f) noexcept { schedule_spawn(f); }

void Scheduler::schedule_batch(FiberBatch& batch) noexcept {
  if (batch.empty()) return;
  Worker* w = tls_worker;
  if (deterministic_) {
    shim::lock_guard<shim::mutex> g(det_mu_);
    for (Fiber* f = batch.head; f != nullptr;) {
      Fiber* next = f->next;
      det_push_locked(f);
      f = next;
    }
    batch = FiberBatch{};
    if (w == nullptr || w->sched != this) workers_[0]->parker.unpark(*this);
    return;
  }
  if (w != nullptr && w->sched == this && batch.count <= w->local.capacity() / 2) {
    for (Fiber* f = batch.head; f != nullptr;) {
      Fiber* next = f->next;
      push_local(*w, f);
      f = next;
    }
    batch = FiberBatch{};
  } else {
    // A big fan-out goes to the injector so every worker can take a share;
    // pinned fibers go home.
    FiberBatch shared;
    for (Fiber* f = batch.head; f != nullptr;) {
      Fiber* next = f->next;
      if (pin_of(f) != 0) {
        push_pinned_remote(f);
      } else {
        shared.push(f);
      }
      f = next;
    }
    batch = FiberBatch{};
    injector_.push_batch(shared);
  }
  notify_parked();
}

Fiber* Scheduler::from_injector(Worker& w) noexcept {
  if (injector_.empty()) return nullptr;
  const std::size_t n = workers_.size();
  std::size_t want = std::min<std::size_t>(injector_.size() / n + 1, w.local.capacity() / 2);
  FiberBatch b = injector_.pop(want);
  if (b.empty()) return nullptr;
  Fiber* first = b.head;
  for (Fiber* f = first->next; f != nullptr;) {
    Fiber* next = f->next;
    push_local(w, f);
    f = next;
  }
  return first;
}

Fiber* Scheduler::next_local(Worker& w) noexcept {
  ++w.tick;
  if (w.inbox.load(std::memory_order_relaxed) != nullptr) drain_inbox(w);
  if (w.tick % 61 == 0) {
    fire_timers();  // busy workers keep timers firing while nobody drives
    poll_io_now();  // ... and I/O events flowing
    FiberBatch b = injector_.pop(1);
    if (!b.empty()) return b.head;
  }
  if (w.lifo != nullptr) {
    Fiber* f = w.lifo;
    w.lifo = nullptr;
    if (w.lifo_streak < 3) {
      ++w.lifo_streak;
      return f;
    }
    push_local(w, f);
  }
  w.lifo_streak = 0;
  // Pinned and stealable fibers take turns, so neither starves the other.
  if (w.pinned_head != nullptr && (w.tick & 1) != 0) return pop_pinned(w);
  if (Fiber* f = w.local.pop()) return f;
  if (Fiber* f = pop_pinned(w)) return f;
  return from_injector(w);
}

Fiber* Scheduler::search(Worker& w) noexcept {
  if (!w.searching) {
    if (!idle_.try_begin_search()) return nullptr;
    w.searching = true;
    w.activity.store(1, std::memory_order_relaxed);
  }
  const std::size_t n = workers_.size();
  const std::size_t start = w.rng() % n;
  for (std::size_t i = 0; i < n; ++i) {
    Worker& victim = *workers_[(start + i) % n];
    if (&victim == &w) continue;
    if (Fiber* f = victim.local.steal_into(w.local)) return f;
  }
  return from_injector(w);
}

bool Scheduler::work_pending() const noexcept {
  if (!injector_.empty()) return true;
  for (auto& w : workers_) {
    if (!w->local.empty()) return true;
  }
  return false;
}

void Scheduler::park(Worker& w) noexcept {
  if (fire_timers()) return;  // due timers made work; run it first
  const bool was_searching = w.searching;
  w.searching = false;
  w.activity.store(2, std::memory_order_relaxed);
  const bool last = idle_.park(w.index, was_searching);
  // The re-check pairs with a producer's "publish work; seq_cst fence; read
  // the idle state" (Idle::pick_sleeper_to_wake). The seq_cst RMW in park()
  // alone does not keep the queues' acquire loads after it (C++ lets a later
  // load to another location pass it; so do ARMv8.3 RCpc loads), so the
  // re-check could read the queues from before the RMW while the producer
  // reads the idle state from before it too: both miss. With a fence on each
  // side, one of the two sees the other.
  if (last) SHOAL_FENCE_SEQ_CST();
  if ((last && work_pending()) || shutdown_.load(std::memory_order_seq_cst)) {
    w.searching = idle_.unpark(w.index);
    w.activity.store(0, std::memory_order_relaxed);
    return;
  }
  w.parker.park(*this);
  w.searching = idle_.unpark(w.index);
  w.activity.store(w.searching ? 1 : 0, std::memory_order_relaxed);
}

void Scheduler::run_fiber(Worker& w, Fiber* f) noexcept {
  tls_fiber = f;
  f->budget = kBudget;
  w.polls.fetch_add(1, std::memory_order_relaxed);
  f->resume.resume();
  tls_fiber = nullptr;
}

void Scheduler::worker_main(Worker& w) noexcept {
  tls_worker = &w;
  for (;;) {
    Fiber* f = next_local(w);
    if (f == nullptr) {
      f = search(w);
      if (f == nullptr) {
        if (shutdown_.load(std::memory_order_acquire)) break;
        park(w);
        continue;
      }
    }
    if (w.searching) {
      w.searching = false;
      w.activity.store(0, std::memory_order_relaxed);
      if (idle_.end_search()) notify_parked();
    }
    run_fiber(w, f);
  }
  tls_worker = nullptr;
}

void Scheduler::det_push_locked(Fiber* f) noexcept {
  try {
    det_ready_.push_back(f);
  } catch (...) {  // no memory to grow the ready list: it waits in an intrusive one
    det_overflow_.push(f);
  }
}

void Scheduler::deterministic_main(Worker& w) noexcept {
  tls_worker = &w;
  for (;;) {
    Fiber* f = nullptr;
    {
      shim::lock_guard<shim::mutex> g(det_mu_);
      if (!det_ready_.empty()) {
        std::size_t i = det_rng_() % det_ready_.size();
        f = det_ready_[i];
        det_ready_[i] = det_ready_.back();
        det_ready_.pop_back();
      } else if (Fiber* o = det_overflow_.head) {
        det_overflow_.head = o->next;
        if (det_overflow_.head == nullptr) det_overflow_ = FiberBatch{};
        f = o;
      }
    }
    if (f != nullptr) {
      run_fiber(w, f);
      if (const StepHook* h = g_step_hook.load(std::memory_order_acquire)) h->after_step(h->ctx);
      continue;
    }
    if (shutdown_.load(std::memory_order_acquire)) break;
    // Ready I/O first: the manual clock must not jump past a wait whose
    // event is already in the kernel (a connect would time out at once).
    if (poll_io_now() || fire_timers() || advance_manual_clock()) continue;
    w.activity.store(2, std::memory_order_relaxed);
    w.parker.park(*this);
    w.activity.store(0, std::memory_order_relaxed);
  }
  tls_worker = nullptr;
}

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

void Scheduler::dump(std::ostream& out) const {
  static const char* const kActivity[] = {"running", "searching", "parked"};
  out << "shoal runtime " << static_cast<const void*>(this) << ": " << workers_.size() << " workers"
      << (deterministic_ ? " (deterministic)" : "") << ", injector " << injector_.size() << ", searching "
      << idle_.searching() << ", unparked " << idle_.unparked() << ", backend " << backend_->name() << ", timers "
      << timers_.size() << "\n";
  for (auto& w : workers_) {
    out << "  worker " << w->index << ": " << kActivity[w->activity.load(std::memory_order_relaxed)]
        << ", local queue " << w->local.size() << ", polls " << w->polls.load(std::memory_order_relaxed)
        << ", parker " << w->parker.state() << "\n";
  }
  shim::lock_guard<shim::mutex> g(roots_mu_);
  for (CancelNode* n : roots_) dump_node(out, n, 1);
}

// Best effort: a node whose lock is held (perhaps by a hung thread) is
// reported as such instead of blocking the watchdog.
void Scheduler::dump_node(std::ostream& out, CancelNode* n, int depth) const {
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  out << indent << (depth == 1 ? "root" : "scope") << (n->cancelled.load() ? " [cancelled]" : "")
      << (n->shielded ? " [shielded]" : "");
  if (!n->lock.try_lock()) {
    out << " (locked)\n";
    return;
  }
  std::size_t waiting = 0, children = 0;
  for (Fiber* f = n->first_fiber; f != nullptr; f = f->node_next) {
    if (f->hook.load(std::memory_order_relaxed) != nullptr) ++waiting;
  }
  for (CancelNode* c = n->first_child; c != nullptr; c = c->next_sibling) ++children;
  out << ": body " << (n->body != nullptr && n->body->hook.load(std::memory_order_relaxed) ? "waiting" : "not waiting")
      << ", " << waiting << " children suspended at a wait, " << children << " nested scopes\n";
  for (CancelNode* c = n->first_child; c != nullptr; c = c->next_sibling) dump_node(out, c, depth + 1);
  n->lock.unlock();
}

// ---- free functions from fiber.hpp -------------------------------------

void schedule(Fiber* f) noexcept { f->sched->schedule(f); }
void schedule_spawn(Fiber* f) noexcept { f->sched->schedule_spawn(f); }
void schedule_yield(Fiber* f) noexcept { f->sched->schedule_yield(f); }

void yield_from(Fiber* f, std::coroutine_handle<> h, const void* /*awaiter: see the header*/) noexcept {
  f->resume = h;
  f->sched->schedule_yield(f);
}
void schedule_batch(Scheduler* s, FiberBatch& batch) noexcept { s->schedule_batch(batch); }
void pin_to_current_worker(Fiber* f) noexcept { f->sched->pin_to_current_worker(f); }
Fiber* current_fiber() noexcept { return tls_fiber; }

Clock::time_point clock_now() noexcept {
  const Worker* w = tls_worker;
  if (w == nullptr || !w->sched->manual_clock()) return Clock::now();
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(w->sched->now_ns())));
}

void set_step_hook(const StepHook* hook) noexcept { g_step_hook.store(hook, std::memory_order_release); }

void report_suppressed_fault(Scheduler* s, const std::exception_ptr& e) noexcept { s->report_suppressed(e); }

std::coroutine_handle<> RootOwner::fiber_done(Fiber&, PromiseBase&, std::coroutine_handle<>) noexcept {
  shim::lock_guard<shim::mutex> g(mu_);
  done_ = true;
  cv_.notify_one();
  return std::noop_coroutine();
}

void RootOwner::wait() noexcept {
  shim::unique_lock<shim::mutex> g(mu_);
  cv_.wait(g, [this] { return done_; });
}

}  // namespace detail

// ---- Runtime -------------------------------------------------------------

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

Runtime::Runtime(RuntimeOptions options) : sched_(std::make_unique<detail::Scheduler>(std::move(options))) {}
Runtime::~Runtime() = default;

void Runtime::start_root(detail::RootOwner& root, detail::PromiseBase& p, std::coroutine_handle<> h) {
  if (sched_->on_own_worker()) {
    h.destroy();
    throw std::logic_error("shoal::Runtime::block_on: called from one of the runtime's own workers (would deadlock)");
  }
  try {
    sched_->add_root(&root.node);
  } catch (...) {
    h.destroy();
    throw;
  }
  detail::Fiber& f = p.own_fiber_;
  root.node.attach(nullptr, &f, sched_.get());
  f.sched = sched_.get();
  f.owner = &root;
  f.node.store(&root.node, std::memory_order_relaxed);
  f.resume = h;
  p.fiber_ = &f;
  sched_->inject(&f);
}

void Runtime::finish_root(detail::RootOwner& root) noexcept { sched_->remove_root(&root.node); }

void Runtime::cancel() noexcept { sched_->cancel_roots(); }

std::size_t Runtime::worker_count() const noexcept { return sched_->worker_count(); }

void Runtime::dump_state(std::ostream& out) const { sched_->dump(out); }

void Runtime::dump_all(std::ostream& out) {
  detail::shim::lock_guard<detail::shim::mutex> g(detail::g_registry_mu);
  for (const detail::Scheduler* s : detail::g_registry) s->dump(out);
}

namespace this_task {
bool cancellation_requested() noexcept {
  if (detail::Fiber* f = detail::tls_fiber) return f->cancelled();
  if (detail::BlockingJob* job = detail::current_blocking_job()) return job->cancelled();
  return false;
}
}  // namespace this_task

}  // namespace shoal

namespace shoal::detail {
bool on_worker_thread() noexcept { return tls_worker != nullptr; }
}  // namespace shoal::detail
