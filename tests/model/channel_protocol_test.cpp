// Channel wait lists under the model checker: the real Channel<int> in lock
// mode (capacity 0 and 1) and ring mode (capacity 2), its send/recv awaiters
// driven by hand, racing a cancellation of one side and close().
// Invariants: values are conserved (every value a send reported sent is
// received or still buffered, in order; a cancelled or refused send's value
// is never received, and a refused one comes back in the exception); a
// cancelled operation has no effect; no waiter is lost (a task left waiting
// forever is a deadlock); each task is scheduled exactly once per
// suspension and its hook is clear after every await.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "harness.hpp"
#include "shoal/channel/channel.hpp"

namespace shoal::model {
namespace {

struct Side {
  detail::CancelNode node;
  TestRecord f;
  Side() {
    f.node.store(&node);
    f.home = &node;
  }
  void leave() {  // as Scope::task_done
    if ((f.flags & detail::TaskRecord::kLinked) != 0) node.remove_record(&f);
    check(f.wakes.load() == f.resumed, "scheduled twice, or scheduled without having suspended");
  }
};

struct Ledger {
  std::vector<int> sent, refused, cancelled, received;
};

void sender(Channel<int>& ch, Side& s, Ledger& l, int count) {
  set_current_record(&s.f);
  for (int v = 1; v <= count; ++v) {
    auto aw = ch.send(v);
    try {
      await(s.f, aw);
      l.sent.push_back(v);
    } catch (const ChannelClosedError<int>& e) {
      check(e.value == v, "a refused send did not get its value back");
      l.refused.push_back(v);
    } catch (const Cancelled&) {
      l.cancelled.push_back(v);
      check(s.f.hook.load() == nullptr, "hook still armed after the await returned");
      break;
    }
    check(s.f.hook.load() == nullptr, "hook still armed after the await returned");
  }
  set_current_record(nullptr);
  s.leave();
}

void receiver(Channel<int>& ch, Side& s, Ledger& l, int count) {
  set_current_record(&s.f);
  for (int i = 0; i < count; ++i) {
    auto aw = ch.recv();
    std::optional<int> v;
    try {
      v = await(s.f, aw);
    } catch (const Cancelled&) {
      check(s.f.hook.load() == nullptr, "hook still armed after the await returned");
      break;
    }
    check(s.f.hook.load() == nullptr, "hook still armed after the await returned");
    if (!v) break;
    l.received.push_back(*v);
  }
  set_current_record(nullptr);
  s.leave();
}

void check_conserved(Channel<int>& ch, Ledger& l, int sends) {
  while (std::optional<int> v = ch.try_recv()) l.received.push_back(*v);
  check(l.received == l.sent, "the values received are not exactly the values sent, in order");
  check(l.sent.size() + l.refused.size() + l.cancelled.size() <= static_cast<std::size_t>(sends),
        "a send ended two ways");
}

enum class Cancel { none, sender, receiver };

// Main cancels one side, waits for it, then closes the channel: a waiter on
// the other side can only be released by close, so if the protocol loses
// it the run deadlocks.
void channel_race(std::size_t capacity, int sends, int recvs, Cancel cancel) {
  Channel<int> ch(capacity);
  Side s, r;
  Ledger l;
  Thread ts = spawn([&] { sender(ch, s, l, sends); }, "sender");
  Thread tr = spawn([&] { receiver(ch, r, l, recvs); }, "receiver");
  if (cancel == Cancel::sender) s.node.cancel(true);
  if (cancel == Cancel::receiver) r.node.cancel(true);
  if (cancel == Cancel::sender) {
    ts.join();
    ch.close();
    tr.join();
  } else {
    tr.join();
    ch.close();
    ts.join();
  }
  check_conserved(ch, l, sends);
}

// No cancel; close() races both sides.
void close_race(std::size_t capacity) {
  Channel<int> ch(capacity);
  Side s, r;
  Ledger l;
  Thread ts = spawn([&] { sender(ch, s, l, 2); }, "sender");
  Thread tr = spawn([&] { receiver(ch, r, l, 3); }, "receiver");
  ch.close();
  ts.join();
  tr.join();
  check_conserved(ch, l, 2);
}

// Wait lists longer than one: two senders or two receivers wait at once,
// and one of them (index 0 of the pair) is cancelled, perhaps from the
// middle of a list. Values are tagged 10 * sender + k.
void crowd_race(std::size_t capacity, bool two_senders) {
  Channel<int> ch(capacity);
  const int n_send = two_senders ? 2 : 1;
  const int n_recv = two_senders ? 1 : 2;
  Side sides_s[2], sides_r[2];
  Ledger ls[2], lr[2];
  std::vector<Thread> senders, receivers;
  for (int i = 0; i < n_send; ++i) {
    senders.push_back(spawn(
        [&, i] {
          set_current_record(&sides_s[i].f);
          for (int k = 1; k <= 2; ++k) {
            auto aw = ch.send(10 * i + k);
            try {
              await(sides_s[i].f, aw);
              ls[i].sent.push_back(10 * i + k);
            } catch (const ChannelClosedError<int>&) {
              ls[i].refused.push_back(10 * i + k);
            } catch (const Cancelled&) {
              break;
            }
            check(sides_s[i].f.hook.load() == nullptr, "hook still armed after the await returned");
          }
          set_current_record(nullptr);
          sides_s[i].leave();
        },
        i == 0 ? "sender0" : "sender1"));
  }
  for (int i = 0; i < n_recv; ++i) {
    receivers.push_back(spawn([&, i] { receiver(ch, sides_r[i], lr[i], 4); }, i == 0 ? "receiver0" : "receiver1"));
  }
  (two_senders ? sides_s[0] : sides_r[0]).node.cancel(true);
  // Senders first, then close; receivers end on nullopt (or the cancel).
  for (Thread& t : senders) t.join();
  ch.close();
  for (Thread& t : receivers) t.join();
  std::vector<int> received;
  for (int i = 0; i < n_recv; ++i) {
    for (int s = 0; s < n_send; ++s) {  // each sender's values arrive in order at each receiver
      int last = 0;
      for (int v : lr[i].received) {
        if (v / 10 != s) continue;
        check(v > last, "a sender's values arrived out of order");
        last = v;
      }
    }
    received.insert(received.end(), lr[i].received.begin(), lr[i].received.end());
  }
  while (std::optional<int> v = ch.try_recv()) received.push_back(*v);
  std::vector<int> sent;
  for (int i = 0; i < n_send; ++i) sent.insert(sent.end(), ls[i].sent.begin(), ls[i].sent.end());
  std::sort(sent.begin(), sent.end());
  std::sort(received.begin(), received.end());
  check(received == sent, "the values received are not exactly the values sent");
}

class ModelChannel : public ::testing::TestWithParam<std::size_t> {};

TEST_P(ModelChannel, CancelledReceiverExhaustiveBound2) {
  expect_passes(explore_bound(2, [] { channel_race(GetParam(), 1, 1, Cancel::receiver); }));
}

TEST_P(ModelChannel, CancelledSenderExhaustiveBound2) {
  expect_passes(explore_bound(2, [] { channel_race(GetParam(), 1, 1, Cancel::sender); }));
}

TEST_P(ModelChannel, CloseRacesSendAndRecvExhaustiveBound2) {
  expect_passes(explore_bound(2, [] { close_race(GetParam()); }));
}

TEST_P(ModelChannel, TwoValuesCancelledReceiverExhaustiveBound2) {
  expect_passes(explore_bound(2, [] { channel_race(GetParam(), 2, 2, Cancel::receiver); }));
}

TEST_P(ModelChannel, TwoSendersOneCancelledExhaustiveBound1) {
  expect_passes(explore_bound(1, [] { crowd_race(GetParam(), true); }));
}

TEST_P(ModelChannel, TwoReceiversOneCancelledExhaustiveBound1) {
  expect_passes(explore_bound(1, [] { crowd_race(GetParam(), false); }));
}

TEST_P(ModelChannel, RandomSchedules) {
  const std::size_t cap = GetParam();
  expect_passes(random_runs(2000, [cap] {
    channel_race(cap, 3, 2, Cancel::receiver);
    channel_race(cap, 2, 3, Cancel::sender);
    close_race(cap);
    crowd_race(cap, true);
    crowd_race(cap, false);
  }));
}

// Ring mode on two workers: two senders, each on its own worker, send two
// values each. A send that meets the other's operation (a lost CAS, or a
// slot still being written) makes the channel's home the sender's worker
// if it has none, or moves the sender there; a send that met nothing never
// moves. Every value arrives once, moved or not.
struct GatherRun {
  int runs_with_a_move = 0;
};

void gather_race(GatherRun& g) {
  Channel<int> ch(4);
  Side s[2];
  Ledger l[2];
  std::vector<Thread> senders;
  for (int i = 0; i < 2; ++i) {
    s[i].f.worker = static_cast<std::uint8_t>(i);
    senders.push_back(spawn(
        [&, i] {
          set_current_record(&s[i].f);
          for (int k = 1; k <= 2; ++k) {
            auto aw = ch.send(10 * i + k);
            await(s[i].f, aw);
            l[i].sent.push_back(10 * i + k);
          }
          set_current_record(nullptr);
          s[i].leave();
        },
        i == 0 ? "sender0" : "sender1"));
  }
  for (Thread& t : senders) t.join();
  std::vector<int> received, sent;
  while (std::optional<int> v = ch.try_recv()) received.push_back(*v);
  for (int i = 0; i < 2; ++i) sent.insert(sent.end(), l[i].sent.begin(), l[i].sent.end());
  std::sort(sent.begin(), sent.end());
  std::sort(received.begin(), received.end());
  check(received == sent && sent.size() == 4, "a value was lost or doubled");
  const int moves = s[0].f.moves + s[1].f.moves;
  check(moves <= 1, "both senders moved: the home changed under them");
  check(s[0].f.worker == s[1].f.worker || moves == 0, "a sender moved, but not to where the other one runs");
  if (moves > 0) ++g.runs_with_a_move;
}

TEST(ModelChannelGather, ASendThatMeetsAnotherWorkersMovesToTheChannelsHomeWorker) {
  GatherRun g;
  expect_passes(explore_bound(2, [&] { gather_race(g); }));
  EXPECT_GT(g.runs_with_a_move, 0) << "no interleaving moved a contended sender to the channel's home worker";
}

INSTANTIATE_TEST_SUITE_P(Capacity, ModelChannel, ::testing::Values(std::size_t{0}, std::size_t{1}, std::size_t{2}),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return "capacity" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace shoal::model
