// Scopes: join-all, cancel-on-fault, start handles, spawn ownership, cancel().
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/frame_counter.hpp"
#include "support/manual_event.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::Scope;
using shoal::Task;

SHOAL_TEST_SUITE(ScopeTest);

struct Boom : std::runtime_error {
  explicit Boom(const std::string& m) : std::runtime_error(m) {}
};

SHOAL_TEST(ScopeTest, ChildFaultCancelsSiblingsAndIsRethrown) {
  std::atomic<int> cancelled{0};
  std::atomic<int> waiting{0};
  const void* thrown_at = nullptr;
  shoal::test::ManualEvent never;
  auto sibling = [&]() -> Task<void> {
    try {
      waiting.fetch_add(1);
      co_await never.wait();
    } catch (const shoal::Cancelled&) {
      cancelled.fetch_add(1);
      throw;
    }
  };
  try {
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn(sibling);
      s.spawn([&]() -> Task<void> {
        while (waiting.load() < 2) co_await shoal::checkpoint();
        try {
          throw Boom("child 2 failed");
        } catch (const Boom& e) {
          thrown_at = &e;
          throw;
        }
      });
      s.spawn(sibling);
      co_return;
    });
    ADD_FAILURE() << "scope returned normally";
  } catch (const Boom& e) {
    EXPECT_STREQ(e.what(), "child 2 failed");
    EXPECT_EQ(&e, thrown_at) << "not the original exception object";
  }
  EXPECT_EQ(cancelled.load(), 2);
}

SHOAL_TEST(ScopeTest, BodyFaultCancelsChildrenAndIsRethrownAfterTheJoin) {
  std::atomic<int> finished{0};
  shoal::test::ManualEvent never;
  try {
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      for (int i = 0; i < 3; ++i) {
        s.spawn([&]() -> Task<void> {
          struct Done {
            std::atomic<int>* n;
            ~Done() { n->fetch_add(1); }
          } d{&finished};
          co_await never.wait();
        });
      }
      throw Boom("body");
    });
    ADD_FAILURE() << "no throw";
  } catch (const Boom& e) {
    EXPECT_STREQ(e.what(), "body");
    EXPECT_EQ(finished.load(), 3) << "children not joined before the scope rethrew";
  }
}

TEST(ScopeFaults, SuppressedFaultsGoToTheHook) {
  std::atomic<int> reported{0};
  shoal::RuntimeOptions opts;
  opts.workers = 4;
  opts.on_suppressed_fault = [&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const Boom&) {
      reported.fetch_add(1);
    }
  };
  std::atomic<int> arrived{0};
  EXPECT_THROW(shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
                            for (int i = 0; i < 3; ++i) {
                              s.spawn([&]() -> Task<void> {
                                arrived.fetch_add(1);
                                while (arrived.load() < 3) std::this_thread::yield();
                                throw Boom("x");
                                co_return;
                              });
                            }
                            co_return;
                          }),
                          opts),
               Boom);
  EXPECT_EQ(reported.load(), 2);
}

SHOAL_TEST(ScopeTest, ReturnsTheBodyValueAfterEveryChildFinished) {
  std::atomic<int> done{0};
  int v = co_await shoal::scope([&](Scope& s) -> Task<int> {
    for (int i = 0; i < 100; ++i) {
      s.spawn([&]() -> Task<void> {
        co_await shoal::checkpoint();
        done.fetch_add(1);
      });
    }
    co_return 7;
  });
  EXPECT_EQ(v, 7);
  EXPECT_EQ(done.load(), 100);
}

