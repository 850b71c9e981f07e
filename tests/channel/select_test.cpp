// select: exactly one case completes, the others leave their primitives as
// they were; fairness; deadlines; cancellation; a lossless stress under
// random cancellation.
#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "shoal/channel/broadcast.hpp"
#include "shoal/channel/oneshot.hpp"
#include "shoal/channel/select.hpp"
#include "shoal/channel/watch.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Channel;
using shoal::Scope;
using shoal::Task;

SHOAL_TEST_SUITE(SelectTest);

// Capacities: 0 and 1 use the channel's locked hand-off, 16 its lock-free ring.
const std::size_t kCapacities[] = {0, 1, 16};

SHOAL_TEST(SelectTest, ReceivesFromTheChannelThatHasAValue) {
  for (std::size_t cap : {std::size_t{1}, std::size_t{16}}) {
    Channel<int> a(cap), b(cap);
    EXPECT_EQ(b.try_send(7), shoal::SendStatus::sent);
    auto r = co_await shoal::select(shoal::on_recv(a), shoal::on_recv(b));
    EXPECT_EQ(r.index(), 1u);
    EXPECT_EQ(std::get<1>(r), std::optional<int>(7));
    EXPECT_EQ(a.try_recv(), std::nullopt) << "the losing case took something";
  }
}

SHOAL_TEST(SelectTest, AWaitingSelectIsCompletedByALaterSendOnAnyOfItsChannels) {
  for (std::size_t cap : kCapacities) {
    Channel<std::string> a(cap), b(cap), c(cap);
    std::size_t index = 99;
    std::string got;
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        auto r = co_await shoal::select(shoal::on_recv(a), shoal::on_recv(b), shoal::on_recv(c));
        index = r.index();
        got = *std::get<1>(std::move(r));
      });
      co_await b.send("hello");
    });
    EXPECT_EQ(index, 1u) << "capacity " << cap;
    EXPECT_EQ(got, "hello");
    EXPECT_EQ(a.try_recv(), std::nullopt);
    EXPECT_EQ(c.try_recv(), std::nullopt);
  }
}

SHOAL_TEST(SelectTest, ASendCaseMeetsAWaitingReceiver) {
  for (std::size_t cap : kCapacities) {
    Channel<std::unique_ptr<int>> out(cap), never(cap);
    std::unique_ptr<int> got;
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> { got = *co_await out.recv(); });
      auto v = std::make_unique<int>(42);
      auto r = co_await shoal::select(shoal::on_recv(never), shoal::on_send(out, v));
      EXPECT_EQ(r.index(), 1u);
      EXPECT_EQ(v, nullptr) << "a sent value is moved from";
    });
    EXPECT_NE(got, nullptr) << "capacity " << cap;
    if (got) {
      EXPECT_EQ(*got, 42);
    }
  }
}

SHOAL_TEST(SelectTest, ASendCaseThatLosesKeepsItsValue) {
  Channel<std::unique_ptr<int>> full(1);
  Channel<int> ready(1);
  EXPECT_EQ(full.try_send(std::make_unique<int>(1)), shoal::SendStatus::sent);
  EXPECT_EQ(ready.try_send(5), shoal::SendStatus::sent);
  auto mine = std::make_unique<int>(2);
  int* raw = mine.get();
  auto r = co_await shoal::select(shoal::on_send(full, mine), shoal::on_recv(ready));
  EXPECT_EQ(r.index(), 1u);
  EXPECT_EQ(mine.get(), raw) << "the send case that lost gave its value away";
  EXPECT_EQ(**full.try_recv(), 1);
  EXPECT_EQ(full.try_recv(), std::nullopt) << "the losing send case enqueued its value";
}

