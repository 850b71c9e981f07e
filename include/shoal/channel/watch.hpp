// Watch<T>: the latest value of something, and a wait for it to change
// (configuration, a health state, a shutdown phase). Receivers see the
// newest value, never a queue of old ones.
//
//   shoal::Watch<Config> config(load());
//   auto rx = config.subscribe();
//   while (co_await rx.changed()) apply(rx.get());   // false once closed
#pragma once

#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"

namespace shoal {

namespace detail {
template <class T>
struct WatchChangedSource;
}  // namespace detail

/// The latest value of something, and a wait for it to change: a receiver
/// sees the newest value, never a queue of old ones. Owned by the code that
/// sends; it must outlive its receivers' waits (destroying it while one
/// waits aborts with a message).
/// Thread-safety: every member, any task or thread.
template <class T>
class Watch {
  static_assert(std::is_copy_constructible_v<T>, "shoal::Watch<T>: T must be copyable (every receiver reads it)");

 public:
  /// A watch holding `initial` (version 0), open.
  explicit Watch(T initial) : value_(std::move(initial)) {}
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  ~Watch() {
    if (!waiters_.empty()) {
      std::fprintf(stderr, "shoal: Watch at %p destroyed while tasks wait on it\n", static_cast<void*>(this));
      std::abort();
    }
  }

  /// Replaces the value and wakes every waiting receiver. Never waits.
  /// Returns false (and keeps the old value) once closed.
  /// Throws: what T's move assignment throws (the value is then as T left it).
  bool send(T v) {
    return modify([&v](T& cur) { cur = std::move(v); });
  }

  /// Changes the value in place with `fn(T&)` under the lock, then wakes
  /// every waiting receiver. Keep `fn` short: readers wait meanwhile.
  /// Returns false (fn not run) once closed.
  /// Throws: what `fn` throws (then no version is published).
  template <class F>
  bool modify(F&& fn) {
    detail::WaitSection sec(lock_);
    if (closed_) return false;
    fn(value_);
    ++version_;
    detail::wake_all(waiters_, sec);
    return true;
  }

  /// Ends every wait: changed() returns false once a receiver has seen the
  /// last value. The value stays readable. Idempotent.
  void close() noexcept {
    detail::WaitSection sec(lock_);
    closed_ = true;
    detail::wake_all(waiters_, sec);
  }

  /// A copy of the current value.
  T get() const {
    detail::WaitSection sec(lock_);
    return value_;
  }

  class Receiver;
  /// A receiver that has seen the current value: its changed() waits for
  /// the next one. Receivers may be made at any time, any number.
  Receiver subscribe() noexcept {
    detail::WaitSection sec(lock_);
    return Receiver(this, version_);
  }

 private:
  friend struct detail::WatchChangedSource<T>;
  // A receiver's watch and seen version, for WatchChangedSource (Receiver
  // befriends Watch).
  static Watch& of(Receiver& r) noexcept { return *r.w_; }
  static std::uint64_t& seen_of(Receiver& r) noexcept { return r.seen_; }
  mutable detail::SpinLock lock_;
  detail::WaitList waiters_;
  T value_;
  std::uint64_t version_ = 0;
  bool closed_ = false;
};

/// One reader of a Watch, remembering the version it saw. Copyable (a copy
/// starts from the same version). Thread-safety: one task or thread at a time.
template <class T>
class Watch<T>::Receiver {
 public:
  /// What changed() returns: `co_await` it for the bool changed() describes.
  class Awaiter final : public detail::LevelWaiter<Awaiter> {
   public:
    /// Waits for a version newer than `r` saw; made by changed().
    explicit Awaiter(Receiver* r) noexcept
        : detail::LevelWaiter<Awaiter>(r->w_->lock_, r->w_->waiters_, "shoal::Watch::Receiver::changed"), r_(r) {}
    bool ready_locked() const noexcept { return detail::WatchChangedSource<T>{r_}.ready_locked(); }
    bool await_resume() {
      this->throw_if_cancelled();
      return detail::WatchChangedSource<T>{r_}.take();
    }

   private:
    Receiver* r_;
  };

  /// Waits until the value is newer than the one this receiver last saw,
  /// and marks it seen (read it with get()). Several sends in between count
  /// as one change.
  /// Checkpoint: yes (a cancelled task throws even if a change is there); a
  ///   change already there yields once per budget.
  /// Cancellation: nothing is marked seen.
  /// Thread-safety: any task; the Watch may be sent to meanwhile.
  /// Throws: Cancelled; std::logic_error outside a shoal task.
  /// Returns: true on a change; false once the watch is closed and this
  ///   receiver has seen its last value.
  [[nodiscard]] Awaiter changed() noexcept { return Awaiter(this); }

  /// A copy of the current value, marked seen.
  T get() {
    detail::WaitSection sec(w_->lock_);
    seen_ = w_->version_;
    return w_->value_;
  }

  /// Calls `fn(const T&)` under the lock (no copy) and marks the value seen;
  /// returns what `fn` returns. Keep `fn` short.
  template <class F>
  decltype(auto) read(F&& fn) {
    detail::WaitSection sec(w_->lock_);
    seen_ = w_->version_;
    return fn(static_cast<const T&>(w_->value_));
  }

  /// True if a value newer than the one seen is there, without waiting or
  /// marking anything.
  bool has_changed() const noexcept {
    detail::WaitSection sec(w_->lock_);
    return w_->version_ != seen_;
  }

 private:
  friend class Watch;
  Receiver(Watch* w, std::uint64_t seen) noexcept : w_(w), seen_(seen) {}
  Watch* w_;
  std::uint64_t seen_;

 public:
  using value_type = T;  ///< what the watch holds

};

namespace detail {
/// on_changed's source for a Watch receiver (detail::LevelCase); also what
/// changed() checks and takes.
template <class T>
struct WatchChangedSource {
  using outcome_type = bool;
  typename Watch<T>::Receiver* r;
  Watch<T>& w() const noexcept { return Watch<T>::of(*r); }
  SpinLock& lock() const noexcept { return w().lock_; }
  WaitList& waiters() const noexcept { return w().waiters_; }
  bool ready_locked() const noexcept { return w().version_ != Watch<T>::seen_of(*r) || w().closed_; }
  bool take() noexcept {
    WaitSection sec(w().lock_);
    std::uint64_t& seen = Watch<T>::seen_of(*r);
    if (w().version_ == seen) return false;  // closed, nothing newer
    seen = w().version_;
    return true;
  }
};
}  // namespace detail

/// A select case (channel/select.hpp): `rx`'s watch holds a value newer
/// than the one `rx` saw, now marked seen (true; read it with get()), or is
/// closed with nothing newer (false), as changed() gives it. Nothing is
/// marked unless this case wins.
template <class R>
  requires std::is_same_v<R, typename Watch<typename R::value_type>::Receiver>
detail::LevelCase<detail::WatchChangedSource<typename R::value_type>> on_changed(R& rx) noexcept {
  using Source = detail::WatchChangedSource<typename R::value_type>;
  return detail::LevelCase<Source>(Source{&rx});
}

}  // namespace shoal
