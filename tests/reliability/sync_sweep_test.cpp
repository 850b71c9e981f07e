// Cancel (or fault) at every suspension point, with the sync awaitables in
// the mix. One scope runs: three children taking a Mutex whose bodies
// suspend (a yield and a sleep), one taking it with with_lock_timeout (a
// deadline shorter than the others hold it), two readers and two writers on
// an RwLock, three children taking 1 or 2 permits of a Semaphore(2), and
// three children calling once_do on a Once whose init suspends (a sleep and
// a yield). It runs on the simulated executor (deterministic schedule +
// manual clock) once to count its N task steps; then, for each k <= N, again
// with the same seed: cancelled exactly after the k-th step, and with a
// child faulting at its first resume after the k-th step (inside a body
// when that is where it was). Every run must: rethrow the first fault (or
// return normally after its own cancel), have joined every child before
// the scope returned, free every frame, never have more than one holder of
// the mutex, more than two permits out, or a writer beside anyone; and leave
// every lock free afterwards (the try forms succeed, every permit is back),
// with the Once either holding the one value of the one init that finished,
// empty (every init was cut off), or failed only after a fault inside init.
//
// One source of drift: the locks' fairness clock is the real coarse
// monotonic clock (waiters older than ~1 ms are handed permits directly
// rather than woken to retry), so a run that straddles a clock tick may
// take a different schedule from the counting run. An action scheduled past
// a run's last step then simply does not happen, which every invariant
// allows; the sweep reports how often a recount disagreed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include "shoal/testing/step_hook.hpp"
#include "shoal/sync.hpp"
#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Mutex;
using shoal::Once;
using shoal::RwLock;
using shoal::Scope;
using shoal::Semaphore;
using shoal::SyncError;
using shoal::Task;

struct Boom : std::runtime_error {
  explicit Boom(int id) : std::runtime_error("boom " + std::to_string(id)), id(id) {}
  int id;
};

enum class Action { none, cancel, fault };

constexpr int kSemPermits = 2;
constexpr int kOnceValue = 42;

// Counters the tasks update. The simulated executor runs every task on its
// one worker thread and the test reads them after run() returned, but they
// are atomics all the same (a regression that ran tasks elsewhere would
// then show up as a wrong count, not as a data race).
struct Ctx {
  // Set by the test.
  Action action = Action::none;
  long act_at = 0;  // act after this many steps (0: never)
  // Observed.
  long steps = 0;           // written by the step hook (worker thread, no task running)
  long scenario_steps = 0;  // steps when the scenario's scope returned
  bool armed = false;       // a fault is due at the next child resume
  int first_fault = -1;
  int next_fault_id = 0;
  Scope* scope = nullptr;
  std::atomic<long> live_children{0};
  // Exclusion.
  std::atomic<int> in_mutex{0}, readers{0}, writers{0}, sem_out{0};
  std::atomic<int> max_in_mutex{0}, max_readers{0}, max_writers{0}, max_sem_out{0};
  std::atomic<long> violations{0};
  // Not vacuous: bodies cut off, timeouts, once waiters.
  std::atomic<long> bodies_unwound{0}, lock_timeouts{0}, once_waited{0};
  // Once.
  std::atomic<long> init_runs{0}, init_finished{0}, once_values{0}, once_wrong{0}, init_failed_seen{0};
  bool fault_in_init = false;

  static void on_step(void* p) noexcept {
    auto* c = static_cast<Ctx*>(p);
    ++c->steps;
    if (c->steps != c->act_at) return;
    if (c->action == Action::cancel && c->scope != nullptr) c->scope->cancel();
    if (c->action == Action::fault) c->armed = true;
  }
  // Children and bodies call this after every await: the armed fault fires here.
  void resumed(bool in_init = false) {
    if (!armed) return;
    armed = false;
    const int id = next_fault_id++;
    if (first_fault < 0) first_fault = id;
    if (in_init) fault_in_init = true;
    throw Boom(id);
  }
};

void raise_max(std::atomic<int>& max, int now) {
  for (int m = max.load(); now > m && !max.compare_exchange_weak(m, now);) {
  }
}

