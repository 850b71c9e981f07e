// The checkpoint contract, one row per public awaitable:
//  - in a pre-cancelled scope it throws Cancelled and has no side effect;
//  - when it completes without waiting it still yields at least once per
//    cooperative budget (a sibling on the same single worker gets to run);
//  - non-suspending calls neither throw Cancelled nor yield.
// Task-set entry is a row; admission (spawn) needs a running set, so it has
// tests of its own below. Later awaitables (I/O, sync) add one row each.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "shoal/testing/checkpoints.hpp"
#include "shoal/testing/stream_pair.hpp"
#include "support/manual_event.hpp"
#include "support/stream_io.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Channel;
using shoal::Scope;
using shoal::SpawnStatus;
using shoal::Task;
using shoal::TaskSet;

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
      {"task set entry",
       [&](Scope&) -> Task<void> {
         co_await shoal::task_set(4, [&](TaskSet&) -> Task<void> {
           child_ran = true;
           co_return;
         });
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
    try {
      shoal::testing::assert_checkpoints(row.name, row.op, row.no_side_effect);
    } catch (const shoal::testing::CheckpointViolation& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// shoal::fs: every file call but close is a checkpoint, on the blocking
// pool and (the uring copy of this binary) on the ring; each always waits
// for the kernel or a pool thread, so it yields too.
TEST(CheckpointContract, FileCallsThrowInACancelledScopeWithoutSideEffectsAndYield) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "file checkpoint contract");
  char tmpl[] = "/tmp/shoal-contract-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, made = dir + "/made", data = dir + "/data";
  const int fd = ::open(data.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "x", 1, 0), 1);
  shoal::fs::File file = shoal::fs::File::adopt(fd, data);
  std::byte b[1] = {std::byte{9}};
  auto absent = [&] { return ::access(made.c_str(), F_OK) != 0; };
  auto unchanged = [&] {
    char c = 0;
    return b[0] == std::byte{9} && ::pread(fd, &c, 1, 0) == 1 && c == 'x' && ::lseek(fd, 0, SEEK_END) == 1;
  };
  shoal::testing::assert_checkpoints("fs::File::create", [&]() -> Task<void> { (void)co_await shoal::fs::File::create(made); }, absent);
  shoal::testing::assert_checkpoints("fs::File::read_at", [&]() -> Task<void> { (void)co_await file.read_at(b, 0); }, unchanged);
  shoal::testing::assert_checkpoints("fs::File::write_at", [&]() -> Task<void> { (void)co_await file.write_at(b, 1); }, unchanged);
  shoal::testing::assert_checkpoints("fs::File::write_all", [&]() -> Task<void> { co_await file.write_all(b, 0); }, unchanged);
  shoal::testing::assert_checkpoints("fs::File::fsync", [&]() -> Task<void> { co_await file.fsync(); }, unchanged);
  shoal::testing::assert_checkpoints("fs::read_file", [&]() -> Task<void> { (void)co_await shoal::fs::read_file(data); }, unchanged);
  shoal::testing::assert_checkpoints("fs::write_file", [&]() -> Task<void> { co_await shoal::fs::write_file(made, b); }, absent);
  shoal::testing::assert_yields_per_budget("fs::File::read_at", [&]() -> Task<void> { (void)co_await file.read_at(b, 0); });
  EXPECT_TRUE(file.is_open());
  (void)std::system(("rm -rf '" + dir + "'").c_str());
}

