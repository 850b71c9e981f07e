// The global injection queue: tasks from outside the workers and overflow
// from full local queues. A mutex-guarded intrusive FIFO; workers only touch
// it on overflow, when their local queue is empty, and every 61st tick.
// `len_` lets them skip the lock when it is empty.
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

/// Hands a batch of ready tasks to `s` (Scheduler::schedule_batch). A free
/// function so code that only needs this, like the cancel protocol, does not
/// depend on the scheduler (model tests define their own).
void schedule_batch(Scheduler* s, TaskBatch& batch) noexcept;

class Injector {
 public:
  void push(TaskRecord* f) noexcept {
    std::lock_guard<shim::mutex> g(mu_);
    list_.push(f);
    len_.store(list_.count, std::memory_order_release);
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
    len_.store(list_.count, std::memory_order_release);
    b = TaskBatch{};
  }
  /// Up to `max` tasks, oldest first.
  TaskBatch pop(std::size_t max) noexcept {
    TaskBatch out;
    if (len_.load(std::memory_order_acquire) == 0) return out;
    std::lock_guard<shim::mutex> g(mu_);
    while (out.count < max && !list_.empty()) out.push(list_.pop_front());
    len_.store(list_.count, std::memory_order_release);
    return out;
  }
  bool empty() const noexcept { return len_.load(std::memory_order_acquire) == 0; }
  std::size_t size() const noexcept { return len_.load(std::memory_order_acquire); }

 private:
  shim::mutex mu_;
  TaskBatch list_;
  shim::atomic<std::size_t> len_{0};
};

}  // namespace shoal::detail