struct LiveGuard {
  explicit LiveGuard(Ctx& c) : c(c) { c.live_children.fetch_add(1); }
  ~LiveGuard() { c.live_children.fetch_sub(1); }
  Ctx& c;
};

// Held for a body's duration: counts `n` in, checks the limit, and notes a
// body cut off (by a cancel or a fault) on its way out.
struct Inside {
  Inside(Ctx& c, std::atomic<int>& count, std::atomic<int>& max, int n, int limit) : c(c), count(count), n(n) {
    const int now = count.fetch_add(n) + n;
    raise_max(max, now);
    if (now > limit) c.violations.fetch_add(1);
  }
  ~Inside() {
    count.fetch_sub(n);
    if (std::uncaught_exceptions() > 0) c.bodies_unwound.fetch_add(1);
  }
  Inside(const Inside&) = delete;
  Inside& operator=(const Inside&) = delete;
  Ctx& c;
  std::atomic<int>& count;
  int n;
};

struct Locks {
  Mutex mutex{"sweep mutex"};
  RwLock rw{"sweep rwlock"};
  Semaphore sem{kSemPermits, "sweep semaphore"};
  Once<int> once{"sweep once"};
};

Task<void> mutex_child(Ctx& c, Locks& l, int id) {
  LiveGuard g(c);
  for (int i = 0; i < 3; ++i) {
    auto body = [&c, id]() -> Task<void> {
      Inside in(c, c.in_mutex, c.max_in_mutex, 1, 1);
      co_await shoal::checkpoint();
      c.resumed();
      co_await shoal::sleep_for(std::chrono::microseconds(5 * (id + 1)));
      c.resumed();
    };
    co_await shoal::with_lock(l.mutex, body);
    c.resumed();
  }
}

// Asks with a deadline shorter than the others hold the mutex: it times out
// unless it finds a gap.
Task<void> timeout_child(Ctx& c, Locks& l) {
  LiveGuard g(c);
  for (int i = 0; i < 3; ++i) {
    auto body = [&c]() -> Task<void> {
      Inside in(c, c.in_mutex, c.max_in_mutex, 1, 1);
      co_await shoal::checkpoint();
      c.resumed();
    };
    auto r = co_await shoal::with_lock_timeout(l.mutex, 3us, body);
    c.resumed();
    if (!r.has_value()) {
      if (r.error() != SyncError::Code::timed_out) throw std::logic_error("with_lock_timeout: not timed_out");
      c.lock_timeouts.fetch_add(1);
    }
  }
}

Task<void> reader_child(Ctx& c, Locks& l, int id) {
  LiveGuard g(c);
  for (int i = 0; i < 3; ++i) {
    auto body = [&c, id]() -> Task<void> {
      Inside in(c, c.readers, c.max_readers, 1, 1 << 20);
      if (c.writers.load() != 0) c.violations.fetch_add(1);
      co_await shoal::sleep_for(std::chrono::microseconds(4 + 3 * id));
      c.resumed();
      if (c.writers.load() != 0) c.violations.fetch_add(1);
    };
    co_await shoal::with_read_lock(l.rw, body);
    c.resumed();
  }
}

Task<void> writer_child(Ctx& c, Locks& l) {
  LiveGuard g(c);
  for (int i = 0; i < 2; ++i) {
    auto body = [&c]() -> Task<void> {
      Inside in(c, c.writers, c.max_writers, 1, 1);
      if (c.readers.load() != 0) c.violations.fetch_add(1);
      co_await shoal::checkpoint();
      c.resumed();
      if (c.readers.load() != 0 || c.writers.load() != 1) c.violations.fetch_add(1);
    };
    co_await shoal::with_write_lock(l.rw, body);
    c.resumed();
  }
}

Task<void> sem_child(Ctx& c, Locks& l, std::uint32_t n) {
  LiveGuard g(c);
  for (int i = 0; i < 2; ++i) {
    auto body = [&c, n]() -> Task<void> {
      Inside in(c, c.sem_out, c.max_sem_out, static_cast<int>(n), kSemPermits);
      co_await shoal::sleep_for(std::chrono::microseconds(6));
      c.resumed();
    };
    co_await shoal::with_permits(l.sem, n, body);
    c.resumed();
  }
}