// The public checks themselves fail where they should, naming the call.
TEST(CheckpointChecks, ACallThatIsNoCheckpointHasASideEffectOrNeverYieldsIsNamed) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "checkpoint checks");
  auto plain = []() -> Task<void> { co_return; };  // checks nothing, yields never
  try {
    shoal::testing::assert_checkpoints("plain", plain);
    ADD_FAILURE() << "a call that checks nothing passed";
  } catch (const shoal::testing::CheckpointViolation& e) {
    EXPECT_EQ(std::string(e.what()), "plain: completed in a cancelled scope: not a checkpoint");
  }
  int sent = 0;
  auto sends_first = [&]() -> Task<void> {
    ++sent;  // a side effect before the checkpoint
    co_await shoal::checkpoint();
  };
  try {
    shoal::testing::assert_checkpoints("sends first", sends_first, [&] { return sent == 0; });
    ADD_FAILURE() << "a side effect passed";
  } catch (const shoal::testing::CheckpointViolation& e) {
    EXPECT_EQ(std::string(e.what()), "sends first: had a side effect when cancelled");
  }
  try {
    shoal::testing::assert_yields_per_budget("plain", plain);
    ADD_FAILURE() << "a call that never yields passed";
  } catch (const shoal::testing::CheckpointViolation& e) {
    EXPECT_EQ(std::string(e.what()), "plain: starved its sibling (0 turns in 1000 calls)");
  }
  shoal::testing::assert_checkpoints("checkpoint", [] { return shoal::checkpoint(); });
  shoal::testing::assert_yields_per_budget("checkpoint", [] { return shoal::checkpoint(); });
}

// A connected pair: each end reads what the other wrote; a close ends the
// other's reads.
TEST(CheckpointChecks, AStreamPairIsConnectedBothWays) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "stream pair");
  shoal::run([]() -> Task<void> {
    shoal::testing::StreamPair pair = shoal::testing::stream_pair();
    co_await pair.first.write_all(std::string_view("ping"));
    co_await pair.second.write_all(std::string_view("pong"));
    pair.first.shutdown();
    EXPECT_EQ(co_await shoal::test::read_to_end(pair.second), "ping");
    pair.second.close();
    EXPECT_EQ(co_await shoal::test::read_to_end(pair.first), "pong");
  }());
}

// The sync library's calls are checkpoints too: in a cancelled scope each
// throws Cancelled before taking anything or running its body.
TEST(CheckpointContract, SyncCallsThrowInACancelledScopeWithoutRunningTheBody) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "sync checkpoint contract");
  shoal::Mutex m("contract");
  shoal::RwLock l("contract");
  shoal::Semaphore sem(2, "contract");
  shoal::Once<int> once("contract");
  shoal::Cell<int> cell(0, "contract");
  int ran = 0;
  auto body = [&] { ++ran; };
  auto init = [&] { ++ran; return 1; };
  auto bump = [&](int v) { ++ran; return v + 1; };
  const std::vector<std::pair<std::string, std::function<Task<void>()>>> ops = {
      {"with_lock", [&]() -> Task<void> { co_await shoal::with_lock(m, body); }},
      {"with_try_lock", [&]() -> Task<void> { (void)co_await shoal::with_try_lock(m, body); }},
      {"with_lock_timeout", [&]() -> Task<void> { (void)co_await shoal::with_lock_timeout(m, std::chrono::seconds(1), body); }},
      {"with_read_lock", [&]() -> Task<void> { co_await shoal::with_read_lock(l, body); }},
      {"with_write_lock", [&]() -> Task<void> { co_await shoal::with_write_lock(l, body); }},
      {"with_try_write_lock", [&]() -> Task<void> { (void)co_await shoal::with_try_write_lock(l, body); }},
      {"with_permits", [&]() -> Task<void> { co_await shoal::with_permits(sem, 2, body); }},
      {"with_permit", [&]() -> Task<void> { co_await shoal::with_permit(sem, body); }},
      {"with_try_permit", [&]() -> Task<void> { (void)co_await shoal::with_try_permit(sem, body); }},
      {"once_do", [&]() -> Task<void> { (void)co_await shoal::once_do(once, init); }},
      {"with_cell", [&]() -> Task<void> { co_await shoal::with_cell(cell, bump); }},
  };
  for (const auto& entry : ops) {  // not a structured binding: clang 14 cannot capture one
    const std::string& name = entry.first;
    const auto& op = entry.second;
    bool threw = false;
    shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
      s.cancel();
      try {
        co_await op();
      } catch (const shoal::Cancelled&) {
        threw = true;
      }
    }));
    EXPECT_TRUE(threw) << name << ": not a cancel point";
    EXPECT_EQ(ran, 0) << name << ": ran its body when cancelled";
    EXPECT_EQ(sem.available(), 2u) << name << ": took permits when cancelled";
  }
  // And nothing is left held.
  shoal::run([&]() -> Task<void> {
    EXPECT_TRUE(co_await shoal::with_try_lock(m, [] {}));
    EXPECT_TRUE(co_await shoal::with_try_write_lock(l, [] {}));
    EXPECT_EQ(co_await shoal::once_do(once, [] { return 5; }), 5);
  }());
}

