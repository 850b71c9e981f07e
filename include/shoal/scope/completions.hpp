// Completions<T>: children of a scope whose results are taken one at a
// time, in the order they finish (Tokio's JoinSet::join_next, the nursery
// + channel idiom of Trio).
//
//   auto crawl = [&](shoal::Scope& s) -> shoal::Task<void> {
//     shoal::Completions<Page> pages(s);
//     for (const auto& url : urls) pages.start(fetch(url));
//     while (auto page = co_await pages.next()) index(*page);
//   };
//   co_await shoal::scope(crawl);
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "shoal/detail/intrusive_list.hpp"
#include "shoal/detail/spin_lock.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/task.hpp"
#include "shoal/scope/scope.hpp"

namespace shoal {

template <class T>
class Completions;

namespace detail {
template <class T>
struct CompletionsNextSource;

// Shared by the Completions object and its running children (a child may
// finish after the object is gone: the body returned, the scope still
// joins). Freed by the last of them.
template <class T>
struct CompletionsState {
  struct Slot : ListHook<> {
    std::optional<JoinHandle<T>> handle;
    std::uint32_t index = 0;
    bool started = false;   // the handle is in place
    bool finished = false;  // the child's body is over
  };
  SpinLock lock;
  WaitList waiters;                 // a task in next()
  std::deque<Slot> slots;           // stable addresses
  std::vector<std::uint32_t> free;  // reusable slots (capacity kept at slots.size())
  IntrusiveList<Slot> ready;        // finished and started, in finishing order
  std::size_t pending = 0;          // started, not yet taken by next()
  shim::atomic<std::size_t> refs{1};

  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  bool ready_locked() const noexcept { return !ready.empty() || pending == 0; }
  // Under the lock: both halves are there (handle and end): queue it.
  void queue_if_complete_locked(Slot& s, WakeList& sec) noexcept {
    if (!s.started || !s.finished) return;
    ready.push_back(&s);
    wake_one(waiters, sec);
  }
  /// Called from the child as its body ends (its result is about to be set).
  void finished(std::uint32_t k) noexcept {
    {
      WaitSection sec(lock);
      slots[k].finished = true;
      queue_if_complete_locked(slots[k], sec);
    }
    release();
  }
};

template <class T>
Task<T> tracked_child(CompletionsState<T>* st, std::uint32_t k, Task<T> task) {
  struct Done {
    CompletionsState<T>* st;
    std::uint32_t k;
    ~Done() { st->finished(k); }
  } done{st, k};
  co_return co_await std::move(task);
}

}  // namespace detail

/// A set of children of one scope, taken in the order they finish. They are
/// the scope's children like any other (Scope::start): the first fault
/// among them cancels the scope and is rethrown at its exit, so for
/// children whose failures must not stop the rest, catch inside the child
/// and return the error as a value. It may go out of scope before its
/// children end (they then finish unobserved, and the scope handles their
/// results as it does for an unawaited JoinHandle).
/// Thread-safety: start and next from any task in the scope, one next() at a
/// time.
template <class T>
class Completions {
 public:
  /// An empty set whose children start in `s`. Throws std::bad_alloc.
  explicit Completions(Scope& s) : s_(&s), st_(new detail::CompletionsState<T>()) {}
  Completions(const Completions&) = delete;
  Completions& operator=(const Completions&) = delete;
  ~Completions() { st_->release(); }

  /// Starts `task` as a child of the scope (as Scope::start).
  /// Checkpoint: no (never suspends).
  /// Cancellation: the child is cancelled with the scope.
  /// Thread-safety: the scope's body and tasks inside it.
  /// Throws: std::invalid_argument for an empty Task; std::bad_alloc
  ///   (nothing started).
  void start(Task<T> task) {
    if (!task) throw std::invalid_argument("shoal::Completions::start: the Task is empty (moved-from?)");
    std::uint32_t k;
    {
      detail::WaitSection sec(st_->lock);
      if (st_->free.empty()) {
        st_->slots.emplace_back();
        try {
          st_->free.reserve(st_->slots.size());  // so taking never allocates
        } catch (...) {
          st_->slots.pop_back();
          throw;
        }
        k = static_cast<std::uint32_t>(st_->slots.size() - 1);
        st_->slots[k].index = k;
      } else {
        k = st_->free.back();
        st_->free.pop_back();
        st_->slots[k].started = st_->slots[k].finished = false;
      }
      ++st_->pending;
    }
    st_->refs.fetch_add(1, std::memory_order_relaxed);  // the child's
    try {
      JoinHandle<T> h = s_->start(detail::tracked_child<T>(st_, k, std::move(task)));
      detail::WaitSection sec(st_->lock);
      st_->slots[k].handle.emplace(std::move(h));
      st_->slots[k].started = true;
      st_->queue_if_complete_locked(st_->slots[k], sec);
    } catch (...) {
      {
        detail::WaitSection sec(st_->lock);
        st_->free.push_back(k);
        --st_->pending;
        if (st_->pending == 0) detail::wake_one(st_->waiters, sec);
      }
      st_->release();
      throw;
    }
  }
  /// The same for a callable (owned by the child, as Scope::start(fn, args...)).
  template <class F, class... Args>
    requires detail::TaskFactory<F, Args...>
  void start(F&& fn, Args&&... args) {
    start(detail::invoke_owned(detail::RootFrame{}, std::decay_t<F>(std::forward<F>(fn)),
                               std::decay_t<Args>(std::forward<Args>(args))...));
  }

