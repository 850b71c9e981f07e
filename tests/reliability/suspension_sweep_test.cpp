// Cancel (or fault) at every suspension point. A scenario of children doing
// channel operations, sleeps, joins and nested scopes runs on the simulated
// executor (deterministic schedule + manual clock), once to count its N task
// steps; then, for each k <= N, again with the same seed, cancelled exactly
// after the k-th step, and again with a child faulting at its first resume
// after the k-th step. Every run must: rethrow the first fault (or return
// normally after its own cancel), have joined every child before the scope
// returned, free every frame, and conserve channel values.
#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "shoal/detail/test_hooks.hpp"
#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Channel;
using shoal::Scope;
using shoal::Task;

struct Boom : std::runtime_error {
  explicit Boom(int id) : std::runtime_error("boom " + std::to_string(id)), id(id) {}
  int id;
};

enum class Action { none, cancel, fault };

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

  static void on_step(void* p) noexcept {
    auto* c = static_cast<Ctx*>(p);
    if (++c->steps != c->act_at) return;
    if (c->action == Action::cancel && c->scope != nullptr) c->scope->cancel();
    if (c->action == Action::fault) c->armed = true;
  }
  // Children call this after every await: the armed fault fires here.
  void resumed() {
    if (!armed) return;
    armed = false;
    const int id = next_fault_id++;
    if (first_fault < 0) first_fault = id;
    throw Boom(id);
  }
};

struct LiveGuard {
  explicit LiveGuard(Ctx& c) : c(c) { ++c.live_children; }
  ~LiveGuard() { --c.live_children; }
  Ctx& c;
};

Task<void> producer(Ctx& c, Channel<int>& ch, int base) {
  LiveGuard g(c);
  for (int i = 1; i <= 4; ++i) {
    const int v = base + i;
    co_await ch.send(v);
    c.sent += v;
    ++c.sends_ok;
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

Task<int> sleeper(Ctx& c, int us) {
  LiveGuard g(c);
  co_await shoal::sleep_for(std::chrono::microseconds(us));
  c.resumed();
  co_await shoal::checkpoint();
  c.resumed();
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

Task<void> scenario_scope(Ctx& c, Channel<int>& ch) {
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    c.scope = &s;  // until the scope has returned: a cancel may land while it joins
    auto p1 = s.start(producer(c, ch, 0));
    auto p2 = s.start(producer(c, ch, 100));
    auto n = s.start(nested(c, ch));
    s.spawn(consumer(c, ch));
    auto sl = s.start(sleeper(c, 40));
    co_await p1;
    co_await p2;
    co_await n;
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
};

Outcome run_once(std::uint64_t seed, int capacity, Action action, long act_at) {
  Ctx c;
  c.action = action;
  c.act_at = act_at;
  shoal::detail::StepHook hook{&Ctx::on_step, &c};
  Outcome o;
  shoal::test::FrameCounter frames;
  shoal::detail::set_step_hook(&hook);
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
  shoal::detail::set_step_hook(nullptr);
  o.steps = c.steps;
  o.sends_ok = c.sends_ok;
  o.first_fault = c.first_fault;
  o.live_frames = frames.live();
  return o;
}

class SuspensionSweep : public ::testing::TestWithParam<int> {};

TEST_P(SuspensionSweep, CancelOrFaultAtEveryStepKeepsTheInvariants) {
  shoal::test::Watchdog dog(std::chrono::seconds(240), "SuspensionSweep");
  const int capacity = GetParam();
  const std::uint64_t base = shoal::test::test_seed("SuspensionSweep");
  long runs = 0, total_steps = 0, faulted = 0, cut_short = 0;
  const std::uint64_t seeds = static_cast<std::uint64_t>(shoal::test::scaled(24, 4));
  for (std::uint64_t seed = base; seed < base + seeds; ++seed) {
    const Outcome clean = run_once(seed, capacity, Action::none, 0);
    ASSERT_FALSE(clean.faulted || clean.other_error) << clean.other_what << " SHOAL_SEED=" << seed;
    ASSERT_EQ(clean.conserved_delta, 0) << "SHOAL_SEED=" << seed;
    ASSERT_EQ(clean.live_frames, 0);
    ASSERT_GT(clean.steps, 20);
    // The same seed gives the same schedule: the step count is stable.
    ASSERT_EQ(run_once(seed, capacity, Action::none, 0).steps, clean.steps) << "SHOAL_SEED=" << seed;
    total_steps += clean.steps;
    for (long k = 1; k <= clean.steps; ++k) {
      for (Action a : {Action::cancel, Action::fault}) {
        const Outcome o = run_once(seed, capacity, a, k);
        ++runs;
        faulted += o.faulted ? 1 : 0;
        cut_short += (a == Action::cancel && o.sends_ok < clean.sends_ok) ? 1 : 0;
        const std::string where = "SHOAL_SEED=" + std::to_string(seed) + " capacity " + std::to_string(capacity) +
                                  (a == Action::cancel ? " cancel" : " fault") + " at step " + std::to_string(k);
        EXPECT_FALSE(o.other_error) << where << ": " << o.other_what;
        EXPECT_EQ(o.live_children_after, 0) << where << ": scope returned before joining its children";
        EXPECT_EQ(o.conserved_delta, 0) << where << ": channel values lost or duplicated";
        EXPECT_EQ(o.live_frames, 0) << where << ": frames leaked";
        if (a == Action::cancel) {
          EXPECT_FALSE(o.faulted) << where << ": a self-cancelled scope returns normally";
        } else if (o.first_fault >= 0) {
          EXPECT_TRUE(o.faulted) << where << ": the fault was lost";
          EXPECT_EQ(o.fault_id, o.first_fault) << where << ": not the first fault";
        } else {
          EXPECT_FALSE(o.faulted) << where;
        }
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
  std::printf("[sweep] capacity %d: %ld runs over %ld steps (%llu seeds); %ld faulted, %ld cancels cut work short\n",
              capacity, runs, total_steps, static_cast<unsigned long long>(seeds), faulted, cut_short);
  // Not vacuous: injected faults surfaced and cancels interrupted work.
  EXPECT_GT(faulted, runs / 4);
  EXPECT_GT(cut_short, runs / 8);
}

INSTANTIATE_TEST_SUITE_P(Capacities, SuspensionSweep, ::testing::Values(0, 1, 4),
                         [](const auto& info) { return "capacity" + std::to_string(info.param); });

}  // namespace
