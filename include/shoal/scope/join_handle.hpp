// JoinHandle: the handle Scope::start returns, and a task's wait for one
// child on the child's cell's join word (a detail::WordWaiter). Included by
// scope.hpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "shoal/scope/scope.hpp"

namespace shoal {

namespace detail {
struct JoinHandleAccess;
}  // namespace detail

/// The result of `Scope::start`: owns the child's result until it delivers
/// it (at most once) or goes. The child's fault, once delivered, belongs to
/// the awaiter (as a function call's exception belongs to its caller):
/// rethrown, it reaches the scope as an ordinary fault; handled, it is
/// reported nowhere. Undelivered, it is reported when the handle goes or
/// the scope exits, whichever comes first. Awaiting and cancelling are valid
/// only while the scope runs; a handle may outlive it (it then holds nothing
/// and its destructor touches nothing of the scope).
template <class T>
class JoinHandle {
 public:
  /// Takes over `o`'s hold on the child's result; `o` is left invalid.
  JoinHandle(JoinHandle&& o) noexcept : scope_(o.scope_), cell_(std::exchange(o.cell_, nullptr)) {}
  /// Lets go of this handle's result as the destructor does, then takes over
  /// `o`'s; `o` is left invalid.
  JoinHandle& operator=(JoinHandle&& o) noexcept {
    if (this != &o) {
      drop();
      scope_ = o.scope_;
      cell_ = std::exchange(o.cell_, nullptr);
    }
    return *this;
  }
  JoinHandle(const JoinHandle&) = delete;
  JoinHandle& operator=(const JoinHandle&) = delete;
  /// A result never delivered goes with the handle (a running child's when
  /// it finishes); never waits.
  ~JoinHandle() { drop(); }

  /// Cancels this one child: it stops at its next checkpoint, and awaiting
  /// the handle then throws ChildCancelled (Cancelled if the awaiter is
  /// cancelled too). Its siblings, the scope and the body go on; the scope
  /// does not count it as cut off. A child that completed first keeps its
  /// result. Idempotent; never waits; does nothing once the child finished
  /// or the result was delivered. Any task or thread while the scope runs,
  /// but not while another thread moves, destroys or finishes awaiting this
  /// same handle (those end its hold on the child, as a std::unique_ptr's).
  /// Safe against the child finishing at the same time on any worker.
  void cancel() noexcept {
    if (cell_ != nullptr) scope_->node_.cancel_one(cell_->record);
  }

  /// True until the result was delivered (or the handle was moved from).
  bool valid() const noexcept { return cell_ != nullptr; }

  /// True once the child finished (value or fault).
  bool done() const noexcept {
    return cell_ != nullptr && (cell_->join.load(std::memory_order_acquire) & detail::JoinCell::kDone) != 0;
  }

  /// What `co_await handle` awaits; not for direct use.
  class Awaiter final : private detail::WordWaiter {
   public:
    /// For task dumps.
    const char* wait_kind() const noexcept override { return "a join (a scope's exit or a JoinHandle)"; }
    /// Waits for `jh`'s child; made by operator co_await.
    explicit Awaiter(JoinHandle* jh) noexcept : WordWaiter(0), jh_(jh) {}  // marked by its address
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> caller) noexcept {
      using detail::JoinCell;
      waiter = detail::record_of(caller);
      if (jh_->cell_ == nullptr) return false;  // await_resume reports the misuse
      if (waiter != nullptr && waiter->cancelled()) {
        cancelled_ = true;
        return false;
      }
      cell = jh_->cell_;
      if ((cell->join.load(std::memory_order_acquire) & JoinCell::kDone) != 0 || waiter == nullptr) {
        if (waiter == nullptr || !detail::consume_budget(waiter)) return false;
        detail::yield_from(waiter, caller, this);  // out of budget: yield once, then take
        return true;
      }
      waiter->resume = caller;
      switch (register_until(cell->join, waiter, JoinCell::kDone)) {
        case Registered::waiting:
          return true;  // nothing may touch *this from here on
        case Registered::cancelled:
          cancelled_ = true;
          return false;
        case Registered::not_needed:
          break;
      }
      return false;  // finished meanwhile, or another task awaits (await_resume: Cancelled)
    }
    [[gnu::always_inline]] T await_resume() {  // see CheckpointAwaiter::await_resume
      if (jh_->cell_ == nullptr) throw std::logic_error("shoal::JoinHandle: awaited twice or after being moved from");
      if (cancelled_) detail::raise_cancelled();
      if (cell == nullptr) cell = jh_->cell_;
      if ((cell->join.load(std::memory_order_acquire) & detail::JoinCell::kDone) == 0) detail::raise_cancelled();
      // A child cut off by cancellation has no value. Its Cancelled goes on
      // only into an awaiter that is cancelled too; to any other (e.g. one
      // inside shielded) a missing value is a fault, as in Tokio's
      // JoinError::Cancelled: cancellation never leaks into a context that
      // was not cancelled.
      if (detail::is_cancelled_exception(cell->error) && (waiter == nullptr || !waiter->cancelled())) {
        jh_->drop();
        throw ChildCancelled{};
      }
      return jh_->take();
    }