  /// Children started and not yet taken by next().
  std::size_t pending() const noexcept {
    detail::WaitSection sec(st_->lock);
    return st_->pending;
  }

  /// Waits for the next child to finish and takes its result: its value
  /// (for Task<void>: true), or its fault rethrown (as awaiting its
  /// JoinHandle does). Empty (false) once every child started so far was
  /// taken.
  /// Checkpoint: yes.
  /// Cancellation: nothing was taken: the finished child is taken by the
  ///   next call.
  /// Thread-safety: one caller at a time, any task inside the scope.
  /// Throws: Cancelled; the child's fault; ChildCancelled (the child was cut
  ///   off by a cancellation the caller does not share).
  auto next() -> Task<std::conditional_t<std::is_void_v<T>, bool, std::optional<T>>> {
    using Slot = typename detail::CompletionsState<T>::Slot;
    detail::CompletionsState<T>* st = st_;
    for (;;) {
      co_await ReadyAwaiter(st);  // a checkpoint; true once a result is queued or none is pending
      Slot* s;
      {
        detail::WaitSection sec(st->lock);
        s = st->ready.pop_front();
        if (s == nullptr) {
          if (st->pending != 0) continue;  // another caller took it
          if constexpr (std::is_void_v<T>) {
            co_return false;
          } else {
            co_return std::nullopt;
          }
        }
      }
      JoinHandle<T> h = std::move(*s->handle);
      s->handle.reset();
      struct Settle {  // once the await is over, either way
        detail::CompletionsState<T>* st;
        Slot* s;
        JoinHandle<T>* h;
        ~Settle() {
          detail::WaitSection sec(st->lock);
          if (h->valid()) {  // a cancelled await took nothing: first in line again
            s->handle.emplace(std::move(*h));
            st->ready.push_front(s);
          } else {
            --st->pending;
            st->free.push_back(s->index);  // reserved: cannot throw
          }
        }
      } settle{st, s, &h};
      if constexpr (std::is_void_v<T>) {
        co_await std::move(h);
        co_return true;
      } else {
        co_return co_await std::move(h);
      }
    }
  }

 private:
  class ReadyAwaiter final : public detail::LevelWaiter<ReadyAwaiter> {
   public:
    explicit ReadyAwaiter(detail::CompletionsState<T>* st) noexcept
        : detail::LevelWaiter<ReadyAwaiter>(st->lock, st->waiters, "shoal::Completions::next"), st_(st) {}
    bool ready_locked() const noexcept { return st_->ready_locked(); }
    void await_resume() const { this->throw_if_cancelled(); }

   private:
    detail::CompletionsState<T>* st_;
  };

  friend struct detail::CompletionsNextSource<T>;
  Scope* s_;
  detail::CompletionsState<T>* st_;
};

namespace detail {
/// on_next's source (detail::LevelCase): a finished child, taken as next()
/// takes it.
template <class T>
struct CompletionsNextSource {
  using outcome_type = std::conditional_t<std::is_void_v<T>, bool, std::optional<T>>;
  static CompletionsNextSource of(Completions<T>& c) noexcept { return CompletionsNextSource{c.st_}; }
  CompletionsState<T>* st;
  SpinLock& lock() const noexcept { return st->lock; }
  WaitList& waiters() const noexcept { return st->waiters; }
  bool ready_locked() const noexcept { return st->ready_locked(); }
  outcome_type take() {
    typename CompletionsState<T>::Slot* s;
    {
      WaitSection sec(st->lock);
      s = st->ready.pop_front();
      if (s == nullptr) {
        if (st->pending != 0) {
          throw std::logic_error("shoal::on_next: another task took the finished child (one next() at a time)");
        }
        return outcome_type{};  // nothing pending: the end, as next() gives it
      }
    }
    JoinHandle<T> h = std::move(*s->handle);
    s->handle.reset();
    {
      WaitSection sec(st->lock);
      --st->pending;
      st->free.push_back(s->index);  // reserved: cannot throw
    }
    if constexpr (std::is_void_v<T>) {
      JoinHandleAccess::take_finished(h);
      return true;
    } else {
      return JoinHandleAccess::take_finished(h);
    }
  }
};
}  // namespace detail

/// A select case (channel/select.hpp): the next child of `c` to finish, as
/// next() gives it (its value, or true for Task<void>; empty once every
/// child started so far was taken). Nothing is taken unless this case wins.
/// Throws: when the case wins, what next() throws (the child's fault;
///   ChildCancelled).
template <class T>
detail::LevelCase<detail::CompletionsNextSource<T>> on_next(Completions<T>& c) noexcept {
  return detail::LevelCase<detail::CompletionsNextSource<T>>(detail::CompletionsNextSource<T>::of(c));
}

}  // namespace shoal