Task<void> once_child(Ctx& c, Locks& l) {
  LiveGuard g(c);
  auto init = [&c]() -> Task<int> {
    c.init_runs.fetch_add(1);
    co_await shoal::sleep_for(12us);
    c.resumed(true);
    co_await shoal::checkpoint();
    c.resumed(true);
    c.init_finished.fetch_add(1);
    co_return kOnceValue;
  };
  const long runs_before = c.init_runs.load();
  try {
    const int& v = co_await shoal::once_do(l.once, init);
    c.once_values.fetch_add(1);
    if (v != kOnceValue) c.once_wrong.fetch_add(1);
    if (c.init_runs.load() == runs_before) c.once_waited.fetch_add(1);  // another caller's init
  } catch (const SyncError& e) {
    if (e.code() != SyncError::Code::init_failed) throw;
    c.init_failed_seen.fetch_add(1);  // the winner's init threw (an injected fault)
    co_return;
  }
  c.resumed();
}

Task<void> scenario_scope(Ctx& c, Locks& l) {
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    c.scope = &s;
    for (int i = 0; i < 3; ++i) s.spawn(mutex_child(c, l, i));
    s.spawn(timeout_child(c, l));
    for (int i = 0; i < 2; ++i) {
      s.spawn(reader_child(c, l, i));
      s.spawn(writer_child(c, l));
    }
    s.spawn(sem_child(c, l, 1));
    s.spawn(sem_child(c, l, 2));
    s.spawn(sem_child(c, l, 1));
    for (int i = 0; i < 3; ++i) s.spawn(once_child(c, l));
    co_return;
  });
}

Task<void> scenario(Ctx& c, Locks& l) {
  try {
    co_await scenario_scope(c, l);
  } catch (...) {
    c.scope = nullptr;
    throw;
  }
  c.scope = nullptr;
}

struct Outcome {
  long steps = 0;
  long scenario_steps = 0;
  bool faulted = false;
  int fault_id = -1;
  int first_fault = -1;
  bool other_error = false;
  std::string other_what;
  long live_children_after = 0;
  long live_frames = 0;
  int max_in_mutex = 0, max_readers = 0, max_writers = 0, max_sem_out = 0;
  long violations = 0, bodies_unwound = 0, lock_timeouts = 0, once_waited = 0;
  long init_runs = 0, init_finished = 0, once_values = 0, once_wrong = 0, init_failed_seen = 0;
  bool fault_in_init = false;
  // Afterwards.
  bool mutex_free = false, rw_free = false, sem_free = false;
  long sem_available = -1;
  bool once_has_value = false;
  int once_value = 0;
  bool once_failed = false;  // a later once_do got SyncError{init_failed}
  bool once_reran = false;   // a later once_do ran its init (the Once was empty)
};

Task<bool> try_take_permits(Semaphore& s, std::uint32_t k) {
  if (k == 0) co_return true;
  auto rest = [&s, k]() -> Task<bool> { co_return co_await try_take_permits(s, k - 1); };
  auto r = co_await shoal::with_try_permit(s, rest);
  co_return r.has_value() && *r;
}

// After the scope: is every lock free, and what does the Once hold?
Task<void> inspect(Locks& l, Outcome& o) {
  auto m = co_await shoal::with_try_lock(l.mutex, [] {});
  o.mutex_free = m.has_value();
  auto w = co_await shoal::with_try_write_lock(l.rw, [] {});
  o.rw_free = w.has_value();
  o.sem_available = l.sem.available();
  const bool all_permits = co_await try_take_permits(l.sem, kSemPermits);
  o.sem_free = all_permits;
  if (const int* v = l.once.get()) {
    o.once_has_value = true;
    o.once_value = *v;
  }
  try {
    bool ran = false;
    auto fresh = [&ran] {
      ran = true;
      return kOnceValue + 1;
    };
    (void)co_await shoal::once_do(l.once, fresh);
    o.once_reran = ran;
  } catch (const SyncError& e) {
    o.once_failed = e.code() == SyncError::Code::init_failed;
  }
}

