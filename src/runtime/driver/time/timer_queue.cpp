// Timer shards. Invariant: an entry is on a wheel iff its state is `queued`,
// and only under that wheel's lock does it move between queued and
// firing/idle. fire_due marks entries `firing` under the lock and calls them
// after; a callback that someone may wait out (a select's deadline, an I/O
// idle limit) stores `done` as its last touch, which is what
// timer_cancel_and_wait spins on. A sleep's callback does not: its owner
// only ever removes (timer_remove), never waits.
//
// Orderings: `state` moves between idle/queued/firing under the shard lock,
// so those stores and loads are relaxed (the lock orders them). `done` is a
// release store (timer.hpp) that timer_cancel_and_wait reads with acquire:
// the callback's reads of its owner happen before the owner frees it. The
// insert's cancel check is seq_cst (Dekker with a canceller, see insert).
// `next` is the driver's sleep handshake (timer_queue.hpp). Checked under
// Relacy: tests/relacy/timer_relacy_test.cpp, against the stand-in driver
// (the handshake with a sleeping driver is not modelled there).
#include "src/runtime/driver/time/timer_queue.hpp"

#include <algorithm>
#include <mutex>

#include "src/runtime/scheduler.hpp"

namespace shoal::detail {

TimerQueue::TimerQueue(std::size_t shards, std::int64_t now_ns) {
  shards_.reserve(shards);
  for (std::size_t i = 0; i < shards; ++i) shards_.push_back(std::make_unique<Shard>(now_ns));
}

TimerInsert TimerQueue::insert(TimerEntry* e, const TaskRecord* unless) noexcept {
  Shard& s = *shards_[e->shard];
  std::lock_guard<SpinLock> g(s.lock);
  // seq_cst: the sleeper's half of the Dekker pair with a canceller (its
  // hook store, then this load; the canceller's flag RMW, then its hook
  // load). An acquire load may read the flag stale while the canceller
  // reads no hook, and the sleep would wait out its whole deadline.
  if (unless != nullptr && unless->cancelled(std::memory_order_seq_cst)) return TimerInsert::cancelled;
  e->state.store(TimerEntry::queued, std::memory_order_relaxed);
  s.wheel.insert(e);
  s.publish();
  return TimerInsert::queued;
}

bool TimerQueue::remove(TimerEntry* e) noexcept {
  Shard& s = *shards_[e->shard];
  std::lock_guard<SpinLock> g(s.lock);
  if (e->state.load(std::memory_order_relaxed) != TimerEntry::queued) return false;
  s.wheel.remove(e);
  e->state.store(TimerEntry::idle, std::memory_order_relaxed);
  s.publish();
  return true;
}

std::size_t TimerQueue::fire_shard(Shard& s, std::int64_t now) noexcept {
  TimerEntry* due[64];
  std::size_t total = 0;
  for (;;) {
    std::size_t n = 0;
    {
      std::lock_guard<SpinLock> g(s.lock);
      n = s.wheel.take_due(now, due, 64);
      for (std::size_t i = 0; i < n; ++i) due[i]->state.store(TimerEntry::firing, std::memory_order_relaxed);
      s.publish();
    }
    for (std::size_t i = 0; i < n; ++i) {
      TimerEntry* e = due[i];
      auto fire = e->fire;
      fire(e);  // may free e (a sleep's frame resumes elsewhere); see timer.hpp
    }
    total += n;
    if (n < 64) return total;
  }
}

std::size_t TimerQueue::fire_due(std::int64_t now) noexcept {
  std::size_t total = 0;
  for (auto& s : shards_) {
    // A peek only (fire_shard takes the lock, which orders what it reads);
    // a stale value delays a timer to the next look, as a later insert would.
    if (s->next.load(std::memory_order_relaxed) <= now) total += fire_shard(*s, now);
  }
  return total;
}

std::int64_t TimerQueue::next_deadline() const noexcept {
  std::int64_t next = kNever;
  for (const auto& s : shards_) next = std::min(next, s->next.load(std::memory_order_seq_cst));
  return next;
}

std::size_t TimerQueue::size() const noexcept {
  std::size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard<SpinLock> g(s->lock);
    n += s->wheel.size();
  }
  return n;
}

void timer_bind(Scheduler* s, TimerEntry* e) noexcept { e->shard = static_cast<std::uint16_t>(s->timer_shard()); }
TimerInsert timer_insert(Scheduler* s, TimerEntry* e, const TaskRecord* unless) noexcept {
  return s->driver().add_timer(e, unless);
}
bool timer_remove(Scheduler* s, TimerEntry* e) noexcept { return s->driver().remove_timer(e); }

void timer_cancel_and_wait(Scheduler* s, TimerEntry* e) noexcept {
  if (s->driver().remove_timer(e)) return;
  SpinWait wait;  // the firing thread is inside e's callback: a few instructions, unless preempted
  // acquire: pairs with the callback's release of `done` (timer.hpp).
  while (e->state.load(std::memory_order_acquire) == TimerEntry::firing) wait.pause();
}

}  // namespace shoal::detail
