// Task sets: admission, first-error reporting, close, cancellation, custom
// frame resources, spawn_local and misuse.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/frame_counter.hpp"
#include "support/manual_event.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::SpawnStatus;
using shoal::Task;
using shoal::TaskSet;

SHOAL_TEST_SUITE(TaskSetTest);

struct Boom : std::runtime_error {
  explicit Boom(const std::string& m) : std::runtime_error(m) {}
};

/// Live-children witness: the most that were ever running at once.
struct Witness {
  std::atomic<int> live{0};
  std::atomic<int> peak{0};
  std::atomic<int> served{0};
  void enter() {
    int now = live.fetch_add(1) + 1;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
  void leave() {
    served.fetch_add(1);
    live.fetch_sub(1);
  }
};

Task<void> serve_one(Witness* w, int item) {
  w->enter();
  for (int i = 0; i < 1 + item % 5; ++i) co_await shoal::checkpoint();
  w->leave();
}

// (1) An accept loop: connections arrive on a channel fed by other tasks.
SHOAL_TEST(TaskSetTest, AcceptLoopServesEveryItemWithinTheLimit) {
  constexpr std::size_t kLimit = 8;
  constexpr int kItems = 5 * kLimit * 4;
  Witness w;
  shoal::Channel<int> incoming(4);
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    for (int p = 0; p < 4; ++p) {
      s.spawn([&incoming, p]() -> Task<void> {
        for (int i = 0; i < kItems / 4; ++i) co_await incoming.send(p * 1000 + i);
      });
    }
    s.spawn([&]() -> Task<void> {
      co_await shoal::task_set(kLimit, [&](TaskSet& set) -> Task<void> {
        for (int n = 0; n < kItems; ++n) {
          auto item = co_await incoming.recv();
          SHOAL_CO_ASSERT(item.has_value());
          EXPECT_EQ(co_await set.spawn([&w, v = *item] { return serve_one(&w, v); }), SpawnStatus::started);
          EXPECT_LE(set.live(), kLimit);
        }
      });
    });
    co_return;
  });
  EXPECT_EQ(w.served.load(), kItems);
  EXPECT_EQ(w.live.load(), 0);
  EXPECT_LE(w.peak.load(), static_cast<int>(kLimit));
  EXPECT_GE(w.peak.load(), 1);
}

// (2) A full set makes the spawner wait; it resumes when a child finishes.
SHOAL_SIMULATED_TEST(TaskSetSimulated, FullSetMakesTheSpawnerWaitUntilAChildFinishes) {
  shoal::test::ManualEvent first_started, release_first;
  std::atomic<bool> first_done{false}, spawn_returned{false};
  std::atomic<TaskSet*> seen{nullptr};
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await shoal::task_set(1, [&](TaskSet& set) -> Task<void> {
        seen.store(&set);
        EXPECT_EQ(co_await set.spawn([&]() -> Task<void> {
          first_started.set();
          co_await release_first.wait();
          first_done.store(true);
        }),
                  SpawnStatus::started);
        EXPECT_EQ(co_await set.spawn([]() -> Task<void> { co_return; }), SpawnStatus::started);
        EXPECT_TRUE(first_done.load()) << "admitted before a slot was free";
        spawn_returned.store(true);
      });
    });
    s.spawn([&]() -> Task<void> {
      co_await first_started.wait();
      co_await shoal::sleep_for(1ms);  // simulated: once the spawner waits too
      EXPECT_FALSE(spawn_returned.load()) << "the second spawn did not wait";
      EXPECT_EQ(seen.load()->live(), 1u);
      release_first.set();
    });
    co_return;
  });
  EXPECT_TRUE(spawn_returned.load());
}

