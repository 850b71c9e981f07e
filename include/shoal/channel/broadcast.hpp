// Broadcast<T>: every receiver sees every value, in order (a chat room, an
// event feed, cache invalidations). Bounded: a sender never waits; a
// receiver that falls more than the capacity behind is told how many values
// it missed and goes on from the oldest one kept (Tokio's broadcast).
//
//   shoal::Broadcast<std::string> room(256);
//   auto rx = room.subscribe();
//   for (;;) {
//     auto r = co_await rx.recv();
//     if (r.lagged()) { warn(r.missed()); continue; }
//     if (r.closed()) break;
//     deliver(*r);
//   }
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/thread_wake.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"

namespace shoal {

namespace detail {
template <class T>
struct BroadcastRecvSource;
}  // namespace detail

/// What Broadcast<T>::Receiver::recv gives: the next value, or why there is
/// none: the receiver lagged (values were overwritten before it read them;
/// the next recv goes on from the oldest kept) or the broadcast is closed
/// and this receiver has read everything.
template <class T>
class BroadcastResult {
 public:
  /// True if this holds a value (neither lagged() nor closed()).
  bool has_value() const noexcept { return value_.has_value(); }
  /// Same as has_value().
  explicit operator bool() const noexcept { return has_value(); }
  /// The value, unchecked: only with has_value().
  T& operator*() & noexcept { return *value_; }
  /// Moves the value out, unchecked: only with has_value().
  T&& operator*() && noexcept { return std::move(*value_); }
  /// Access to the value's members, unchecked: only with has_value().
  T* operator->() noexcept { return &*value_; }
  /// The value; std::logic_error if there is none.
  T& value() & {
    if (!value_) throw std::logic_error(lagged() ? "shoal::BroadcastResult: no value: the receiver lagged"
                                                 : "shoal::BroadcastResult: no value: the broadcast is closed");
    return *value_;
  }
  /// True if values were overwritten before this receiver read them (see missed()).
  bool lagged() const noexcept { return missed_ != 0; }
  /// How many values this receiver missed (0 unless lagged()).
  std::uint64_t missed() const noexcept { return missed_; }
  /// True if the broadcast is closed and this receiver has read every value.
  bool closed() const noexcept { return !value_ && missed_ == 0; }

 private:
  template <class U>
  friend class Broadcast;
  std::optional<T> value_;
  std::uint64_t missed_ = 0;
};

/// A bounded broadcast: every receiver gets a copy of every value, in order.
/// It keeps the last `capacity` values; a receiver that falls further behind
/// is told how many it missed (BroadcastResult::lagged). Owned by the code
/// that sends; it must outlive its receivers (destroying it while one waits
/// aborts with a message).
/// Thread-safety: every member, any task or thread.
template <class T>
class Broadcast {
  static_assert(std::is_copy_constructible_v<T>, "shoal::Broadcast<T>: T must be copyable (every receiver gets a copy)");

 public:
  /// Throws std::invalid_argument for a capacity of 0; std::bad_alloc.
  explicit Broadcast(std::size_t capacity) : ring_(check(capacity)) {}
  Broadcast(const Broadcast&) = delete;
  Broadcast& operator=(const Broadcast&) = delete;
  ~Broadcast() {
    if (!waiters_.empty()) {
      std::fprintf(stderr, "shoal: Broadcast at %p destroyed while tasks wait on it\n", static_cast<void*>(this));
      std::abort();
    }
  }

  /// How many values are kept for slow receivers (as given at construction).
  std::size_t capacity() const noexcept { return ring_.size(); }

  /// Appends `v` for every receiver and wakes the waiting ones. Never
  /// waits: when the buffer is full the oldest value is dropped, and
  /// receivers that had not read it lag. Returns how many receivers are
  /// subscribed (with none, `v` is dropped at once). After close(): 0, and
  /// `v` is dropped.
  /// Throws: what T's move assignment throws (nothing is appended).
  std::size_t send(T v) {
    detail::WaitSection sec(lock_);
    if (closed_ || receivers_ == 0) return 0;
    ring_[tail_ % ring_.size()] = std::move(v);
    ++tail_;
    detail::wake_all(waiters_, sec);
    return receivers_;
  }

