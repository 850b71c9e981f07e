// The task's wait hook (the task's wait state) under the model checker:
// the real Event awaiter and the real publish_hook/disarm_wait/CancelNode
// (src/scope/cancel_protocol.cpp) racing Event::set() and cancellation.
// Invariants: a waiter is scheduled exactly once if it suspended and never
// if it did not; it ends woken only if the event was set and Cancelled only
// if its scope was cancelled; its hook is null once its await returns; a
// set-only or cancel-only race always ends that one way (no lost wake-up).
#include <gtest/gtest.h>

#include "harness.hpp"
#include "shoal/sync/event.hpp"
#include "shoal/runtime/errors.hpp"

namespace shoal::model {
namespace {

enum class End { none, woken, cancelled };

// One task awaiting an Event, as a task would; then it leaves its scope's
// task list as Scope::task_done does.
End await_event(TestRecord& f, Event& ev, detail::CancelNode& home) {
  set_current_record(&f);
  End end = End::none;
  {
    Event::Awaiter aw = ev.wait();
    try {
      await(f, aw);
      end = End::woken;
    } catch (const Cancelled&) {
      end = End::cancelled;
    }
    check(f.hook.load() == nullptr, "hook still armed after the await returned");
  }
  if ((f.flags & detail::TaskRecord::kLinked) != 0) home.remove_record(&f);
  set_current_record(nullptr);
  return end;
}

void check_wakes(TestRecord& f) {
  check(f.wakes.load() == f.resumed, "scheduled twice, or scheduled without having suspended");
}

void event_race(bool with_set, bool with_cancel) {
  Event ev;
  detail::CancelNode node;
  TestRecord f;
  f.node.store(&node);
  f.home = &node;
  End end = End::none;
  Thread waiter = spawn([&] { end = await_event(f, ev, node); }, "waiter");
  Thread setter = spawn(
      [&] {
        if (with_set) ev.set();
      },
      "set");
  Thread canceller = spawn(
      [&] {
        if (with_cancel) node.cancel(true);
      },
      "cancel");
  waiter.join();
  setter.join();
  canceller.join();
  check_wakes(f);
  check(end != End::woken || with_set, "woken without a set");
  check(end != End::cancelled || with_cancel, "cancelled without a cancel");
  check(end != End::none, "the await neither returned nor threw");
  check(node.records.empty(), "the task is still in its scope's list");
}

TEST(ModelWaitHook, EventSetRacesCancelExhaustiveBound2) {
  expect_passes(explore_bound(2, [] { event_race(true, true); }));
}

TEST(ModelWaitHook, EventSetRacesCancelRandomSchedules) {
  expect_passes(random_runs(3000, [] { event_race(true, true); }));
}

TEST(ModelWaitHook, CancelAloneAlwaysLandsExhaustiveBound3) {
  expect_passes(explore_bound(3, [] { event_race(false, true); }));
}

TEST(ModelWaitHook, SetAloneAlwaysWakesExhaustiveBound3) {
  expect_passes(explore_bound(3, [] { event_race(true, false); }));
}

// Two cancellers of one node (a scope cancel racing a parent's): the second
// finds kBusy or a cleared hook, and the waiter is still scheduled once.
TEST(ModelWaitHook, TwoCancellersExhaustiveBound2) {
  expect_passes(explore_bound(2, [] {
    Event ev;
    detail::CancelNode parent, child;
    child.attach(&parent, nullptr, nullptr);
    TestRecord f;
    f.node.store(&child);
    f.home = &child;
    End end = End::none;
    Thread waiter = spawn([&] { end = await_event(f, ev, child); }, "waiter");
    Thread c1 = spawn([&] { child.cancel(true); }, "cancel child");
    parent.cancel(true);
    waiter.join();
    c1.join();
    child.detach();
    check_wakes(f);
    check(end == End::cancelled, "not cancelled");
  }));
}

// Two waiters on one event, one of them cancelled while the other may be
// linked beside it: the cancel unlinks only its own waiter, and set() still
// wakes the other.
void two_waiters() {
  Event ev;
  detail::CancelNode a, b;
  TestRecord fa, fb;
  fa.node.store(&a);
  fa.home = &a;
  fb.node.store(&b);
  fb.home = &b;
  End ea = End::none, eb = End::none;
  Thread wa = spawn([&] { ea = await_event(fa, ev, a); }, "waiter a");
  Thread wb = spawn([&] { eb = await_event(fb, ev, b); }, "waiter b");
  a.cancel(true);
  ev.set();
  wa.join();
  wb.join();
  check_wakes(fa);
  check_wakes(fb);
  check(ea != End::none, "the cancelled waiter neither returned nor threw");
  check(eb == End::woken, "the other waiter was not woken by set()");
}

TEST(ModelWaitHook, TwoWaitersOneCancelledExhaustiveBound2) { expect_passes(explore_bound(2, two_waiters)); }

TEST(ModelWaitHook, TwoWaitersOneCancelledRandomSchedules) { expect_passes(random_runs(2000, two_waiters)); }

// A child scope entered while its parent is being cancelled: attach and
// cancel take the parent's lock, so the child is born cancelled or reached
// by the cancel walk, and the waiter inside it ends Cancelled either way.
void attach_races_parent_cancel() {
  Event ev;
  detail::CancelNode parent, child;
  TestRecord f;
  End end = End::none;
  Thread waiter = spawn(
      [&] {
        child.attach(&parent, nullptr, nullptr);
        f.node.store(&child);
        f.home = &child;
        end = await_event(f, ev, child);
        child.detach();
      },
      "waiter");
  parent.cancel(true);
  waiter.join();
  check_wakes(f);
  check(end == End::cancelled, "a child scope missed its parent's cancel");
}

TEST(ModelWaitHook, ChildAttachRacesParentCancelExhaustiveBound2) {
  expect_passes(explore_bound(2, attach_races_parent_cancel));
}

TEST(ModelWaitHook, ChildAttachRacesParentCancelRandomSchedules) {
  expect_passes(random_runs(2000, attach_races_parent_cancel));
}

}  // namespace
}  // namespace shoal::model