// (3) try_spawn never waits: refused while full, after close and after cancel.
SHOAL_TEST(TaskSetTest, TrySpawnIsRefusedWhileFullClosedOrCancelled) {
  shoal::test::ManualEvent release;
  std::atomic<int> ran{0};
  co_await shoal::task_set(2, [&](TaskSet& set) -> Task<void> {
    auto blocker = [&]() -> Task<void> {
      co_await release.wait();
      ran.fetch_add(1);
    };
    EXPECT_TRUE(set.try_spawn(blocker));
    EXPECT_TRUE(set.try_spawn(blocker));
    EXPECT_FALSE(set.try_spawn(blocker)) << "admitted past the limit";
    EXPECT_EQ(set.live(), 2u);
    release.set();
    while (set.live() != 0) co_await shoal::checkpoint();
    EXPECT_TRUE(set.try_spawn([&]() -> Task<void> {
      ran.fetch_add(1);
      co_return;
    }));
    set.cancel();
    EXPECT_FALSE(set.try_spawn([&]() -> Task<void> { co_return; })) << "admitted after cancel";
  });
  EXPECT_GE(ran.load(), 2);
  co_await shoal::task_set(2, [&](TaskSet& set) -> Task<void> {
    set.close();
    EXPECT_FALSE(set.try_spawn([]() -> Task<void> { co_return; })) << "admitted after close";
    co_return;
  });
}

// (4) A child's fault does not cancel its siblings; the first one is kept.
SHOAL_SIMULATED_TEST(TaskSetSimulated, ChildFaultDoesNotCancelSiblingsAndTheFirstIsReported) {
  std::atomic<bool> sibling_finished{false}, sibling_saw_cancel{false};
  shoal::test::ManualEvent first_failed;
  try {
    co_await shoal::task_set(4, [&](TaskSet& set) -> Task<void> {
      (void)co_await set.spawn([&]() -> Task<void> {
        co_await first_failed.wait();
        co_await shoal::sleep_for(1ms);  // simulated: once the fault has gone as far as it goes
        sibling_saw_cancel.store(shoal::this_task::cancellation_requested());
        sibling_finished.store(true);
      });
      (void)co_await set.spawn([&]() -> Task<void> {
        struct Signal {
          shoal::test::ManualEvent* e;
          ~Signal() { e->set(); }
        } signal{&first_failed};
        throw Boom("first");
        co_return;
      });
      (void)co_await set.spawn([&set]() -> Task<void> {
        while (set.live() > 1) co_await shoal::sleep_for(1ms);  // only this one left
        throw Boom("second");
      });
    });
    ADD_FAILURE() << "the set returned normally";
  } catch (const Boom& e) {
    EXPECT_STREQ(e.what(), "first");
  }
  EXPECT_TRUE(sibling_finished.load()) << "the set returned before every child finished";
  EXPECT_FALSE(sibling_saw_cancel.load()) << "a child's fault cancelled a sibling";
}

TEST(TaskSetReport, LaterChildFaultsGoToOnSuppressedFault) {
  std::mutex mu;
  std::vector<std::string> suppressed;
  shoal::RuntimeOptions opts;
  opts.workers = 2;
  opts.on_suppressed_fault = [&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      std::lock_guard<std::mutex> g(mu);
      suppressed.emplace_back(ex.what());
    }
  };
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "LaterChildFaultsGoToOnSuppressedFault");
  EXPECT_THROW(shoal::run(shoal::task_set(8,
                                          [](TaskSet& set) -> Task<void> {
                                            (void)co_await set.spawn([]() -> Task<void> {
                                              throw Boom("a");
                                              co_return;
                                            });
                                            while (set.live() != 0) co_await shoal::checkpoint();
                                            (void)co_await set.spawn([]() -> Task<void> {
                                              throw Boom("b");
                                              co_return;
                                            });
                                            while (set.live() != 0) co_await shoal::checkpoint();
                                            EXPECT_EQ(set.suppressed_faults(), 1u);
                                          }),
                          std::move(opts)),
               Boom);
  ASSERT_EQ(suppressed.size(), 1u);
  EXPECT_EQ(suppressed[0], "b");
}