// The body's task counts its children in batches (Scope::count_child); the
// join must still wait for exactly every child, whatever the count, whoever
// spawned it (the body, a nested scope's body on the same task, a child),
// and whether the body returned or threw.
SHOAL_TEST(ScopeTest, JoinWaitsForEveryChildWhateverTheBodySpawnedAndHowItEnded) {
  static constexpr int kCounts[] = {1, 63, 64, 65, 200};
  for (int n : kCounts) {
    for (int k = 0; k < 2; ++k) {
      const bool body_throws = k == 1;
      std::atomic<int> done{0};
      auto leaf = [&]() -> Task<void> {
        co_await shoal::checkpoint();
        done.fetch_add(1);
      };
      bool threw = false;
      try {
        co_await shoal::scope([&](Scope& s) -> Task<void> {
          for (int i = 0; i < n; ++i) {
            s.spawn([&]() -> Task<void> {
              co_await shoal::checkpoint();
              s.spawn(leaf);  // a sibling from a child's task
              done.fetch_add(1);
            });
          }
          auto inner = [&](Scope&) -> Task<void> {
            for (int i = 0; i < n; ++i) s.spawn(leaf);  // the outer scope, from the same task
            co_return;
          };
          co_await shoal::scope(inner);
          if (body_throws) throw Boom("body");
        });
      } catch (const Boom&) {
        threw = true;
      }
      EXPECT_EQ(threw, body_throws);
      // Children spawned before the body threw may be cancelled before their
      // checkpoint; a clean body's children all run.
      if (!body_throws) {
        EXPECT_EQ(done.load(), 3 * n) << n;
      }
      EXPECT_LE(done.load(), 3 * n) << n;
    }
  }
}

SHOAL_TEST(ScopeTest, StartHandleYieldsTheChildValue) {
  int sum = co_await shoal::scope([&](Scope& s) -> Task<int> {
    auto a = s.start([]() -> Task<int> {
      co_await shoal::checkpoint();
      co_return 40;
    });
    auto b = s.start([](int x) -> Task<int> { co_return x; }, 2);
    int va = co_await a;
    int vb = co_await std::move(b);
    co_return va + vb;
  });
  EXPECT_EQ(sum, 42);
}

SHOAL_TEST(ScopeTest, StartHandleRethrowsTheChildFault) {
  bool caught = false;
  try {
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      auto h = s.start([]() -> Task<int> {
        throw Boom("started child");
        co_return 1;
      });
      try {
        (void)co_await h;
      } catch (const Boom&) {
        caught = true;  // either the fault itself...
      } catch (const shoal::Cancelled&) {
        caught = true;  // ...or the scope's cancellation got here first
        throw;
      }
    });
  } catch (const Boom& e) {
    EXPECT_STREQ(e.what(), "started child");
  }
  EXPECT_TRUE(caught);
}

SHOAL_TEST(ScopeTest, AwaitingAHandleTwiceIsALogicError) {
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    auto h = s.start([]() -> Task<int> { co_return 1; });
    EXPECT_EQ(co_await h, 1);
    EXPECT_THROW(co_await h, std::logic_error);
  });
}

SHOAL_TEST(ScopeTest, AnUndeliveredResultIsGoneByTheScopeExit) {
  auto counter = std::make_shared<int>(0);
  struct Probe {
    std::shared_ptr<int> c;
    Probe(std::shared_ptr<int> p) : c(std::move(p)) {}
    Probe(Probe&& o) noexcept = default;
    ~Probe() {
      if (c) ++*c;
    }
  };
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    (void)s.start([counter]() -> Task<Probe> { co_return Probe(counter); });
    co_return;
  });
  EXPECT_EQ(*counter, 1);
}

SHOAL_TEST(ScopeTest, AFinishedStartedChildKeepsOnlyItsResult) {
  auto arg = std::make_shared<int>(40);
  std::weak_ptr<int> watch = arg;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    auto h = s.start([](std::shared_ptr<int> p) -> Task<int> { co_return *p + 2; }, std::move(arg));
    while (!h.done()) co_await shoal::checkpoint();
    EXPECT_TRUE(watch.expired()) << "the finished child's frame still holds its argument";
    EXPECT_EQ(co_await h, 42);
  });
}

SHOAL_TEST(ScopeTest, AnUndeliveredValueGoesWithItsHandle) {
  auto counter = std::make_shared<int>(0);
  struct Probe {
    std::shared_ptr<int> c;
    explicit Probe(std::shared_ptr<int> p) : c(std::move(p)) {}
    Probe(Probe&& o) noexcept = default;
    ~Probe() {
      if (c) ++*c;
    }
  };
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    {
      auto h = s.start([counter]() -> Task<Probe> { co_return Probe(counter); });
      while (!h.done()) co_await shoal::checkpoint();
      EXPECT_EQ(*counter, 0) << "the value went before its handle";
    }
    EXPECT_EQ(*counter, 1) << "the value outlived its handle";
  });
  EXPECT_EQ(*counter, 1);
}

