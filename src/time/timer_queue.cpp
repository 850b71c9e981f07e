// Timer heap. Invariant: an entry is in the heap iff its state is `queued`,
// and only while holding mu_ does it move between queued and firing/idle.
// fire_due marks entries `firing` under the lock and calls them after; it
// sets `done` after each callback returns, which is what
// timer_cancel_and_wait spins on.
#include "src/time/timer_queue.hpp"

#include <utility>

#include "src/runtime/scheduler.hpp"

namespace shoal::detail {

void TimerQueue::sift_up(std::size_t i) noexcept {
  while (i > 0) {
    std::size_t parent = (i - 1) / 2;
    if (!less(i, parent)) break;
    const Node a = heap_[i];
    place(i, heap_[parent]);
    place(parent, a);
    i = parent;
  }
}

void TimerQueue::sift_down(std::size_t i) noexcept {
  const std::size_t n = heap_.size();
  for (;;) {
    std::size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && less(l, m)) m = l;
    if (r < n && less(r, m)) m = r;
    if (m == i) return;
    const Node a = heap_[i];
    place(i, heap_[m]);
    place(m, a);
    i = m;
  }
}

void TimerQueue::erase_at(std::size_t i) noexcept {
  TimerEntry* e = heap_[i].entry;
  e->index = TimerEntry::kNotQueued;
  const Node last = heap_.back();
  heap_.pop_back();
  if (last.entry != e) {
    place(i, last);
    sift_down(i);
    sift_up(last.entry->index);
  }
}

TimerInsert TimerQueue::insert(TimerEntry* e, const TaskRecord* unless) noexcept {
  shim::lock_guard<shim::mutex> g(mu_);
  if (unless != nullptr && unless->cancelled()) return TimerInsert::cancelled;
  e->seq = seq_++;
  e->state.store(TimerEntry::queued, std::memory_order_relaxed);
  try {
    heap_.push_back(Node{e->deadline, e->seq, e});
  } catch (...) {
    e->state.store(TimerEntry::idle, std::memory_order_relaxed);
    return TimerInsert::no_memory;  // the heap could not grow
  }
  place(heap_.size() - 1, heap_.back());
  sift_up(e->index);
  publish_next();
  return TimerInsert::queued;
}

bool TimerQueue::remove(TimerEntry* e) noexcept {
  shim::lock_guard<shim::mutex> g(mu_);
  if (e->state.load(std::memory_order_relaxed) != TimerEntry::queued) return false;
  erase_at(e->index);
  e->state.store(TimerEntry::idle, std::memory_order_relaxed);
  publish_next();
  return true;
}

std::size_t TimerQueue::fire_due(std::int64_t now) noexcept {
  if (next_deadline() > now) return 0;
  TimerEntry* due[64];
  std::size_t total = 0;
  for (;;) {
    std::size_t n = 0;
    {
      shim::lock_guard<shim::mutex> g(mu_);
      while (n < 64 && !heap_.empty() && heap_[0].deadline <= now) {
        TimerEntry* e = heap_[0].entry;
        erase_at(0);
        e->state.store(TimerEntry::firing, std::memory_order_relaxed);
        due[n++] = e;
      }
      publish_next();
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

std::size_t TimerQueue::size() const noexcept {
  shim::lock_guard<shim::mutex> g(mu_);
  return heap_.size();
}

TimerInsert timer_insert(Scheduler* s, TimerEntry* e, const TaskRecord* unless) noexcept {
  return s->driver().add_timer(e, unless);
}
bool timer_remove(Scheduler* s, TimerEntry* e) noexcept { return s->driver().remove_timer(e); }

void timer_cancel_and_wait(Scheduler* s, TimerEntry* e) noexcept {
  if (s->driver().remove_timer(e)) return;
  SpinWait wait;  // the firing thread is inside e's callback: a few instructions, unless preempted
  while (e->state.load(std::memory_order_acquire) == TimerEntry::firing) wait.pause();
}

}  // namespace shoal::detail
