// Task sets: a scope for children that arrive over time (a task per accepted
// connection, per stream) with an admission limit. Unlike a Scope, a child's
// fault does not cancel its siblings; the set keeps the first one.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory_resource>
#include <span>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "shoal/detail/view_traits.hpp"
#include "shoal/detail/child_group.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/detail/frame_alloc.hpp"
#include "shoal/detail/spin_lock.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/task.hpp"
#include "shoal/scope/cancel.hpp"
#include "shoal/scope/scope.hpp"

namespace shoal {

/// What `co_await set.spawn(...)` did.
enum class SpawnStatus {
  started,        ///< the child was admitted and runs
  closed,         ///< refused: `close()` was called (or the body returned)
  out_of_memory,  ///< the child's frame could not be allocated; the set goes on
};

class TaskSet;

namespace detail {
template <class F>
Task<void> run_task_set(std::pmr::memory_resource* resource, std::size_t limit, F body);

template <class X>
inline constexpr bool kIsCharPointer =
    std::is_pointer_v<X> && (std::is_same_v<std::remove_cv_t<std::remove_pointer_t<X>>, char> ||
                             std::is_same_v<std::remove_cv_t<std::remove_pointer_t<X>>, char8_t> ||
                             std::is_same_v<std::remove_cv_t<std::remove_pointer_t<X>>, wchar_t>);

/// A child owns its arguments: anything that only refers to memory the
/// spawner owns would dangle once the spawner moves on. One assertion per
/// kind, so the message names what was rejected; the compiler's
/// "required from" notes name the argument's type and the call site.
template <class A>
constexpr bool check_owned_arg() {
  using D = std::decay_t<A>;
  static_assert(!kIsCharPointer<D>,
                "shoal::TaskSet::spawn: a string literal or character pointer argument would dangle in the "
                "child; pass a std::string");
  static_assert(!std::is_pointer_v<D> || kIsCharPointer<D> || std::is_function_v<std::remove_pointer_t<D>>,
                "shoal::TaskSet::spawn: a raw pointer argument may dangle in the child; pass the value, a "
                "std::unique_ptr or a std::shared_ptr");
  static_assert(!IsStringView<D>::value,
                "shoal::TaskSet::spawn: a std::string_view argument would dangle in the child; pass a std::string");
  static_assert(!IsSpan<D>::value,
                "shoal::TaskSet::spawn: a std::span argument would dangle in the child; pass a std::vector or "
                "std::array");
  static_assert(!IsRefWrapper<D>::value,
                "shoal::TaskSet::spawn: a std::reference_wrapper (std::ref/std::cref) argument would dangle in "
                "the child; pass a copy or a std::shared_ptr");
  return true;
}

template <class F, class... Args>
constexpr bool check_spawn_args() {
  static_assert(!TaskType<F>,
                "shoal::TaskSet::spawn takes a factory (a callable returning a Task), not a Task: the set "
                "creates the child's frame itself, after admission; write set.spawn([=] { return work(); })");
  if constexpr (!TaskType<F>) {
    static_assert(TaskFactory<F, Args...>,
                  "shoal::TaskSet::spawn: the factory must be callable with the (decay-copied) arguments and "
                  "return a shoal::Task");
  }
  (check_owned_arg<Args>(), ...);
  return true;
}

/// Serializes a task set's use of its memory resource: children are created
/// on the body's worker and freed on whichever worker they finish, so an
/// unsynchronized resource (a pool, an arena) is safe to hand to a set.
class SerializedResource final : public std::pmr::memory_resource {
 public:
  explicit SerializedResource(std::pmr::memory_resource* upstream) noexcept : upstream_(upstream) {}

 private:
  struct Hold {
    SpinLock& l;
    explicit Hold(SpinLock& lock) noexcept : l(lock) { l.lock(); }
    ~Hold() { l.unlock(); }
  };
  void* do_allocate(std::size_t bytes, std::size_t align) override {
    Hold h(lock_);
    return upstream_->allocate(bytes, align);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t align) override {
    Hold h(lock_);
    upstream_->deallocate(p, bytes, align);
  }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }

  std::pmr::memory_resource* upstream_;
  SpinLock lock_;
};

/// A child whose frame its spawner already created (serve's connection
/// handler): started as it is once admitted, with no wrapper frame.
struct MadeChild {
  Task<void> task;
};
struct TaskSetAccess;
struct TaskSetProbe;  // tests/relacy/task_set_relacy_test.cpp: drives the state word

/// Suspends the eagerly started child wrapper until it is launched.
struct HandOver {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  void await_resume() const noexcept {}
};

/// The child wrapper. The spawner runs it up to the hand-over, so the
/// factory is invoked (and the child's frame allocated) synchronously, in
/// the set's memory resource; the factory and its arguments then live in
/// this frame until the child is done, so captures never dangle.
template <class F, class... Args>
Task<void> set_child(RootFrame, F f, Args... args) {
  using R = typename std::invoke_result_t<F&, Args&...>::value_type;
  auto inner = std::invoke(f, args...);
  if (!inner) throw std::invalid_argument("shoal::TaskSet::spawn: the factory returned an empty Task");
  co_await HandOver{};
  Forward<R> fw{inner.release()};
  struct Free {
    std::coroutine_handle<Promise<R>> h;
    ~Free() { h.destroy(); }
  } free{fw.h};
  co_await fw;  // a fault moves into this promise: no extra throw
}

}  // namespace detail

/// The handle to a running task set, passed to the body.
/// Thread-safety: `spawn`, `spawn_local` and `try_spawn` only from the task
/// running the body (and the functions it awaits); a spawn from any other
/// task throws std::logic_error. `close`, `cancel` and the queries: any thread.
class TaskSet final : private detail::ChildGroup {
  // state_: live children << kCountShift | flags.
  // Bit 0: the WordWaiter's kCancelPending (a canceller found the body not yet registered).
  static constexpr std::uint64_t kAdmitWait = 2;      // the body waits for a free slot
  static constexpr std::uint64_t kJoinWait = 4;       // the body waits for the last child
  static constexpr std::uint64_t kClosed = 8;
  static constexpr std::uint64_t kIdleWait = 16;      // the body waits for no child to be live
  static constexpr unsigned kCountShift = 5;
  static constexpr std::uint64_t kOne = std::uint64_t{1} << kCountShift;

  enum class Outcome : std::uint8_t { admitted, closed, cancelled, waiting, misuse };

  class BodyWait;
  template <class F, class... Args>
  class SpawnAwaiter;
  class IdleAwaiter;

 public:
  TaskSet(const TaskSet&) = delete;
  TaskSet& operator=(const TaskSet&) = delete;

  /// Starts `fn(args...)` as a child that may run on any worker. While
  /// `limit` children are live, waits for one to finish. Returns (when
  /// awaited) SpawnStatus::started, SpawnStatus::closed (closed, or a spawn
  /// that was waiting when close() came) or SpawnStatus::out_of_memory
  /// (std::bad_alloc making the child; the set goes on). `fn` runs here,
  /// synchronously, once a slot is taken; if it throws anything else that is
  /// the child's fault (status `started`). The callable and the decay-copied
  /// arguments belong to the child; pointer- and view-like arguments are
  /// rejected at compile time. A child's fault is kept by the set (the
  /// first) and does not cancel its siblings.
  /// Checkpoint: yes (a cancelled set throws before and after waiting); with
  ///   a free slot it still yields once per budget, holding the slot.
  /// Cancellation: `fn` was not invoked and no slot is kept (one taken for a
  ///   budget yield is given back).
  /// Thread-safety: only the task running the body (and what it awaits).
  /// Throws: Cancelled; std::logic_error from any other task.
  template <class F, class... Args>
  [[nodiscard]] auto spawn(F&& fn, Args&&... args) {
    static_assert(detail::check_spawn_args<std::decay_t<F>, Args...>());
    return SpawnAwaiter<std::decay_t<F>, std::decay_t<Args>...>(
        this, false, std::decay_t<F>(std::forward<F>(fn)), std::decay_t<Args>(std::forward<Args>(args))...);
  }