SHOAL_TEST(SelectTest, TwoSelectsOnOneRendezvousChannelMeet) {
  Channel<int> link(0), idle_a(0), idle_b(0);
  int received = 0;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      auto r = co_await shoal::select(shoal::on_recv(idle_a), shoal::on_recv(link));
      EXPECT_EQ(r.index(), 1u);
      received = *std::get<1>(r);
    });
    int v = 9;
    auto r = co_await shoal::select(shoal::on_recv(idle_b), shoal::on_send(link, v));
    EXPECT_EQ(r.index(), 1u);
  });
  EXPECT_EQ(received, 9);
}

SHOAL_TEST(SelectTest, ASelectNeverMatchesItsOwnSendWithItsOwnReceive) {
  Channel<int> ch(0);
  int v = 3;
  auto r = co_await shoal::select(shoal::on_send(ch, v), shoal::on_recv(ch), shoal::on_timeout(5ms));
  EXPECT_EQ(r.index(), 2u) << "a select completed two cases against itself";
  EXPECT_EQ(v, 3);
}

SHOAL_TEST(SelectTest, TheDeadlineCaseCompletesWhenNothingElseDoes) {
  Channel<int> ch(4);
  shoal::Notify n;
  const auto t0 = shoal::now();
  auto r = co_await shoal::select(shoal::on_recv(ch), shoal::on_notify(n), shoal::on_timeout(20ms));
  EXPECT_EQ(r.index(), 2u);
  EXPECT_GE(shoal::now() - t0, 20ms) << "the deadline fired early";
  EXPECT_EQ(ch.try_send(1), shoal::SendStatus::sent);
  n.notify_one();
  // A deadline already passed is a ready case like any other.
  auto r2 = co_await shoal::select(shoal::on_deadline(shoal::now() - 1s));
  EXPECT_EQ(r2.index(), 0u);
}

SHOAL_TEST(SelectTest, ReadyCasesAreChosenFairly) {
  Channel<int> a(4), b(4);
  int wins[2] = {0, 0};
  const int rounds = 10'000;
  for (int i = 0; i < rounds; ++i) {
    (void)a.try_send(1);
    (void)b.try_send(2);
    auto r = co_await shoal::select(shoal::on_recv(a), shoal::on_recv(b));
    ++wins[r.index()];
    // Put the winner's channel back to one value, the loser's stays at one.
    if (r.index() == 0) {
      (void)b.try_recv();
    } else {
      (void)a.try_recv();
    }
  }
  EXPECT_GE(wins[0], rounds / 3) << "case 0 won " << wins[0] << " of " << rounds;
  EXPECT_GE(wins[1], rounds / 3) << "case 1 won " << wins[1] << " of " << rounds;
}

// N receive cases over channels[0..N); returns how often each case won in
// `rounds` selects, with the `ready` cases kept holding one value each.
template <std::size_t N>
Task<std::vector<int>> count_select_wins(std::vector<bool> ready, int rounds) {
  std::vector<std::unique_ptr<Channel<int>>> chans;
  for (std::size_t i = 0; i < N; ++i) {
    chans.push_back(std::make_unique<Channel<int>>(1));
    if (ready[i]) (void)chans[i]->try_send(static_cast<int>(i));
  }
  std::vector<int> wins(N, 0);
  for (int round = 0; round < rounds; ++round) {
    const std::size_t won = co_await [&]<std::size_t... I>(std::index_sequence<I...>) -> Task<std::size_t> {
      auto r = co_await shoal::select(shoal::on_recv(*chans[I])...);
      co_return r.index();
    }(std::make_index_sequence<N>{});
    ++wins[won];
    (void)chans[won]->try_send(static_cast<int>(won));  // ready again for the next round
  }
  co_return wins;
}

