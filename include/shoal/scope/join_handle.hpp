// JoinHandle: the handle Scope::start returns, and a task's wait for one
// child on the child's cell's join word (a detail::WordWaiter). Included by
// scope.hpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

#include "shoal/detail/join_drop.hpp"
#include "shoal/scope/scope.hpp"

namespace shoal {

namespace detail {
struct JoinHandleAccess;
class SelectClaim;  // a select's case needs these by reference only
class SpinLock;
class WakeList;
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
    if (c == nullptr || !detail::abandon_join(*c)) return;  // the child frees it
    // Only a listed cell touches the scope: a handle may outlive it, and
    // the scope unlists every cell as it exits.
    if (c->next != nullptr) scope_->report_undelivered(*c);
    detail::free_join_cell(c);
  }

  Scope* scope_;
  Cell* cell_;
};

namespace detail {
/// For a select case that won on a finished child (Completions' on_next,
/// on_join): its result as awaiting the handle gives it, without the await.
struct JoinHandleAccess {
  template <class T>
  static JoinCell* cell(const JoinHandle<T>& h) noexcept {
    return h.cell_;
  }
  /// `h`'s child finished its body (Completions queues it then), or its
  /// join word says kDone (on_join). The result is published a few steps
  /// after the body: the frame goes first, running destructors that
  /// cannot suspend. Waits those out.
  template <class T>
  static T take_finished(JoinHandle<T>& h) {
    for (SpinWait w; (h.cell_->join.load(std::memory_order_acquire) & JoinCell::kDone) == 0;) w.pause();
    const TaskRecord* f = current_record();
    if (is_cancelled_exception(h.cell_->error) && (f == nullptr || !f->cancelled())) {
      h.drop();
      throw ChildCancelled{};
    }
    return h.take();
  }
};

/// on_join's case, apart from the result's type. The case marks the
/// child's join word with its address, as a waiting Awaiter does. The
/// finishing child that takes the mark claims the select (wake_taken) and
/// then marks the case settled; a select that finished another way waits
/// for that before the case may go, as for a DeadlineCase's firing
/// (src/scope/scope.cpp).
class JoinCaseCore : private WordWaiter {
 public:
  SpinLock* lock() noexcept { return nullptr; }
  void after_unlock() noexcept {}
  /// Takes the mark back, or waits until the child that took it is done
  /// with this case.
  void disarm_locked() noexcept;
  bool finish() noexcept { return true; }  // a finished child stays finished
  void reset() noexcept {}

 protected:
  JoinCaseCore() noexcept : WordWaiter(0) {}
  ~JoinCaseCore() = default;
  /// Null (delivered or moved from: take() reports it) or finished.
  static bool ready(const JoinCell* c) noexcept {
    return c == nullptr || (c->join.load(std::memory_order_acquire) & JoinCell::kDone) != 0;
  }
  /// Marks `c`'s word; true if the case completes after all (the child
  /// finished, or another task awaits the handle: busy_).
  bool link(JoinCell* c, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept;

  bool busy_ = false;

 private:
  void wake_taken() noexcept override;

  JoinCell* cell_ = nullptr;  // whose word holds the mark, while linked
  // Read by the child that takes the mark, written by the next link():
  // settled_ orders the two.
  shim::plain<SelectClaim*> claim_ = nullptr;
  shim::plain<std::uint32_t> index_ = 0;
  shim::atomic<bool> settled_{false};  // the child that took the mark is done with the case
};

/// What on_join yields for a Task<T>: a reference as a std::reference_wrapper
/// (a variant holds no reference), nothing as std::monostate.
template <class T>
using JoinOutcome =
    std::conditional_t<std::is_void_v<T>, std::monostate,
                       std::conditional_t<std::is_reference_v<T>, std::reference_wrapper<std::remove_reference_t<T>>, T>>;

/// The select case on_join returns.
template <class T>
class JoinCase final : public JoinCaseCore {
 public:
  using outcome_type = JoinOutcome<T>;
  explicit JoinCase(JoinHandle<T>& h) noexcept : h_(&h) {}
  JoinCase(JoinCase&& o) noexcept : h_(o.h_) {}

  int poll_fast() noexcept { return ready(JoinHandleAccess::cell(*h_)) ? 1 : -1; }
  bool poll_locked(WakeList&) noexcept { return ready(JoinHandleAccess::cell(*h_)); }
  bool link_locked(WakeList&, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept {
    return link(JoinHandleAccess::cell(*h_), claim, index, f);
  }
  outcome_type take() {
    if (busy_) throw std::logic_error("shoal::on_join: another task awaits this JoinHandle (one awaiter at a time)");
    if (!h_->valid()) throw std::logic_error("shoal::on_join: the JoinHandle was awaited already or moved from");
    if constexpr (std::is_void_v<T>) {
      JoinHandleAccess::take_finished(*h_);
      return {};
    } else {
      return outcome_type(JoinHandleAccess::take_finished(*h_));
    }
  }

 private:
  JoinHandle<T>* h_;
};

}  // namespace detail

/// A select case (channel/select.hpp): `h`'s child finished. Yields what
/// awaiting `h` yields: its value (a reference as a std::reference_wrapper;
/// std::monostate for Task<void>), and the result is delivered. Unless the
/// case wins, the handle keeps the result.
/// Throws: when the case wins, what awaiting `h` throws (the child's fault;
///   ChildCancelled); std::logic_error if `h` was awaited already, moved
///   from, or is being awaited by another task.
template <class T>
detail::JoinCase<T> on_join(JoinHandle<T>& h) noexcept {
  static_assert(!std::is_rvalue_reference_v<T>, "shoal::on_join: await a Task<T&&>'s handle instead");
  return detail::JoinCase<T>(h);
}

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
