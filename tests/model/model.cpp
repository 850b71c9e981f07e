// The model checker's scheduler (see model.hpp).
//
// Baton passing: `Execution::active` names the one model thread allowed to
// run; every other one waits on its own semaphore. A thread at a scheduling
// point asks the strategy whom to run (under `mu`), releases that thread's
// semaphore and waits on its own. The release/acquire pair orders everything
// the threads touch between points (no data races for TSan to see).
//
// Choices: at each point the candidates are the runnable threads, the
// current one first when it may go on. Picking another one then is a
// preemption; after a block (a spin blocks until another thread writes) or
// a thread's end every pick is free.
// Only points with two or more candidates are decisions; the schedule is the
// list of thread ids picked there.
//
// Model threads run on pooled carrier threads (creating a thread per model
// thread per execution dominated the run time, worst under TSan).
//
// A failed execution cannot be unwound (its threads sit in noexcept code),
// so its carriers stay blocked forever and the execution is leaked on purpose.
#include "model.hpp"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <semaphore>
#include <sstream>
#include <thread>
#include <vector>

namespace shoal::model {
namespace {

enum class State { runnable, blocked, finished };
enum class Why { point, yield, blocked, finished };

// What spinning threads are blocked on: any write by another thread.
const char kSpinning = 0;

struct ThreadState {
  int id = 0;
  std::string name;
  State state = State::runnable;
  const void* blocked_on = nullptr;
  const char* blocked_what = "";
  std::uint64_t blocked_since = 0;  // FIFO among waiters of one object
  std::binary_semaphore go{0};      // released when this thread gets the baton
  std::uint64_t own_writes = 0;
  std::uint64_t others_at_spin = 0;  // others' writes when spin() last returned
  std::condition_variable never;    // a failed execution's threads wait here
  std::function<void()> fn;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// Picks an index into `cands` (size >= 2). `current_first`: cands[0] is
  /// the running thread and any other pick preempts it.
  virtual std::size_t pick(const std::vector<int>& cands, bool current_first, int preemptions) = 0;
};

struct Execution {
  std::mutex mu;
  std::condition_variable done_cv;
  std::vector<std::unique_ptr<ThreadState>> threads;
  int active = 0;
  bool done = false;
  std::string failure;
  Strategy* strategy = nullptr;
  long steps = 0;
  long max_steps = 0;
  int preemptions = 0;
  std::uint64_t block_seq = 0;
  int spinning = 0;         // threads blocked on kSpinning
  bool wrote = false;       // the running thread wrote since it last entered the scheduler
  std::uint64_t writes = 0;  // by every thread
  std::vector<int> schedule;  // the thread picked at each decision
  int carriers_out = 0;       // guarded by the pool's mutex, not `mu`
};

// Idle carrier threads, reused across executions. Never destroyed: carriers
// of failed executions are still blocked at exit.
class Pool {
 public:
  static Pool& get() {
    static auto* p = new Pool;
    return *p;
  }
  void start(Execution* ex, std::function<void()> job) {
    std::lock_guard<std::mutex> g(mu_);
    ++ex->carriers_out;
    Carrier* c;
    if (idle_.empty()) {
      c = new Carrier;
      c->th = std::thread([this, c] { loop(*c); });
    } else {
      c = idle_.back();
      idle_.pop_back();
    }
    c->job = std::move(job);
    c->ex = ex;
    c->cv.notify_one();
  }
  /// Waits until no carrier touches `ex` any more.
  void wait_released(Execution* ex) {
    std::unique_lock<std::mutex> lk(mu_);
    released_.wait(lk, [&] { return ex->carriers_out == 0; });
  }