template <std::size_t N>
Task<void> expect_fair_among_ready_cases() {
  // The layouts: Go's TestSelectFairness (never-ready cases first, then the
  // ready ones), the reverse, every other one, all ready, and one at random.
  std::vector<std::vector<bool>> layouts;
  std::vector<bool> tail(N), head(N), alternate(N), all(N, true), random(N);
  std::mt19937 rng(static_cast<unsigned>(N));
  for (std::size_t i = 0; i < N; ++i) {
    tail[i] = i >= N / 2;
    head[i] = i < (N + 1) / 2;
    alternate[i] = i % 2 == 1;
    random[i] = rng() % 2 == 0;
  }
  random[rng() % N] = true;
  for (auto* l : {&tail, &head, &alternate, &all, &random}) layouts.push_back(*l);
  const int rounds = 10'000;
  for (const auto& ready : layouts) {
    const auto k = static_cast<int>(std::count(ready.begin(), ready.end(), true));
    const std::vector<int> wins = co_await count_select_wins<N>(ready, rounds);
    std::string layout;
    for (bool r : ready) layout += r ? 'R' : '-';
    // A fair pick gives each of k ready cases rounds/k wins, with a standard
    // deviation of at most 50 at 10,000 rounds; the tolerance, a fifth of the
    // share, is at least 6 of those. The old random-start scan gave the first
    // ready case after two idle ones 3/4 of Go's layout.
    const int share = rounds / k;
    for (std::size_t i = 0; i < N; ++i) {
      if (!ready[i]) {
        EXPECT_EQ(wins[i], 0) << "N=" << N << " " << layout << ": a case that was never ready won";
      } else {
        EXPECT_NEAR(wins[i], share, share / 5) << "N=" << N << " " << layout << ": case " << i << " won " << wins[i]
                                               << " of " << rounds << ", a fair share is " << share;
      }
    }
  }
}

SHOAL_TEST(SelectTest, EveryReadyCaseWinsItsShareWhereverItStands) {
  co_await expect_fair_among_ready_cases<2>();
  co_await expect_fair_among_ready_cases<3>();
  co_await expect_fair_among_ready_cases<4>();
  co_await expect_fair_among_ready_cases<5>();
  co_await expect_fair_among_ready_cases<6>();
  co_await expect_fair_among_ready_cases<7>();
  co_await expect_fair_among_ready_cases<8>();
}

SHOAL_TEST(SelectTest, ARecvCaseOnAClosedChannelYieldsNullopt) {
  Channel<int> open(1), closed(1);
  closed.close();
  auto r = co_await shoal::select(shoal::on_recv(open), shoal::on_recv(closed));
  EXPECT_EQ(r.index(), 1u);
  EXPECT_EQ(std::get<1>(r), std::nullopt);
}

SHOAL_TEST(SelectTest, ASendCaseOnAClosedChannelThrowsAndKeepsTheValue) {
  for (std::size_t cap : kCapacities) {
    Channel<std::unique_ptr<int>> ch(cap), idle(cap);
    for (std::size_t i = 0; i < cap; ++i) (void)ch.try_send(std::make_unique<int>(0));  // full: the case waits
    auto v = std::make_unique<int>(1);
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        EXPECT_THROW((void)co_await shoal::select(shoal::on_recv(idle), shoal::on_send(ch, v)), shoal::ChannelClosed);
      });
      co_await shoal::checkpoint();
      ch.close();
    });
    EXPECT_NE(v, nullptr) << "capacity " << cap;
  }
}

SHOAL_TEST(SelectTest, EventAndNotifyCasesComplete) {
  shoal::Event ev;
  shoal::Notify n;
  Channel<int> idle(1);
  n.notify_one();  // before the wait: kept as a permit
  auto r = co_await shoal::select(shoal::on_recv(idle), shoal::on_notify(n));
  EXPECT_EQ(r.index(), 1u);
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      auto r2 = co_await shoal::select(shoal::on_notify(n), shoal::on_event(ev));
      EXPECT_EQ(r2.index(), 1u);
    });
    co_await shoal::checkpoint();
    ev.set();
  });
  // The event stays set; the permit was taken by the first select.
  auto r3 = co_await shoal::select(shoal::on_notify(n), shoal::on_event(ev));
  EXPECT_EQ(r3.index(), 1u);
}