SHOAL_TEST(ScopeTest, AResultWhoseMoveThrowsIsTheChildsFault) {
  struct Fragile {
    int moves = 0;
    Fragile() = default;
    Fragile(Fragile&& o) : moves(o.moves + 1) {
      if (moves == 2) throw Boom("second move");  // the first is co_return's, the second into the handle
    }
  };
  try {
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      auto h = s.start([]() -> Task<Fragile> { co_return Fragile{}; });
      (void)co_await h;
      ADD_FAILURE() << "the handle delivered a value";
    });
    ADD_FAILURE() << "the scope returned normally";
  } catch (const Boom& e) {
    EXPECT_STREQ(e.what(), "second move");
  }
}

SHOAL_TEST(ScopeTest, JoinHandleOfACutOffChildThrowsChildCancelledIntoAShieldedAwaiter) {
  shoal::test::ManualEvent never;
  bool awaiter_cancelled = true;
  bool child_cancelled = false;
  bool cancel_leaked = false;
  co_await shoal::scope([&](Scope& outer) -> Task<void> {
    co_await shoal::scope([&](Scope& inner) -> Task<void> {
      auto h = inner.start([&]() -> Task<int> {
        co_await never.wait();
        co_return 1;
      });
      outer.cancel();  // from outside `inner`: cuts its child off
      auto await_handle = [&]() -> Task<void> {
        awaiter_cancelled = shoal::this_task::cancellation_requested();
        try {
          (void)co_await h;
        } catch (const shoal::ChildCancelled&) {
          child_cancelled = true;
        } catch (const shoal::Cancelled&) {
          cancel_leaked = true;
        }
      };
      co_await shoal::shielded(await_handle());
    });
  });
  EXPECT_FALSE(awaiter_cancelled);
  EXPECT_TRUE(child_cancelled);
  EXPECT_FALSE(cancel_leaked) << "the outer cancellation reached shielded work through the handle";
}

// One awaiter at a time: a second task awaiting the same handle while the
// first waits gets Cancelled (not an error, and not the value); the first
// still gets the value. (The sleep ends once every other task waits; the
// handle outlives the body, as it must while another task awaits it.)
SHOAL_SIMULATED_TEST(ScopeSimulated, ASecondConcurrentAwaiterOfAHandleGetsCancelledAndTheFirstTheValue) {
  shoal::test::ManualEvent go;
  int first = 0;
  bool second_cancelled = false;
  std::optional<shoal::JoinHandle<int>> h;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    h.emplace(s.start([&]() -> Task<int> {
      co_await go.wait();
      co_return 7;
    }));
    s.spawn([&]() -> Task<void> { first = co_await *h; });
    co_await shoal::sleep_for(std::chrono::milliseconds(1));  // the first awaiter waits on the handle now
    try {
      (void)co_await *h;
    } catch (const shoal::Cancelled&) {
      second_cancelled = true;
    }
    go.set();
  });
  EXPECT_TRUE(second_cancelled);
  EXPECT_EQ(first, 7);
}

SHOAL_TEST(ScopeTest, ARethrownChildCancelledIsTheScopesFault) {
  shoal::test::ManualEvent never;
  try {
    co_await shoal::scope([&](Scope& outer) -> Task<void> {
      co_await shoal::scope([&](Scope& inner) -> Task<void> {
        auto h = inner.start([&]() -> Task<int> {
          co_await never.wait();
          co_return 1;
        });
        outer.cancel();
        auto await_handle = [&]() -> Task<void> { (void)co_await h; };
        co_await shoal::shielded(await_handle());
      });
    });
    ADD_FAILURE() << "the scopes returned normally";
  } catch (const shoal::ChildCancelled&) {
    // An ordinary fault: `outer` absorbs only its own Cancelled.
  }
}

// What reached on_suppressed_fault, by what().
struct SuppressedReports {
  std::mutex mu;
  std::vector<std::string> whats;
  std::vector<std::string> get() {
    std::lock_guard<std::mutex> g(mu);
    return whats;
  }
};

