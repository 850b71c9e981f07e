// Scopes (nurseries): the dynamic extent of a group of child tasks. A scope
// joins every child before it returns and cancels the rest when one fails.
#pragma once

#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "shoal/detail/child_group.hpp"
#include "shoal/sync/event.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/task.hpp"
#include "shoal/scope/cancel.hpp"

namespace shoal {

class Scope;
template <class T>
class JoinHandle;
template <class T>
class Ready;

namespace detail {

/// Yields the task of the awaiting coroutine without suspending.
struct CurrentRecord {
  TaskRecord* record = nullptr;
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    record = record_of(h);
    return false;
  }
  TaskRecord* await_resume() const noexcept { return record; }
};

/// Owns a callable (and its decay-copied arguments) for the lifetime of the
/// task it returns: the second of at most two allocations of a spawned callable.
template <class F, class... Args>
auto invoke_owned(RootFrame, F f, Args... args) -> Task<typename std::invoke_result_t<F&, Args&...>::value_type> {
  using R = typename std::invoke_result_t<F&, Args&...>::value_type;
  auto inner = std::invoke(f, args...);
  if (!inner) throw std::invalid_argument("shoal: a spawned callable returned an empty Task");
  Forward<R> fw{inner.release()};
  struct Free {
    std::coroutine_handle<Promise<R>> h;
    ~Free() { h.destroy(); }
  } free{fw.h};
  const bool ok = co_await fw;
  if constexpr (std::is_void_v<R>) {
    (void)ok;
    co_return;
  } else {
    if (!ok) co_return ForwardedError{};
    co_return fw.h.promise().take();
  }
}

template <class F, class... Args>
concept TaskFactory = std::invocable<std::decay_t<F>&, std::decay_t<Args>&...> &&
                      TaskType<std::invoke_result_t<std::decay_t<F>&, std::decay_t<Args>&...>>;

/// True while handling a Cancelled (inside unhandled_exception), without a rethrow.
bool current_exception_is_cancelled() noexcept;
/// The message of a fault, for one-line reports ("(not a std::exception)" otherwise).
/// Allocates: paths that must not throw use print_fault.
std::string what_of(const std::exception_ptr& e);
/// Writes "<prefix><the fault's message>\n" to stderr without allocating, so a
/// report made while memory runs out cannot itself throw.
void print_fault(const char* prefix, const std::exception_ptr& e) noexcept;

/// A task waiting on a Scope::start child. The child's cell's `join` word
/// holds a pointer to it while it waits; whoever swaps that word out owns
/// the wake.
struct JoinWaiter : WaitHook {
  const char* wait_kind() const noexcept override { return "a join (a scope's exit or a JoinHandle)"; }
  TaskRecord* waiter = nullptr;
  JoinCell* cell = nullptr;
  // If the waiter published its hook but has not registered yet, leave a
  // pending mark: its registration CAS then fails and it cancels itself.
  bool cancel_wait() noexcept override {
    const std::uintptr_t self = reinterpret_cast<std::uintptr_t>(this);
    std::uintptr_t v = cell->join.load(std::memory_order_acquire);
    for (;;) {
      if (v == self) {
        if (cell->join.compare_exchange_weak(v, JoinCell::kRunning, std::memory_order_acq_rel)) return true;
      } else if (v == JoinCell::kRunning) {
        if (cell->join.compare_exchange_weak(v, JoinCell::kCancelPending, std::memory_order_acq_rel)) return false;
      } else {
        return false;
      }
    }
  }

 protected:
  ~JoinWaiter() = default;
};

template <class T>
struct ScopeResult {
  std::optional<Stored<T>> value;
};

}  // namespace detail