// The same where each call would have to wait: the locks are held (and a
// Once's init is running) on plain threads. Each call throws Cancelled
// without running its body and without staying queued: once the threads
// let go, every lock is free and the Once holds the thread's value (a
// waiter left behind would also make a destructor abort).
TEST(CheckpointContract, SyncCallsThatWouldWaitThrowInACancelledScopeWithoutQueueing) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "sync checkpoint contract, contended");
  shoal::Mutex m("contended");
  shoal::RwLock l("contended");
  shoal::Semaphore sem(2, "contended");
  shoal::Once<int> running("running"), ready("ready");
  (void)shoal::blocking::once_do(ready, [] { return 1; });
  std::promise<void> let_go;
  std::shared_future<void> released = let_go.get_future().share();
  std::latch holding(4);
  const auto hold = [&] {
    holding.count_down();
    released.wait();
  };
  std::vector<std::thread> holders;
  holders.emplace_back([&] { shoal::blocking::with_lock(m, hold); });
  holders.emplace_back([&] { shoal::blocking::with_write_lock(l, hold); });
  holders.emplace_back([&] { shoal::blocking::with_permits(sem, 2, hold); });
  holders.emplace_back([&] {
    (void)shoal::blocking::once_do(running, [&] {
      hold();
      return 7;
    });
  });
  holding.wait();
  int ran = 0;
  auto body = [&] { ++ran; };
  auto init = [&] {
    ++ran;
    return 2;
  };
  const std::vector<std::pair<std::string, std::function<Task<void>()>>> ops = {
      {"with_lock when held", [&]() -> Task<void> { co_await shoal::with_lock(m, body); }},
      {"with_try_lock when held", [&]() -> Task<void> { (void)co_await shoal::with_try_lock(m, body); }},
      {"with_lock_timeout when held", [&]() -> Task<void> { (void)co_await shoal::with_lock_timeout(m, std::chrono::hours(1), body); }},
      {"with_read_lock when write-held", [&]() -> Task<void> { co_await shoal::with_read_lock(l, body); }},
      {"with_write_lock when write-held", [&]() -> Task<void> { co_await shoal::with_write_lock(l, body); }},
      {"with_try_write_lock when write-held", [&]() -> Task<void> { (void)co_await shoal::with_try_write_lock(l, body); }},
      {"with_permit when none is free", [&]() -> Task<void> { co_await shoal::with_permit(sem, body); }},
      {"with_permits(2) when none is free", [&]() -> Task<void> { co_await shoal::with_permits(sem, 2, body); }},
      {"with_try_permit when none is free", [&]() -> Task<void> { (void)co_await shoal::with_try_permit(sem, body); }},
      {"once_do while another caller's init runs", [&]() -> Task<void> { (void)co_await shoal::once_do(running, init); }},
      {"once_do with the value ready", [&]() -> Task<void> { (void)co_await shoal::once_do(ready, init); }},
  };
  for (const auto& entry : ops) {  // not a structured binding: clang 14 cannot capture one
    const std::string& name = entry.first;
    const auto& op = entry.second;
    bool threw = false;
    shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
      s.cancel();
      try {
        co_await op();
      } catch (const shoal::Cancelled&) {
        threw = true;
      }
    }));
    EXPECT_TRUE(threw) << name << ": not a cancel point";
    EXPECT_EQ(ran, 0) << name << ": ran its body (or init) when cancelled";
  }
  let_go.set_value();
  for (auto& t : holders) t.join();
  EXPECT_EQ(sem.available(), 2u);
  shoal::run([&]() -> Task<void> {
    EXPECT_TRUE(co_await shoal::with_try_lock(m, [] {})) << "a cancelled waiter left the mutex held";
    EXPECT_TRUE(co_await shoal::with_try_write_lock(l, [] {})) << "a cancelled waiter left the RwLock held";
    EXPECT_EQ(co_await shoal::once_do(running, init), 7);
    EXPECT_EQ(co_await shoal::once_do(ready, init), 1);
  }());
  EXPECT_EQ(ran, 0) << "init ran again";
}

