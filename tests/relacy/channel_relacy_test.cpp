// The buffered channel's lock-free ring (detail::Ring, include/shoal/detail/
// ring.hpp) and the channel's wait protocol over it (Channel<T> in ring mode,
// include/shoal/channel/channel.hpp: a waiter announces itself, then
// retries; whoever completes an operation and sees an announced waiter
// hands over to it under the lock) under Relacy's memory model. The real
// send and recv awaiters are driven by hand, as tests/model does:
// await_suspend, then (if it suspended) wait until scheduled, then
// await_resume. Scenarios port tests/model/channel_protocol_test.cpp's
// ring-mode runs: senders and a receiver racing on a capacity-2 ring (so
// values wrap onto a slot a receiver has just emptied), a close racing both,
// and a cancel of either side.
// Every value is a Msg whose every construction, move and destruction is
// mirrored on a plain Relacy variable of the memory it lives in (a ring
// slot's own, for the whole run): a receiver that reads a slot without a
// happens-before edge from the sender's write, or a sender that reuses a
// slot without one from the last receiver's read, is a data race, as is a
// hand-off under the lock that the woken side does not see.
// Invariants: no value lost or duplicated, each sender's values in order, a
// refused send gets its value back, a cancelled operation moves nothing,
// close is observed by both sides (a send after it fails, a receiver ends on
// nullopt once drained), and a task that waited is scheduled exactly once
// per wait (a lost wake-up leaves it blocked: Relacy reports a deadlock).
#include <gtest/gtest.h>

#include <algorithm>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "harness.hpp"
#include "shoal/channel/channel.hpp"
#include "shoal/runtime/errors.hpp"

namespace {

using shoal::detail::CancelNode;
using shoal::relacy::Record;

// The plain variables that shadow the memory Msgs live in. A ring slot's
// shadow lasts the whole run (the slot is reused lap after lap); any other
// Msg (an awaiter's value or slot, a result) gets a fresh one for its
// lifetime, as its memory (a stack, an exception) may be another thread's
// later without any order between the two.
struct Shadows {
  static constexpr int kSlots = 2, kPool = 128;
  const void* slot_at[kSlots] = {};
  rl::var<int> slot[kSlots];
  const void* live_at[kPool] = {};
  rl::var<int> pool[kPool];
  int used = 0;
  bool capture = false;  // a Msg constructed now is in a ring slot