/// The handle to a running scope, passed to the body. Spawn children here.
/// Thread-safety: `spawn`, `start` and `cancel` may be called from the body
/// and from any task inside the scope, on any worker, while the scope runs.
class Scope final : private detail::ChildGroup {
 public:
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  /// Starts `task` as a child; it may run on any worker. Its value is
  /// discarded; its fault cancels the scope and is rethrown at the join.
  /// Checkpoint: no (never suspends). A child spawned into a cancelled
  ///   scope still starts and throws at its first checkpoint.
  /// Cancellation: not a cancellation point; the child is cancelled with the scope.
  /// Thread-safety: the body and any task inside the scope, while it runs.
  /// Throws: std::invalid_argument for an empty Task.
  template <class T>
  void spawn(Task<T> task, SpawnSite site = {}) {
    launch_task(std::move(task), 0, nullptr, {site.file, site.line, {}});
  }

  /// The same for a Task-like awaitable (e.g. `with_lock(m, body)`).
  template <detail::TaskLike A>
  void spawn(A call, SpawnSite site = {}) {
    spawn(typename A::task_type(std::move(call)), site);
  }

  /// Starts `fn(args...)` as a child. The callable and the decay-copied
  /// arguments are owned by the child until it finishes, so captures never
  /// dangle. Allocation: two frames. `fn` is invoked inside the child: its
  /// throw (or an empty Task, std::invalid_argument) is the child's fault.
  /// A task dump names the callable's type as where it came from (a
  /// defaulted SpawnSite cannot follow a parameter pack; `named` records
  /// the call's place).
  /// Checkpoint, Cancellation, Thread-safety: as spawn(Task).
  /// Throws: std::bad_alloc if the child's frame cannot be allocated.
  template <class F, class... Args>
    requires detail::TaskFactory<F, Args...>
  void spawn(F&& fn, Args&&... args) {
    launch_task(detail::invoke_owned(detail::RootFrame{}, std::decay_t<F>(std::forward<F>(fn)),
                                     std::decay_t<Args>(std::forward<Args>(args))...),
                0, nullptr, {detail::callable_origin<std::decay_t<F>>(), 0, {}});
  }

  /// The spawn forms with a name for task dumps (see TaskName):
  /// `s.spawn(shoal::named("flusher"), flush_loop, std::ref(log))`.
  /// Throws: std::bad_alloc (also for the name's copy); as the unnamed forms.
  template <class T>
  void spawn(const TaskName& name, Task<T> task) {
    launch_task(std::move(task), 0, nullptr, {name.site.file, name.site.line, name.name});
  }
  /// As spawn(fn, args...), named.
  template <class F, class... Args>
    requires detail::TaskFactory<F, Args...>
  void spawn(const TaskName& name, F&& fn, Args&&... args) {
    launch_task(detail::invoke_owned(detail::RootFrame{}, std::decay_t<F>(std::forward<F>(fn)),
                                     std::decay_t<Args>(std::forward<Args>(args))...),
                0, nullptr, {name.site.file, name.site.line, name.name});
  }

  /// Starts `task` as a child and returns a handle whose `co_await` yields its
  /// value (or rethrows its fault). When the child finishes, its frame (its
  /// arguments and locals) goes at once and its result waits in the handle;
  /// a result never awaited is destroyed with the handle (or when the child
  /// finishes, if the handle went first). The forms mirror spawn (a Task, a Task-like call,
  /// `fn(args...)` owned by the child).
  /// Checkpoint: no (never suspends; awaiting the handle is one).
  /// Cancellation: not a cancellation point; the child is cancelled with the scope.
  /// Thread-safety: the body and any task inside the scope, while it runs.
  /// Throws: std::invalid_argument for an empty Task; std::bad_alloc (the
  ///   handle's cell, the child's record or the `fn` form's frame).
  template <class T>
  [[nodiscard]] JoinHandle<T> start(Task<T> task, SpawnSite site = {}) {
    return start_task(std::move(task), {site.file, site.line, {}});
  }
  /// The same for a Task-like awaitable (e.g. `with_lock(m, body)`).
  template <detail::TaskLike A>
  [[nodiscard]] auto start(A call, SpawnSite site = {}) {
    return start(typename A::task_type(std::move(call)), site);
  }