// Runs each op kBudgetOps times in a row on one worker beside a sibling
// that counts its turns: ~kBudgetOps/128 budget yields must let it run.
constexpr int kBudgetOps = 1000;
void expect_yields_per_budget(const std::vector<std::pair<std::string, std::function<Task<void>()>>>& ops) {
  for (const auto& entry : ops) {  // not a structured binding: clang 14 cannot capture one
    try {
      shoal::testing::assert_yields_per_budget(entry.first, entry.second, kBudgetOps);
    } catch (const shoal::testing::CheckpointViolation& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// Sync calls that need not wait still yield at least once per cooperative
// budget: on one worker, 1,000 of them in a row let a sibling run.
TEST(CheckpointContract, SyncCallsThatNeedNotWaitStillYieldPerBudget) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "sync budget");
  shoal::Mutex m("budget");
  shoal::RwLock l("budget");
  shoal::Semaphore sem(2, "budget");
  shoal::Once<int> once("budget");
  shoal::Cell<int> cell(0, "budget");
  (void)shoal::blocking::once_do(once, [] { return 1; });
  const std::vector<std::pair<std::string, std::function<Task<void>()>>> ops = {
      {"with_lock when free", [&]() -> Task<void> { co_await shoal::with_lock(m, [] {}); }},
      {"with_try_lock when free", [&]() -> Task<void> { (void)co_await shoal::with_try_lock(m, [] {}); }},
      {"with_lock_timeout when free", [&]() -> Task<void> { (void)co_await shoal::with_lock_timeout(m, std::chrono::hours(1), [] {}); }},
      {"with_read_lock when free", [&]() -> Task<void> { co_await shoal::with_read_lock(l, [] {}); }},
      {"with_write_lock when free", [&]() -> Task<void> { co_await shoal::with_write_lock(l, [] {}); }},
      {"with_permit when free", [&]() -> Task<void> { co_await shoal::with_permit(sem, [] {}); }},
      {"with_permits(2) when free", [&]() -> Task<void> { co_await shoal::with_permits(sem, 2, [] {}); }},
      {"once_do with the value ready", [&]() -> Task<void> { (void)co_await shoal::once_do(once, [] { return 2; }); }},
      {"with_cell", [&]() -> Task<void> { co_await shoal::with_cell(cell, [](int v) { return v + 1; }); }},
  };
  expect_yields_per_budget(ops);
}

Task<void> count_run(std::atomic<int>& ran) {
  ran.fetch_add(1);
  co_return;
}

// Task-set admission is a checkpoint, but a cancelled scope cannot enter a
// set, so these rows cancel a set already running: by set.cancel() or by the
// enclosing scope. The spawn throws Cancelled before invoking the factory or
// taking a slot, whether or not a slot is free; the set then returns normally
// after its own cancel and surfaces Cancelled after an outside one.
TEST(CheckpointContract, SpawnInACancelledTaskSetThrowsWithoutStartingAChild) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "task set admission");
  enum class Kind { spawn, spawn_local, spawn_when_full };
  enum class By { set_cancel, scope_cancel };
  enum class End { none, normal, cancelled };
  for (Kind kind : {Kind::spawn, Kind::spawn_local, Kind::spawn_when_full}) {
    for (By by : {By::set_cancel, By::scope_cancel}) {
      const std::string name = std::string(kind == Kind::spawn         ? "spawn"
                                            : kind == Kind::spawn_local ? "spawn_local"
                                                                        : "spawn when full") +
                               (by == By::set_cancel ? " after set.cancel()" : " after the scope's cancel");
      std::atomic<int> factory_calls{0}, children_ran{0};
      bool threw = false, went_on = false;
      std::size_t live_before = 0, live_after = 0;
      End end = End::none;
      shoal::test::ManualEvent never;
      shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
        try {
          co_await shoal::task_set(1, [&](TaskSet& set) -> Task<void> {
            if (kind == Kind::spawn_when_full) {
              EXPECT_EQ(co_await set.spawn([&]() -> Task<void> { co_await never.wait(); }), SpawnStatus::started);
            }
            if (by == By::set_cancel) {
              set.cancel();
            } else {
              s.cancel();
            }
            const auto factory = [&] {
              factory_calls.fetch_add(1);
              return count_run(children_ran);
            };
            live_before = set.live();
            try {
              if (kind == Kind::spawn_local) {
                (void)co_await set.spawn_local(factory);
              } else {
                (void)co_await set.spawn(factory);
              }
              went_on = true;
            } catch (const shoal::Cancelled&) {
              threw = true;
              live_after = set.live();
              throw;
            }
          });
          end = End::normal;
        } catch (const shoal::Cancelled&) {
          end = End::cancelled;
        }
      }));
      EXPECT_TRUE(threw) << name << ": not a cancel point";
      EXPECT_FALSE(went_on) << name;
      EXPECT_EQ(factory_calls.load(), 0) << name << ": the factory was invoked";
      EXPECT_EQ(children_ran.load(), 0) << name << ": a child ran";
      EXPECT_LE(live_after, live_before) << name << ": a slot was taken";
      EXPECT_EQ(end, by == By::set_cancel ? End::normal : End::cancelled)
          << name << ": a set returns normally after its own cancel and throws Cancelled after an outside one";
    }
  }
}