 private:
  struct Carrier {
    std::thread th;
    std::condition_variable cv;
    std::function<void()> job;
    Execution* ex = nullptr;
  };
  void loop(Carrier& c) {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      c.cv.wait(lk, [&] { return c.job != nullptr; });
      std::function<void()> job = std::move(c.job);
      c.job = nullptr;
      lk.unlock();
      job();
      lk.lock();
      --c.ex->carriers_out;
      c.ex = nullptr;
      idle_.push_back(&c);
      released_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable released_;
  std::vector<Carrier*> idle_;
};

thread_local Execution* tls_ex = nullptr;
thread_local ThreadState* tls_self = nullptr;

std::string schedule_string(const std::vector<int>& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i != 0) out += ',';
    out += std::to_string(s[i]);
  }
  return out;
}

std::string thread_label(const ThreadState& t) {
  std::string s = "thread " + std::to_string(t.id);
  if (!t.name.empty()) s += " (" + t.name + ")";
  return s;
}

[[noreturn]] void outside_execution(const char* what) {
  std::fprintf(stderr, "shoal::model: %s outside a model execution\n", what);
  std::abort();
}

// Records the first failure, wakes the controller and never returns.
[[noreturn]] void fail_locked(std::unique_lock<std::mutex>& lk, const std::string& what) {
  Execution& ex = *tls_ex;
  if (ex.failure.empty()) ex.failure = what;
  ex.done = true;
  ex.done_cv.notify_all();
  ThreadState& me = *tls_self;
  for (;;) me.never.wait(lk);
}

std::string describe_stuck(const Execution& ex) {
  std::string s;
  for (const auto& t : ex.threads) {
    if (t->state == State::blocked) s += "\n    " + thread_label(*t) + " blocked in " + t->blocked_what;
  }
  return s;
}

// Picks the next thread and hands it the baton; returns once the caller has
// it back (at once if the caller goes on; never if it finished).
void reschedule(std::unique_lock<std::mutex>& lk, Why why) {
  Execution& ex = *tls_ex;
  ThreadState& me = *tls_self;
  std::vector<int> cands;
  const bool may_continue = why == Why::point;
  if (may_continue) cands.push_back(me.id);
  for (const auto& t : ex.threads) {
    if (t.get() != &me && t->state == State::runnable) cands.push_back(t->id);
  }
  if (cands.empty() && why == Why::yield) return;  // nobody else to let run
  if (cands.empty()) {
    bool all_finished = true;
    for (const auto& t : ex.threads) all_finished = all_finished && t->state == State::finished;
    if (all_finished) {
      ex.done = true;
      ex.done_cv.notify_all();
      return;
    }
    fail_locked(lk, "deadlock, lost wake-up or livelock: no thread can run" + describe_stuck(ex));
  }
  std::size_t idx = 0;
  if (cands.size() > 1) {
    idx = ex.strategy->pick(cands, may_continue, ex.preemptions);
    if (idx >= cands.size()) fail_locked(lk, "the replayed schedule does not fit this test (is it deterministic?)");
    ex.schedule.push_back(cands[idx]);
    if (may_continue && idx != 0) ++ex.preemptions;
  }
  const int next = cands[idx];
  if (next == me.id) return;
  ex.active = next;
  lk.unlock();
  ex.threads[static_cast<std::size_t>(next)]->go.release();
  if (why == Why::finished) return;
  me.go.acquire();
  lk.lock();
}

void wake_locked(Execution& ex, const void* obj, bool all);

// Spinners wake after a write, not at the write's point: one woken there
// could re-read the old value and sleep again before the write happens.
void flush_write(Execution& ex) {
  if (!ex.wrote) return;
  ex.wrote = false;
  if (ex.spinning != 0) wake_locked(ex, &kSpinning, true);
}

void block_locked(std::unique_lock<std::mutex>& lk, const void* obj, const char* what) {
  Execution& ex = *tls_ex;
  flush_write(ex);
  ThreadState& me = *tls_self;
  me.state = State::blocked;
  me.blocked_on = obj;
  me.blocked_what = what;
  me.blocked_since = ++ex.block_seq;
  reschedule(lk, Why::blocked);
}

void wake_locked(Execution& ex, const void* obj, bool all) {
  ThreadState* oldest = nullptr;
  for (const auto& t : ex.threads) {
    if (t->state != State::blocked || t->blocked_on != obj) continue;
    if (obj == &kSpinning) --ex.spinning;
    if (all) {
      t->state = State::runnable;
      t->blocked_on = nullptr;
    } else if (oldest == nullptr || t->blocked_since < oldest->blocked_since) {
      oldest = t.get();
    }
  }
  if (oldest != nullptr) {
    if (obj == &kSpinning) --ex.spinning;
    oldest->state = State::runnable;
    oldest->blocked_on = nullptr;
  }
}

void thread_main(Execution* ex, ThreadState* t) {
  tls_ex = ex;
  tls_self = t;
  t->go.acquire();
  t->others_at_spin = ex->writes;
  try {
    t->fn();
  } catch (...) {
    fail(thread_label(*t) + " ended with an exception");
  }
  std::unique_lock<std::mutex> lk(ex->mu);
  flush_write(*ex);
  t->state = State::finished;
  wake_locked(*ex, t, true);  // joiners
  reschedule(lk, Why::finished);
  tls_ex = nullptr;
  tls_self = nullptr;
}

// Leaked on purpose (see the top); kept reachable so LeakSanitizer is quiet.
std::vector<Execution*>& failed_executions() {
  static auto* v = new std::vector<Execution*>;
  return *v;
}

struct RunOutcome {
  bool ok;
  std::string failure;
  std::vector<int> schedule;
};

RunOutcome run_once(Strategy& strategy, const Options& opts, const std::function<void()>& body) {
  auto* ex = new Execution;
  ex->strategy = &strategy;
  ex->max_steps = opts.max_steps;
  std::unique_lock<std::mutex> lk(ex->mu);
  auto main = std::make_unique<ThreadState>();
  main->name = "main";
  main->fn = body;
  ThreadState* mp = main.get();
  ex->threads.push_back(std::move(main));
  ex->active = 0;
  Pool::get().start(ex, [ex, mp] { thread_main(ex, mp); });
  mp->go.release();
  ex->done_cv.wait(lk, [&] { return ex->done; });
  RunOutcome out{ex->failure.empty(), ex->failure, ex->schedule};
  lk.unlock();
  if (!out.ok) {
    failed_executions().push_back(ex);
    return out;
  }
  Pool::get().wait_released(ex);
  delete ex;
  return out;
}

// Depth-first over decisions: replay a prefix of picks, then take the
// default (go on, or the lowest runnable id), and backtrack from the end.
class Dfs final : public Strategy {
 public:
  explicit Dfs(int bound) : bound_(bound) {}
  std::size_t pick(const std::vector<int>& cands, bool current_first, int preemptions) override {
    const std::size_t k = trail_.size();
    std::size_t idx = 0;
    if (k < prefix_.size()) {
      if (prefix_[k].cands != cands) return cands.size();  // nondeterministic test
      idx = prefix_[k].chosen;
    }
    trail_.push_back({cands, idx, current_first, preemptions});
    return idx;
  }
  /// Sets up the next execution; false when the tree is exhausted.
  bool advance() {
    while (!trail_.empty()) {
      Point& p = trail_.back();
      const std::size_t alt = p.chosen + 1;
      // Any pick but cands[0] preempts when the current thread could go on.
      if (alt < p.cands.size() && (!p.current_first || p.preemptions_before < bound_)) {
        p.chosen = alt;
        prefix_ = std::move(trail_);
        trail_.clear();
        return true;
      }
      trail_.pop_back();
    }
    return false;
  }