// A broadcast receiver and a watch are cases: "a message for the room, or
// the shutdown, whichever first" in one select. The losing case takes
// nothing: the receiver's position and the watch's seen version stay.
SHOAL_TEST(SelectTest, ABroadcastReceiverAndAWatchAreCasesAndTakeNothingWhenTheyLose) {
  shoal::Broadcast<std::string> room(8);
  shoal::Watch<int> phase(0);
  shoal::Event shutdown;
  auto rx = room.subscribe();
  auto phases = phase.subscribe();
  // Waiting: a later broadcast completes it.
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      auto r = co_await shoal::select(shoal::on_recv(rx), shoal::on_changed(phases), shoal::on_event(shutdown));
      SHOAL_CO_ASSERT(r.index() == 0u);
      auto& got = std::get<0>(r);
      EXPECT_TRUE(got.has_value() && *got == "hello");
    });
    co_await shoal::sleep_for(1ms);  // whether it waits or not, the outcome is the same
    room.send("hello");
  });
  // Ready at once: the watch changed; the broadcast has nothing new.
  (void)phase.send(1);
  auto r = co_await shoal::select(shoal::on_recv(rx), shoal::on_changed(phases), shoal::on_event(shutdown));
  EXPECT_EQ(r.index(), 1u);
  EXPECT_TRUE(std::get<1>(r)) << "a change, marked seen";
  EXPECT_FALSE(phases.has_changed());
  // The shutdown wins; the broadcast sent meanwhile is still there for rx.
  room.send("kept");
  shutdown.set();
  (void)phase.send(2);
  for (int i = 0; i < 20; ++i) {  // whichever ready case wins, the others keep theirs
    auto w = co_await shoal::select(shoal::on_event(shutdown));
    EXPECT_EQ(w.index(), 0u);
  }
  auto next = rx.try_recv();
  SHOAL_CO_ASSERT(next.has_value() && next->has_value());
  EXPECT_EQ(**next, "kept");
  EXPECT_TRUE(phases.has_changed()) << "the watch's change is still unseen";
  // Closed: the broadcast case gives the end, the watch case false.
  room.close();
  auto end = co_await shoal::select(shoal::on_recv(rx));
  EXPECT_TRUE(std::get<0>(end).closed());
  phase.close();
  EXPECT_TRUE(co_await phases.changed());  // version 2, unseen
  auto closed = co_await shoal::select(shoal::on_changed(phases));
  EXPECT_FALSE(std::get<0>(closed));
}

// A select that finished another way leaves its dead case linked until it
// unlinks it; a broadcast meeting it first drops it and wakes nobody twice.
SHOAL_TEST(SelectTest, ABroadcastToASelectThatEndedAnotherWayWakesNobodyTwice) {
  shoal::Broadcast<int> feed(4);
  for (int round = 0; round < 200; ++round) {
    auto rx = feed.subscribe();
    shoal::Notify n;
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        auto r = co_await shoal::select(shoal::on_recv(rx), shoal::on_notify(n));
        (void)r;
      });
      s.spawn([&]() -> Task<void> {
        n.notify_one();
        co_return;
      });
      s.spawn([&]() -> Task<void> {
        (void)feed.send(round);
        co_return;
      });
      co_return;
    });
  }
}