// A spawn with a free slot takes it, then yields when the budget runs out.
// Cancelled during that yield, it throws Cancelled, invokes no factory and
// gives the slot back (else the set could never finish joining). On one
// worker the body only suspends inside a spawn, so the sibling's cancel
// lands in exactly that yield.
TEST(CheckpointContract, CancelDuringASpawnsBudgetYieldGivesItsSlotBack) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "budget yield cancel");
  constexpr int kSpawns = 1000;
  std::atomic<int> factory_calls{0}, ran{0};
  int started = 0;
  bool in_spawn = false, cancelled_in_spawn = false, spawn_threw = false, set_cancelled = false;
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               s.spawn([&]() -> Task<void> {
                 while (!in_spawn) co_await shoal::checkpoint();
                 cancelled_in_spawn = true;
                 s.cancel();
               });
               try {
                 co_await shoal::task_set(kSpawns, [&](TaskSet& set) -> Task<void> {
                   try {
                     for (int i = 0; i < kSpawns; ++i) {
                       in_spawn = true;
                       const SpawnStatus st = co_await set.spawn([&] {
                         factory_calls.fetch_add(1);
                         return count_run(ran);
                       });
                       in_spawn = false;
                       started += st == SpawnStatus::started ? 1 : 0;
                     }
                   } catch (const shoal::Cancelled&) {
                     spawn_threw = true;
                   }
                   in_spawn = false;
                   // Shielded: let every admitted child finish, then count.
                   co_await shoal::shielded([&]() -> Task<void> {
                     for (int i = 0; i < 100 * kSpawns && set.live() != 0; ++i) co_await shoal::checkpoint();
                   }());
                   // Checked here: with a slot kept, the set's join below never ends.
                   EXPECT_EQ(set.live(), 0u) << "the cancelled spawn kept its slot";
                   if (spawn_threw) throw shoal::Cancelled{};
                 });
               } catch (const shoal::Cancelled&) {
                 set_cancelled = true;
               }
             }),
             shoal::RuntimeOptions::with_workers(1));
  EXPECT_TRUE(cancelled_in_spawn) << "the cancel did not land inside a spawn";
  EXPECT_TRUE(spawn_threw) << "a spawn cancelled in its budget yield did not throw";
  EXPECT_LT(started, kSpawns);
  EXPECT_EQ(factory_calls.load(), started) << "the cancelled spawn invoked its factory";
  EXPECT_TRUE(set_cancelled) << "a set cancelled from outside returned normally";
}