 private:
  struct Point {
    std::vector<int> cands;
    std::size_t chosen;
    bool current_first;
    int preemptions_before;
  };
  int bound_;
  std::vector<Point> prefix_;
  std::vector<Point> trail_;
};

// Per execution a switch probability between 1/2 and 1/32: runs with few
// switches reach deep states, runs with many find fine-grained races.
class RandomPicks final : public Strategy {
 public:
  explicit RandomPicks(std::uint64_t seed) : rng_(seed) { switch_one_in_ = 2u << (rng_() % 5); }
  std::size_t pick(const std::vector<int>& cands, bool current_first, int) override {
    if (current_first) {
      if (rng_() % switch_one_in_ != 0) return 0;
      return 1 + rng_() % (cands.size() - 1);
    }
    return rng_() % cands.size();
  }

 private:
  std::mt19937_64 rng_;
  std::uint64_t switch_one_in_;
};

class Replay final : public Strategy {
 public:
  explicit Replay(std::vector<int> ids) : ids_(std::move(ids)) {}
  std::size_t pick(const std::vector<int>& cands, bool, int) override {
    if (k_ >= ids_.size()) return 0;
    const int want = ids_[k_++];
    for (std::size_t i = 0; i < cands.size(); ++i) {
      if (cands[i] == want) return i;
    }
    return cands.size();
  }

 private:
  std::vector<int> ids_;
  std::size_t k_ = 0;
};

bool replay_requested(Result& r, const Options& opts, const std::function<void()>& body) {
  const char* env = std::getenv("SHOAL_MODEL_SCHEDULE");
  if (env == nullptr) return false;
  std::vector<int> ids;
  std::stringstream in(env);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) ids.push_back(std::atoi(item.c_str()));
  }
  Replay replay(std::move(ids));
  RunOutcome o = run_once(replay, opts, body);
  r.executions = 1;
  r.ok = o.ok;
  if (!o.ok) r.failure = o.failure + "\n  replayed SHOAL_MODEL_SCHEDULE=" + env;
  return true;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

