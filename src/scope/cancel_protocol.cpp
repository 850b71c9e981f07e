// Cancellation tree and the cancellable-wait protocol. Depends only on
// task.hpp and TaskBatch, so model tests compile this file as is.
//
// Invariants and memory-order argument:
// - A node's `cancelled` flag only goes false -> true. A node attached under
//   a cancelled parent is born cancelled (unless shielded); attach and cancel
//   both hold the parent's lock, so no child misses its parent's cancel.
// - A task suspended at a cancellable wait has `hook` = its WaitHook. The
//   task publishes the hook (seq_cst store) and then reads `cancelled`
//   (seq_cst); the canceller sets `cancelled` (seq_cst RMW) and then reads the
//   hook (seq_cst). Whichever comes second sees the other (Dekker), so a
//   cancel is never missed by a task about to sleep.
// - A canceller swaps the hook for kBusy while it calls cancel_wait(); the
//   waiting task never leaves its wait (destroying the hook) while kBusy is
//   set (disarm_wait spins it out). The hook stays valid while inspected.
// - A task claimed by cancel_wait() is taken out of its home node's list
//   by the canceller, under the lock it already holds, so it needs no node
//   lock to finish; the canceller schedules claimed tasks in batches as its
//   walk goes on. A record it has not reached yet stays alive: a task that
//   finishes on its own unlinks itself under the lock the walk holds.
// - Lock order: parent node before child node; node lock before any wait
//   primitive's lock (cancel_wait may take one). Wakers never take node locks.
// - end_inspect's release store and disarm_wait's acq_rel CAS: a canceller's
//   look at the hook (cancel_wait, after_cancel) happens before the disarm
//   that reads the hook it put back, and so before the waiter goes.
// Checked under Relacy (C++ memory model): tests/relacy/cancel_tree_relacy_test.cpp
// (two waiters in a node, attach/leave vs a parent's cancel, disarm vs
// inspect), wait_queue_relacy_test.cpp, select_relacy_test.cpp and
// join_relacy_test.cpp. seq_cst is needed on both halves of the Dekker pair
// (the hook store, the flag's exchange, the hook load, and the waiter's
// re-check), not on inspect_hook's CAS (the load before it decides) nor on
// claim_for_cancel's flag load (the canceller reads its own flag).
#include <time.h>

#include <atomic>

#include "shoal/detail/task_record.hpp"
#include "src/runtime/injector.hpp"
#include "src/runtime/wait_inspect.hpp"
#include "src/scope/word_wait.hpp"
#include "src/platform/platform.hpp"