// A oneshot receiver is a case: "the reply, or the shutdown, whichever
// first". The value is never lost: a select that another case won leaves it
// for recv; a sender dropped unsent makes the winning case throw.
SHOAL_TEST(SelectTest, AOneshotIsACaseThatLosesNoValueAndThrowsForADroppedSender) {
  for (int round = 0; round < 200; ++round) {
    auto ends = shoal::oneshot<int>();
    auto& tx = ends.first;
    auto& rx = ends.second;
    shoal::Notify n;
    int got = -1;
    bool notified = false;
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        auto r = co_await shoal::select(shoal::on_recv(rx), shoal::on_notify(n));
        if (r.index() == 0) {
          got = std::get<0>(r);
        } else {
          notified = true;
        }
      });
      s.spawn([&]() -> Task<void> {
        n.notify_one();
        co_return;
      });
      s.spawn([&]() -> Task<void> {
        EXPECT_TRUE(tx.send(round));
        co_return;
      });
      co_return;
    });
    if (notified) {
      auto kept = rx.try_recv();
      SHOAL_CO_ASSERT(kept.has_value());  // the select that lost left the value
      EXPECT_EQ(*kept, round);
    } else {
      EXPECT_EQ(got, round);
    }
  }
  auto [tx, rx] = shoal::oneshot<std::string>();
  { auto gone = std::move(tx); }
  EXPECT_THROW((void)co_await shoal::select(shoal::on_recv(rx)), shoal::SenderDropped);
}

// on_join: "the child's result, or the shutdown, whichever first" in one
// select. A select that another case won leaves the result in the handle.
SHOAL_TEST(SelectTest, AJoinHandleIsACaseThatLeavesTheResultInTheHandleWhenItLoses) {
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    shoal::Notify go;
    shoal::Event shutdown, never;
    auto h = s.start([&]() -> Task<int> {
      co_await go.wait();
      co_return 7;
    });
    shutdown.set();
    auto lost = co_await shoal::select(shoal::on_join(h), shoal::on_event(shutdown));
    EXPECT_EQ(lost.index(), 1u);
    EXPECT_TRUE(h.valid()) << "the case that lost took the result";
    s.spawn([&]() -> Task<void> {
      go.notify_one();
      co_return;
    });
    auto got = co_await shoal::select(shoal::on_join(h), shoal::on_event(never));
    SHOAL_CO_ASSERT(got.index() == 0u);
    EXPECT_EQ(std::get<0>(got), 7);
    EXPECT_FALSE(h.valid()) << "the case that won delivered the result";
    auto finished = s.start([]() -> Task<void> { co_return; });
    while (!finished.done()) co_await shoal::checkpoint();
    auto at_once = co_await shoal::select(shoal::on_event(never), shoal::on_join(finished));
    EXPECT_EQ(at_once.index(), 1u) << "a finished child completes the case without waiting";
    int x = 3;
    auto ref = s.start([&]() -> Task<int&> { co_return x; });
    auto r = co_await shoal::select(shoal::on_join(ref), shoal::on_event(never));
    SHOAL_CO_ASSERT(r.index() == 0u);
    EXPECT_EQ(&std::get<0>(r).get(), &x) << "a reference comes as a std::reference_wrapper";
  });
}

SHOAL_TEST(SelectTest, AJoinCaseRethrowsTheChildsFaultAndReportsACutOffChild) {
  bool caught = false;
  try {
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      shoal::Event never;
      auto bad = s.start([]() -> Task<int> {
        co_await shoal::checkpoint();
        throw std::runtime_error("child failed");
      });
      // The first fault cancels the scope too: a shielded select is sure to see it.
      co_await shoal::shielded([&]() -> Task<void> {
        try {
          (void)co_await shoal::select(shoal::on_join(bad), shoal::on_event(never));
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "child failed");
          caught = true;
        }
      }());
      EXPECT_FALSE(bad.valid()) << "the case that won delivered the fault";
    });
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "child failed");  // the scope's own first fault
  }
  EXPECT_TRUE(caught);
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    shoal::Event never;
    auto cut = s.start([&]() -> Task<void> { co_await never.wait(); });
    s.spawn([&]() -> Task<void> {
      cut.cancel();
      co_return;
    });
    EXPECT_THROW((void)co_await shoal::select(shoal::on_join(cut), shoal::on_event(never)), shoal::ChildCancelled);
  });
}