  /// The same for `fn(args...)`, the callable and the decay-copied arguments
  /// owned by the child as with spawn(fn, args...); its throw is the child's fault.
  template <class F, class... Args>
    requires detail::TaskFactory<F, Args...>
  [[nodiscard]] auto start(F&& fn, Args&&... args) {
    return start_task(detail::invoke_owned(detail::RootFrame{}, std::decay_t<F>(std::forward<F>(fn)),
                                           std::decay_t<Args>(std::forward<Args>(args))...),
                      {detail::callable_origin<std::decay_t<F>>(), 0, {}});
  }

  /// The start forms with a name for task dumps (see TaskName).
  template <class T>
  [[nodiscard]] JoinHandle<T> start(const TaskName& name, Task<T> task) {
    return start_task(std::move(task), {name.site.file, name.site.line, name.name});
  }
  /// As start(fn, args...), named.
  template <class F, class... Args>
    requires detail::TaskFactory<F, Args...>
  [[nodiscard]] auto start(const TaskName& name, F&& fn, Args&&... args) {
    return start_task(detail::invoke_owned(detail::RootFrame{}, std::decay_t<F>(std::forward<F>(fn)),
                                           std::decay_t<Args>(std::forward<Args>(args))...),
                      {name.site.file, name.site.line, name.name});
  }

  /// Starts `fn(ready, args...)` as a child and waits until it calls
  /// `ready(value)` (e.g. a server reporting its bound port); returns that
  /// value while the child runs on. `fn` must take `shoal::Ready<T>&` first.
  /// Checkpoint: yes (a cancelled caller throws before starting anything);
  ///   no budget yield when the value is already there.
  /// Cancellation: if cancelled while waiting, throws Cancelled and the child
  ///   runs on in this scope (a deadline around start_ready cancels only the
  ///   wait, not the child); a value it signals later is dropped.
  /// Thread-safety: as spawn.
  /// Throws: Cancelled; the child's fault if it failed before signalling
  ///   (that fault is also the child's own fault in the scope: it cancels the
  ///   scope and is rethrown at its exit even if caught here);
  ///   std::logic_error if the child returned without signalling; std::bad_alloc.
  template <class T, class F, class... Args>
  Task<T> start_ready(F fn, Args... args);

  /// Cancels the body and every child without a fault; the scope then
  /// returns normally (a value-returning body that was cut off throws
  /// ScopeCancelled; a body that already returned its value returns it).
  /// Idempotent. Never waits. Any thread, while the scope runs.
  using ChildGroup::cancel;

  /// True once this scope (or an enclosing one) is cancelled.
  using ChildGroup::cancellation_requested;

  /// Faults after the first reported so far (each also went to
  /// `on_suppressed_fault`). A later fault of a `start()` child is the
  /// awaiter's once its handle delivers it: it counts only if rethrown into
  /// the scope; undelivered, when its handle is dropped or the scope exits,
  /// whichever comes first.
  using ChildGroup::suppressed_faults;

 private:
  template <class F>
  friend auto scope(F body) -> Task<typename std::invoke_result_t<F&, Scope&>::value_type>;
  template <class T>
  friend class JoinHandle;

  explicit Scope(detail::TaskRecord* body) noexcept : ChildGroup(body) {}

  /// Starts `task` (not empty) with `flags` and, for a start()ed child, its
  /// cell. Throws std::invalid_argument for an empty Task; std::bad_alloc
  /// (the record of a frame that is not a RootFrame, or the name; the frame
  /// is destroyed, the cell left to the caller).
  template <class T>
  void launch_task(Task<T> task, std::uint32_t flags, detail::JoinCell* cell, const detail::Origin& origin) {
    auto h = task.release();
    if (!h) {
      throw std::invalid_argument(cell != nullptr ? "shoal::Scope::start: the Task is empty (moved-from?)"
                                                  : "shoal::Scope::spawn: the Task is empty (moved-from?)");
    }
    detail::TaskRecord* f;
    try {
      f = &detail::root_record(h.promise());
      detail::set_origin(*f, origin);
    } catch (...) {
      h.destroy();
      throw;
    }
    if (cell != nullptr) {
      f->cell = cell;
      cell->record.store(reinterpret_cast<std::uintptr_t>(f), std::memory_order_relaxed);
    }
    count_child();
    ChildGroup::launch(*f, h, flags, false);
  }