void run_with_reports(std::size_t workers, SuppressedReports& reports, Task<void> t) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, ::testing::UnitTest::GetInstance()->current_test_info()->name());
  shoal::RuntimeOptions opts;
  opts.workers = workers;
  opts.on_suppressed_fault = [&reports](std::exception_ptr e) {
    std::string what = "(not a std::exception)";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
    }
    std::lock_guard<std::mutex> g(reports.mu);
    reports.whats.push_back(what);
  };
  shoal::run(std::move(t), std::move(opts));
}

// A start() child that fails only once the scope's first fault cancelled
// it: its fault is always a later one.
Task<int> fails_once_cancelled(shoal::test::ManualEvent& never) {
  try {
    co_await never.wait();
  } catch (const shoal::Cancelled&) {
  }
  throw Boom("later");
  co_return 0;
}

Task<void> first_fault() {
  throw Boom("first");
  co_return;
}

TEST_P(ScopeTest, ADeliveredLaterFaultIsReportedOnceWhenRethrown) {
  SuppressedReports reports;
  shoal::test::ManualEvent never;
  run_with_reports(GetParam(), reports, [&]() -> Task<void> {
    try {
      co_await shoal::scope([&](Scope& s) -> Task<void> {
        auto h = s.start(fails_once_cancelled(never));
        s.spawn(first_fault());
        // Shielded, so that the handle delivers the fault; the body rethrows it.
        auto deliver = [&]() -> Task<void> { (void)co_await h; };
        co_await shoal::shielded(deliver());
      });
      ADD_FAILURE() << "the scope returned normally";
    } catch (const Boom& e) {
      EXPECT_STREQ(e.what(), "first");
    }
  }());
  EXPECT_EQ(reports.get(), std::vector<std::string>{"later"});
}

TEST_P(ScopeTest, AHandledDeliveredFaultIsNotReported) {
  SuppressedReports reports;
  shoal::test::ManualEvent never;
  std::string handled;
  run_with_reports(GetParam(), reports, [&]() -> Task<void> {
    try {
      co_await shoal::scope([&](Scope& s) -> Task<void> {
        auto h = s.start(fails_once_cancelled(never));
        s.spawn(first_fault());
        auto deliver = [&]() -> Task<void> {
          try {
            (void)co_await h;
          } catch (const Boom& e) {
            handled = e.what();  // the awaiter's now, like a call's exception
          }
        };
        co_await shoal::shielded(deliver());
      });
      ADD_FAILURE() << "the scope returned normally";
    } catch (const Boom& e) {
      EXPECT_STREQ(e.what(), "first");
    }
  }());
  EXPECT_EQ(handled, "later");
  EXPECT_TRUE(reports.get().empty()) << reports.get().size() << " reports";
}

TEST_P(ScopeTest, AnUndeliveredLaterFaultIsReportedAtScopeExit) {
  SuppressedReports reports;
  shoal::test::ManualEvent never;
  std::size_t reported_before_exit = 99;
  std::size_t counted_before_exit = 99;
  run_with_reports(GetParam(), reports, [&]() -> Task<void> {
    try {
      co_await shoal::scope([&](Scope& s) -> Task<void> {
        auto h = s.start(fails_once_cancelled(never));
        s.spawn(first_fault());
        auto wait_done = [&]() -> Task<void> {
          while (!h.done()) co_await shoal::checkpoint();
        };
        co_await shoal::shielded(wait_done());
        // The child failed, but its handle could still deliver the fault.
        reported_before_exit = reports.get().size();
        counted_before_exit = s.suppressed_faults();
      });
      ADD_FAILURE() << "the scope returned normally";
    } catch (const Boom& e) {
      EXPECT_STREQ(e.what(), "first");
    }
  }());
  EXPECT_EQ(reported_before_exit, 0u) << "reported before the result was known to be undelivered";
  EXPECT_EQ(counted_before_exit, 0u);
  EXPECT_EQ(reports.get(), std::vector<std::string>{"later"});
}

TEST_P(ScopeTest, ALaterFaultOfAChildWhoseHandleWentIsReportedWhenItFinishes) {
  SuppressedReports reports;
  shoal::test::ManualEvent never;
  run_with_reports(GetParam(), reports, [&]() -> Task<void> {
    try {
      co_await shoal::scope([&](Scope& s) -> Task<void> {
        { auto h = s.start(fails_once_cancelled(never)); }  // gone while the child waits
        s.spawn(first_fault());
        co_return;
      });
      ADD_FAILURE() << "the scope returned normally";
    } catch (const Boom& e) {
      EXPECT_STREQ(e.what(), "first");
    }
  }());
  EXPECT_EQ(reports.get(), std::vector<std::string>{"later"});
}