Outcome run_once(std::uint64_t seed, Action action, long act_at) {
  Ctx c;
  c.action = action;
  c.act_at = act_at;
  shoal::testing::StepHook hook{&Ctx::on_step, &c};
  Outcome o;
  auto* locks = new Locks;  // deleted below only if every lock is free (else its destructor would abort)
  {
    shoal::test::FrameCounter frames;
    shoal::testing::set_step_hook(&hook);
    shoal::RuntimeOptions opts = shoal::RuntimeOptions::simulated(seed);
    opts.on_suppressed_fault = [](std::exception_ptr) {};
    try {
      shoal::run(
          [](Ctx& c, Locks& l, Outcome& o) -> Task<void> {
            std::exception_ptr error;
            try {
              co_await scenario(c, l);
            } catch (...) {
              error = std::current_exception();
            }
            o.live_children_after = c.live_children.load();  // at the moment the scope ended
            c.scenario_steps = c.steps;
            co_await inspect(l, o);
            if (error) std::rethrow_exception(error);
          }(c, *locks, o),
          std::move(opts));
    } catch (const Boom& b) {
      o.faulted = true;
      o.fault_id = b.id;
    } catch (const std::exception& e) {
      o.other_error = true;
      o.other_what = e.what();
    }
    shoal::testing::set_step_hook(nullptr);
    o.live_frames = frames.live();
  }
  if (o.mutex_free && o.rw_free && o.sem_free) delete locks;
  o.steps = c.steps;
  o.scenario_steps = c.scenario_steps;
  o.first_fault = c.first_fault;
  o.max_in_mutex = c.max_in_mutex.load();
  o.max_readers = c.max_readers.load();
  o.max_writers = c.max_writers.load();
  o.max_sem_out = c.max_sem_out.load();
  o.violations = c.violations.load();
  o.bodies_unwound = c.bodies_unwound.load();
  o.lock_timeouts = c.lock_timeouts.load();
  o.once_waited = c.once_waited.load();
  o.init_runs = c.init_runs.load();
  o.init_finished = c.init_finished.load();
  o.once_values = c.once_values.load();
  o.once_wrong = c.once_wrong.load();
  o.init_failed_seen = c.init_failed_seen.load();
  o.fault_in_init = c.fault_in_init;
  return o;
}

// The invariants every run keeps, whatever was done to it.
void check(const Outcome& o, Action a, const std::string& where) {
  EXPECT_FALSE(o.other_error) << where << ": " << o.other_what;
  EXPECT_EQ(o.live_children_after, 0) << where << ": scope returned before joining its children";
  EXPECT_EQ(o.live_frames, 0) << where << ": frames leaked";
  EXPECT_LE(o.max_in_mutex, 1) << where << ": two holders of the mutex";
  EXPECT_LE(o.max_writers, 1) << where << ": two writers at once";
  EXPECT_LE(o.max_sem_out, kSemPermits) << where << ": more permits out than exist";
  EXPECT_EQ(o.violations, 0) << where << ": a writer beside a reader or writer (or a limit exceeded)";
  EXPECT_TRUE(o.mutex_free) << where << ": the mutex was left held";
  EXPECT_TRUE(o.rw_free) << where << ": the RwLock was left held";
  EXPECT_TRUE(o.sem_free) << where << ": not every permit came back (" << o.sem_available << " of " << kSemPermits
                          << " available)";
  EXPECT_EQ(o.sem_available, kSemPermits) << where;
  if (a == Action::cancel) {
    EXPECT_FALSE(o.faulted) << where << ": a self-cancelled scope returns normally";
  } else if (o.first_fault >= 0) {
    EXPECT_TRUE(o.faulted) << where << ": the fault was lost";
    EXPECT_EQ(o.fault_id, o.first_fault) << where << ": not the first fault";
  } else {
    EXPECT_FALSE(o.faulted) << where;
  }
  // The Once: one init finished at most, and its value is the one stored.
  EXPECT_LE(o.init_finished, 1) << where << ": init finished twice";
  EXPECT_EQ(o.once_wrong, 0) << where << ": a caller got a value other than init's";
  if (o.init_finished == 1) {
    EXPECT_TRUE(o.once_has_value) << where << ": init finished but the Once holds no value";
    EXPECT_EQ(o.once_value, kOnceValue) << where;
    EXPECT_FALSE(o.once_reran) << where << ": a later once_do ran init again";
  } else {
    EXPECT_FALSE(o.once_has_value) << where << ": a value without a finished init";
    EXPECT_EQ(o.once_values, 0) << where << ": a caller got a value no init produced";
  }
  if (o.once_failed || o.init_failed_seen > 0) {
    EXPECT_TRUE(o.fault_in_init) << where << ": SyncError{init_failed} though no init threw";
  } else if (!o.once_has_value) {
    EXPECT_TRUE(o.once_reran) << where << ": an empty Once did not run init for a later caller";
  }
}