  /// As `spawn`, but the child always runs on the spawning worker: it is
  /// never stolen (cheaper queues, the caller's cache stays warm).
  /// Checkpoint, Cancellation, Thread-safety, Throws: as spawn.
  template <class F, class... Args>
  [[nodiscard]] auto spawn_local(F&& fn, Args&&... args) {
    static_assert(detail::check_spawn_args<std::decay_t<F>, Args...>());
    return SpawnAwaiter<std::decay_t<F>, std::decay_t<Args>...>(
        this, true, std::decay_t<F>(std::forward<F>(fn)), std::decay_t<Args>(std::forward<Args>(args))...);
  }

  /// Starts a child without waiting. False when the set is full, closed or
  /// cancelled (`fn` not invoked), or when the child's frame could not be
  /// allocated (then the set's result becomes out-of-memory unless something
  /// worse happens). True also when `fn` itself threw: that is the child's fault.
  /// Checkpoint: no (never yields, never throws Cancelled).
  /// Cancellation: a cancelled set refuses (false) without invoking `fn`.
  /// Thread-safety: only the task running the body.
  /// Throws: std::logic_error from any other task.
  template <class F, class... Args>
  [[nodiscard]] bool try_spawn(F&& fn, Args&&... args) {
    static_assert(detail::check_spawn_args<std::decay_t<F>, Args...>());
    detail::TaskRecord* f = detail::current_record();
    check_spawner(f);
    if (f->cancelled() || !try_admit()) return false;
    return start_child(false, std::decay_t<F>(std::forward<F>(fn)), std::decay_t<Args>(std::forward<Args>(args))...) ==
           SpawnStatus::started;
  }

  /// Waits until no child is live (e.g. the drain of a graceful shutdown,
  /// under a deadline: `move_on_after(grace, set.wait_idle())`). Later
  /// spawns are still admitted unless the set is closed.
  /// Checkpoint: yes (cancellation is checked first); returns at once,
  ///   without a budget yield, when nothing is live.
  /// Cancellation: nothing changes in the set; the children run on. Woken by
  ///   the last child and a cancel at once, it returns normally (the next
  ///   checkpoint throws).
  /// Thread-safety: only the task running the body.
  /// Throws: Cancelled; std::logic_error from any other task.
  [[nodiscard]] IdleAwaiter wait_idle() noexcept;

  /// Stops admission without cancelling anything: running children finish,
  /// later spawns return SpawnStatus::closed (a spawn waiting for a slot
  /// returns it at once). Idempotent. Any thread.
  void close() noexcept;

  /// Cancels the body and every child without a fault; the set then returns
  /// normally (unless a child faulted). Idempotent. Any thread.
  using ChildGroup::cancel;

  /// True once admission stopped: close() was called or the body returned.
  bool closed() const noexcept { return (state_.load(std::memory_order_acquire) & kClosed) != 0; }
  using ChildGroup::cancellation_requested;
  /// Children started and not yet finished.
  std::size_t live() const noexcept { return static_cast<std::size_t>(state_.load(std::memory_order_acquire) >> kCountShift); }
  /// The most children that may be live at once (task_set's `limit`; 0 was taken as 1).
  std::size_t limit() const noexcept { return static_cast<std::size_t>(limit_); }
  /// Child faults after the first (each also went to `on_suppressed_fault`).
  using ChildGroup::suppressed_faults;

 private:
  template <class F>
  friend Task<void> detail::run_task_set(std::pmr::memory_resource* resource, std::size_t limit, F body);
  friend struct detail::TaskSetAccess;
  friend struct detail::TaskSetProbe;

  TaskSet(detail::TaskRecord* body, std::pmr::memory_resource* resource, std::size_t limit) noexcept;

  std::coroutine_handle<> task_done(detail::TaskRecord& f, detail::PromiseBase& p,
                                     std::coroutine_handle<> frame) noexcept override;