TEST_P(ScopeTest, AHandleThatOutlivesItsScopeHoldsNothingAndItsFaultIsReportedOnceAtTheExit) {
  SuppressedReports reports;
  shoal::test::ManualEvent never;
  std::size_t reported_at_exit = 99;
  run_with_reports(GetParam(), reports, [&]() -> Task<void> {
    std::vector<shoal::JoinHandle<int>> kept;  // outlives the scope
    try {
      co_await shoal::scope([&](Scope& s) -> Task<void> {
        kept.push_back(s.start(fails_once_cancelled(never)));
        kept.push_back(s.start([]() -> Task<int> { co_return 3; }));
        s.spawn(first_fault());
        co_return;
      });
      ADD_FAILURE() << "the scope returned normally";
    } catch (const Boom& e) {
      EXPECT_STREQ(e.what(), "first");
    }
    reported_at_exit = reports.get().size();
    kept.clear();  // touches nothing of the scope that is gone
  }());
  EXPECT_EQ(reported_at_exit, 1u);
  EXPECT_EQ(reports.get(), std::vector<std::string>{"later"});
}

SHOAL_TEST(ScopeTest, SpawnCopiesArgumentsAndOwnsTheCallable) {
  std::string seen;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    std::string arg = "original";
    s.spawn(
        [&seen](std::string a) -> Task<void> {
          co_await shoal::checkpoint();
          seen = a;
        },
        arg);
    arg = "changed after spawn";
    co_return;
  });
  EXPECT_EQ(seen, "original");
}

SHOAL_TEST(ScopeTest, CancelEndsAVoidScopeNormally) {
  shoal::test::ManualEvent never;
  std::atomic<int> cancelled{0};
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (int i = 0; i < 4; ++i) {
      s.spawn([&]() -> Task<void> {
        try {
          co_await never.wait();
        } catch (const shoal::Cancelled&) {
          cancelled.fetch_add(1);
          throw;
        }
      });
    }
    s.cancel();
    co_await never.wait();  // the body is cancelled too
    ADD_FAILURE() << "body not cancelled";
  });
  EXPECT_EQ(cancelled.load(), 4);
}

SHOAL_TEST(ScopeTest, CancelledValueScopeThrowsScopeCancelled) {
  shoal::test::ManualEvent never;
  EXPECT_THROW(co_await shoal::scope([&](Scope& s) -> Task<int> {
                 s.cancel();
                 co_await never.wait();
                 co_return 1;
               }),
               shoal::ScopeCancelled);
}

SHOAL_TEST(ScopeTest, CancelledScopeThatStillProducedItsValueReturnsIt) {
  int v = co_await shoal::scope([&](Scope& s) -> Task<int> {
    s.cancel();
    co_return 5;  // completed before any checkpoint observed the cancel
  });
  EXPECT_EQ(v, 5);
}

SHOAL_TEST(ScopeTest, GrandchildrenInNestedScopesOnOtherWorkersAreCancelled) {
  std::atomic<int> ready{0};
  std::atomic<int> cancelled{0};
  shoal::test::ManualEvent never;
  EXPECT_THROW(co_await shoal::scope([&](Scope& outer) -> Task<void> {
                 for (int c = 0; c < 3; ++c) {
                   outer.spawn([&]() -> Task<void> {
                     co_await shoal::scope([&](Scope& mid) -> Task<void> {
                       for (int g = 0; g < 3; ++g) {
                         mid.spawn([&]() -> Task<void> {
                           co_await shoal::scope([&](Scope& leaf) -> Task<void> {
                             leaf.spawn([&]() -> Task<void> {
                               try {
                                 ready.fetch_add(1);
                                 co_await never.wait();
                               } catch (const shoal::Cancelled&) {
                                 cancelled.fetch_add(1);
                                 throw;
                               }
                             });
                             co_return;
                           });
                         });
                       }
                       co_return;
                     });
                   });
                 }
                 outer.spawn([&]() -> Task<void> {
                   while (ready.load() < 9) co_await shoal::checkpoint();
                   throw Boom("outer child");
                 });
                 co_return;
               }),
               Boom);
  EXPECT_EQ(cancelled.load(), 9);
}