  /// No more values: receivers read what is buffered, then get closed().
  /// Idempotent.
  void close() noexcept {
    detail::WaitSection sec(lock_);
    closed_ = true;
    detail::wake_all(waiters_, sec);
  }

  /// How many receivers are subscribed right now (a snapshot).
  std::size_t receiver_count() const noexcept {
    detail::WaitSection sec(lock_);
    return receivers_;
  }

  class Receiver;
  /// A receiver that sees the values sent from now on. Receivers may join
  /// and leave at any time.
  Receiver subscribe() noexcept {
    detail::WaitSection sec(lock_);
    ++receivers_;
    return Receiver(this, tail_);
  }

 private:
  static std::size_t check(std::size_t capacity) {
    if (capacity == 0) throw std::invalid_argument("shoal::Broadcast: the capacity must be at least 1");
    return capacity;
  }
  // Under the lock: the receiver's next result, or false if it must wait.
  bool take_locked(std::uint64_t& next, BroadcastResult<T>& out) {
    if (next == tail_) {
      if (!closed_) return false;
      return true;  // closed: out stays empty
    }
    const std::uint64_t oldest = tail_ > ring_.size() ? tail_ - ring_.size() : 0;
    if (next < oldest) {
      out.missed_ = oldest - next;
      next = oldest;
      return true;
    }
    out.value_.emplace(*ring_[next % ring_.size()]);  // a copy: the others read it too
    ++next;
    return true;
  }

  friend struct detail::BroadcastRecvSource<T>;
  // A receiver's broadcast and position, for BroadcastRecvSource (Receiver
  // befriends Broadcast).
  static Broadcast*& of(Receiver& r) noexcept { return r.b_; }
  static std::uint64_t& next_of(Receiver& r) noexcept { return r.next_; }
  mutable detail::SpinLock lock_;
  detail::WaitList waiters_;
  std::vector<std::optional<T>> ring_;
  std::uint64_t tail_ = 0;  // values ever sent
  std::size_t receivers_ = 0;
  bool closed_ = false;
};

/// One reader's position in a Broadcast. Move-only; leaving (destroying it)
/// is always fine. Thread-safety: one task or thread at a time.
template <class T>
class Broadcast<T>::Receiver {
 public:
  /// Takes over `o`'s subscription and position; `o` is left moved-from.
  Receiver(Receiver&& o) noexcept : b_(std::exchange(o.b_, nullptr)), next_(o.next_) {}
  /// Leaves this receiver's broadcast, then takes over `o`'s subscription and position.
  Receiver& operator=(Receiver&& o) noexcept {
    if (this != &o) {
      leave();
      b_ = std::exchange(o.b_, nullptr);
      next_ = o.next_;
    }
    return *this;
  }
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;
  ~Receiver() { leave(); }

  using value_type = T;  ///< what the broadcast carries

  /// What recv() returns: `co_await` it for a BroadcastResult.
  class Awaiter final : public detail::LevelWaiter<Awaiter> {
   public:
    /// Waits for `r`'s next result; made by recv().
    explicit Awaiter(Receiver* r) noexcept
        : detail::LevelWaiter<Awaiter>(r->b_->lock_, r->b_->waiters_, "shoal::Broadcast::Receiver::recv"), r_(r) {}
    bool ready_locked() { return r_->b_->take_locked(r_->next_, out_); }
    BroadcastResult<T> await_resume() {
      this->throw_if_cancelled();
      if (!out_.has_value() && !out_.lagged()) {
        // Woken by a send or close: the position only moves forward, so
        // something is there now (a value, a lag, or the end).
        detail::WaitSection sec(r_->b_->lock_);
        (void)r_->b_->take_locked(r_->next_, out_);
      }
      return std::move(out_);
    }

   private:
    Receiver* r_;
    BroadcastResult<T> out_;
  };