namespace shoal::detail {
namespace {

WaitHook* const kBusy = reinterpret_cast<WaitHook*>(std::uintptr_t{1});
}  // namespace

// seq_cst: a canceller's claim is the second half of the Dekker pair with
// the waiter's hook store (see the top of this file).
bool inspect_hook(TaskRecord* f, WaitHook*& h) noexcept {
  h = f->hook.load(std::memory_order_seq_cst);
  SpinWait wait;
  for (;;) {
    if (h == nullptr) return false;
    if (h == kBusy) {  // another canceller (or a dump) is looking; let it finish, then retry
      wait.pause();
      h = f->hook.load(std::memory_order_seq_cst);
      continue;
    }
    if (f->hook.compare_exchange_weak(h, kBusy, std::memory_order_seq_cst)) return true;
  }
}

void end_inspect(TaskRecord* f, WaitHook* h) noexcept { f->hook.store(h, std::memory_order_release); }

namespace {

// Takes `f` out of its cancellable wait into `batch`, unless it is not
// waiting or waits inside a shielded node. True if it was claimed.
bool claim_for_cancel(TaskRecord* f, TaskBatch& batch) noexcept {
  WaitHook* h;
  if (!inspect_hook(f, h)) return false;
  // A task waiting inside a shielded (uncancelled) node is left alone.
  const bool claimed = f->cancelled(std::memory_order_seq_cst) && h->cancel_wait();
  end_inspect(f, claimed ? nullptr : h);
  if (claimed) batch.push(f);
  return claimed;
}

// The same for `f` in the list of `home`, whose lock we hold. A task
// claimed here leaves the list at once (nothing else touches it until the
// batch is scheduled), so it ends without taking the node's lock, which
// every child of a big fan-out otherwise took at its end, one contended
// line. If it waits again (in a shielded scope, say), link_home relinks it.
void wake_for_cancel(CancelNode* home, TaskRecord* f, TaskBatch& batch) noexcept {
  if (!claim_for_cancel(f, batch)) return;
  home->records.remove(f);
  f->flags &= ~TaskRecord::kLinked;
}

}  // namespace

namespace {
// A spawned task joins its home node's list at its first wait: cancellers
// only need to find tasks that can be suspended at a wait. Linking before
// the hook is published keeps the Dekker argument: a canceller that walked
// the list before we joined it set the flag before taking the lock we took
// after, so our flag check sees it.
void link_home(TaskRecord* f) noexcept {
  placement_at_wait(f);
  if (f->home != nullptr && (f->flags & TaskRecord::kLinked) == 0) {
    f->home->add_record(f);
    f->flags |= TaskRecord::kLinked;
  }
}
}  // namespace

namespace {
// Runtimes that keep wait start times (RuntimeOptions::track_waits). A
// plain atomic, not a shim one: it changes only as runtimes come and go.
std::atomic<int> g_track_waits{0};

// Published before the hook: a dump that claims the hook reads it after.
void note_wait_start(TaskRecord* f) noexcept {
  if (g_track_waits.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    f->wait_since = wait_clock_ms();
  }
}
}  // namespace

void track_waits(bool on) noexcept { g_track_waits.fetch_add(on ? 1 : -1, std::memory_order_relaxed); }

std::uint32_t wait_clock_ms() noexcept {
  timespec ts;  // the coarse clock: a few ns, a tick's resolution (1-4 ms)
  clock_gettime(platform::kCoarseMonotonic, &ts);
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(ts.tv_sec) * 1000 +
                                    static_cast<std::uint64_t>(ts.tv_nsec) / 1'000'000);
}

// The canceller's side of a WordWaiter (task_record.hpp): the waiter's mark
// in the word means it is registered, and clearing it takes its wake; no
// mark means it has not registered yet (the pending mark makes its CAS
// fail) or was woken.
bool WordWaiter::cancel_wait() noexcept {
  std::uint64_t v = word_->load(std::memory_order_acquire);
  for (;;) {
    if (marked(v)) {
      if (word_->compare_exchange_weak(v, unmarked(v), std::memory_order_acq_rel)) return true;
    } else if (word_->compare_exchange_weak(v, v | kCancelPending, std::memory_order_acq_rel)) {
      return false;
    }
  }
}

void WordWaiter::wake_taken() noexcept {
  TaskRecord* f = waiter;
  disarm_wait(f, this);
  schedule(f);
}

WordWaiter::Registered WordWaiter::register_until(shim::atomic<std::uint64_t>& word, TaskRecord* f,
                                                  std::uint64_t done) noexcept {
  return register_wait(word, f, [done](std::uint64_t& v) noexcept { return (v & done) != 0 ? 1 : 0; });
}

void publish_hook(TaskRecord* f, WaitHook* w) noexcept {
  link_home(f);
  note_wait_start(f);
  f->hook.store(w, std::memory_order_seq_cst);
}

bool arm_wait(TaskRecord* f, WaitHook* w) noexcept {
  link_home(f);
  note_wait_start(f);
  f->hook.store(w, std::memory_order_seq_cst);
  if (f->cancelled(std::memory_order_seq_cst)) {
    disarm_wait(f, w);
    return false;
  }
  return true;
}

namespace {
void disarm_slow(TaskRecord* f, WaitHook* w) noexcept {
  SpinWait wait;
  WaitHook* h = w;
  while (!f->hook.compare_exchange_weak(h, nullptr, std::memory_order_acq_rel)) {
    if (h == nullptr) return;  // a canceller already cleared it
    if (h != w) wait.pause();  // kBusy: a canceller is inspecting our hook
    h = w;
  }
}
}  // namespace

void disarm_wait(TaskRecord* f, WaitHook* w) noexcept {
  WaitHook* h = w;
  if (f->hook.compare_exchange_strong(h, nullptr, std::memory_order_acq_rel) || h == nullptr) return;
  disarm_slow(f, w);  // kBusy: a canceller is inspecting our hook
}

