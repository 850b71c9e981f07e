// Cancel (or fault) at every suspension point. A scenario of children doing
// channel operations, a select (channel, notify, deadline), sleeps, joins,
// nested scopes and a task set (whose
// body spawns more children than its limit, so it waits for admission) runs
// on the simulated
// executor (deterministic schedule + manual clock), once to count its N task
// steps; then, for each k <= N, again with the same seed, cancelled exactly
// after the k-th step, again with a child faulting at its first resume
// after the k-th step, and again with the task set cancelled (by set.cancel())
// after the k-th step. Every run must: rethrow the first fault (or return
// normally after its own cancel), have joined every child before the scope
// (and the set) returned, free every frame, and conserve channel values. The
// set, cancelled from outside, ends in Cancelled or the first fault; it
// returns normally only if every child it admitted ran to the end.
#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "shoal/testing/step_hook.hpp"
#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Channel;
using shoal::Scope;
using shoal::SpawnStatus;
using shoal::Task;
using shoal::TaskSet;

struct Boom : std::runtime_error {
  explicit Boom(int id) : std::runtime_error("boom " + std::to_string(id)), id(id) {}
  int id;
};

enum class Action { none, cancel, fault, cancel_set };

// How the scenario's task set ended.
enum class SetEnd { not_run, running, normal, cancelled, fault, other };

constexpr int kSetLimit = 2;
constexpr int kSetChildren = 5;  // more than the limit: the body waits for admission

struct Ctx {
  // Set by the test.
  Action action = Action::none;
  long act_at = 0;  // act after this many steps (0: never)
  // Observed.
  long steps = 0;
  bool armed = false;       // a fault is due at the next child resume
  int first_fault = -1;     // id of the first Boom thrown
  int next_fault_id = 0;
  Scope* scope = nullptr;   // the scenario's scope while its body runs
  long live_children = 0;
  long sent = 0, received = 0;  // sums of channel values
  long sends_ok = 0, recvs_ok = 0;
  // The task set.
  TaskSet* set = nullptr;  // while the set exists
  bool set_self_cancelled = false;
  bool fault_in_set = false;  // the fault was thrown by the set's body or a child
  SetEnd set_end = SetEnd::not_run;
  int set_fault_id = -1;
  long set_live = 0, set_live_at_end = -1;  // set children alive; when the set returned
  long set_spawned = 0, set_refused = 0, set_done = 0;
  long admission_waits = 0;  // spawns made while the set was full
  bool cancelled_in_admission = false;  // a spawn into a full set threw Cancelled
  long set_first_step = 0, set_last_step = 0;  // steps after which the set existed

  static void on_step(void* p) noexcept {
    auto* c = static_cast<Ctx*>(p);
    ++c->steps;
    if (c->set != nullptr) {
      if (c->set_first_step == 0) c->set_first_step = c->steps;
      c->set_last_step = c->steps;
    }
    if (c->steps != c->act_at) return;
    if (c->action == Action::cancel && c->scope != nullptr) c->scope->cancel();
    if (c->action == Action::fault) c->armed = true;
    if (c->action == Action::cancel_set && c->set != nullptr) {
      c->set->cancel();
      c->set_self_cancelled = true;
    }
  }
  // Children call this after every await: the armed fault fires here.
  void resumed(bool in_set = false) {
    if (!armed) return;
    armed = false;
    const int id = next_fault_id++;
    if (first_fault < 0) {
      first_fault = id;
      fault_in_set = in_set;
    }
    throw Boom(id);
  }
};

struct LiveGuard {
  explicit LiveGuard(Ctx& c) : c(c) { ++c.live_children; }
  ~LiveGuard() { --c.live_children; }
  Ctx& c;
};

Task<void> producer(Ctx& c, Channel<int>& ch, int base, shoal::Notify& poke) {
  LiveGuard g(c);
  for (int i = 1; i <= 4; ++i) {
    const int v = base + i;
    co_await ch.send(v);
    c.sent += v;
    ++c.sends_ok;
    if (i == 2) poke.notify_one();
    c.resumed();
    co_await shoal::sleep_for(std::chrono::microseconds(10 * i));
    c.resumed();
  }
}

Task<void> consumer(Ctx& c, Channel<int>& ch) {
  LiveGuard g(c);
  for (;;) {
    std::optional<int> v = co_await ch.recv();
    if (!v) co_return;  // closed and drained
    c.received += *v;
    ++c.recvs_ok;
    c.resumed();
  }
}