// On one worker, 1,000 awaits that never need to wait must still let a
// sibling run (budget ~128): count-based, no timing.
TEST(CheckpointContract, AwaitsThatNeedNotWaitStillYieldPerBudget) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "budget");
  constexpr int kOps = 1000;
  using Op = std::function<Task<void>()>;
  using Measure = std::function<Task<void>(Op)>;
  // Each case prepares, then has `measure` run kOps awaits of `op` that
  // complete at once (from wherever the op may be awaited: a set's body).
  struct Case {
    const char* name;
    std::function<Task<void>(Scope&, const Measure&)> run;
  };
  Channel<int> ch(2 * kOps);
  std::vector<shoal::JoinHandle<int>> handles;
  int refused = 0;
  const std::vector<Case> cases = {
      {"channel send then recv",
       [&](Scope&, const Measure& measure) -> Task<void> {
         co_await measure([&]() -> Task<void> {
           co_await ch.send(1);
           (void)co_await ch.recv();
         });
       }},
      {"join handle of a finished child",
       [&](Scope& s, const Measure& measure) -> Task<void> {
         handles.clear();
         for (int i = 0; i < kOps; ++i) handles.push_back(s.start([]() -> Task<int> { co_return 1; }));
         for (auto& h : handles) {
           while (!h.done()) co_await shoal::checkpoint();  // all finished before we measure
         }
         std::size_t next = 0;
         co_await measure([&]() -> Task<void> { (void)co_await handles[next++]; });
       }},
      {"udp send_to then recv_from (regression: never yielded)",
       [&](Scope&, const Measure& measure) -> Task<void> {
         auto sock = shoal::net::UdpSocket::bind(shoal::net::Address::parse("127.0.0.1:0"));
         const auto self = sock.local_address();
         std::byte b[1] = {std::byte{7}};
         co_await measure([&]() -> Task<void> {
           (void)co_await sock.send_to(b, self);
           (void)co_await sock.recv_from(b);
         });
       }},
      {"stream write_some to a pipe (regression: never yielded)",
       [&](Scope&, const Measure& measure) -> Task<void> {
         int fds[2];
         SHOAL_CO_ASSERT(::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
         shoal::net::Stream rd(fds[0]), wr(fds[1]);
         std::byte b[1] = {std::byte{7}};
         co_await measure([&]() -> Task<void> { (void)co_await wr.write_some(b); });  // 1,000 B fit in the pipe
       }},
      {"stream wait_readable with data pending (regression: never yielded)",
       [&](Scope&, const Measure& measure) -> Task<void> {
         int fds[2];
         SHOAL_CO_ASSERT(::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
         shoal::net::Stream rd(fds[0]), wr(fds[1]);
         std::byte b[1] = {std::byte{7}};
         co_await wr.write_all(b);
         co_await measure([&]() -> Task<void> { co_await rd.wait_readable(); });
       }},
      {"task set spawn with a free slot",
       [&](Scope&, const Measure& measure) -> Task<void> {
         co_await shoal::task_set(kOps, [&](TaskSet& set) -> Task<void> {
           co_await measure([&]() -> Task<void> {
             if (co_await set.spawn([]() -> Task<void> { co_return; }) != SpawnStatus::started) ++refused;
           });
         });
       }},
      {"task set spawn_local with a free slot",
       [&](Scope&, const Measure& measure) -> Task<void> {
         co_await shoal::task_set(kOps, [&](TaskSet& set) -> Task<void> {
           co_await measure([&]() -> Task<void> {
             if (co_await set.spawn_local([]() -> Task<void> { co_return; }) != SpawnStatus::started) ++refused;
           });
         });
       }},
  };
  for (const auto& c : cases) {
    long sibling_runs = 0;
    bool done = false;
    long during = -1;
    refused = 0;
    const Measure measure = [&](Op op) -> Task<void> {
      const long before = sibling_runs;
      for (int i = 0; i < kOps; ++i) co_await op();
      during = sibling_runs - before;
    };
    shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
                 s.spawn([&]() -> Task<void> {
                   while (!done) {
                     ++sibling_runs;
                     co_await shoal::checkpoint();
                   }
                 });
                 co_await c.run(s, measure);
                 done = true;
               }),
               shoal::RuntimeOptions::with_workers(1));
    EXPECT_EQ(refused, 0) << c.name << ": an await that should complete at once was refused";
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