SHOAL_TEST(ScopeTest, CancelledTaskFreesCapturedStateExactlyOnce) {
  auto destroyed = std::make_shared<std::atomic<int>>(0);
  struct Heap {
    std::shared_ptr<std::atomic<int>> d;
    std::unique_ptr<int[]> payload{new int[1024]};
    explicit Heap(std::shared_ptr<std::atomic<int>> p) : d(std::move(p)) {}
    Heap(Heap&& o) noexcept = default;
    ~Heap() {
      if (payload) d->fetch_add(1);
    }
  };
  shoal::test::ManualEvent never;
  EXPECT_THROW(co_await shoal::scope([&](Scope& s) -> Task<void> {
                 s.spawn([h = Heap(destroyed), &never]() -> Task<void> { co_await never.wait(); });
                 s.spawn([]() -> Task<void> {
                   co_await shoal::checkpoint();
                   throw Boom("sibling");
                 });
                 co_return;
               }),
               Boom);
  EXPECT_EQ(destroyed->load(), 1);
}

Task<int> tree(int depth) {
  if (depth == 0) co_return 1;
  co_return co_await shoal::scope([depth](Scope& s) -> Task<int> {
    auto a = s.start(tree, depth - 1);
    auto b = s.start(tree, depth - 1);
    co_return co_await a + co_await b;
  });
}

SHOAL_TEST(ScopeTest, DeepSpawnTreeJoinsEveryLeaf) {
  EXPECT_EQ(co_await tree(12), 4096);
}

Task<int> nest(int depth) {
  if (depth == 0) co_return 0;
  co_return co_await shoal::scope([depth](Scope& s) -> Task<int> {
    s.spawn([]() -> Task<void> { co_await shoal::checkpoint(); });
    co_return 1 + co_await nest(depth - 1);
  });
}

SHOAL_TEST(ScopeTest, DeeplyNestedScopesUnwind) {
  EXPECT_EQ(co_await nest(500), 500);
}

TEST(ScopeFrames, EveryFrameIsFreedAfterFaultsAndCancellation) {
  shoal::test::FrameCounter frames;
  shoal::test::ManualEvent never;
  for (int round = 0; round < 20; ++round) {
    EXPECT_THROW(shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
                              for (int i = 0; i < 50; ++i) s.spawn([&]() -> Task<void> { co_await never.wait(); });
                              (void)s.start([]() -> Task<int> { co_return 3; });
                              s.spawn([]() -> Task<void> {
                                throw Boom("x");
                                co_return;
                              });
                              co_await never.wait();
                            }),
                            shoal::RuntimeOptions::with_workers(3)),
                 Boom);
  }
  EXPECT_EQ(frames.live(), 0);
}

TEST(ScopeFrames, SpawnAllocationFailureIsAFaultNotACrash) {
  shoal::test::FrameCounter frames;
  std::atomic<int> ran{0};
  EXPECT_THROW(shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
                 frames.fail_at(1, /*forever=*/true);  // every frame from here on
                 for (int i = 0; i < 10; ++i) s.spawn([&]() -> Task<void> {
                     ran.fetch_add(1);
                     co_return;
                   });
                 co_return;
               })),
               std::bad_alloc);
  frames.stop_failing();
  EXPECT_EQ(ran.load(), 0);
  EXPECT_GE(frames.failures(), 1);
  EXPECT_EQ(frames.live(), 0);
}

}  // namespace

