// The cancel tree's publish/disarm handshake (src/scope/cancel_protocol.cpp:
// CancelNode, publish_hook, inspect_hook, disarm_wait) under Relacy's memory
// model, beyond the one waiter join_relacy_test.cpp drives: two waiters in
// one node; a child node attached (a scope entered) while its parent is
// cancelled; a child node leaving and going while the parent's cancel
// walks; a wait that ends on its own (disarming) while a canceller
// inspects its hook. The waits are real wait_step waits on a test
// primitive (gate_support.hpp). Invariants: each waiter is scheduled
// exactly once if it suspended, never if not; a cancel is never lost (a
// waiter in a cancelled node ends Cancelled, also one that entered its
// node during the cancel); a canceller's look at a waiter happens before
// the waiter frees it (its after_cancel writes an rl::var in the waiter's
// freed memory); a node is never touched by a cancel walk after it left
// its parent and was freed.
// The three-thread tests run random schedules (200,000 by default): bound 2
// explores 110k-420k executions in 1-5 s, bound 3 takes 35 s to minutes.
#include <gtest/gtest.h>

#include <new>

#include "gate_support.hpp"

namespace {

using shoal::detail::CancelNode;
using shoal::detail::TaskRecord;
using shoal::relacy::End;
using shoal::relacy::Gate;
using shoal::relacy::Record;

void leave_home(Record& f) {
  if ((f.flags & TaskRecord::kLinked) != 0) f.home->remove_record(&f);
}

// Two tasks of one scope, each waiting on its own gate, and the scope's
// cancel: both end Cancelled, each scheduled once (the walk claims one
// while the other may still be arming; the second one's Dekker is its own).
// `Linked`: both waited here before (in the node's list already).
template <bool Linked>
struct TwoWaitersInANode : rl::test_suite<TwoWaitersInANode<Linked>, 3> {
  Gate ga, gb;
  Record fa, fb;
  CancelNode node;
  void before() {
    ga.init();
    gb.init();
    for (Record* f : {&fa, &fb}) {
      f->node.store(&node, std::memory_order_relaxed);
      f->home = &node;
      if (Linked) {
        node.add_record(f);
        f->flags |= TaskRecord::kLinked;
      }
    }
  }
  void thread(unsigned id) {
    if (id == 2) {
      node.cancel(true);
      return;
    }
    Record& f = id == 0 ? fa : fb;
    int got = 0;
    RL_ASSERT(await_gate(id == 0 ? ga : gb, f, got) == End::cancelled);
    leave_home(f);
  }
  void after() { RL_ASSERT(node.records.empty()); }
};

// A task enters a child scope (attach under the parent) and waits in it,
// while the parent is cancelled: attach and the walk both hold the
// parent's lock, so the child is born cancelled or reached by the walk;
// the wait ends Cancelled either way. Another child attaches at the same
// time (two attaches and the walk on the parent's list): it ends
// cancelled too.
struct ChildAttachVsParentCancel : rl::test_suite<ChildAttachVsParentCancel, 3> {
  Gate gate;
  Record f;
  CancelNode parent, child, other;
  void before() {
    gate.init();
    f.node.store(&parent, std::memory_order_relaxed);
    f.home = &parent;
  }
  void thread(unsigned id) {
    if (id == 0) {
      parent.cancel(true);
    } else if (id == 1) {
      other.attach(&parent, nullptr, nullptr);
    } else {
      shoal::relacy::set_current_record(&f);
      child.enter(&f);
      int got = 0;
      RL_ASSERT(await_gate(gate, f, got) == End::cancelled);
      child.leave(&f);
      leave_home(f);
    }
  }
  void after() {
    RL_ASSERT(other.cancelled.load(std::memory_order_relaxed));
    other.detach();
    RL_ASSERT(parent.children.empty());
  }
};

// A task enters a child scope, waits in it (a notify may end the wait
// first), leaves it and frees it, while the parent's cancel walks: the
// walk never touches the child after it left (its atomics are gone with
// it), and claims the task at most once (through the child's body or the
// parent's list).
struct ChildLeavesVsParentCancel : rl::test_suite<ChildLeavesVsParentCancel, 3> {
  Gate gate;
  Record f;
  CancelNode parent;
  End end = End::none;
  void before() {
    gate.init();
    f.node.store(&parent, std::memory_order_relaxed);
    f.home = &parent;
  }
  void thread(unsigned id) {
    if (id == 0) {
      parent.cancel(true);
    } else if (id == 1) {
      gate.notify(7);
    } else {
      shoal::relacy::set_current_record(&f);
      void* mem = rl::rl_malloc(sizeof(CancelNode), RL_INFO);
      auto* child = new (mem) CancelNode;
      child->enter(&f);
      int got = 0;
      end = await_gate(gate, f, got);
      RL_ASSERT(end != End::none);
      child->leave(&f);
      child->~CancelNode();
      rl::rl_free(mem, RL_INFO);
      leave_home(f);
    }
  }
  void after() {
    // The notify went to the waiter or stayed.
    RL_ASSERT((end == End::cancelled) == (gate.permit($) == 7));
  }
};

// A wait that ends without suspending (the gate had its value: wait_step
// is done and disarms its own hook) while a canceller inspects that hook:
// the waiter's disarm waits out the canceller's look (kBusy), which
// happens before the waiter frees its awaiter (the canceller's
// after_cancel writes in it).
struct DisarmVsInspect : rl::test_suite<DisarmVsInspect, 2> {
  Gate gate;
  Record f;
  CancelNode node;
  void before() {
    gate.init();
    gate.permit($) = 7;
    f.node.store(&node, std::memory_order_relaxed);
    f.home = &node;
  }
  void thread(unsigned id) {
    if (id == 0) {
      node.cancel(true);
    } else {
      int got = 0;
      const End end = await_gate(gate, f, got);
      RL_ASSERT(end == End::took || end == End::cancelled);
      leave_home(f);
    }
  }
};

TEST(RelacyCancelTree, TwoWaitersInANodeBothCancelled) {
  EXPECT_TRUE(shoal::relacy::check<TwoWaitersInANode<false>>(shoal::relacy::search_or("random")));
}
TEST(RelacyCancelTree, TwoWaitersAlreadyInTheirNodeBothCancelled) {
  EXPECT_TRUE(shoal::relacy::check<TwoWaitersInANode<true>>(shoal::relacy::search_or("random")));
}
TEST(RelacyCancelTree, ChildrenAttachWhileTheParentIsCancelled) {
  EXPECT_TRUE(shoal::relacy::check<ChildAttachVsParentCancel>(shoal::relacy::search_or("random")));
}
TEST(RelacyCancelTree, AChildLeavesAndGoesWhileTheParentIsCancelled) {
  EXPECT_TRUE(shoal::relacy::check<ChildLeavesVsParentCancel>(shoal::relacy::search_or("random")));
}
TEST(RelacyCancelTree, AWaitDisarmsWhileACancellerInspectsItsHook) {
  EXPECT_TRUE(shoal::relacy::check<DisarmVsInspect>(shoal::relacy::search_or("bound")));
}
}  // namespace
