// The global injection queue: tasks from outside the workers and overflow
// from full local queues. A mutex-guarded intrusive FIFO; workers only touch
// it on overflow, when their local queue is empty, and every 61st tick.
// `len_` lets them skip the lock when it is empty. Checked under Relacy by
// tests/relacy/push_stack_relacy_test.cpp. Every access to len_ is relaxed:
// the mutex orders the list, and len_ is a hint no data is read through.
// Nor does the wake protocol need len_'s orders: a worker's last look before
// it sleeps reads len_ after a seq_cst fence, and the producer's fence
// follows its store (idle.hpp); the fences pair whatever len_'s orders are
// (tests/relacy/park_relacy_test.cpp, which fails with the producer's fence
// removed).
#pragma once

#include <cstddef>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/sync_shim.hpp"

namespace shoal::detail {

/// An intrusive singly linked list of tasks (through TaskRecord::next).
struct TaskBatch {
  TaskRecord* head = nullptr;
  TaskRecord* tail = nullptr;
  std::size_t count = 0;
  void push(TaskRecord* f) noexcept {
    f->next = nullptr;
    f->ahead = nullptr;
    if (tail != nullptr) {
      tail->next = f;
    } else {
      head = f;
    }
    tail = f;
    ++count;
  }
  TaskRecord* pop_front() noexcept {
    TaskRecord* f = head;
    if (f == nullptr) return nullptr;
    head = f->next;
    if (head == nullptr) tail = nullptr;
    --count;
    f->next = nullptr;
    return f;
  }
  bool empty() const noexcept { return head == nullptr; }
};

/// A walk of a batch loads each record's first line (its link) and misses:
/// another core wrote it. The rest of what running it touches, its second
/// line and its frame's first, is fetched then, so those misses overlap
/// instead of coming one by one as each task starts.
inline void prefetch_rest(const TaskRecord* f) noexcept {
  __builtin_prefetch(f->ahead);
  __builtin_prefetch(&f->flags, 1);
  __builtin_prefetch(f->resume.address(), 1);
}

/// How far ahead an overflow batch's `ahead` hints point.
inline constexpr std::size_t kAhead = 8;

/// Hands a batch of ready tasks to `s` (Scheduler::schedule_batch). A free
/// function so code that only needs this, like the cancel protocol, does not
/// depend on the scheduler (model tests define their own).
void schedule_batch(Scheduler* s, TaskBatch& batch) noexcept;

class Injector {
 public:
  void push(TaskRecord* f) noexcept {
    std::lock_guard<shim::mutex> g(mu_);
    list_.push(f);
    len_.store(list_.count, std::memory_order_relaxed);
  }
  void push_batch(TaskBatch& b) noexcept {
    if (b.empty()) return;
    std::lock_guard<shim::mutex> g(mu_);
    if (list_.tail != nullptr) {
      list_.tail->next = b.head;
    } else {
      list_.head = b.head;
    }
    list_.tail = b.tail;
    list_.count += b.count;
    len_.store(list_.count, std::memory_order_relaxed);
    b = TaskBatch{};
  }
  /// Up to `max` (> 0) tasks, oldest first. The list is taken whole and cut
  /// outside the lock, the rest put back in front: the walk to the cut
  /// touches records other cores wrote, a cache miss each, and a spawner
  /// overflowing its queue used to sleep on the lock through that walk
  /// (a futex wait and wake per overflow). While the rest is out, the
  /// injector looks emptier than it is; the caller, which is awake and
  /// comes back for it, wakes a sleeper if some is left (from_injector).
  TaskBatch pop(std::size_t max) noexcept {
    TaskBatch out;
    if (len_.load(std::memory_order_relaxed) == 0) return out;
    {
      std::lock_guard<shim::mutex> g(mu_);
      out = list_;
      list_ = TaskBatch{};
      len_.store(0, std::memory_order_relaxed);
    }
    if (out.count <= max) return out;
    TaskRecord* last = out.head;
    for (std::size_t n = 1; n < max; ++n) {
      prefetch_rest(last);
      last = last->next;
    }
    TaskBatch rest{last->next, out.tail, out.count - max};
    last->next = nullptr;
    out.tail = last;
    out.count = max;
    std::lock_guard<shim::mutex> g(mu_);
    rest.tail->next = list_.head;
    if (list_.tail == nullptr) list_.tail = rest.tail;
    list_.head = rest.head;
    list_.count += rest.count;
    len_.store(list_.count, std::memory_order_relaxed);
    return out;
  }
  bool empty() const noexcept { return len_.load(std::memory_order_relaxed) == 0; }
  std::size_t size() const noexcept { return len_.load(std::memory_order_relaxed); }

 private:
  shim::mutex mu_;
  TaskBatch list_;
  shim::atomic<std::size_t> len_{0};
};

}  // namespace shoal::detail