// The second consumer waits in a select: the channel, a notification the
// producers send, and a deadline. Whatever it takes is counted like the
// first consumer's: a select that was cancelled must have taken nothing.
Task<void> select_consumer(Ctx& c, Channel<int>& ch, shoal::Notify& poke) {
  LiveGuard g(c);
  for (;;) {
    auto r = co_await shoal::select(shoal::on_recv(ch), shoal::on_notify(poke), shoal::on_timeout(30us));
    if (r.index() == 0) {
      std::optional<int> v = std::get<0>(std::move(r));
      if (!v) co_return;  // closed and drained
      c.received += *v;   // counted before an injected fault can drop it
      ++c.recvs_ok;
    }
    c.resumed();
  }
}

Task<int> sleeper(Ctx& c, int us, bool in_set = false) {
  LiveGuard g(c);
  co_await shoal::sleep_for(std::chrono::microseconds(us));
  c.resumed(in_set);
  co_await shoal::checkpoint();
  c.resumed(in_set);
  co_return us;
}

Task<void> nested(Ctx& c, Channel<int>& ch) {
  LiveGuard g(c);
  co_await shoal::scope([&](Scope& inner) -> Task<void> {
    inner.spawn(sleeper(c, 15));
    inner.spawn([&]() -> Task<void> {
      LiveGuard g2(c);
      co_await ch.send(1000);
      c.sent += 1000;
      ++c.sends_ok;
      c.resumed();
    });
    auto h = inner.start(sleeper(c, 25));
    const int v = co_await h;
    c.resumed();
    if (v != 25) throw std::logic_error("join returned the wrong value");
  });
  c.resumed();
}

Task<void> set_child(Ctx& c, Channel<int>& ch, int i) {
  LiveGuard g(c);
  ++c.set_live;
  struct Leave {
    Ctx& c;
    ~Leave() { --c.set_live; }
  } leave{c};
  co_await ch.send(500 + i);
  c.sent += 500 + i;
  ++c.sends_ok;
  c.resumed(true);
  if (i == 3) {  // one child awaits a nested task
    const int v = co_await sleeper(c, 5, true);
    c.resumed(true);
    if (v != 5) throw std::logic_error("a nested task returned the wrong value");
  } else {
    co_await shoal::sleep_for(std::chrono::microseconds(5 * i));
    c.resumed(true);
  }
  ++c.set_done;
}

// Records how the set ended, and how many of its children were still alive
// then, before passing the outcome on to the scope.
Task<void> set_runner(Ctx& c, Channel<int>& ch) {
  LiveGuard g(c);
  c.set_end = SetEnd::running;
  const auto ended = [&c](SetEnd e) {
    c.set_end = e;
    c.set = nullptr;  // the set is gone
    c.set_live_at_end = c.set_live;
  };
  try {
    co_await shoal::task_set(kSetLimit, [&](TaskSet& set) -> Task<void> {
      c.set = &set;
      for (int i = 1; i <= kSetChildren; ++i) {
        const bool must_wait = set.live() >= set.limit();
        c.admission_waits += must_wait ? 1 : 0;
        SpawnStatus st = SpawnStatus::closed;
        try {
          st = co_await set.spawn([&c, &ch, i] { return set_child(c, ch, i); });
        } catch (const shoal::Cancelled&) {
          if (must_wait) c.cancelled_in_admission = true;
          throw;
        }
        (st == SpawnStatus::started ? c.set_spawned : c.set_refused) += 1;
        c.resumed(true);
      }
    });
  } catch (const shoal::Cancelled&) {
    ended(SetEnd::cancelled);
    throw;
  } catch (const Boom& b) {
    c.set_fault_id = b.id;
    ended(SetEnd::fault);
    throw;
  } catch (...) {
    ended(SetEnd::other);
    throw;
  }
  ended(SetEnd::normal);
}

Task<void> scenario_scope(Ctx& c, Channel<int>& ch) {
  shoal::Notify poke;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    c.scope = &s;  // until the scope has returned: a cancel may land while it joins
    auto p1 = s.start(producer(c, ch, 0, poke));
    auto p2 = s.start(producer(c, ch, 100, poke));
    auto n = s.start(nested(c, ch));
    s.spawn(consumer(c, ch));
    s.spawn(select_consumer(c, ch, poke));
    auto sl = s.start(sleeper(c, 40));
    auto ts = s.start(set_runner(c, ch));
    co_await p1;
    co_await p2;
    co_await n;
    co_await ts;
    const int v = co_await sl;
    if (v != 40) throw std::logic_error("join returned the wrong value");
    ch.close();
  });
}

Task<void> scenario(Ctx& c, Channel<int>& ch) {
  try {
    co_await scenario_scope(c, ch);
  } catch (...) {
    c.scope = nullptr;
    throw;
  }
  c.scope = nullptr;
}