  void check_spawner(detail::TaskRecord* f) const;
  /// Takes a slot if one is free (the body is the only taker).
  bool try_admit() noexcept;
  /// Gives back a slot taken by try_admit that no child used.
  void release_slot() noexcept;
  Outcome admit_or_wait(detail::TaskRecord* f, detail::WordWaiter* hook, std::coroutine_handle<> h) noexcept;
  Outcome idle_or_wait(detail::TaskRecord* f, detail::WordWaiter* hook, std::coroutine_handle<> h) noexcept;
  Outcome register_wait(detail::TaskRecord* f, detail::WordWaiter* hook, std::coroutine_handle<> h, bool idle) noexcept;
  /// `p.record_` is set: a RootFrame's own, or root_record's.
  void launch(detail::PromiseBase& p, std::coroutine_handle<> h, bool local) noexcept;

  /// Creates the child (in the set's resource) in a slot already taken and
  /// launches it. Out of memory: gives the slot back and records it.
  template <class F, class... Args>
  SpawnStatus start_child(bool local, F fn, Args... args) {
    std::coroutine_handle<detail::Promise<void>> h;
    std::exception_ptr early;
    try {
      detail::FrameResourceGuard guard(resource_ != nullptr ? &serialized_ : nullptr);
      h = detail::set_child(detail::RootFrame{}, std::move(fn), std::move(args)...).release();
      h.promise().continuation_ = std::noop_coroutine();  // an early throw ends back here
      h.resume();  // invokes the factory, up to the hand-over
    } catch (...) {
      early = std::current_exception();  // the wrapper frame itself
    }
    if (h && h.done()) {
      early = h.promise().error_;
      h.destroy();
      h = {};
    }
    if (!h) return start_failed(early);
    h.promise().continuation_ = {};
    detail::TaskRecord& r = *h.promise().record_;
    r.set_origin(detail::callable_origin<F>(), r.origin_line());  // for task dumps
    launch(h.promise(), h, local);
    return SpawnStatus::started;
  }
  /// A child made by the spawner (not in the set's resource).
  SpawnStatus start_child(bool local, detail::MadeChild child) noexcept {
    try {
      (void)detail::root_record(detail::TaskAccess::promise(child.task));
    } catch (...) {
      return start_failed(std::current_exception());  // the slot goes back; the child is dropped
    }
    auto h = child.task.release();
    launch(h.promise(), h, local);
    return SpawnStatus::started;
  }
  /// A factory threw before its child could start: bad_alloc is
  /// out-of-memory; anything else is that child's fault.
  SpawnStatus start_failed(std::exception_ptr e) noexcept;
  void child_fault(std::exception_ptr e) noexcept;

  struct JoinAwaiter {
    TaskSet* s;
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) noexcept;
    void await_resume() const noexcept {}
  };
  /// Closes admission and waits for every child (not a checkpoint: a join).
  JoinAwaiter join_all() noexcept { return JoinAwaiter{this}; }
  void leave() noexcept;
  /// The set's result once all are done; rethrows it.
  void finish(std::exception_ptr body_error);

  std::pmr::memory_resource* resource_;
  detail::SerializedResource serialized_;  // what child frames actually come from
  const std::uint64_t limit_;
  detail::shim::atomic<std::uint64_t> state_{0};  // its orderings: src/scope/task_set.cpp
  // Written by the body before it sets kAdmitWait or kIdleWait; read by whoever clears the bit.
  detail::shim::plain<detail::WordWaiter*> admit_hook_ = nullptr;
  bool out_of_memory_ = false;              // body only
};

/// The body's wait on the set's word: a spawn waiting for a slot, or
/// wait_idle (`idle_`). One hook for both: its canceller clears the wait's
/// bit (and owns the wake), or leaves kCancelPending for a body that has
/// published its hook but not yet registered.
class TaskSet::BodyWait : protected detail::WordWaiter {
 public:
  /// For task dumps.
  const char* wait_kind() const noexcept override {
    return idle_ ? "shoal::TaskSet::wait_idle" : "shoal::TaskSet::spawn (admission)";
  }