// (5) The body's fault cancels every child and the set waits for them.
SHOAL_TEST(TaskSetTest, BodyFaultCancelsEveryChild) {
  std::atomic<int> cancelled{0}, waiting{0};
  shoal::test::ManualEvent never;
  try {
    co_await shoal::task_set(16, [&](TaskSet& set) -> Task<void> {
      for (int i = 0; i < 10; ++i) {
        (void)co_await set.spawn([&]() -> Task<void> {
          try {
            waiting.fetch_add(1);
            co_await never.wait();
          } catch (const shoal::Cancelled&) {
            cancelled.fetch_add(1);
            throw;
          }
        });
      }
      while (waiting.load() < 10) co_await shoal::checkpoint();
      throw Boom("body");
    });
    ADD_FAILURE() << "the set returned normally";
  } catch (const Boom& e) {
    EXPECT_STREQ(e.what(), "body");
  }
  EXPECT_EQ(cancelled.load(), 10);
}

// The accept loop lives in its own function; the set is passed by reference.
Task<void> accept_loop(TaskSet& set, std::atomic<int>& started, std::atomic<int>& cancelled,
                       shoal::test::ManualEvent& never) {
  for (int i = 0; i < 6; ++i) {
    (void)co_await set.spawn([&]() -> Task<void> {
      started.fetch_add(1);
      try {
        co_await shoal::sleep_for(1h);
      } catch (const shoal::Cancelled&) {
        cancelled.fetch_add(1);
        throw;
      }
    });
  }
  co_await never.wait();
}

SHOAL_TEST(TaskSetTest, OuterTimeoutReachesChildrenSpawnedFromAHelper) {
  std::atomic<int> started{0}, cancelled{0};
  shoal::test::ManualEvent never;
  EXPECT_THROW(co_await shoal::with_timeout(30ms, shoal::task_set(16, [&](TaskSet& set) -> Task<void> {
                 co_await accept_loop(set, started, cancelled, never);
               })),
               shoal::TimedOut);
  EXPECT_EQ(cancelled.load(), started.load());
  EXPECT_EQ(started.load(), 6);
}

/// A pmr resource that fails every allocation after the first `budget` and
/// counts what is still allocated.
class FailingResource final : public std::pmr::memory_resource {
 public:
  explicit FailingResource(long budget) : budget_(budget) {}
  long live() const { return live_.load(); }
  long allocations() const { return count_.load(); }

 private:
  void* do_allocate(std::size_t bytes, std::size_t align) override {
    if (count_.fetch_add(1) >= budget_) throw std::bad_alloc();
    live_.fetch_add(1);
    return std::pmr::new_delete_resource()->allocate(bytes, align);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t align) override {
    live_.fetch_sub(1);
    std::pmr::new_delete_resource()->deallocate(p, bytes, align);
  }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }
  const long budget_;
  std::atomic<long> count_{0}, live_{0};
};

// (6) A failing resource: spawns report out-of-memory, the set goes on, the
// result is out-of-memory, nothing leaks.
SHOAL_TEST(TaskSetTest, FailingResourceMakesSpawnsReportOutOfMemoryAndTheSetGoesOn) {
  FailingResource res(6);
  std::atomic<int> ran{0};
  std::vector<SpawnStatus> statuses;
  std::atomic<int> after_oom{0};
  EXPECT_THROW(co_await shoal::task_set(&res, 4, [&](TaskSet& set) -> Task<void> {
                 for (int i = 0; i < 8; ++i) {
                   statuses.push_back(co_await set.spawn([&ran]() -> Task<void> {
                     ran.fetch_add(1);
                     co_return;
                   }));
                 }
                 after_oom.store(1);  // the body went on after the failures
               }),
               std::bad_alloc);
  SHOAL_CO_ASSERT(statuses.size() == 8u);
  // One or two frames per child (clang may fold the factory's frame into
  // the wrapper), so a budget of 6 admits 3 to 6 children; the rest fail.
  int started = 0, oom = 0;
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i] == SpawnStatus::started) {
      ++started;
      EXPECT_EQ(oom, 0) << "a spawn succeeded after the resource was exhausted";
    }
    oom += statuses[i] == SpawnStatus::out_of_memory;
  }
  EXPECT_GE(started, 3);
  EXPECT_LE(started, 6);
  EXPECT_EQ(started + oom, 8);
  EXPECT_EQ(ran.load(), started);
  EXPECT_EQ(after_oom.load(), 1);
  EXPECT_EQ(res.live(), 0) << "a child frame leaked";
  EXPECT_GE(res.allocations(), 8);
}

