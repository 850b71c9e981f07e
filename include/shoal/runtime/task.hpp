// shoal::Task<T>: the lazy, move-only coroutine type every shoal API speaks.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/frame_alloc.hpp"

/// Structured concurrency: lazy tasks (Task), scopes that join every child
/// and cancel the rest on a fault (scope(), Scope), cooperative cancellation,
/// timeouts, channels, timers and the sync library. The entry point is run().
namespace shoal {

template <class T = void>
class Task;

/// Where a task was spawned, as Runtime::dump_tasks shows it. The spawn
/// functions take one as a defaulted last parameter, which records the
/// caller's file and line; nothing to write at the call.
struct SpawnSite {
  const char* file;    ///< The spawning call's source file (as the compiler names it).
  std::uint32_t line;  ///< Its line.
  /// The caller's place. __builtin_FILE/LINE in a default argument name the
  /// outermost caller's place on g++ and clang (clang 14 with libstdc++
  /// lacks std::source_location).
  constexpr SpawnSite(const char* f = __builtin_FILE(), std::uint32_t l = __builtin_LINE()) noexcept
      : file(f), line(l) {}
};

/// A name for a spawned task, for Runtime::dump_tasks:
/// `s.spawn(shoal::named("accept loop"), accept_loop, std::ref(listener))`.
/// The name is copied at the spawn; the call's file and line are kept too.
struct TaskName {
  std::string_view name;  ///< Copied into the task's record at the spawn.
  SpawnSite site;         ///< Where named() was called.
};
/// See TaskName. Allocation: one copy of `name` at the spawn.
inline TaskName named(std::string_view name, SpawnSite site = {}) noexcept { return TaskName{name, site}; }

namespace detail {

/// Awaiting a Task that holds no frame (moved from) or whose frame already
/// finished (awaited before): std::logic_error naming the mistake.
[[noreturn]] void throw_invalid_task_await(bool moved_from);

struct TaskAccess;

/// Ends a coroutine whose fault was already stored in its promise.
struct ForwardedError {};

/// Where a result of type T is kept until delivered: `bool` stands in for void.
template <class T>
using Stored = std::conditional_t<std::is_void_v<T>, bool, T>;

/// A spawned task's record when its root frame carries none: allocated at
/// the spawn, freed with that frame (by its promise).
TaskRecord* allocate_record();
void free_record(TaskRecord* f) noexcept;

/// Where a spawn came from and what it is called, for the task's record
/// (see TaskRecord::origin).
struct Origin {
  const char* where;
  std::uint32_t line;
  std::string_view name;
};
/// Throws std::bad_alloc (the name's copy).
inline void set_origin(TaskRecord& f, const Origin& o) {
  f.set_origin(o.where, o.line);
  if (!o.name.empty()) set_task_name(f, o.name.data(), o.name.size());
}

struct PromiseBase {
  // The task this frame runs on: its awaiter's, or for a spawned root its
  // own record (in the frame for a RootFrame coroutine, else allocated at
  // the spawn). A plain frame carries no record: one pointer.
  TaskRecord* record_ = nullptr;
  std::coroutine_handle<> continuation_;
  std::exception_ptr error_;

  PromiseBase() noexcept = default;
  PromiseBase(const PromiseBase&) = delete;
  // Set by root_record when the spawn allocated the record. A flag, not a
  // look at record_: an awaited frame's promise may outlive its task's
  // record (promises die before parameter copies, such as an inner Task).
  bool owns_record_ = false;
  ~PromiseBase() {
    if (owns_record_) free_record(record_);
  }

  static void* operator new(std::size_t size) { return frame_allocate(size); }
  static void operator delete(void* p, std::size_t size) noexcept { frame_deallocate(p, size); }

  std::suspend_always initial_suspend() noexcept { return {}; }

  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      PromiseBase& p = h.promise();
      if (p.continuation_) return p.continuation_;
      TaskRecord& f = *p.record_;
      if constexpr (requires { h.promise().value_to_cell(f); }) {
        if ((f.flags & TaskRecord::kStarted) != 0) h.promise().value_to_cell(f);
      }
      return f.home->owner->task_done(f, p, h);  // home: the node it was spawned into
    }
    void await_resume() noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { error_ = std::current_exception(); }

  void rethrow_if_error() {
    if (error_) std::rethrow_exception(error_);
  }
};

template <class T>
struct JoinCellOf;

template <class T>
struct Promise : PromiseBase {
  using Stored = std::conditional_t<std::is_reference_v<T>, std::remove_reference_t<T>*, T>;
  alignas(Stored) unsigned char storage_[sizeof(Stored)];
  bool has_value_ = false;

  Promise() = default;
  Promise(const Promise&) = delete;
  ~Promise() {
    if (has_value_) ptr()->~Stored();
  }
  Stored* ptr() noexcept { return std::launder(reinterpret_cast<Stored*>(storage_)); }

  Task<T> get_return_object() noexcept;