 protected:
  /// A wait of `set`'s body: for no live child (`idle`), else for a slot.
  BodyWait(TaskSet* set, bool idle) noexcept : WordWaiter(idle ? kIdleWait : kAdmitWait), set_(set), idle_(idle) {}
  ~BodyWait() = default;
  /// The wait itself, from await_suspend: true if the body now waits
  /// (nothing may touch *this from there on); else `outcome_` says why not.
  template <class P>
  bool wait_or_settle(std::coroutine_handle<P> h) noexcept {
    record_ = detail::record_of(h);
    outcome_ = Outcome::waiting;  // before registering: the waker may resume us at once
    const Outcome o = idle_ ? set_->idle_or_wait(record_, this, h) : set_->admit_or_wait(record_, this, h);
    if (o == Outcome::waiting) return true;
    outcome_ = o;
    return false;
  }

  TaskSet* set_;                          ///< the set waited on
  detail::TaskRecord* record_ = nullptr;  ///< the body's task
  Outcome outcome_ = Outcome::misuse;     ///< how the wait ended (waiting while it lasts)

 private:
  bool idle_;
};

/// What spawn() and spawn_local() return: `co_await` it for the SpawnStatus.
template <class F, class... Args>
class TaskSet::SpawnAwaiter final : private TaskSet::BodyWait {
 public:
  /// A spawn into `set` of the callable and arguments `parts`; made by
  /// spawn() (`local` false) and spawn_local() (`local` true).
  template <class... A>
  SpawnAwaiter(TaskSet* set, bool local, A&&... parts)
      : BodyWait(set, false), local_(local), parts_(std::forward<A>(parts)...) {}
  SpawnAwaiter(const SpawnAwaiter&) = delete;
  SpawnAwaiter& operator=(const SpawnAwaiter&) = delete;

  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    if (wait_or_settle(h)) return true;
    if (outcome_ == Outcome::admitted && detail::consume_budget(record_)) {
      detail::yield_from(record_, h, this);  // out of budget: yield once, holding the slot
      return true;
    }
    return false;
  }
  SpawnStatus await_resume() {
    if (outcome_ == Outcome::waiting) {
      clear_pending();  // what a canceller left
      // Woken by a free slot, close() or a cancel: look again. Only the body
      // takes slots, so a slot freed for us is still free.
      if (record_->cancelled()) {
        outcome_ = Outcome::cancelled;
      } else if (set_->closed()) {
        outcome_ = Outcome::closed;
      } else {
        outcome_ = set_->try_admit() ? Outcome::admitted : Outcome::closed;
      }
    }
    switch (outcome_) {
      case Outcome::misuse:
        set_->check_spawner(record_);
        throw std::logic_error("shoal::TaskSet::spawn: awaited outside the set's body");
      case Outcome::cancelled:
        detail::raise_cancelled();
      case Outcome::closed:
        return SpawnStatus::closed;
      default:
        break;
    }
    if (record_->cancelled()) {  // cancelled while it yielded with a slot
      set_->release_slot();
      detail::raise_cancelled();
    }
    return std::apply([this](auto&... p) { return set_->start_child(local_, std::move(p)...); }, parts_);
  }

 private:
  bool local_;
  std::tuple<F, Args...> parts_;
};

/// What wait_idle() returns: `co_await` it to wait until no child is live.
class TaskSet::IdleAwaiter final : private TaskSet::BodyWait {
 public:
  /// Waits for `set` to have no live child; made by wait_idle().
  explicit IdleAwaiter(TaskSet* set) noexcept : BodyWait(set, true) {}
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    return wait_or_settle(h);
  }
  void await_resume() {
    if (outcome_ == Outcome::waiting) {
      clear_pending();  // what a canceller left
      // Woken by the last child or by a cancel; a cancel that lost the race
      // to the last child is seen at the next checkpoint.
      outcome_ = set_->live() == 0 ? Outcome::admitted : Outcome::cancelled;
    }
    if (outcome_ == Outcome::misuse) {
      set_->check_spawner(record_);
      throw std::logic_error("shoal::TaskSet::wait_idle: awaited outside the set's body");
    }
    if (outcome_ == Outcome::cancelled) detail::raise_cancelled();
  }
};