SHOAL_TEST(TaskSetTest, ChildFramesComeFromTheResource) {
  FailingResource res(1000);
  co_await shoal::task_set(&res, 4, [&](TaskSet& set) -> Task<void> {
    for (int i = 0; i < 10; ++i) (void)co_await set.spawn([]() -> Task<void> { co_return; });
  });
  // The wrapper that owns the factory and the factory's task; clang may
  // fold the second into the first.
  EXPECT_GE(res.allocations(), 10);
  EXPECT_LE(res.allocations(), 20);
  EXPECT_EQ(res.live(), 0);
}

// (8) close(): running children finish, later spawns are refused, and the
// set completes when all are done.
SHOAL_TEST(TaskSetTest, CloseLetsRunningChildrenFinishAndRefusesLaterSpawns) {
  shoal::test::ManualEvent release, checked;
  std::atomic<int> finished{0};
  std::atomic<bool> saw_cancel{false};
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await shoal::task_set(4, [&](TaskSet& set) -> Task<void> {
        for (int i = 0; i < 3; ++i) {
          (void)co_await set.spawn([&]() -> Task<void> {
            co_await release.wait();
            for (int k = 0; k < 5; ++k) co_await shoal::checkpoint();
            if (shoal::this_task::cancellation_requested()) saw_cancel.store(true);
            finished.fetch_add(1);
          });
        }
        set.close();
        EXPECT_TRUE(set.closed());
        EXPECT_EQ(co_await set.spawn([]() -> Task<void> { co_return; }), SpawnStatus::closed);
        EXPECT_FALSE(set.try_spawn([]() -> Task<void> { co_return; }));
        EXPECT_EQ(set.live(), 3u);
        checked.set();
      });
      EXPECT_EQ(finished.load(), 3) << "the set completed before its children";
    });
    // The children are released once the body has looked at them: 20
    // checkpoints here raced the body, and a child could finish first.
    s.spawn([&]() -> Task<void> {
      co_await checked.wait();
      release.set();
    });
    co_return;
  });
  EXPECT_EQ(finished.load(), 3);
  EXPECT_FALSE(saw_cancel.load()) << "close() cancelled a child";
}

SHOAL_SIMULATED_TEST(TaskSetSimulated, CloseWakesASpawnWaitingForAdmission) {
  shoal::test::ManualEvent release, waiting_spawn;
  std::atomic<TaskSet*> seen{nullptr};
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await shoal::task_set(1, [&](TaskSet& set) -> Task<void> {
        seen.store(&set);
        (void)co_await set.spawn([&]() -> Task<void> { co_await release.wait(); });
        waiting_spawn.set();
        EXPECT_EQ(co_await set.spawn([]() -> Task<void> { co_return; }), SpawnStatus::closed);
        release.set();
      });
    });
    s.spawn([&]() -> Task<void> {
      co_await waiting_spawn.wait();
      co_await shoal::sleep_for(1ms);  // simulated: once the second spawn waits for admission
      seen.load()->close();  // from another task: close is any-thread
    });
    co_return;
  });
}

