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

}  // namespace shoal

// The parts of a scope that a body uses only when it starts children with
// a handle or a readiness handshake, each in its own header.
#include "shoal/scope/join_handle.hpp"
#include "shoal/scope/ready.hpp"