TEST(SyncSweep, CancelOrFaultAtEveryStepKeepsTheLocksConsistent) {
  shoal::test::Watchdog dog(std::chrono::seconds(240), "SyncSweep");
  const std::uint64_t base = shoal::test::test_seed("SyncSweep");
  const std::uint64_t seeds = static_cast<std::uint64_t>(shoal::test::scaled(100, 4));
  long runs = 0, total_steps = 0, faulted = 0, fault_runs = 0, recount_differs = 0;
  long unwound = 0, timeouts = 0, once_waited = 0, init_faults = 0, empty_after = 0;
  int peak_readers = 0, peak_sem = 0;
  for (std::uint64_t seed = base; seed < base + seeds; ++seed) {
    const Outcome clean = run_once(seed, Action::none, 0);
    const std::string at = "SHOAL_SEED=" + std::to_string(seed);
    check(clean, Action::none, at + " clean run");
    ASSERT_FALSE(clean.faulted) << at;
    ASSERT_EQ(clean.init_finished, 1) << at;
    ASSERT_EQ(clean.init_runs, 1) << at << ": init ran more than once without a cancel or fault";
    ASSERT_EQ(clean.once_values, 3) << at;
    ASSERT_GT(clean.scenario_steps, 40) << at;
    if (::testing::Test::HasFailure()) return;
    timeouts += clean.lock_timeouts;
    once_waited += clean.once_waited;
    peak_readers = std::max(peak_readers, clean.max_readers);
    peak_sem = std::max(peak_sem, clean.max_sem_out);
    recount_differs += run_once(seed, Action::none, 0).scenario_steps != clean.scenario_steps ? 1 : 0;
    total_steps += clean.scenario_steps;
    for (long k = 1; k <= clean.scenario_steps; ++k) {
      for (Action a : {Action::cancel, Action::fault}) {
        const Outcome o = run_once(seed, a, k);
        ++runs;
        fault_runs += a == Action::fault ? 1 : 0;
        faulted += o.faulted ? 1 : 0;
        unwound += o.bodies_unwound > 0 ? 1 : 0;
        init_faults += o.fault_in_init ? 1 : 0;
        empty_after += (!o.once_has_value && !o.once_failed) ? 1 : 0;
        check(o, a, at + (a == Action::cancel ? " cancel" : " fault") + " at step " + std::to_string(k));
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
  std::printf("[sync sweep] %ld runs over %ld steps (%llu seeds; %ld recounts differed: fairness clock); %ld faulted; "
              "%ld cut a body off\n",
              runs, total_steps, static_cast<unsigned long long>(seeds), recount_differs, faulted, unwound);
  std::printf("[sync sweep] clean runs: %ld lock timeouts, %ld once_do waits, peak %d readers, %d permits out; "
              "%ld runs faulted inside init, %ld left the Once empty\n",
              timeouts, once_waited, peak_readers, peak_sem, init_faults, empty_after);
  // Not vacuous: faults surfaced, bodies were cut off while holding, the
  // locks were contended, and Once had waiters and cut-off inits.
  EXPECT_GT(faulted, fault_runs / 2);
  EXPECT_GT(unwound, runs / 4);
  EXPECT_GT(timeouts, 0);
  EXPECT_GT(once_waited, 0);
  EXPECT_GE(peak_readers, 2);
  EXPECT_EQ(peak_sem, kSemPermits);
  EXPECT_GT(init_faults, 0);
  EXPECT_GT(empty_after, 0);
}

}  // namespace