  template <class T>
  JoinHandle<T> start_task(Task<T> task, const detail::Origin& origin);

  /// Latches `e` as the first fault and cancels the scope, unless another
  /// fault came first. True if `e` is now the first fault.
  bool latch_first_fault(const std::exception_ptr& e) noexcept {
    if (!faults_.latch(e)) return false;
    node_.cancel(true);
    return true;
  }
  /// Cancel-on-fault: the first fault cancels the rest; a later one is
  /// reported, unless it is the first again (a body rethrowing what a
  /// JoinHandle or start_ready delivered).
  void fault(const std::exception_ptr& e) noexcept {
    if (!latch_first_fault(e) && !faults_.is_first(e)) faults_.report_later(node_.sched, e);
  }

  std::coroutine_handle<> task_done(detail::TaskRecord& f, detail::PromiseBase& p,
                                     std::coroutine_handle<> frame) noexcept override;
  /// A start()ed child finished: its result to its cell, its frame gone.
  void finish_started(detail::TaskRecord& f, detail::PromiseBase& p, std::coroutine_handle<> frame,
                      bool faulted) noexcept;

  struct JoinAwaiter {
    Scope* s;
    bool await_ready() const noexcept { return s->live_.load(std::memory_order_acquire) == 0; }
    bool await_suspend(std::coroutine_handle<> h) noexcept {
      s->body_->resume = h;
      if (s->live_.fetch_add(1, std::memory_order_acq_rel) == 0) {
        s->live_.store(0, std::memory_order_relaxed);
        return false;
      }
      return true;
    }
    void await_resume() const noexcept {}
  };
  JoinAwaiter join_all() noexcept {
    if (prepaid_ != 0) {
      live_.fetch_sub(2 * prepaid_, std::memory_order_acq_rel);
      prepaid_ = 0;
    }
    return JoinAwaiter{this};
  }

  /// Counts a child in live_. The body's own spawns pay kPrepaid at a time:
  /// the children usually finish on another worker, and one shared counter
  /// written by both sides per child moved its cache line twice per spawn.
  /// The prepaid rest keeps live_ above zero until join_all returns it.
  void count_child() noexcept {
    if (detail::current_record() != body_) {
      live_.fetch_add(2, std::memory_order_relaxed);
      return;
    }
    if (prepaid_ == 0) {
      live_.fetch_add(2 * kPrepaid, std::memory_order_relaxed);
      prepaid_ = kPrepaid;
    }
    --prepaid_;
  }
  static constexpr std::uint64_t kPrepaid = 64;

  /// After the join: unlinks the node and reports the later faults no
  /// handle delivered (their handles may live on, holding nothing).
  void leave() noexcept;
  /// A finished child's cell leaves the list of undelivered later faults
  /// (its handle delivers it, or goes); true if it was listed.
  bool unlist(detail::JoinCell& c) noexcept;
  /// A handle went without delivering its finished child's listed fault.
  void report_undelivered(detail::JoinCell& c) noexcept;

  detail::JoinCell* faulted_ = nullptr;  // undelivered later faults of start()ed children; node_.lock
  std::uint64_t prepaid_ = 0;  // children counted ahead by the body's task; only that task touches it
  // live_ has a cache line to itself: every child's finish writes it on the
  // worker that ran the child while the body spawns on another, and beside
  // prepaid_ (written per spawn) the line moved twice per child (86 % of
  // task_done's samples in spawn_join). Padded, not aligned: a Scope lives
  // in a coroutine frame, which C++20 does not over-align. The padding is
  // never read, so it is left uninitialized.
  char live_before_[56];
  detail::shim::atomic<std::uint64_t> live_{0};  // 2 * live children, | 1 while the body waits
  char live_after_[56];
};