  template <class U>
    requires std::is_convertible_v<U&&, T>
  void return_value(U&& v) noexcept(std::is_nothrow_constructible_v<Stored, U&&>) {
    if constexpr (std::is_reference_v<T>) {
      T ref = static_cast<U&&>(v);
      ::new (static_cast<void*>(storage_)) Stored(std::addressof(ref));
    } else {
      ::new (static_cast<void*>(storage_)) Stored(static_cast<U&&>(v));
    }
    has_value_ = true;
  }

  /// The fault was already stored in error_ (see detail::Forward).
  void return_value(ForwardedError) noexcept {}

  /// A Scope::start child, finishing: its value moves to its cell, as the
  /// frame goes next. A move that throws makes that the child's fault.
  void value_to_cell(TaskRecord& f) noexcept {
    if (!has_value_) return;
    auto* c = static_cast<JoinCellOf<T>*>(f.cell);
    try {
      ::new (static_cast<void*>(c->storage_)) Stored(std::move(*ptr()));
      c->has_value_ = true;
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  /// Moves the result out (rethrows the fault). Once.
  T take() {
    rethrow_if_error();
    if constexpr (std::is_reference_v<T>) {
      return static_cast<T>(**ptr());
    } else {
      return std::move(*ptr());
    }
  }
};

template <>
struct Promise<void> : PromiseBase {
  Task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void take() { rethrow_if_error(); }
};

template <class T>
void free_join_cell(JoinCellOf<T>* c) noexcept;

/// A started child's cell with room for its value (see JoinCell).
template <class T>
struct JoinCellOf : JoinCellValue {
  using Stored = typename Promise<T>::Stored;
  alignas(Stored) unsigned char storage_[sizeof(Stored)];
  bool has_value_ = false;

  JoinCellOf() noexcept { drop = &drop_cell; }
  ~JoinCellOf() {
    if (has_value_) ptr()->~Stored();
  }
  Stored* ptr() noexcept { return std::launder(reinterpret_cast<Stored*>(storage_)); }
  static void drop_cell(JoinCell* c) noexcept { free_join_cell(static_cast<JoinCellOf*>(c)); }
};
template <>
struct JoinCellOf<void> : JoinCell {};

/// A new cell for a child started with a `T` result. Throws std::bad_alloc.
template <class T>
JoinCellOf<T>* new_join_cell() {
  return ::new (frame_allocate(sizeof(JoinCellOf<T>))) JoinCellOf<T>;
}
template <class T>
void free_join_cell(JoinCellOf<T>* c) noexcept {
  c->~JoinCellOf<T>();
  frame_deallocate(c, sizeof(JoinCellOf<T>));
}

/// The first parameter of a coroutine that is always spawned (a child
/// wrapper, serve's connection root): its promise holds the task record, so
/// the spawn allocates nothing beyond the frame. Awaited instead, it works
/// as any Task (the record goes unused).
struct RootFrame {};

template <class T>
struct RootPromise : Promise<T> {
  TaskRecord own_record_;
  RootPromise() noexcept {
    this->record_ = &own_record_;
    own_record_.root = this;
  }
};

/// The record a spawned root `p` runs on: its own (a RootFrame), or a new
/// one. Throws std::bad_alloc.
inline TaskRecord& root_record(PromiseBase& p) {
  if (p.record_ == nullptr) {
    p.record_ = allocate_record();
    p.record_->root = &p;
    p.owns_record_ = true;
  }
  return *p.record_;
}

}  // namespace detail

/// A lazy coroutine producing a `T` (or a fault). Nothing runs until it is
/// awaited, spawned into a scope or run with `shoal::run`. Move-only;
/// destroying a Task that never started frees its frame. `Task<T&>` yields
/// a reference.
/// Thread-safety: a Task is owned by one task at a time.
template <class T>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::Promise<T>;
  /// The type `co_await` on this task yields.
  using value_type = T;
  /// The handle of the task's coroutine frame, as release() returns it.
  using Handle = std::coroutine_handle<promise_type>;

  Task() noexcept = default;
  /// Takes ownership of the frame `h` (e.g. one given up with release()).
  explicit Task(Handle h) noexcept : h_(h) {}
  /// Takes `o`'s frame; `o` is left empty.
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  /// Destroys this Task's frame, if any, and takes `o`'s; `o` is left empty.
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }

  /// True while this Task owns a frame: false when default-constructed,
  /// moved from or released (still true after it was awaited).
  explicit operator bool() const noexcept { return static_cast<bool>(h_); }