// (9) An outer deadline fires while the body waits for admission: the set
// surfaces TimedOut, never a bare Cancelled.
SHOAL_TEST(TaskSetTest, OuterTimeoutDuringAdmissionWaitSurfacesTimedOut) {
  std::atomic<bool> spawn_threw_cancelled{false};
  shoal::test::ManualEvent never;
  try {
    co_await shoal::with_timeout(20ms, shoal::task_set(1, [&](TaskSet& set) -> Task<void> {
      (void)co_await set.spawn([&]() -> Task<void> { co_await never.wait(); });
      try {
        (void)co_await set.spawn([]() -> Task<void> { co_return; });
      } catch (const shoal::Cancelled&) {
        spawn_threw_cancelled.store(true);
        throw;
      }
      ADD_FAILURE() << "admitted while full";
    }));
    ADD_FAILURE() << "no timeout";
  } catch (const shoal::TimedOut&) {
  } catch (const shoal::Cancelled&) {
    ADD_FAILURE() << "a bare Cancelled escaped the set";
  }
  EXPECT_TRUE(spawn_threw_cancelled.load());
}

SHOAL_TEST(TaskSetTest, SpawnAfterCancelFailsFastAndTheSetReturnsNormally) {
  bool threw = false;
  co_await shoal::task_set(4, [&](TaskSet& set) -> Task<void> {
    set.cancel();
    try {
      (void)co_await set.spawn([]() -> Task<void> { co_return; });
    } catch (const shoal::Cancelled&) {
      threw = true;
      throw;
    }
  });
  EXPECT_TRUE(threw);
}

SHOAL_TEST(TaskSetTest, ALimitOfZeroMeansOne) {
  shoal::test::ManualEvent release;  // outlives the set: the child waits on it after the body returned
  co_await shoal::task_set(0, [&](TaskSet& set) -> Task<void> {
    EXPECT_EQ(set.limit(), 1u);
    EXPECT_TRUE(set.try_spawn([&]() -> Task<void> { co_await release.wait(); }));
    EXPECT_FALSE(set.try_spawn([]() -> Task<void> { co_return; }));
    release.set();
    co_return;
  });
}

SHOAL_TEST(TaskSetTest, FinishedChildrenAreReapedAtOnce) {
  co_await shoal::task_set(2, [&](TaskSet& set) -> Task<void> {
    for (int i = 0; i < 1000; ++i) {
      EXPECT_EQ(co_await set.spawn([]() -> Task<void> { co_return; }), SpawnStatus::started);
    }
    while (set.live() != 0) co_await shoal::checkpoint();
  });
}

SHOAL_TEST(TaskSetTest, ASpawnFromAChildFailsLoudly) {
  try {
    co_await shoal::task_set(4, [&](TaskSet& set) -> Task<void> {
      (void)co_await set.spawn([&set]() -> Task<void> {
        (void)set.try_spawn([]() -> Task<void> { co_return; });
        co_return;
      });
    });
    ADD_FAILURE() << "a child spawned into the set";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("other than the set's body"), std::string::npos) << e.what();
  }
  try {
    co_await shoal::task_set(4, [&](TaskSet& set) -> Task<void> {
      (void)co_await set.spawn([&set]() -> Task<void> { (void)co_await set.spawn([]() -> Task<void> { co_return; }); });
    });
    ADD_FAILURE() << "a child spawned into the set";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("other than the set's body"), std::string::npos) << e.what();
  }
}

SHOAL_TEST(TaskSetTest, AThrowingFactoryIsThatChildsFault) {
  std::atomic<int> ran{0};
  try {
    co_await shoal::task_set(4, [&](TaskSet& set) -> Task<void> {
      EXPECT_EQ(co_await set.spawn([]() -> Task<void> { throw Boom("factory"); }), SpawnStatus::started);
      EXPECT_EQ(co_await set.spawn([&]() -> Task<void> {
        ran.fetch_add(1);
        co_return;
      }),
                SpawnStatus::started);
    });
    ADD_FAILURE() << "the set returned normally";
  } catch (const Boom& e) {
    EXPECT_STREQ(e.what(), "factory");
  }
  EXPECT_EQ(ran.load(), 1) << "the factory's fault stopped a sibling";
}

