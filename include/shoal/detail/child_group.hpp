// The one child-group core: what a scope, a task set and the runtime's root
// share about the children they own. Each is a thin policy over it: when to
// cancel (a scope on the first fault, a task set never for a child's), how
// to count live children and wake the body, what to hand back.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/runtime_abi.hpp"

namespace shoal::detail {

/// True for an exception_ptr captured from a Cancelled, without a rethrow.
bool is_cancelled_exception(const std::exception_ptr& e) noexcept;


/// The first fault of a group, latched once by whichever child (or body)
/// gets there first on any worker; every later fault is counted and
/// reported exactly once.
class FaultLatch {
 public:
  /// True if `e` is now the first fault.
  bool latch(const std::exception_ptr& e) noexcept {
    if (faulted_.exchange(true, std::memory_order_acq_rel)) return false;
    first_ = e;
    ready_.store(true, std::memory_order_release);
    return true;
  }
  /// The first fault again (a body rethrowing what a handle delivered).
  bool is_first(const std::exception_ptr& e) const noexcept {
    return ready_.load(std::memory_order_acquire) && e == first_;
  }
  void report_later(Scheduler* s, const std::exception_ptr& e) noexcept {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    report_suppressed_fault(s, e);
  }
  /// After the join (which publishes it): the first fault, if any.
  const std::exception_ptr& first() const noexcept { return first_; }
  std::size_t suppressed() const noexcept { return suppressed_.load(std::memory_order_relaxed); }

 private:
  shim::atomic<bool> faulted_{false};
  shim::atomic<bool> ready_{false};
  std::exception_ptr first_;
  shim::atomic<std::size_t> suppressed_{0};
};

/// Fills a child's spawned-task record `cf` (see root_record) so that it
/// runs `h` in `node` and reports to the node's owner. The caller schedules it.
inline void adopt_child(TaskRecord& cf, std::coroutine_handle<> h, CancelNode& node, std::uint32_t flags) noexcept {
  cf.sched = node.sched;
  cf.node.store(&node, std::memory_order_relaxed);
  cf.home = &node;
  cf.resume = h;
  cf.flags = flags;
}

/// A group of children under one cancel node, entered by the body's task for
/// the group's extent.
class ChildGroup : public TaskOwner {
 public:
  ChildGroup(const ChildGroup&) = delete;
  ChildGroup& operator=(const ChildGroup&) = delete;

  /// Cancels the body and every child. Any thread.
  void cancel() noexcept { node_.cancel(true); }
  /// True once this group (or an enclosing scope) is cancelled.
  bool cancellation_requested() const noexcept { return node_.cancelled.load(std::memory_order_acquire); }
  /// Faults after the first reported so far.
  std::size_t suppressed_faults() const noexcept { return faults_.suppressed(); }

 protected:
  explicit ChildGroup(TaskRecord* body) noexcept : body_(body) {
    node_.owner = this;
    node_.enter(body);
  }
  /// A group with no body (the runtime's root): attach_root() before launch.
  ChildGroup() noexcept : body_(nullptr) { node_.owner = this; }
  ~ChildGroup() = default;
  /// The bodiless group's node heads a cancel tree of runtime `s`.
  void attach_root(Scheduler* s) noexcept { node_.attach(nullptr, nullptr, s); }

  /// Starts the child whose frame is `h` (record `cf`, from root_record)
  /// on any worker, or pinned to this one (`local`). Not linked into the
  /// node yet: a child that never waits never takes the node's lock.
  void launch(TaskRecord& cf, std::coroutine_handle<> h, std::uint32_t flags, bool local) noexcept {
    adopt_child(cf, h, node_, flags);
    if (local) pin_to_current_worker(&cf);
    schedule_spawn(&cf);
  }

  /// How a child ended, at its task_done: `fault` leaves its error to the
  /// policy; a child that a cancellation cut off marks the group, so an
  /// outside cancellation surfaces at the join even if the body finished.
  enum class End : std::uint8_t { value, cancelled, fault };
  End child_ended(TaskRecord& f, const std::exception_ptr& error) noexcept {
    task_finished(f);
    if ((f.flags & TaskRecord::kLinked) != 0) node_.remove_record(&f);
    if (!error) return End::value;
    if (!is_cancelled_exception(error)) return End::fault;
    // Cancelled alone (JoinHandle::cancel): the group was not cut off.
    if (!f.cancel_alone.load(std::memory_order_relaxed)) cut_off_.store(true, std::memory_order_relaxed);
    return End::cancelled;
  }

  /// After the join: the body's task leaves the group's node.
  void leave_node() noexcept { node_.leave(body_); }
  /// An outside cancellation cut a child off and this group did not ask for it.
  bool cut_off_from_outside() const noexcept {
    return cut_off_.load(std::memory_order_relaxed) && !node_.self_cancelled.load(std::memory_order_acquire);
  }

  CancelNode node_;
  TaskRecord* body_;
  FaultLatch faults_;
  // A child ended with Cancelled: relaxed, published by the child's end on
  // the owner's word and the join's acquire (tests/relacy/task_set_relacy_test.cpp).
  shim::atomic<bool> cut_off_{false};
};

}  // namespace shoal::detail