  /// What `co_await std::move(task)` awaits; not for direct use.
  struct Awaiter {
    /// The awaited task's frame (still owned by the Task).
    Handle h;
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> caller) noexcept {
      h.promise().continuation_ = caller;
      h.promise().record_ = detail::record_of(caller);
      return h;
    }
    T await_resume() { return h.promise().take(); }
  };

  /// Runs the task to completion on the awaiting task (symmetric transfer);
  /// yields its value or rethrows its fault. Needs an rvalue (`co_await
  /// std::move(t)` or `co_await f()`): a task runs once. The frame is freed
  /// when the Task is destroyed.
  /// Checkpoint: no, not by itself (no cancellation check, no yield); the
  ///   task's own waits are.
  /// Cancellation: whatever the task does with it; its Cancelled passes through.
  /// Thread-safety: the task that owns the Task.
  /// Throws: the task's fault; std::logic_error for a moved-from or
  ///   already-awaited Task.
  Awaiter operator co_await() && {
    if (!h_ || h_.done()) [[unlikely]] detail::throw_invalid_task_await(!h_);
    return Awaiter{h_};
  }

  /// Gives up ownership of the frame (used by scopes and the runtime).
  Handle release() noexcept { return std::exchange(h_, {}); }

 private:
  friend struct detail::TaskAccess;
  Handle h_;
};

namespace detail {
/// How a task ended: its value (engaged; `true` for void) or its fault.
template <class T>
struct Outcome {
  std::optional<Stored<T>> value;
  std::exception_ptr error;
};

/// Awaits a task on the same task and hands back its Outcome instead of
/// rethrowing its fault: for wrappers that run code after the task whatever
/// happened (a deadline, a cancel scope, finally), without a rethrow and a
/// catch per fault. The Task keeps its frame.
template <class T>
struct Capture {
  std::coroutine_handle<Promise<T>> h;
  bool await_ready() const noexcept { return false; }
  template <class P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> caller) noexcept {
    h.promise().continuation_ = caller;
    h.promise().record_ = record_of(caller);
    return h;
  }
  /// Throws only what moving the value out throws.
  Outcome<T> await_resume() {
    Outcome<T> o;
    if (h.promise().error_) {
      o.error = std::move(h.promise().error_);
    } else if constexpr (std::is_void_v<T>) {
      o.value.emplace(true);
    } else {
      o.value.emplace(h.promise().take());
    }
    return o;
  }
};

/// For awaitables that run a Task of their own as a slow path and finish it
/// by hand (await_suspend, later await_resume): the unchecked awaiter.
struct TaskAccess {
  template <class T>
  static typename Task<T>::Awaiter awaiter(Task<T>& t) noexcept {
    return typename Task<T>::Awaiter{t.h_};
  }
  template <class T>
  static Promise<T>& promise(Task<T>& t) noexcept {
    return t.h_.promise();
  }
  /// The task's outcome, without a rethrow (see Capture).
  template <class T>
  static Capture<T> capture(Task<T>& t) {
    if (!t.h_ || t.h_.done()) [[unlikely]] throw_invalid_task_await(!t.h_);
    return Capture<T>{t.h_};
  }
};

template <class T>
Task<T> Promise<T>::get_return_object() noexcept {
  return Task<T>(std::coroutine_handle<Promise<T>>::from_promise(*this));
}
inline Task<void> Promise<void>::get_return_object() noexcept {
  return Task<void>(std::coroutine_handle<Promise<void>>::from_promise(*this));
}

/// Awaits a task on the same task; a fault is moved into the awaiting
/// promise instead of being rethrown, so a wrapper that only forwards costs
/// no extra throw (cancelling 10k children must not throw 20k times).
template <class T>
struct Forward {
  std::coroutine_handle<Promise<T>> h;
  PromiseBase* outer = nullptr;
  bool await_ready() const noexcept { return false; }
  template <class P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> caller) noexcept {
    outer = &caller.promise();
    h.promise().continuation_ = caller;
    h.promise().record_ = record_of(caller);
    return h;
  }
  /// False when the task faulted (the fault now belongs to the awaiter).
  bool await_resume() noexcept {
    if (!h.promise().error_) return true;
    outer->error_ = std::move(h.promise().error_);
    return false;
  }
};

/// An awaitable that is not a Task but becomes one on request (a lock call
/// that allocates nothing while the lock is free): the Task-taking APIs
/// (spawn, start, move_on_after, with_timeout, shielded) accept it as well.
template <class A>
concept TaskLike = !std::is_reference_v<A> && requires { typename A::task_type; } &&
                   std::is_convertible_v<A&&, typename A::task_type>;

template <class X>
struct IsTask : std::false_type {};
template <class T>
struct IsTask<Task<T>> : std::true_type {};
}  // namespace detail

template <class X>
concept TaskType = detail::IsTask<std::remove_cvref_t<X>>::value;

}  // namespace shoal

/// A coroutine whose first parameter is RootFrame gets the promise with the
/// record. Task<T>'s handle still names Promise<T>, RootPromise's base at
/// offset 0: the frame offset of a promise depends only on its alignment.
template <class T, class... Args>
struct std::coroutine_traits<shoal::Task<T>, shoal::detail::RootFrame, Args...> {
  static_assert(alignof(shoal::detail::RootPromise<T>) == alignof(shoal::detail::Promise<T>));
  using promise_type = shoal::detail::RootPromise<T>;
};