namespace rt {

void point() noexcept {
  Execution* ex = tls_ex;
  if (ex == nullptr) return;
  std::unique_lock<std::mutex> lk(ex->mu);
  if (++ex->steps > ex->max_steps) {
    fail_locked(lk, "more than " + std::to_string(ex->max_steps) + " steps in one execution (livelock?)");
  }
  flush_write(*ex);
  reschedule(lk, Why::point);
}

// Called by the running thread only, so no lock: the baton orders it.
void wrote() noexcept {
  Execution* ex = tls_ex;
  if (ex == nullptr) return;
  ++ex->writes;
  ++tls_self->own_writes;
  ex->wrote = true;
}

void block(const void* obj, const char* what) noexcept {
  Execution* ex = tls_ex;
  if (ex == nullptr) outside_execution(what);
  std::unique_lock<std::mutex> lk(ex->mu);
  block_locked(lk, obj, what);
}

void wake(const void* obj, bool all) noexcept {
  Execution* ex = tls_ex;
  if (ex == nullptr) return;
  std::lock_guard<std::mutex> g(ex->mu);
  wake_locked(*ex, obj, all);
}

int self() noexcept { return tls_self != nullptr ? tls_self->id : -1; }

}  // namespace rt

void spin() noexcept {
  Execution* ex = tls_ex;
  if (ex == nullptr) {
    std::this_thread::yield();
    return;
  }
  std::unique_lock<std::mutex> lk(ex->mu);
  if (++ex->steps > ex->max_steps) {
    fail_locked(lk, "more than " + std::to_string(ex->max_steps) + " steps in one execution (livelock?)");
  }
  ThreadState& me = *tls_self;
  if (ex->writes - me.own_writes == me.others_at_spin) {
    ++ex->spinning;
    block_locked(lk, &kSpinning, "a spin (until another thread writes)");
  } else {
    flush_write(*ex);
    reschedule(lk, Why::yield);
  }
  me.others_at_spin = ex->writes - me.own_writes;
}

void fail(const std::string& what) noexcept {
  Execution* ex = tls_ex;
  if (ex == nullptr) {
    std::fprintf(stderr, "shoal::model: check failed outside an execution: %s\n", what.c_str());
    std::abort();
  }
  std::unique_lock<std::mutex> lk(ex->mu);
  fail_locked(lk, thread_label(*tls_self) + ": " + what);
}

void Thread::join() noexcept {
  rt::point();
  Execution* ex = tls_ex;
  std::unique_lock<std::mutex> lk(ex->mu);
  ThreadState* t = ex->threads[static_cast<std::size_t>(id_)].get();
  while (t->state != State::finished) block_locked(lk, t, "join");
}

Thread spawn(std::function<void()> fn, const char* name) {
  Execution* ex = tls_ex;
  if (ex == nullptr) outside_execution("spawn");
  rt::point();
  std::unique_lock<std::mutex> lk(ex->mu);
  auto t = std::make_unique<ThreadState>();
  t->id = static_cast<int>(ex->threads.size());
  t->name = name;
  t->fn = std::move(fn);
  ThreadState* tp = t.get();
  ex->threads.push_back(std::move(t));
  lk.unlock();
  Pool::get().start(ex, [ex, tp] { thread_main(ex, tp); });
  return Thread(tp->id);
}

Result explore(const Options& opts, const std::function<void()>& body) {
  Result r;
  if (replay_requested(r, opts, body)) return r;
  Dfs dfs(opts.preemption_bound);
  do {
    if (r.executions == opts.max_executions) {
      r.ok = false;
      r.failure = "more than " + std::to_string(opts.max_executions) +
                  " executions: shrink the scenario or lower the preemption bound";
      return r;
    }
    ++r.executions;
    RunOutcome o = run_once(dfs, opts, body);
    if (!o.ok) {
      r.ok = false;
      r.failure = o.failure + "\n  in execution " + std::to_string(r.executions) +
                  " (preemption bound " + std::to_string(opts.preemption_bound) +
                  "); rerun it with SHOAL_MODEL_SCHEDULE=" + schedule_string(o.schedule);
      return r;
    }
  } while (dfs.advance());
  return r;
}

Result random_schedules(std::uint64_t seed, long iterations, const Options& opts, const std::function<void()>& body) {
  Result r;
  if (replay_requested(r, opts, body)) return r;
  for (long i = 0; i < iterations; ++i) {
    RandomPicks picks(mix(seed ^ mix(static_cast<std::uint64_t>(i))));
    ++r.executions;
    RunOutcome o = run_once(picks, opts, body);
    if (!o.ok) {
      r.ok = false;
      r.failure = o.failure + "\n  in random schedule " + std::to_string(i) + " of SHOAL_SEED=" +
                  std::to_string(seed) + "; rerun it alone with SHOAL_MODEL_SCHEDULE=" + schedule_string(o.schedule);
      return r;
    }
  }
  return r;
}

}  // namespace shoal::model