/// Runs `body(scope)` on the awaiting task and returns its value once the
/// body and every child have finished (a join-all barrier: no child
/// outlives its scope). The first fault of the body or a child cancels the
/// rest at once; later faults go to `on_suppressed_fault`, each once.
/// Checkpoint: yes: entering a cancelled context throws Cancelled without
///   running the body. No budget yield of its own.
/// Cancellation: absorbs only the cancellation this scope requested. When it
///   throws Cancelled, the body and every child have finished (or the body
///   never ran): an outside cancellation reached the body, or cut a child off
///   even though the body returned (so a caller never takes cut-off work for
///   completion). A body whose value and children all completed beats a late
///   cancel.
/// Thread-safety: any task; the body runs on the awaiting task.
/// Throws: the first fault (the original object); Cancelled (as above);
///   ScopeCancelled (a value-returning body cut off by Scope::cancel());
///   std::logic_error when awaited outside a shoal task.
template <class F>
auto scope(F body) -> Task<typename std::invoke_result_t<F&, Scope&>::value_type> {
  using R = typename std::invoke_result_t<F&, Scope&>::value_type;
  detail::TaskRecord* f = co_await detail::CurrentRecord{};
  if (f == nullptr) throw std::logic_error("shoal::scope: awaited outside a shoal task");
  if (f->cancelled()) detail::raise_cancelled();
  Scope s(f);
  detail::ScopeResult<R> result;
  std::exception_ptr body_error;
  try {
    if constexpr (std::is_void_v<R>) {
      co_await body(s);
      result.value.emplace(true);
    } else {
      result.value.emplace(co_await body(s));
    }
  } catch (...) {
    body_error = std::current_exception();
  }
  if (body_error && !detail::is_cancelled_exception(body_error)) {
    s.fault(body_error);
    body_error = nullptr;
  }
  co_await s.join_all();
  s.leave();
  if (s.faults_.first()) std::rethrow_exception(s.faults_.first());
  if (body_error) {
    // The body was cancelled. Absorb it only if this scope asked for it.
    if (!s.node_.self_cancelled.load(std::memory_order_acquire)) std::rethrow_exception(body_error);
    if constexpr (std::is_void_v<R>) {
      co_return;
    } else {
      throw ScopeCancelled{};
    }
  }
  // A cancellation from outside that cut a child off surfaces here even if
  // the body finished: the caller must not take that for completion.
  // (Children that all completed beat a late cancel, like the body's value.)
  if (s.cut_off_from_outside()) detail::raise_cancelled();
  if constexpr (!std::is_void_v<R>) {
    co_return std::move(*result.value);
  }
}

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
    return cell_ != nullptr && cell_->join.load(std::memory_order_acquire) == detail::JoinCell::kDone;
  }

  /// What `co_await handle` awaits; not for direct use.
  class Awaiter final : private detail::JoinWaiter {
   public:
    /// Waits for `jh`'s child; made by operator co_await.
    explicit Awaiter(JoinHandle* jh) noexcept : jh_(jh) {}
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
      if (cell->join.load(std::memory_order_acquire) == JoinCell::kDone || waiter == nullptr) {
        if (waiter == nullptr || !detail::consume_budget(waiter)) return false;
        detail::yield_from(waiter, caller, this);  // out of budget: yield once, then take
        return true;
      }
      waiter->resume = caller;
      if (!detail::arm_wait(waiter, static_cast<detail::JoinWaiter*>(this))) {
        std::uintptr_t pending = JoinCell::kCancelPending;  // a canceller may have marked us
        cell->join.compare_exchange_strong(pending, JoinCell::kRunning, std::memory_order_acq_rel);
        cancelled_ = true;
        return false;
      }
      std::uintptr_t expected = JoinCell::kRunning;
      if (cell->join.compare_exchange_strong(expected,
                                             reinterpret_cast<std::uintptr_t>(static_cast<detail::JoinWaiter*>(this)),
                                             std::memory_order_acq_rel)) {
        return true;  // nothing may touch *this from here on
      }
      detail::disarm_wait(waiter, static_cast<detail::JoinWaiter*>(this));
      if (expected == JoinCell::kCancelPending) {
        // A canceller ran between our hook and our registration.
        cell->join.compare_exchange_strong(expected, JoinCell::kRunning, std::memory_order_acq_rel);
        cancelled_ = true;
      }
      return false;  // finished meanwhile, or cancelled
    }
    [[gnu::always_inline]] T await_resume() {  // see CheckpointAwaiter::await_resume
      if (jh_->cell_ == nullptr) throw std::logic_error("shoal::JoinHandle: awaited twice or after being moved from");
      if (cancelled_) detail::raise_cancelled();
      if (cell == nullptr) cell = jh_->cell_;
      if (cell->join.load(std::memory_order_acquire) != detail::JoinCell::kDone) detail::raise_cancelled();
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
    std::uintptr_t w = c->join.load(std::memory_order_acquire);
    while (w == detail::JoinCell::kRunning || w == detail::JoinCell::kCancelPending) {
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

namespace detail {

template <class T>
struct ReadyState {
  shim::mutex mu;
  bool settled = false;
  std::optional<Stored<T>> value;
  std::exception_ptr error;
  Event event;

  template <class... V>
  bool settle_value(V&&... v) {
    {
      shim::lock_guard<shim::mutex> g(mu);
      if (settled) return false;
      if constexpr (std::is_void_v<T>) {
        value.emplace(true);
      } else {
        value.emplace(std::forward<V>(v)...);
      }
      settled = true;
    }
    event.set();
    return true;
  }
  void settle_error(std::exception_ptr e) {
    {
      shim::lock_guard<shim::mutex> g(mu);
      if (settled) return;
      error = std::move(e);
      settled = true;
    }
    event.set();
  }
};

template <class T, class F, class... Args>
Task<void> ready_child(std::shared_ptr<ReadyState<T>> st, F fn, Args... args);

}  // namespace detail

/// The start_ready handshake, handed to the child. Signal once; later calls
/// are ignored; never waits. Thread-safety: the child task.
template <class T>
class Ready {
 public:
  /// Signals the value built from `v...` (nothing for Ready<void>): start_ready
  /// returns it. Throws what T's constructor throws (then nothing is signalled).
  template <class... V>
  void operator()(V&&... v) {
    st_->settle_value(std::forward<V>(v)...);
  }

 private:
  template <class U, class F, class... Args>
  friend Task<void> detail::ready_child(std::shared_ptr<detail::ReadyState<U>>, F, Args...);
  explicit Ready(std::shared_ptr<detail::ReadyState<T>> st) noexcept : st_(std::move(st)) {}
  std::shared_ptr<detail::ReadyState<T>> st_;
};

namespace detail {
template <class T, class F, class... Args>
Task<void> ready_child(std::shared_ptr<ReadyState<T>> st, F fn, Args... args) {
  Ready<T> ready(st);
  std::exception_ptr error;
  try {
    co_await std::invoke(fn, ready, args...);
  } catch (...) {
    error = std::current_exception();
  }
  if (error) {
    st->settle_error(error);
    std::rethrow_exception(error);
  }
  st->settle_error(std::make_exception_ptr(
      std::logic_error("shoal::Scope::start_ready: the child finished without signalling ready")));
}
}  // namespace detail

template <class T, class F, class... Args>
Task<T> Scope::start_ready(F fn, Args... args) {
  detail::TaskRecord* f = co_await detail::CurrentRecord{};
  if (f != nullptr && f->cancelled()) detail::raise_cancelled();  // a cancel point before any side effect
  auto st = std::make_shared<detail::ReadyState<T>>();
  launch_task(detail::ready_child<T>(st, std::move(fn), std::move(args)...), 0, nullptr,
              {detail::callable_origin<F>(), 0, {}});
  try {
    co_await st->event.wait();
  } catch (const Cancelled&) {
    // A child that faults before `ready` cancels this scope, and the cancel
    // can reach this wait first: the caller is owed the fault, not Cancelled.
    if (!st->event.is_set() || !st->error) throw;
  }
  if (st->error) std::rethrow_exception(st->error);
  if constexpr (!std::is_void_v<T>) co_return std::move(*st->value);
}

}  // namespace shoal