// A handle has one awaiter at a time: of two selects on one running child,
// whichever links second is told so (and sets `stop` for the first).
SHOAL_TEST(SelectTest, AJoinCaseOnADeliveredOrBusyHandleIsALogicError) {
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    shoal::Event never, go, stop;
    auto h = s.start([]() -> Task<int> { co_return 1; });
    EXPECT_EQ(co_await h, 1);
    EXPECT_THROW((void)co_await shoal::select(shoal::on_join(h), shoal::on_event(never)), std::logic_error);
    auto slow = s.start([&]() -> Task<int> {
      co_await go.wait();
      co_return 2;
    });
    int told = 0;
    auto both = [&]() -> Task<void> {
      try {
        auto r = co_await shoal::select(shoal::on_join(slow), shoal::on_event(stop));
        EXPECT_EQ(r.index(), 1u);
      } catch (const std::logic_error& e) {
        EXPECT_NE(std::string(e.what()).find("another task awaits"), std::string::npos) << e.what();
        ++told;
        stop.set();
      }
    };
    co_await shoal::scope([&](Scope& pair) -> Task<void> {
      pair.spawn(both);
      pair.spawn(both);
      co_return;
    });
    EXPECT_EQ(told, 1);
    go.set();
    EXPECT_EQ(co_await slow, 2) << "neither select took the result";
  });
}

SHOAL_TEST(SelectTest, InACancelledScopeItThrowsWithoutTakingAnything) {
  Channel<int> ch(1);
  EXPECT_EQ(ch.try_send(1), shoal::SendStatus::sent);
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.cancel();
    EXPECT_THROW((void)co_await shoal::select(shoal::on_recv(ch)), shoal::Cancelled);
    co_return;
  });
  EXPECT_EQ(ch.try_recv(), std::optional<int>(1));
}

SHOAL_TEST(SelectTest, ACancelledWaitingSelectCompletedNoCase) {
  for (std::size_t cap : kCapacities) {
    Channel<int> in(cap), out(cap == 0 ? 0 : 1);
    if (cap != 0) {
      EXPECT_EQ(out.try_send(0), shoal::SendStatus::sent);  // full: the send case must wait
    }
    shoal::Event waiting;
    bool cancelled = false;
    int v = 5;
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        try {
          waiting.set();
          (void)co_await shoal::select(shoal::on_recv(in), shoal::on_send(out, v), shoal::on_timeout(1h));
        } catch (const shoal::Cancelled&) {
          cancelled = true;
          throw;
        }
      });
      co_await waiting.wait();
      co_await shoal::sleep_for(1ms);  // let it park (either way the outcome must hold)
      s.cancel();
    });
    EXPECT_TRUE(cancelled) << "capacity " << cap;
    EXPECT_EQ(v, 5) << "the cancelled select sent its value";
    EXPECT_EQ(in.try_send(1), cap == 0 ? shoal::SendStatus::full : shoal::SendStatus::sent)
        << "a receiver is still linked after the select was cancelled";
  }
}

