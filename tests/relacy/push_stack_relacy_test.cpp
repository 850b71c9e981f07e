// The push-then-drain stack (src/runtime/push_stack.hpp: the pinned lanes'
// inboxes, the frame cache's remote frees, the driver's released sources)
// and the injector (src/runtime/injector.hpp) under Relacy's memory model.
// A node's payload is written before its push and read by whoever takes it:
// without the push's release and the take's acquire that read is a data
// race. Invariant: every node is taken exactly once and none is lost.
#include <gtest/gtest.h>

#include "relacy_support.hpp"
#include "runtime/injector.hpp"
#include "runtime/push_stack.hpp"

namespace {

struct Node {
  Node* next = nullptr;
  rl::var<int> payload;
  rl::var<int> taken;
};
using Stack = shoal::detail::PushStack<Node, &Node::next>;

struct Nodes : shoal::relacy::Handed<Node, 3> {
  void take_chain(Node* n) {
    while (n != nullptr) {
      Node* next = n->next;
      take(n);
      n = next;
    }
  }
};

// Two pushers (one node, then a chain of two) and a taker that drains once
// while they push; what is left is drained after they all finished.
struct PushersAndATaker : rl::test_suite<PushersAndATaker, 3> {
  Stack stack;
  Nodes nodes;
  void before() { nodes.before(); }
  void after() {
    nodes.take_chain(stack.take_all());
    nodes.check();
  }
  void thread(unsigned id) {
    if (id == 0) {
      (void)stack.push(nodes.make(0));
    } else if (id == 1) {
      Node* a = nodes.make(1);
      Node* b = nodes.make(2);
      a->next = b;
      (void)stack.push(a, b);
    } else {
      nodes.take_chain(stack.take_all_oldest_first());
    }
  }
};

// Two records pushed from two threads while a worker pops one at a time
// (the cut-and-put-back path); the rest is popped after.
struct Records {
  shoal::detail::TaskRecord records[3];
  rl::var<int> taken[3];
  void before() {
    for (auto& t : taken) t($) = 0;
  }
  void take(shoal::detail::TaskBatch b) {
    while (shoal::detail::TaskRecord* f = b.pop_front()) {
      auto& t = taken[f - records];
      t($) = t($) + 1;
    }
  }
  void check() {
    for (auto& t : taken) RL_ASSERT(t($) == 1);
  }
};

struct InjectorPushVsPop : rl::test_suite<InjectorPushVsPop, 3> {
  shoal::detail::Injector injector;
  Records r;
  void before() { r.before(); }
  void after() {
    r.take(injector.pop(8));
    r.check();
  }
  void thread(unsigned id) {
    if (id == 0) {
      injector.push(&r.records[0]);
    } else if (id == 1) {
      shoal::detail::TaskBatch b;
      b.push(&r.records[1]);
      b.push(&r.records[2]);
      injector.push_batch(b);
    } else {
      r.take(injector.pop(1));
      r.take(injector.pop(1));
    }
  }
};

TEST(RelacyPushStack, PushersAndATakerLoseNothing) { EXPECT_TRUE(shoal::relacy::check<PushersAndATaker>("bound")); }
TEST(RelacyInjector, PushesRacingAPopThatCutsLoseNothing) {
  EXPECT_TRUE(shoal::relacy::check<InjectorPushVsPop>("bound"));
}

}  // namespace