void CancelNode::attach(CancelNode* parent_node, TaskRecord* body_record, Scheduler* s) noexcept {
  parent = parent_node;
  body = body_record;
  sched = s;
  if (parent == nullptr) return;
  parent->lock.lock();
  parent->children.push_front(this);
  // A body that its own handle cancelled (JoinHandle::cancel) carries that
  // into the nodes it enters at its top level.
  const bool body_alone = body != nullptr && body->home == parent && body->cancel_alone.load(std::memory_order_relaxed);
  if (!shielded && (parent->cancelled.load(std::memory_order_relaxed) || body_alone)) {
    cancelled.store(true, std::memory_order_seq_cst);
  }
  parent->lock.unlock();
}

void CancelNode::detach() noexcept {
  if (parent == nullptr) return;
  parent->lock.lock();
  parent->children.remove(this);
  parent->lock.unlock();
}

void CancelNode::enter(TaskRecord* f) noexcept {
  CancelNode* outer = f->node.load(std::memory_order_relaxed);
  attach(outer, f, outer->sched);
  f->node.store(this, std::memory_order_relaxed);
}

void CancelNode::leave(TaskRecord* f) noexcept {
  detach();
  f->node.store(parent, std::memory_order_relaxed);
}

void CancelNode::add_record(TaskRecord* f) noexcept {
  lock.lock();
  records.push_front(f);
  lock.unlock();
}

void CancelNode::remove_record(TaskRecord* f) noexcept {
  lock.lock();
  records.remove(f);
  lock.unlock();
  f->flags &= ~TaskRecord::kLinked;
}

namespace {
// Claimed tasks go to the scheduler kFanOutBatch at a time while the walk
// goes on, so other workers start unwinding the first children while this
// one is still claiming the rest (of 10 k children, the walk is a tenth of
// the whole fan-out). They finish without our lock (wake_for_cancel).
constexpr std::size_t kFanOutBatch = 64;

void cancel_tree(CancelNode* n, TaskBatch& batch) noexcept {
  if (n->cancelled.exchange(true, std::memory_order_seq_cst)) return;
  n->lock.lock();
  if (n->body != nullptr) claim_for_cancel(n->body, batch);  // listed in its own home, not here
  for (TaskRecord* f = n->records.front(); f != nullptr;) {
    TaskRecord* next = n->records.next(f);
    wake_for_cancel(n, f, batch);
    if (batch.count >= kFanOutBatch) schedule_batch(n->sched, batch);
    f = next;
  }
  for (CancelNode* c = n->children.front(); c != nullptr; c = n->children.next(c)) {
    if (!c->shielded) cancel_tree(c, batch);
  }
  n->lock.unlock();
}
}  // namespace

void CancelNode::cancel_one(shim::atomic<std::uintptr_t>& record) noexcept {
  // Mark the word first: a child finishing after the mark passes through
  // our lock before its record goes (Scope::finish_started), so the record
  // we read under the lock is alive. Zero: it finished.
  if ((record.fetch_or(1, std::memory_order_seq_cst) & ~std::uintptr_t{1}) == 0) return;
  TaskBatch batch;
  lock.lock();
  auto* f = reinterpret_cast<TaskRecord*>(record.load(std::memory_order_acquire) & ~std::uintptr_t{1});
  // Flag, then look (Dekker with the task's hook, as for a node's flag); a
  // node it enters after our walk sees the flag under our lock.
  if (f != nullptr && !f->cancel_alone.exchange(true, std::memory_order_seq_cst)) {
    if (RecordList::is_linked(f)) wake_for_cancel(this, f, batch);  // waiting here (the hook is guarded by our lock)
    for (CancelNode* c = children.front(); c != nullptr; c = children.next(c)) {
      if (c->body == f && !c->shielded) cancel_tree(c, batch);
    }
  }
  lock.unlock();
  if (!batch.empty()) schedule_batch(sched, batch);
}

void CancelNode::cancel(bool self) noexcept {
  if (self) self_cancelled.store(true, std::memory_order_release);
  TaskBatch batch;
  cancel_tree(this, batch);
  if (!batch.empty()) schedule_batch(sched, batch);
}

}  // namespace shoal::detail