// The acceptance test: 4 producers on 4 channels, one consumer in a
// select loop whose scope is cancelled at random and restarted; every
// message is received exactly once.
void select_stress(std::size_t workers, std::size_t cap, std::uint64_t seed) {
  const long per = shoal::test::scaled(25'000, 2'000);
  std::vector<std::atomic<std::uint8_t>> seen(static_cast<std::size_t>(per) * 4);
  std::mt19937_64 rng(seed);
  shoal::RuntimeOptions opts;
  opts.workers = workers;
  std::atomic<long> received{0};
  long restarts = 0, cancelled_selects = 0;
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
    std::vector<std::unique_ptr<Channel<long>>> chans;
    for (int i = 0; i < 4; ++i) chans.push_back(std::make_unique<Channel<long>>(cap));
    for (int p = 0; p < 4; ++p) {
      s.spawn([&, p]() -> Task<void> {
        for (long i = 0; i < per; ++i) co_await chans[p]->send(p * per + i);
      });
    }
    while (received < per * 4) {
      const long budget = 1 + static_cast<long>(rng() % 40);  // cancel after this many checkpoints of the canceller
      ++restarts;
      co_await shoal::scope([&](Scope& inner) -> Task<void> {
        inner.spawn([&]() -> Task<void> {
          while (received < per * 4) {
            std::variant<std::optional<long>, std::optional<long>, std::optional<long>, std::optional<long>> r;
            try {
              r = co_await shoal::select(shoal::on_recv(*chans[0]), shoal::on_recv(*chans[1]),
                                         shoal::on_recv(*chans[2]), shoal::on_recv(*chans[3]));
            } catch (const shoal::Cancelled&) {
              ++cancelled_selects;
              throw;
            }
            const long v = std::visit([](auto& o) { return *o; }, r);
            if (seen[static_cast<std::size_t>(v)].fetch_add(1) != 0) ADD_FAILURE() << "value " << v << " received twice";
            ++received;
          }
          inner.cancel();
        });
        for (long k = 0; k < budget && received < per * 4; ++k) co_await shoal::checkpoint();
        inner.cancel();
      });
    }
    co_return;
  }), opts);
  for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(), 1) << "value " << i << " (seed " << seed << ")";
  std::printf("workers %zu capacity %zu: %ld messages, %ld restarts, %ld selects cancelled\n", workers, cap,
              received.load(), restarts, cancelled_selects);
  EXPECT_GT(cancelled_selects, 0) << "no select was ever cancelled: the test did not test that";
}

TEST(SelectStress, FourProducersOneCancelledConsumerLoseNothing) {
  shoal::test::Watchdog dog(std::chrono::seconds(300), "select stress");
  const std::uint64_t seed = shoal::test::test_seed("SelectStress.FourProducersOneCancelledConsumerLoseNothing");
  for (std::size_t workers : {1u, 4u}) {
    for (std::size_t cap : {0u, 1u, 64u}) select_stress(workers, cap, seed + workers * 100 + cap);
  }
}

}  // namespace

namespace {

// Selecting and plain senders and receivers on a rendezvous channel and a
// ring channel at once: selects win against plain waiters, against each
// other, and against the lock-free ring's receivers; every value is
// received exactly once.
void mixed_stress(std::size_t workers, std::uint64_t seed) {
  const long per = shoal::test::scaled(20'000, 2'000);
  constexpr int kSenders = 4;  // 0, 1 plain (A, B); 2, 3 select (on_send A or B)
  std::vector<std::atomic<std::uint8_t>> seen(static_cast<std::size_t>(per) * kSenders);
  shoal::RuntimeOptions opts;
  opts.workers = workers;
  std::atomic<long> got{0};
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
    Channel<long> a(0), b(8);
    const auto take = [&](long v) {
      if (seen[static_cast<std::size_t>(v)].fetch_add(1) != 0) ADD_FAILURE() << "value " << v << " received twice";
      got.fetch_add(1);
    };
    co_await shoal::scope([&](Scope& io) -> Task<void> {
      co_await shoal::scope([&](Scope& senders) -> Task<void> {
        for (int p = 0; p < kSenders; ++p) {
          senders.spawn([&, p]() -> Task<void> {
            for (long i = 0; i < per; ++i) {
              long v = p * per + i;
              if (p == 0) {
                co_await a.send(v);
              } else if (p == 1) {
                co_await b.send(v);
              } else {
                (void)co_await shoal::select(shoal::on_send(a, v), shoal::on_send(b, v));
              }
            }
          });
        }
        // Two selecting receivers and one plain receiver on each channel.
        for (int r = 0; r < 2; ++r) {
          io.spawn([&]() -> Task<void> {
            for (;;) {
              auto x = co_await shoal::select(shoal::on_recv(a), shoal::on_recv(b));
              const auto& v = x.index() == 0 ? std::get<0>(x) : std::get<1>(x);
              if (!v) break;  // one channel closed: drain the other plainly
              take(*v);
            }
            while (auto v = co_await a.recv()) take(*v);
            while (auto v = co_await b.recv()) take(*v);
          });
        }
        io.spawn([&]() -> Task<void> {
          while (auto v = co_await a.recv()) take(*v);
        });
        io.spawn([&]() -> Task<void> {
          while (auto v = co_await b.recv()) take(*v);
        });
        co_return;
      });
      a.close();
      b.close();
    });
    (void)s;
  }), opts);
  EXPECT_EQ(got.load(), per * kSenders) << "seed " << seed;
  for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(), 1) << "value " << i;
}