Task<void> pinned_child(std::thread::id home, std::atomic<int>* moved, std::atomic<int>* done) {
  for (int i = 0; i < 20; ++i) {
    if (i % 5 == 0) {
      co_await shoal::sleep_for(100us);  // woken by a timer, possibly on another worker
    } else {
      co_await shoal::checkpoint();
    }
    if (std::this_thread::get_id() != home) moved->fetch_add(1);
  }
  done->fetch_add(1);
}

SHOAL_TEST(TaskSetTest, SpawnLocalChildrenStayOnTheSpawningWorker) {
  std::atomic<int> moved{0}, done{0};
  co_await shoal::task_set(64, [&](TaskSet& set) -> Task<void> {
    for (int i = 0; i < 64; ++i) {
      // The factory runs on the spawning worker, at the spawn.
      EXPECT_EQ(co_await set.spawn_local([&] { return pinned_child(std::this_thread::get_id(), &moved, &done); }),
                SpawnStatus::started);
    }
  });
  EXPECT_EQ(done.load(), 64);
  EXPECT_EQ(moved.load(), 0) << "a spawn_local child ran on another worker";
}

SHOAL_TEST(TaskSetTest, OwnedArgumentsOutliveTheSpawner) {
  std::atomic<int> ok{0};
  co_await shoal::task_set(4, [&](TaskSet& set) -> Task<void> {
    for (int i = 0; i < 8; ++i) {
      std::string name = "conn-" + std::to_string(i);  // an lvalue: copied
      (void)co_await set.spawn(
          [&ok](std::string n, int k) -> Task<void> {
            co_await shoal::checkpoint();
            if (n == "conn-" + std::to_string(k)) ok.fetch_add(1);
          },
          name, i);
      name.assign("overwritten");
    }
  });
  EXPECT_EQ(ok.load(), 8);
}

TEST(TaskSetMisuse, ANullResourceIsRefused) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "ANullResourceIsRefused");
  EXPECT_THROW(shoal::run(shoal::task_set(static_cast<std::pmr::memory_resource*>(nullptr), 4,
                                          [](TaskSet&) -> Task<void> { co_return; })),
               std::invalid_argument);
}

}  // namespace

namespace {

SHOAL_SIMULATED_TEST(TaskSetSimulated, WaitIdleReturnsWhenNoChildIsLive) {
  shoal::test::ManualEvent release;
  std::atomic<int> done{0};
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await shoal::task_set(8, [&](TaskSet& set) -> Task<void> {
        for (int i = 0; i < 5; ++i) {
          (void)co_await set.spawn([&]() -> Task<void> {
            co_await release.wait();
            done.fetch_add(1);
          });
        }
        co_await set.wait_idle();
        EXPECT_EQ(done.load(), 5) << "wait_idle returned while children were live";
        EXPECT_EQ(set.live(), 0u);
        co_await set.wait_idle();  // already idle: returns at once
        EXPECT_EQ(co_await set.spawn([]() -> Task<void> { co_return; }), SpawnStatus::started)
            << "wait_idle closed the set";
      });
    });
    s.spawn([&]() -> Task<void> {
      co_await shoal::sleep_for(1ms);  // simulated: once wait_idle and the children wait
      EXPECT_EQ(done.load(), 0);
      release.set();
    });
    co_return;
  });
}

SHOAL_TEST(TaskSetTest, WaitIdleIsCancellableByADeadline) {
  shoal::test::ManualEvent never;
  std::atomic<bool> child_cancelled{false};
  co_await shoal::task_set(4, [&](TaskSet& set) -> Task<void> {
    (void)co_await set.spawn([&]() -> Task<void> {
      try {
        co_await never.wait();
      } catch (const shoal::Cancelled&) {
        child_cancelled.store(true);
        throw;
      }
    });
    const bool idle = co_await shoal::move_on_after(5ms, [&]() -> Task<void> { co_await set.wait_idle(); }());
    EXPECT_FALSE(idle);
    EXPECT_FALSE(child_cancelled.load()) << "the deadline on wait_idle reached a child";
    set.cancel();
  });
  EXPECT_TRUE(child_cancelled.load());
}

}  // namespace