struct Outcome {
  long steps = 0;
  bool faulted = false;
  int fault_id = -1;
  int first_fault = -1;
  bool other_error = false;
  std::string other_what;
  long live_children_after = 0;
  long conserved_delta = 0;  // sent - received - left in the channel
  long sends_ok = 0;
  long live_frames = 0;
  // The task set.
  SetEnd set_end = SetEnd::not_run;
  int set_fault_id = -1;
  bool fault_in_set = false, set_self_cancelled = false, cancelled_in_admission = false;
  long set_live_at_end = -1, set_spawned = 0, set_refused = 0, set_done = 0, admission_waits = 0;
  long set_first_step = 0, set_last_step = 0;
};

Outcome run_once(std::uint64_t seed, int capacity, Action action, long act_at) {
  Ctx c;
  c.action = action;
  c.act_at = act_at;
  shoal::testing::StepHook hook{&Ctx::on_step, &c};
  Outcome o;
  shoal::test::FrameCounter frames;
  shoal::testing::set_step_hook(&hook);
  {
    Channel<int> ch(static_cast<std::size_t>(capacity));
    try {
      shoal::run(
          [](Ctx& c, Channel<int>& ch, Outcome& o) -> Task<void> {
            try {
              co_await scenario(c, ch);
            } catch (...) {
              o.live_children_after = c.live_children;  // at the moment the scope ended
              throw;
            }
            o.live_children_after = c.live_children;
          }(c, ch, o),
          shoal::RuntimeOptions::simulated(seed));
    } catch (const Boom& b) {
      o.faulted = true;
      o.fault_id = b.id;
    } catch (const std::exception& e) {
      o.other_error = true;
      o.other_what = e.what();
    }
    long left = 0;
    while (auto v = ch.try_recv()) left += *v;
    o.conserved_delta = c.sent - c.received - left;
  }
  shoal::testing::set_step_hook(nullptr);
  o.steps = c.steps;
  o.sends_ok = c.sends_ok;
  o.first_fault = c.first_fault;
  o.live_frames = frames.live();
  o.set_end = c.set_end;
  o.set_fault_id = c.set_fault_id;
  o.fault_in_set = c.fault_in_set;
  o.set_self_cancelled = c.set_self_cancelled;
  o.cancelled_in_admission = c.cancelled_in_admission;
  o.set_live_at_end = c.set_live_at_end;
  o.set_spawned = c.set_spawned;
  o.set_refused = c.set_refused;
  o.set_done = c.set_done;
  o.admission_waits = c.admission_waits;
  o.set_first_step = c.set_first_step;
  o.set_last_step = c.set_last_step;
  return o;
}

class SuspensionSweep : public ::testing::TestWithParam<int> {};