TEST(SelectStress, SelectingAndPlainSendersAndReceiversLoseNothing) {
  shoal::test::Watchdog dog(std::chrono::seconds(300), "select mixed stress");
  const std::uint64_t seed = shoal::test::test_seed("SelectStress.SelectingAndPlainSendersAndReceiversLoseNothing");
  for (std::size_t workers : {1u, 4u}) mixed_stress(workers, seed + workers);
}

}  // namespace

namespace {

// A child finishing at the moment another case wins, or the select's scope
// is cancelled: the result is delivered exactly once, by the case or by
// awaiting the handle afterwards; and a select that ended another way never
// lets its case go while the finishing child still claims through it
// (ASan and TSan run this).
void join_case_stress(std::size_t workers) {
  const long rounds = shoal::test::scaled(20'000, 2'000);
  shoal::RuntimeOptions opts;
  opts.workers = workers;
  long by_case = 0, by_await = 0;
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
    for (long i = 0; i < rounds; ++i) {
      shoal::Event go;
      shoal::Notify other;
      // Each party yields a different number of times first, so that every
      // order of the three comes up (any order must keep the invariant).
      auto h = s.start([&go, i]() -> Task<long> {
        co_await go.wait();
        for (long k = 0; k < i % 4; ++k) co_await shoal::checkpoint();
        co_return i;
      });
      const long how = i % 3;  // 0: a notify races the child; 1: a cancel does; 2: both
      bool won = false;
      co_await shoal::scope([&](Scope& round) -> Task<void> {
        round.spawn([&]() -> Task<void> {
          go.set();
          co_return;
        });
        if (how != 1) {
          round.spawn([&]() -> Task<void> {
            for (long k = 0; k < i / 4 % 4; ++k) co_await shoal::checkpoint();
            other.notify_one();
          });
        }
        co_await shoal::scope([&](Scope& inner) -> Task<void> {
          inner.spawn([&]() -> Task<void> {
            auto r = co_await shoal::select(shoal::on_join(h), shoal::on_notify(other));
            if (r.index() == 0) {
              EXPECT_EQ(std::get<0>(r), i);
              won = true;
            }
          });
          if (how != 0) {
            inner.spawn([&]() -> Task<void> {
              for (long k = 0; k < i / 16 % 4; ++k) co_await shoal::checkpoint();
              inner.cancel();
            });
          }
          co_return;
        });
      });
      if (won) {
        ++by_case;
        EXPECT_FALSE(h.valid());
      } else {
        ++by_await;
        EXPECT_EQ(co_await h, i) << "round " << i << ": the select that lost left the result";
      }
    }
  }), opts);
  std::printf("workers %zu: %ld results by the case, %ld by awaiting the handle after\n", workers, by_case, by_await);
  EXPECT_GT(by_case, 0) << "the case never won: the test did not test that";
  EXPECT_GT(by_await, 0) << "the case never lost: the test did not test that";
}

TEST(SelectStress, AJoinCaseRacingAnotherCaseOrACancelDeliversEachResultOnce) {
  shoal::test::Watchdog dog(std::chrono::seconds(300), "join case stress");
  for (std::size_t workers : {1u, 4u}) join_case_stress(workers);
}

}  // namespace