// A set's non-suspending calls, on one worker: try_spawn invokes the factory
// but runs no child inline and lets nothing else run; once the scope is
// cancelled it refuses without throwing or invoking the factory; close() and
// the queries neither throw nor yield.
TEST(CheckpointContract, TaskSetNonSuspendingCallsNeitherThrowNorYield) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "task set non-suspending calls");
  int factory_calls = 0, sibling_runs = 0;
  std::atomic<int> ran{0};
  bool stop = false, set_cancelled = false;
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               s.spawn([&]() -> Task<void> {
                 while (!stop) {
                   ++sibling_runs;
                   co_await shoal::checkpoint();
                 }
               });
               co_await shoal::checkpoint();  // the sibling is running
               try {
                 co_await shoal::task_set(2, [&](TaskSet& set) -> Task<void> {
                   const int sibling_before = sibling_runs;
                   const auto factory = [&] {
                     ++factory_calls;
                     return count_run(ran);
                   };
                   EXPECT_TRUE(set.try_spawn(factory));
                   EXPECT_TRUE(set.try_spawn(factory));
                   EXPECT_FALSE(set.try_spawn(factory)) << "admitted past the limit";
                   EXPECT_EQ(factory_calls, 2);
                   EXPECT_EQ(ran.load(), 0) << "try_spawn ran a child inline";
                   EXPECT_EQ(set.live(), 2u);
                   EXPECT_EQ(sibling_runs, sibling_before) << "try_spawn yielded";
                   stop = true;
                   s.cancel();
                   EXPECT_TRUE(set.cancellation_requested());
                   EXPECT_TRUE(shoal::this_task::cancellation_requested());
                   for (int i = 0; i < 100; ++i) EXPECT_FALSE(set.try_spawn(factory)) << "admitted after cancel";
                   EXPECT_EQ(factory_calls, 2) << "a cancelled set invoked a factory";
                   EXPECT_FALSE(set.closed());
                   set.close();
                   set.close();
                   EXPECT_TRUE(set.closed());
                   // A yield would have let the two children run and leave.
                   EXPECT_EQ(set.live(), 2u) << "a non-suspending call yielded";
                   EXPECT_EQ(set.limit(), 2u);
                   EXPECT_EQ(set.suppressed_faults(), 0u);
                   co_return;
                 });
               } catch (const shoal::Cancelled&) {
                 set_cancelled = true;
               }
             }),
             shoal::RuntimeOptions::with_workers(1));
  EXPECT_EQ(factory_calls, 2);
  // A child the cancel cut off makes the set report Cancelled: none is lost.
  EXPECT_TRUE(ran.load() == 2 || set_cancelled) << ran.load() << " of 2 children ran, yet the set returned normally";
}

}  // namespace

