// The checkpoint contract, one row per public awaitable:
//  - in a pre-cancelled scope it throws Cancelled and has no side effect;
//  - when it completes without waiting it still yields at least once per
//    cooperative budget (a sibling on the same single worker gets to run);
//  - non-suspending calls neither throw Cancelled nor yield.
// Later awaitables (task sets, I/O, sync) add one row each.
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Channel;
using shoal::Scope;
using shoal::Task;

struct Row {
  std::string name;
  // Runs the awaitable once inside a cancelled scope; must throw Cancelled.
  std::function<Task<void>(Scope&)> op;
  // After the op threw: true if nothing observable happened.
  std::function<bool()> no_side_effect;
};

std::vector<Row> rows(Channel<int>& roomy, Channel<int>& full, Channel<int>& holding, bool& blocking_ran,
                      bool& child_ran) {
  return {
      {"checkpoint", [](Scope&) -> Task<void> { co_await shoal::checkpoint(); }, [] { return true; }},
      {"sleep_for(0)", [](Scope&) -> Task<void> { co_await shoal::sleep_for(0ms); }, [] { return true; }},
      {"sleep_for(1h)", [](Scope&) -> Task<void> { co_await shoal::sleep_for(1h); }, [] { return true; }},
      {"channel send with room",
       [&](Scope&) -> Task<void> { co_await roomy.send(1); },
       [&] { return roomy.try_recv() == std::nullopt; }},
      {"channel send when full",
       [&](Scope&) -> Task<void> { co_await full.send(2); },
       [&] { return full.try_recv() == std::optional<int>(1) && full.try_recv() == std::nullopt && full.try_send(1) == shoal::SendStatus::sent; }},
      {"channel recv with a value",
       [&](Scope&) -> Task<void> { (void)co_await holding.recv(); },
       [&] { return holding.try_recv() == std::optional<int>(7) && holding.try_send(7) == shoal::SendStatus::sent; }},
      {"channel recv when empty", [&](Scope&) -> Task<void> { (void)co_await roomy.recv(); }, [] { return true; }},
      {"join handle of a finished child",
       [&](Scope& s) -> Task<void> {
         auto h = s.start([]() -> Task<int> { co_return 1; });
         (void)co_await h;
       },
       [] { return true; }},
      {"scope entry",
       [&](Scope&) -> Task<void> {
         co_await shoal::scope([&](Scope&) -> Task<void> {
           child_ran = true;
           co_return;
         });
       },
       [&] { return !child_ran; }},
      {"spawn_blocking",
       [&](Scope&) -> Task<void> { co_await shoal::spawn_blocking([&] { blocking_ran = true; }); },
       [&] { return !blocking_ran; }},
      {"with_timeout entry",
       [&](Scope&) -> Task<void> {
         co_await shoal::with_timeout(1h, [&]() -> Task<void> {
           child_ran = true;
           co_return;
         }());
       },
       [&] { return !child_ran; }},
      {"move_on_after entry",
       [&](Scope&) -> Task<void> {
         (void)co_await shoal::move_on_after(1h, [&]() -> Task<void> {
           child_ran = true;
           co_return;
         }());
       },
       [&] { return !child_ran; }},
      {"parallel",
       [&](Scope&) -> Task<void> {
         (void)co_await shoal::parallel([&]() -> Task<void> {
           child_ran = true;
           co_return;
         }());
       },
       [&] { return !child_ran; }},
      {"race",
       [&](Scope&) -> Task<void> {
         co_await shoal::race([&]() -> Task<void> {
           child_ran = true;
           co_return;
         }());
       },
       [&] { return !child_ran; }},
      {"start_ready",
       [&](Scope& s) -> Task<void> {
         (void)co_await s.start_ready<int>([&](shoal::Ready<int>& ready) -> Task<void> {
           child_ran = true;
           ready(1);
           co_return;
         });
       },
       [&] { return !child_ran; }},
  };
}

TEST(CheckpointContract, EveryAwaitableThrowsInACancelledScopeWithoutSideEffects) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "checkpoint contract");
  Channel<int> roomy(4), full(1), holding(4);
  ASSERT_EQ(full.try_send(1), shoal::SendStatus::sent);
  ASSERT_EQ(holding.try_send(7), shoal::SendStatus::sent);
  bool blocking_ran = false, child_ran = false;
  for (auto& row : rows(roomy, full, holding, blocking_ran, child_ran)) {
    bool threw = false;
    shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
      s.cancel();
      try {
        co_await row.op(s);
      } catch (const shoal::Cancelled&) {
        threw = true;
      }
    }));
    EXPECT_TRUE(threw) << row.name << ": not a cancel point";
    EXPECT_TRUE(row.no_side_effect()) << row.name << ": had a side effect when cancelled";
  }
}

// On one worker, 1,000 awaits that never need to wait must still let a
// sibling run (budget ~128): count-based, no timing.
TEST(CheckpointContract, AwaitsThatNeedNotWaitStillYieldPerBudget) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "budget");
  constexpr int kOps = 1000;
  // Each case prepares, then runs kOps awaits that complete at once.
  struct Case {
    const char* name;
    std::function<Task<void>(Scope&, std::function<Task<void>()>&)> prepare;
  };
  Channel<int> ch(2 * kOps);
  std::vector<shoal::JoinHandle<int>> handles;
  const std::vector<Case> cases = {
      {"channel send then recv",
       [&](Scope&, std::function<Task<void>()>& op) -> Task<void> {
         op = [&]() -> Task<void> {
           co_await ch.send(1);
           (void)co_await ch.recv();
         };
         co_return;
       }},
      {"join handle of a finished child",
       [&](Scope& s, std::function<Task<void>()>& op) -> Task<void> {
         handles.clear();
         for (int i = 0; i < kOps; ++i) handles.push_back(s.start([]() -> Task<int> { co_return 1; }));
         for (auto& h : handles) {
           while (!h.done()) co_await shoal::checkpoint();  // all finished before we measure
         }
         std::size_t next = 0;
         op = [&, next]() mutable -> Task<void> { (void)co_await handles[next++]; };
       }},
  };
  for (const auto& c : cases) {
    long sibling_runs = 0;
    bool done = false;
    long during = -1;
    shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
                 s.spawn([&]() -> Task<void> {
                   while (!done) {
                     ++sibling_runs;
                     co_await shoal::checkpoint();
                   }
                 });
                 std::function<Task<void>()> op;
                 co_await c.prepare(s, op);
                 const long before = sibling_runs;
                 for (int i = 0; i < kOps; ++i) co_await op();
                 during = sibling_runs - before;
                 done = true;
               }),
               shoal::RuntimeOptions::with_workers(1));
    // ~kOps/128 budget yields; each lets the sibling run once.
    EXPECT_GE(during, kOps / 128 - 1) << c.name << ": starved its sibling";
  }
}

TEST(CheckpointContract, NonSuspendingCallsNeitherThrowNorYield) {
  Channel<int> ch(4);
  bool flag = false;
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
    s.cancel();
    flag = shoal::this_task::cancellation_requested();
    EXPECT_EQ(ch.try_send(1), shoal::SendStatus::sent);
    EXPECT_EQ(ch.try_recv(), std::optional<int>(1));
    co_return;
  }));
  EXPECT_TRUE(flag);
}

}  // namespace