namespace {

TEST(ScopeFanOut, TenThousandCancellationsAreSpreadOverTheWorkers) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "fan-out spread");
  constexpr int kChildren = 10'000;
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::atomic<int> blocked{0}, cancelled{0};
  shoal::test::ManualEvent never;
  EXPECT_THROW(shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
                            for (int i = 0; i < kChildren; ++i) {
                              s.spawn([&]() -> Task<void> {
                                try {
                                  blocked.fetch_add(1);
                                  co_await never.wait();
                                } catch (const shoal::Cancelled&) {
                                  cancelled.fetch_add(1);
                                  std::size_t seen;
                                  {
                                    std::lock_guard<std::mutex> g(mu);
                                    threads.insert(std::this_thread::get_id());
                                    seen = threads.size();
                                  }
                                  // Hold this worker (up to 2 s) until another one has taken a
                                  // cancelled child: only a fan-out that reaches other workers
                                  // gets past this quickly, whatever the machine's load.
                                  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
                                  while (seen < 2 && std::chrono::steady_clock::now() < until) {
                                    std::this_thread::yield();
                                    std::lock_guard<std::mutex> g(mu);
                                    seen = threads.size();
                                  }
                                  throw;
                                }
                              });
                            }
                            s.spawn([&]() -> Task<void> {
                              while (blocked.load() < kChildren) co_await shoal::checkpoint();
                              throw Boom("fault");
                            });
                            co_return;
                          }),
                          shoal::RuntimeOptions::with_workers(4)),
               Boom);
  EXPECT_EQ(cancelled.load(), kChildren);
  EXPECT_GE(threads.size(), 2u) << "every cancelled child resumed on one thread";
}

}  // namespace

namespace {

long allocations_for(shoal::test::FrameCounter& frames, bool callable, int n) {
  auto trivial = []() -> Task<void> { co_return; };
  const long before = frames.allocations();
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
    for (int i = 0; i < n; ++i) {
      if (callable) {
        s.spawn(trivial);
      } else {
        s.spawn(trivial());
      }
    }
    co_return;
  }));
  return frames.allocations() - before;
}

// A spawned Task is its frame and its task record (a plain frame carries
// none); a spawned callable is the wrapper, whose frame holds the record,
// and the callable's task.
TEST(ScopeFrames, SpawnedTaskCostsItsFrameAndItsRecordAndACallableTwoFrames) {
  shoal::test::FrameCounter frames;
  const long base = allocations_for(frames, false, 0);
  EXPECT_EQ(allocations_for(frames, false, 100) - base, 200);
  // At most two (clang may fold the task's frame into the wrapper's).
  EXPECT_LE(allocations_for(frames, true, 100) - base, 200);
  EXPECT_EQ(frames.live(), 0);
}

// Only a spawned root needs the task record: a frame that is awaited (with
// its 16-byte header) is no larger than the record alone; it was the record
// plus the promise and the frame.
TEST(ScopeFrames, AnAwaitedTasksFrameCarriesNoTaskRecord) {
  static std::size_t largest = 0;
  static std::size_t awaited_size = 0;
  struct Sizes {
    static void* alloc(std::size_t size, void*) {
      largest = std::max(largest, size);
      return ::operator new(size);
    }
    static void dealloc(void* p, std::size_t, void*) noexcept { ::operator delete(p); }
  };
  auto awaited = []() -> Task<int> { co_return 7; };
  int got = 0;
  auto body = [&]() -> Task<void> {
    const shoal::testing::FrameHooks hooks{&Sizes::alloc, &Sizes::dealloc, nullptr};
    shoal::testing::set_frame_hooks(&hooks);
    got = co_await awaited();
    shoal::testing::set_frame_hooks(nullptr);
    awaited_size = largest;
  };
  shoal::run(body());
  EXPECT_EQ(got, 7);
  EXPECT_LE(awaited_size, sizeof(shoal::detail::TaskRecord)) << "the awaited frame's size, with the frame header";
}

TEST(Watchdog, DumpShowsWorkersAndTheScopeTree) {
  shoal::test::ManualEvent ev;
  std::atomic<bool> waiting{false};
  std::string dump;
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(2));
  std::thread t([&] {
    while (!waiting.load()) std::this_thread::yield();
    std::ostringstream out;
    shoal::Runtime::dump_all(out);
    dump = out.str();
    ev.set();
  });
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await shoal::scope([&](Scope&) -> Task<void> {
        waiting.store(true);
        co_await ev.wait();
      });
    });
    co_return;
  }));
  t.join();
  EXPECT_NE(dump.find("worker 0"), std::string::npos) << dump;
  EXPECT_NE(dump.find("worker 1"), std::string::npos) << dump;
  EXPECT_NE(dump.find("\n      scope, the body of task (spawned callable"), std::string::npos) << dump;
}

}  // namespace