TEST_P(SuspensionSweep, CancelOrFaultAtEveryStepKeepsTheInvariants) {
  shoal::test::Watchdog dog(std::chrono::seconds(240), "SuspensionSweep");
  const int capacity = GetParam();
  const std::uint64_t base = shoal::test::test_seed("SuspensionSweep");
  long runs = 0, total_steps = 0, faulted = 0, cut_short = 0, fault_runs = 0, cancel_runs = 0;
  long set_cancelled = 0, set_faulted = 0, set_cut_by_own_cancel = 0, admission_cancels = 0, admission_waits = 0;
  const std::uint64_t seeds = static_cast<std::uint64_t>(shoal::test::scaled(24, 4));
  for (std::uint64_t seed = base; seed < base + seeds; ++seed) {
    const Outcome clean = run_once(seed, capacity, Action::none, 0);
    ASSERT_FALSE(clean.faulted || clean.other_error) << clean.other_what << " SHOAL_SEED=" << seed;
    ASSERT_EQ(clean.conserved_delta, 0) << "SHOAL_SEED=" << seed;
    ASSERT_EQ(clean.live_frames, 0);
    ASSERT_GT(clean.steps, 20);
    ASSERT_EQ(clean.set_end, SetEnd::normal) << "SHOAL_SEED=" << seed;
    ASSERT_EQ(clean.set_done, kSetChildren) << "SHOAL_SEED=" << seed;
    ASSERT_EQ(clean.set_spawned, kSetChildren) << "SHOAL_SEED=" << seed;
    admission_waits += clean.admission_waits;
    // The same seed gives the same schedule: the step count is stable.
    ASSERT_EQ(run_once(seed, capacity, Action::none, 0).steps, clean.steps) << "SHOAL_SEED=" << seed;
    total_steps += clean.steps;
    for (long k = 1; k <= clean.steps; ++k) {
      for (Action a : {Action::cancel, Action::fault, Action::cancel_set}) {
        // set.cancel() needs the set: only at the steps where it existed.
        if (a == Action::cancel_set && (k < clean.set_first_step || k > clean.set_last_step)) continue;
        const Outcome o = run_once(seed, capacity, a, k);
        ++runs;
        fault_runs += a == Action::fault ? 1 : 0;
        cancel_runs += a == Action::cancel ? 1 : 0;
        faulted += o.faulted ? 1 : 0;
        cut_short += (a == Action::cancel && o.sends_ok < clean.sends_ok) ? 1 : 0;
        const std::string where = "SHOAL_SEED=" + std::to_string(seed) + " capacity " + std::to_string(capacity) +
                                  (a == Action::cancel  ? " cancel"
                                   : a == Action::fault ? " fault"
                                                        : " set.cancel()") +
                                  " at step " + std::to_string(k);
        EXPECT_FALSE(o.other_error) << where << ": " << o.other_what;
        EXPECT_EQ(o.live_children_after, 0) << where << ": scope returned before joining its children";
        EXPECT_EQ(o.conserved_delta, 0) << where << ": channel values lost or duplicated";
        EXPECT_EQ(o.live_frames, 0) << where << ": frames leaked";
        if (a == Action::cancel) {
          EXPECT_FALSE(o.faulted) << where << ": a self-cancelled scope returns normally";
        } else if (a == Action::cancel_set) {
          EXPECT_FALSE(o.faulted) << where << ": a set's own cancel is no fault";
        } else if (o.first_fault >= 0) {
          EXPECT_TRUE(o.faulted) << where << ": the fault was lost";
          EXPECT_EQ(o.fault_id, o.first_fault) << where << ": not the first fault";
        } else {
          EXPECT_FALSE(o.faulted) << where;
        }
        // The task set.
        EXPECT_EQ(o.set_refused, 0) << where << ": a spawn into an open set was refused";
        EXPECT_NE(o.set_end, SetEnd::running) << where << ": the set never ended";
        EXPECT_NE(o.set_end, SetEnd::other) << where << ": the set ended in an unexpected error";
        if (o.set_end != SetEnd::not_run) {
          EXPECT_EQ(o.set_live_at_end, 0) << where << ": the set returned before joining its children";
        }
        if (a == Action::cancel_set) {
          EXPECT_EQ(o.set_end, SetEnd::normal) << where << ": a set returns normally after its own cancel";
          if (!o.set_self_cancelled) {
            EXPECT_EQ(o.set_done, kSetChildren) << where << ": no cancel, yet a child lost";
          }
        } else if (o.set_end == SetEnd::normal) {
          // Cancelled from outside (or by a sibling's fault) yet normal: only
          // if nothing was cut off.
          EXPECT_EQ(o.set_spawned, kSetChildren) << where << ": the set returned normally with spawns cut off";
          EXPECT_EQ(o.set_done, kSetChildren) << where << ": the set returned normally with a child lost";
        }
        if (o.fault_in_set) {
          EXPECT_EQ(o.set_end, SetEnd::fault) << where << ": a fault in the set did not surface from it";
          EXPECT_EQ(o.set_fault_id, o.first_fault) << where << ": the set did not rethrow the first fault";
        } else {
          EXPECT_NE(o.set_end, SetEnd::fault) << where << ": the set rethrew a fault it never had";
        }
        set_cancelled += o.set_end == SetEnd::cancelled ? 1 : 0;
        set_faulted += o.set_end == SetEnd::fault ? 1 : 0;
        set_cut_by_own_cancel += (a == Action::cancel_set && o.set_done < kSetChildren) ? 1 : 0;
        admission_cancels += o.cancelled_in_admission ? 1 : 0;
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
  std::printf("[sweep] capacity %d: %ld runs over %ld steps (%llu seeds); %ld faulted, %ld cancels cut work short\n",
              capacity, runs, total_steps, static_cast<unsigned long long>(seeds), faulted, cut_short);
  std::printf("[sweep] capacity %d: task set: %ld admission waits in clean runs; %ld runs ended Cancelled, %ld in a "
              "fault, %ld cut short by set.cancel(), %ld threw Cancelled from a spawn into a full set\n",
              capacity, admission_waits, set_cancelled, set_faulted, set_cut_by_own_cancel, admission_cancels);
  // Not vacuous: injected faults surfaced and cancels interrupted work.
  EXPECT_GT(faulted, fault_runs / 2);
  EXPECT_GT(cut_short, cancel_runs / 4);
  // ... in the set too, including while its body waited for admission.
  EXPECT_GT(admission_waits, 0);
  EXPECT_GT(set_cancelled, 0);
  EXPECT_GT(set_faulted, 0);
  EXPECT_GT(set_cut_by_own_cancel, 0);
  EXPECT_GT(admission_cancels, 0);
}

INSTANTIATE_TEST_SUITE_P(Capacities, SuspensionSweep, ::testing::Values(0, 1, 4),
                         [](const auto& info) { return "capacity" + std::to_string(info.param); });

}  // namespace