  void reset() {
    used = 0;
    for (const void*& p : live_at) p = nullptr;
  }
  rl::var<int>* slot_of(const void* p) {
    for (int i = 0; i < kSlots; ++i) {
      if (slot_at[i] == p) return &slot[i];
    }
    return nullptr;
  }
  // The shadow of a Msg constructed at `p`.
  rl::var<int>& born(const void* p) {
    if (capture) {
      for (int i = 0; i < kSlots; ++i) {
        if (slot_at[i] == nullptr || slot_at[i] == p) {
          slot_at[i] = p;
          return slot[i];
        }
      }
      RL_ASSERT(false);
    }
    if (rl::var<int>* s = slot_of(p)) return *s;
    RL_ASSERT(used < kPool);
    live_at[used] = p;
    return pool[used++];
  }
  // The shadow of the live Msg at `p`.
  rl::var<int>& of(const void* p) {
    if (rl::var<int>* s = slot_of(p)) return *s;
    for (int i = used; i-- > 0;) {
      if (live_at[i] == p) return pool[i];
    }
    RL_ASSERT(false);
    return pool[0];
  }
  void died(const void* p) {
    if (slot_of(p) != nullptr) return;
    for (int i = used; i-- > 0;) {
      if (live_at[i] == p) {
        live_at[i] = nullptr;
        return;
      }
    }
  }
};
Shadows* g_shadows = nullptr;  // the running suite's

// A channel's value: a number, its memory shadowed (see Shadows).
struct Msg {
  int v;
  explicit Msg(int x) noexcept : v(x) { g_shadows->born(this)($) = x; }
  Msg(Msg&& o) noexcept : v(o.v) {
    RL_ASSERT(g_shadows->of(&o)($) == o.v);  // the value, seen where it was
    g_shadows->born(this)($) = v;
  }
  Msg(const Msg&) = delete;
  Msg& operator=(const Msg&) = delete;
  Msg& operator=(Msg&&) = delete;
  ~Msg() {
    g_shadows->of(this)($) = -1;  // gone: its memory may be reused
    g_shadows->died(this);
  }
};

using Ch = shoal::Channel<Msg>;

// A task in its scope's node (a task always runs in one).
struct Task {
  Record f;
  CancelNode node;
  int suspensions = 0;
  // Opened once the task first waits (parks) or its operations are over: a
  // thread that holds back until then blocks on it (a Relacy semaphore:
  // nothing spins). It orders the task's steps so far before that thread's.
  rl::semaphore<struct ParkedTag> parked;
  bool opened = false;
  void setup() {
    f.node.store(&node, std::memory_order_relaxed);
    f.home = &node;
    parked.init(false, 0, 2, $);
  }
  void teardown() { parked.deinit($); }
  void open() {  // for up to two threads that wait_parked()
    if (opened) return;
    opened = true;
    unsigned prev = 0;
    parked.post(2, prev, $);
  }
  void wait_parked() { parked.wait(false, false, $); }
  // Waits until scheduled once more (a parked task resumed).
  void wait_scheduled() {
    ++suspensions;
    open();
    // Blocks (the harness's schedule() notifies): a wake nobody sends is a
    // Relacy deadlock report.
    for (int w; (w = f.wakes.load(std::memory_order_acquire)) < suspensions;)
      f.wakes.wait(w, std::memory_order_acquire);
  }
  void leave() {                                                        // as Scope::task_done
    RL_ASSERT(f.wakes.load(std::memory_order_relaxed) == suspensions);  // once per wait, never twice
    RL_ASSERT(f.hook.load(std::memory_order_relaxed) == nullptr);
    if ((f.flags & shoal::detail::TaskRecord::kLinked) != 0) node.remove_record(&f);
    open();
  }
};

enum class Sent { sent, refused, cancelled };

// `co_await ch.send(Msg(v))` by task `t`.
Sent send(Ch& ch, Task& t, int v) {
  shoal::relacy::set_current_record(&t.f);
  Sent r = Sent::sent;
  try {
    auto aw = ch.send(Msg(v));
    if (aw.await_suspend(std::noop_coroutine())) t.wait_scheduled();
    aw.await_resume();
  } catch (const shoal::ChannelClosedError<Msg>& e) {
    RL_ASSERT(e.value.v == v);  // a refused send gets its value back
    r = Sent::refused;
  } catch (const shoal::Cancelled&) {
    r = Sent::cancelled;
  }
  RL_ASSERT(t.f.hook.load(std::memory_order_relaxed) == nullptr);
  shoal::relacy::set_current_record(nullptr);
  return r;
}

// `co_await ch.recv()` by task `t`: the value, 0 once closed and drained,
// -1 if cancelled.
int recv(Ch& ch, Task& t) {
  shoal::relacy::set_current_record(&t.f);
  int r = -1;
  try {
    auto aw = ch.recv();
    if (aw.await_suspend(std::noop_coroutine())) t.wait_scheduled();
    std::optional<Msg> m = aw.await_resume();
    r = m ? m->v : 0;
  } catch (const shoal::Cancelled&) {
  }
  RL_ASSERT(t.f.hook.load(std::memory_order_relaxed) == nullptr);
  shoal::relacy::set_current_record(nullptr);
  return r;
}

// What each side did (each list written by its own thread, read after).
struct Ledger {
  std::vector<int> sent, refused, cancelled, received;
};

// A capacity-2 ring channel, its shadows, and what crossed it.
struct Run {
  Shadows shadows;  // before the channel: its ring's values die after it
  Ch ch{2};
  Ledger senders[2], receivers[2];
  void setup() {
    g_shadows = &shadows;
    shadows.reset();
    // Find the ring's two slots (the Msgs constructed while a try_send
    // pushes), then empty the ring again: the run starts a lap in.
    for (int i = 0; i < 2; ++i) {
      Msg m(-1);
      shadows.capture = true;
      RL_ASSERT(ch.try_send(std::move(m)) == shoal::SendStatus::sent);
      shadows.capture = false;
    }
    for (int i = 0; i < 2; ++i) RL_ASSERT(ch.try_recv().has_value());
    for (Ledger& l : senders) l = Ledger{};
    for (Ledger& l : receivers) l = Ledger{};
  }
  // `count` values, 10 * id + 1, ...: stops at the first that fails.
  void sender(Task& t, int id, int count) {
    Ledger& l = senders[id];
    for (int k = 1; k <= count; ++k) {
      const int v = 10 * id + k;
      const Sent r = send(ch, t, v);
      (r == Sent::sent ? l.sent : r == Sent::refused ? l.refused : l.cancelled).push_back(v);
      if (r != Sent::sent) break;
    }
    t.leave();
  }
  // Up to `count` values; stops early on nullopt (closed) or a cancel.
  void receiver(Task& t, int id, int count) {
    Ledger& l = receivers[id];
    for (int i = 0; i < count; ++i) {
      const int v = recv(ch, t);
      if (v <= 0) break;
      l.received.push_back(v);
    }
    t.leave();
  }
  // Every value sent was received (or is still buffered) exactly once, each
  // sender's in order; no refused or cancelled value was.
  void check() {
    std::vector<int> got;
    for (const Ledger& l : receivers) {
      for (int s = 0; s < 2; ++s) {
        int last = 0;
        for (int v : l.received) {
          if (v / 10 != s) continue;
          RL_ASSERT(v > last);  // a sender's values in order
          last = v;
        }
      }
      got.insert(got.end(), l.received.begin(), l.received.end());
    }
    while (std::optional<Msg> m = ch.try_recv()) got.push_back(m->v);
    std::vector<int> sent;
    for (const Ledger& l : senders) sent.insert(sent.end(), l.sent.begin(), l.sent.end());
    std::sort(got.begin(), got.end());
    std::sort(sent.begin(), sent.end());
    RL_ASSERT(got == sent);
  }
};

// How often the executions took the paths a suite is about (its test
// expects each at least once).
struct Seen {
  long sender_waited = 0;
  long receiver_waited = 0;
  long refused = 0;
  long cancelled = 0;
};
Seen g_seen;
void note(const Task& t, long& waited) {
  if (t.suspensions > 0) ++waited;
}

// Two senders, two values each, into a capacity-2 ring, and a receiver that
// takes all four, nothing holding anyone back: senders wait for room (a
// receive hands their value over), the receiver waits for values (a send
// hands one over), and the values wrap onto slots the receiver has just
// emptied.
struct TwoSendersOneReceiver : rl::test_suite<TwoSendersOneReceiver, 3>, Run {
  Task s[2], r;
  void before() {
    setup();
    for (Task& t : s) t.setup();
    r.setup();
  }
  void after() {
    check();
    RL_ASSERT(receivers[0].received.size() == 4);
    note(s[0], g_seen.sender_waited);
    note(s[1], g_seen.sender_waited);
    note(r, g_seen.receiver_waited);
    for (Task& t : s) t.teardown();
    r.teardown();
  }
  void thread(unsigned id) {
    if (id < 2) {
      sender(s[id], static_cast<int>(id), 2);
    } else {
      receiver(r, 0, 4);
    }
  }
};

// A sender of three values (the third waits for room: the receiver and the
// close start once the sender has parked or is done), a receiver that takes
// values until the channel says closed and drained, and a close racing both:
// every value sent before the close is received; a send waiting at it gets
// its value back; the receiver sees the end.
struct CloseWakesAWaitingSender : rl::test_suite<CloseWakesAWaitingSender, 3>, Run {
  Task s, r;
  void before() {
    setup();
    s.setup();
    r.setup();
  }
  void after() {
    check();
    note(s, g_seen.sender_waited);
    note(r, g_seen.receiver_waited);
    if (!senders[0].refused.empty()) ++g_seen.refused;
    s.teardown();
    r.teardown();
  }
  void thread(unsigned id) {
    if (id == 0) {
      sender(s, 0, 3);
    } else if (id == 1) {
      s.wait_parked();
      receiver(r, 0, 4);  // ends on nullopt: at most three values come
    } else {
      s.wait_parked();
      ch.close();
    }
  }
};

// A receiver that takes values until the channel says closed and drained,
// a sender of two values, and a close once the receiver has parked (or is
// done), racing the sends: the receiver is handed a value or woken by the
// close, and ends on nullopt after every value sent before the close.
struct CloseWakesAWaitingReceiver : rl::test_suite<CloseWakesAWaitingReceiver, 3>, Run {
  Task s, r;
  void before() {
    setup();
    s.setup();
    r.setup();
  }
  void after() {
    check();
    note(r, g_seen.receiver_waited);
    if (!senders[0].refused.empty()) ++g_seen.refused;
    s.teardown();
    r.teardown();
  }
  void thread(unsigned id) {
    if (id == 0) {
      sender(s, 0, 2);
    } else if (id == 1) {
      receiver(r, 0, 3);  // ends on nullopt: at most two values come
    } else {
      r.wait_parked();
      ch.close();
    }
  }
};

// A receiver that waits (the sender and the cancel start once it has
// parked), a sender of one value, and a cancel of the receiver's scope
// racing the send: the
// receive takes the value (a value handed over wins over the cancel) or
// nothing (the value stays in the channel).
struct CancelledReceiver : rl::test_suite<CancelledReceiver, 3>, Run {
  Task s, r;
  void before() {
    setup();
    s.setup();
    r.setup();
  }
  void after() {
    check();
    note(r, g_seen.receiver_waited);
    if (r.suspensions > 0 && receivers[0].received.empty()) ++g_seen.cancelled;
    s.teardown();
    r.teardown();
  }
  void thread(unsigned id) {
    if (id == 0) {
      r.wait_parked();
      sender(s, 0, 1);
    } else if (id == 1) {
      receiver(r, 0, 1);
    } else {
      r.wait_parked();
      r.node.cancel(true);
    }
  }
};

// A sender of three values whose third waits for room (the receiver and the
// canceller start once the sender has parked or is done), a receiver of two,
// and a cancel of the sender's scope racing the receive that would hand its
// value over; the canceller then closes the channel, so the receiver ends on
// nullopt if fewer came. A cancelled send's value never arrives; a refused
// one comes back.
struct CancelledSender : rl::test_suite<CancelledSender, 3>, Run {
  Task s, r;
  void before() {
    setup();
    s.setup();
    r.setup();
  }
  void after() {
    check();
    note(s, g_seen.sender_waited);
    if (s.suspensions > 0 && !senders[0].cancelled.empty()) ++g_seen.cancelled;
    s.teardown();
    r.teardown();
  }
  void thread(unsigned id) {
    if (id == 0) {
      sender(s, 0, 3);
    } else if (id == 1) {
      s.wait_parked();
      receiver(r, 0, 2);
    } else {
      s.wait_parked();
      s.node.cancel(true);
      ch.close();
    }
  }
};

// A close and a receiver, nothing else: what the closer wrote before
// close() is visible to a receive that ends because the channel is closed
// (as Go's memory model promises), whether it found the close on its fast
// path (the ring's tail) or was woken by it (the lock).
struct CloseHappensBeforeAClosedReceive : rl::test_suite<CloseHappensBeforeAClosedReceive, 2>, Run {
  Task r;
  rl::var<int> closer_wrote;
  void before() {
    setup();
    r.setup();
    closer_wrote($) = 0;
  }
  void after() {
    note(r, g_seen.receiver_waited);
    r.teardown();
  }
  void thread(unsigned id) {
    if (id == 0) {
      closer_wrote($) = 1;
      ch.close();
    } else {
      RL_ASSERT(recv(ch, r) == 0);
      RL_ASSERT(closer_wrote($) == 1);
      r.leave();
    }
  }
};

using shoal::relacy::check;
using shoal::relacy::search_or;

template <class Suite>
bool check_channel() {
  g_seen = Seen{};
  const bool ok = check<Suite>(search_or("random"));
  std::printf(
      "relacy: seen sender waited %ld, receiver waited %ld, refused "
      "%ld, cancelled %ld\n",
      g_seen.sender_waited, g_seen.receiver_waited, g_seen.refused, g_seen.cancelled);
  return ok;
}

TEST(RelacyChannel, TwoSendersAndAReceiverRaceOnTheRing) {
  EXPECT_TRUE(check_channel<TwoSendersOneReceiver>());
  EXPECT_GT(g_seen.sender_waited, 0);
  EXPECT_GT(g_seen.receiver_waited, 0);
}
TEST(RelacyChannel, ACloseWakesAWaitingSender) {
  EXPECT_TRUE(check_channel<CloseWakesAWaitingSender>());
  EXPECT_GT(g_seen.sender_waited, 0);
  EXPECT_GT(g_seen.refused, 0);
}
TEST(RelacyChannel, ACloseWakesAWaitingReceiver) {
  EXPECT_TRUE(check_channel<CloseWakesAWaitingReceiver>());
  EXPECT_GT(g_seen.receiver_waited, 0);
  EXPECT_GT(g_seen.refused, 0);
}
TEST(RelacyChannel, ACloseHappensBeforeTheReceiveThatSeesIt) {
  EXPECT_TRUE(check_channel<CloseHappensBeforeAClosedReceive>());
  EXPECT_GT(g_seen.receiver_waited, 0);
}
TEST(RelacyChannel, AWaitingReceiverIsCancelled) {
  EXPECT_TRUE(check_channel<CancelledReceiver>());
  EXPECT_GT(g_seen.receiver_waited, 0);
  EXPECT_GT(g_seen.cancelled, 0);
}
TEST(RelacyChannel, AWaitingSenderIsCancelled) {
  EXPECT_TRUE(check_channel<CancelledSender>());
  EXPECT_GT(g_seen.sender_waited, 0);
  EXPECT_GT(g_seen.cancelled, 0);
}

}  // namespace