  /// The next value (a copy), or the lag, or the end.
  /// Checkpoint: yes; a recv that need not wait yields once per budget (the
  ///   value is kept even if cancelled then).
  /// Cancellation: nothing was read: the position is where it was.
  /// Thread-safety: the task that owns the receiver; plain threads use recv_blocking.
  /// Throws: Cancelled; what T's copy throws (the position stays);
  ///   std::logic_error outside a shoal task or on a moved-from receiver.
  [[nodiscard]] Awaiter recv() {
    if (b_ == nullptr) throw std::logic_error("shoal::Broadcast::Receiver::recv: moved from");
    return Awaiter(this);
  }

  /// Never waits: the result recv would give, or nullopt when nothing new is
  /// there yet (and the broadcast is open).
  std::optional<BroadcastResult<T>> try_recv() {
    if (b_ == nullptr) throw std::logic_error("shoal::Broadcast::Receiver::try_recv: moved from");
    detail::WaitSection sec(b_->lock_);
    BroadcastResult<T> out;
    if (!b_->take_locked(next_, out)) return std::nullopt;
    return out;
  }

  /// Blocks a plain thread until there is a result (as recv).
  /// Checkpoint: not applicable. Cancellation: none.
  /// Thread-safety: plain threads and spawn_blocking functions, not a worker.
  BroadcastResult<T> recv_blocking() {
    if (b_ == nullptr) throw std::logic_error("shoal::Broadcast::Receiver::recv_blocking: moved from");
    BroadcastResult<T> out;
    (void)detail::wait_level_blocking(b_->lock_, b_->waiters_, [&] { return b_->take_locked(next_, out); },
                                      "shoal::Broadcast::Receiver::recv_blocking");
    if (!out.has_value() && !out.lagged()) {  // woken: something is there now
      detail::WaitSection sec(b_->lock_);
      (void)b_->take_locked(next_, out);
    }
    return out;
  }

 private:
  friend class Broadcast;
  Receiver(Broadcast* b, std::uint64_t next) noexcept : b_(b), next_(next) {}
  void leave() noexcept {
    if (b_ == nullptr) return;
    detail::WaitSection sec(b_->lock_);
    --b_->receivers_;
    b_ = nullptr;
  }
  Broadcast* b_;
  std::uint64_t next_;

};

namespace detail {
/// on_recv's source for a Broadcast receiver (detail::LevelCase).
template <class T>
struct BroadcastRecvSource {
  using outcome_type = BroadcastResult<T>;
  using Receiver = typename Broadcast<T>::Receiver;
  static BroadcastRecvSource of(Receiver& rx) {
    if (Broadcast<T>::of(rx) == nullptr) throw std::logic_error("shoal::on_recv: the broadcast receiver is moved from");
    return BroadcastRecvSource{&rx};
  }
  Receiver* r;
  Broadcast<T>& b() const noexcept { return *Broadcast<T>::of(*r); }
  SpinLock& lock() const noexcept { return b().lock_; }
  WaitList& waiters() const noexcept { return b().waiters_; }
  bool ready_locked() const noexcept { return Broadcast<T>::next_of(*r) != b().tail_ || b().closed_; }
  BroadcastResult<T> take() {
    WaitSection sec(b().lock_);
    BroadcastResult<T> out;
    (void)b().take_locked(Broadcast<T>::next_of(*r), out);  // something is there: the position only moves forward
    return out;
  }
};
}  // namespace detail

/// A select case (channel/select.hpp): `rx`'s next result from its
/// Broadcast, as recv() gives it (a value, the lag, or the end). Nothing is
/// taken unless this case wins.
/// Throws: std::logic_error for a moved-from receiver.
template <class R>
  requires std::is_same_v<R, typename Broadcast<typename R::value_type>::Receiver>
detail::LevelCase<detail::BroadcastRecvSource<typename R::value_type>> on_recv(R& rx) {
  using Source = detail::BroadcastRecvSource<typename R::value_type>;
  return detail::LevelCase<Source>(Source::of(rx));
}

}  // namespace shoal