inline TaskSet::IdleAwaiter TaskSet::wait_idle() noexcept { return IdleAwaiter(this); }

namespace detail {
/// For serve: spawns a child whose Task already exists, as TaskSet::spawn
/// does (admission, checkpoint, yield), but starts that frame itself: the
/// connection's handler runs in one frame less than a factory's child. The
/// frame exists before admission, so only a spawner that holds one such
/// child at a time (an accept loop) may use it.
struct TaskSetAccess {
  static auto spawn_made(TaskSet& set, Task<void> task) {
    if (!task) throw std::invalid_argument("shoal::TaskSet: the Task is empty (moved-from?)");
    return TaskSet::SpawnAwaiter<MadeChild>(&set, false, MadeChild{std::move(task)});
  }
};
}  // namespace detail

namespace detail {
template <class F>
Task<void> run_task_set(std::pmr::memory_resource* resource, std::size_t limit, F body) {
  static_assert(std::is_invocable_v<F&, TaskSet&>, "shoal::task_set: the body must be callable as body(TaskSet&)");
  static_assert(std::is_same_v<std::invoke_result_t<F&, TaskSet&>, Task<void>>,
                "shoal::task_set: the body must return shoal::Task<void>");
  TaskRecord* f = co_await CurrentRecord{};
  if (f == nullptr) throw std::logic_error("shoal::task_set: awaited outside a shoal task");
  if (f->cancelled()) detail::raise_cancelled();
  TaskSet set(f, resource, limit);
  std::exception_ptr body_error;
  try {
    co_await body(set);
  } catch (...) {
    body_error = std::current_exception();
  }
  if (body_error && !is_cancelled_exception(body_error)) set.node_.cancel(true);
  co_await set.join_all();
  set.leave();
  set.finish(std::move(body_error));
}
}  // namespace detail

/// Runs `body(set)` on the awaiting task with at most `limit` (0 means 1)
/// live children, then closes admission and waits for every child (finished
/// children are freed at once: memory tracks live children).
/// Result: the body's fault if any (a child fault it displaced is reported),
/// else the first child fault, else Cancelled if a cancellation from outside
/// reached the body or cut a child off (so an enclosing `with_timeout`
/// reports TimedOut), else std::bad_alloc if a spawn ran out of memory, else
/// success. Later child faults go to `on_suppressed_fault`, each once.
/// Checkpoint: yes: entering a cancelled context throws Cancelled without
///   running the body.
/// Cancellation: the body's fault, `set.cancel()` or a cancellation from
///   outside cancels every child; every child has finished before it returns.
/// Thread-safety: any task; the body runs on the awaiting task.
/// Throws: as in Result; std::logic_error when awaited outside a shoal task.
template <class F>
Task<void> task_set(std::size_t limit, F body) {
  return detail::run_task_set(nullptr, limit, std::move(body));
}

/// `task_set` whose child frames (the factory's Task and the wrapper that
/// owns the factory) come from `resource`; tasks a child awaits allocate as
/// usual. A failed allocation makes that spawn report out-of-memory. The set
/// serializes its calls into `resource` (children finish on any worker), so
/// an unsynchronized pool is fine; it must outlive the set.
/// Checkpoint, Cancellation, Thread-safety: as above.
/// Throws: as above; std::invalid_argument for a null resource (at the call).
template <class F>
Task<void> task_set(std::pmr::memory_resource* resource, std::size_t limit, F body) {
  if (resource == nullptr) throw std::invalid_argument("shoal::task_set: the memory resource is null");
  return detail::run_task_set(resource, limit, std::move(body));
}

}  // namespace shoal