   private:
    JoinHandle* jh_;
    detail::JoinCell* cell = nullptr;
    bool cancelled_ = false;
  };

  /// Waits for the child; yields its value or rethrows its fault.
  /// Checkpoint: yes (a finished child still costs a yield once per budget).
  /// Cancellation: a cancelled awaiter throws Cancelled at once, even if the
  ///   child is done; one cancelled while waiting throws Cancelled unless the
  ///   child finished before it resumed (then the value or fault wins, as a
  ///   value handed over by a channel does). After a Cancelled the result
  ///   stays in the handle (awaiting again, e.g. inside `shielded`, waits
  ///   for it).
  /// Thread-safety: any task inside the scope, one awaiter at a time (a
  ///   second concurrent awaiter gets Cancelled, not an error).
  /// Throws: Cancelled; ChildCancelled (the child was cut off by a
  ///   cancellation the awaiter does not share); the child's fault;
  ///   std::logic_error once the result was delivered (awaited twice) or
  ///   after a move.
  Awaiter operator co_await() & noexcept { return Awaiter{this}; }
  /// The same on a temporary handle, e.g. `co_await s.start(task)`.
  Awaiter operator co_await() && noexcept { return Awaiter{this}; }

 private:
  friend class Scope;
  friend struct detail::JoinHandleAccess;
  using Cell = detail::JoinCellOf<T>;
  JoinHandle(Scope* s, Cell* c) noexcept : scope_(s), cell_(c) {}

  /// The child finished: delivers its value or rethrows its fault, which is
  /// then the awaiter's.
  T take() {
    struct Free {
      Scope* s;
      Cell* c;
      ~Free() {
        if (c->next != nullptr) s->unlist(*c);
        detail::free_join_cell(c);
      }
    } free{scope_, std::exchange(cell_, nullptr)};
    if (free.c->error) std::rethrow_exception(free.c->error);
    if constexpr (std::is_reference_v<T>) {
      return static_cast<T>(**free.c->ptr());
    } else if constexpr (!std::is_void_v<T>) {
      return std::move(*free.c->ptr());
    }
  }

  /// Goes without delivering: a running child's result is left to the
  /// child (it frees the cell when it finishes); a finished one's is freed.
  void drop() noexcept {
    Cell* c = std::exchange(cell_, nullptr);
    if (c == nullptr) return;
    std::uint64_t w = c->join.load(std::memory_order_acquire);
    while ((w & ~detail::WordWaiter::kCancelPending) == 0) {  // running, nobody waiting
      if (c->join.compare_exchange_weak(w, detail::JoinCell::kAbandoned, std::memory_order_acq_rel)) return;
    }
    // Only a listed cell touches the scope: a handle may outlive it, and
    // the scope unlists every cell as it exits.
    if (c->next != nullptr) scope_->report_undelivered(*c);
    detail::free_join_cell(c);
  }

  Scope* scope_;
  Cell* cell_;
};

namespace detail {
/// For a select case that won on a finished child (Completions' on_next):
/// its result as awaiting the handle gives it, without the await.
struct JoinHandleAccess {
  template <class T>
  static T take_finished(JoinHandle<T>& h) {
    const TaskRecord* f = current_record();
    if (is_cancelled_exception(h.cell_->error) && (f == nullptr || !f->cancelled())) {
      h.drop();
      throw ChildCancelled{};
    }
    return h.take();
  }
};
}  // namespace detail

template <class T>
JoinHandle<T> Scope::start_task(Task<T> task, const detail::Origin& origin) {
  auto* cell = detail::new_join_cell<T>();  // first: if it throws, the Task still owns its frame
  std::uint32_t flags = detail::TaskRecord::kStarted;
  if constexpr (!std::is_void_v<T>) flags |= detail::TaskRecord::kCellValue;
  try {
    launch_task(std::move(task), flags, cell, origin);
  } catch (...) {
    detail::free_join_cell(cell);
    throw;
  }
  return JoinHandle<T>(this, cell);
}

}  // namespace shoal