namespace {

// The coordination toolkit (select, broadcast, watch, event, notify,
// oneshot, interval, completions, cancel scopes): each in a cancelled scope
// throws Cancelled and takes, sends, consumes and starts nothing.
TEST(CheckpointContract, ToolkitAwaitablesThrowInACancelledScopeWithoutSideEffects) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "toolkit checkpoint contract");
  Channel<int> holding(4), roomy(4);
  ASSERT_EQ(holding.try_send(7), shoal::SendStatus::sent);
  shoal::Event set_event;
  set_event.set();
  shoal::Notify with_permit;
  with_permit.notify_one();
  shoal::Broadcast<int> b(4);
  auto brx = b.subscribe();
  (void)b.send(3);
  shoal::Watch<int> w(0);
  auto wrx = w.subscribe();
  w.send(1);
  auto ends = shoal::oneshot<int>();  // not a structured binding: clang 14 cannot capture one
  auto& tx = ends.first;
  auto& orx = ends.second;
  (void)tx.send(5);
  bool child_ran = false;
  int value = 9;
  struct Row {
    std::string name;
    std::function<Task<void>(Scope&)> op;
    std::function<bool()> no_side_effect;
  };
  const std::vector<Row> rows = {
      {"select with a ready recv case",
       [&](Scope&) -> Task<void> { (void)co_await shoal::select(shoal::on_recv(holding), shoal::on_timeout(1h)); },
       [&] { return holding.try_recv() == std::optional<int>(7) && holding.try_send(7) == shoal::SendStatus::sent; }},
      {"select with a ready send case",
       [&](Scope&) -> Task<void> { (void)co_await shoal::select(shoal::on_send(roomy, value)); },
       [&] { return roomy.try_recv() == std::nullopt && value == 9; }},
      {"Event::wait when set", [&](Scope&) -> Task<void> { co_await set_event.wait(); }, [] { return true; }},
      {"Notify::wait with a permit",
       [&](Scope&) -> Task<void> { co_await with_permit.wait(); },
       [&] { return true; }},  // checked below: the permit is still there
      {"Broadcast recv with a value",
       [&](Scope&) -> Task<void> { (void)co_await brx.recv(); },
       [&] {
         auto r = brx.try_recv();
         return r && r->has_value() && **r == 3;
       }},
      {"Watch changed with a change", [&](Scope&) -> Task<void> { (void)co_await wrx.changed(); },
       [&] { return wrx.has_changed(); }},
      {"Oneshot recv with the value",
       [&](Scope&) -> Task<void> { (void)co_await orx.recv(); },
       [&] { return true; }},  // checked below: the value is still there
      {"Interval tick (due)",
       [&](Scope&) -> Task<void> {
         shoal::Interval iv(1h);
         (void)co_await iv.tick();
       },
       [] { return true; }},
      {"Completions next",
       [&](Scope& s) -> Task<void> {
         shoal::Completions<int> c(s);
         (void)co_await c.next();
       },
       [] { return true; }},
      {"CancelScope run",
       [&](Scope&) -> Task<void> {
         shoal::CancelScope cs;
         (void)co_await cs.run([&]() -> Task<void> {
           child_ran = true;
           co_return;
         }());
       },
       [&] { return !child_ran; }},
  };
  for (const auto& row : rows) {
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
  shoal::run([&]() -> Task<void> {
    auto r = co_await shoal::move_on_after(std::chrono::milliseconds(50), with_permit.wait());
    EXPECT_TRUE(r) << "a cancelled Notify::wait consumed the permit";
    EXPECT_EQ(co_await orx.recv(), 5) << "a cancelled Oneshot recv took the value";
  }());
}

// The toolkit's awaitables that need not wait still yield once per budget:
// on one worker, 1,000 of them in a row let a sibling run.
TEST(CheckpointContract, ToolkitAwaitablesThatNeedNotWaitStillYieldPerBudget) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "toolkit budget");
  Channel<int> ch(4);
  shoal::Event ev;
  ev.set();
  shoal::Notify n;
  shoal::Broadcast<int> b(4);
  auto brx = b.subscribe();
  shoal::Watch<int> w(0);
  auto wrx = w.subscribe();
  const std::vector<std::pair<std::string, std::function<Task<void>()>>> ops = {
      {"select with a ready case",
       [&]() -> Task<void> {
         (void)ch.try_send(1);
         (void)co_await shoal::select(shoal::on_recv(ch));
       }},
      {"Event::wait when set", [&]() -> Task<void> { co_await ev.wait(); }},
      {"Notify::wait with a permit",
       [&]() -> Task<void> {
         n.notify_one();
         co_await n.wait();
       }},
      {"Broadcast recv with a value",
       [&]() -> Task<void> {
         (void)b.send(1);
         (void)co_await brx.recv();
       }},
      {"Watch changed with a change",
       [&]() -> Task<void> {
         w.send(1);
         (void)co_await wrx.changed();
       }},
  };
  expect_yields_per_budget(ops);
}

}  // namespace
