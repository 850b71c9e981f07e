// Oneshot<T>: one value from a sender to a receiver (a result handed back
// from another task or thread, a reply to a request).
//
//   auto [tx, rx] = shoal::oneshot<int>();
//   s.spawn([tx = std::move(tx)]() mutable -> shoal::Task<void> { tx.send(42); co_return; });
//   const int v = co_await rx.recv();  // throws SenderDropped if tx went unsent
//   use(v);
#pragma once

#include <coroutine>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/thread_wake.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"

namespace shoal {

/// The oneshot's sender was destroyed without sending a value.
class SenderDropped : public std::runtime_error {
 public:
  SenderDropped() : std::runtime_error("shoal: the oneshot's sender was destroyed without sending a value") {}
};

template <class T>
class OneshotSender;
template <class T>
class OneshotReceiver;
template <class T>
std::pair<OneshotSender<T>, OneshotReceiver<T>> oneshot();
namespace detail {
template <class T>
struct OneshotRecvSource;
}  // namespace detail

namespace detail {

// Shared by the two ends; freed by the last one to go. The value moves only
// under the lock, and the receiver's wait is on the one wait queue.
template <class T>
struct OneshotState {
  SpinLock lock;
  WaitList waiters;  // the receiver, while it waits
  std::optional<T> value;
  bool sender_gone = false;
  bool received = false;
  shim::atomic<int> refs{2};

  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  bool ready_locked() const noexcept { return value.has_value() || sender_gone || received; }
  /// Under the lock, once ready: the value, or why there is none.
  T take_locked() {
    if (received) throw std::logic_error("shoal::OneshotReceiver: the value was already received");
    if (!value) throw SenderDropped();
    T v = std::move(*value);  // if this throws, the value stays for a retry
    value.reset();
    received = true;
    return v;
  }
};

}  // namespace detail

/// The sending end: sends at most one value. Move-only.
/// Thread-safety: one task or thread at a time.
template <class T>
class OneshotSender {
 public:
  /// Takes over `o`'s end; `o` is left moved-from.
  OneshotSender(OneshotSender&& o) noexcept : st_(std::exchange(o.st_, nullptr)) {}
  /// Drops this end as the destructor does (an unsent oneshot's receiver gets
  /// SenderDropped), then takes over `o`'s.
  OneshotSender& operator=(OneshotSender&& o) noexcept {
    if (this != &o) {
      drop();
      st_ = std::exchange(o.st_, nullptr);
    }
    return *this;
  }
  OneshotSender(const OneshotSender&) = delete;
  OneshotSender& operator=(const OneshotSender&) = delete;
  /// Destroyed without sending: the receiver gets SenderDropped.
  ~OneshotSender() { drop(); }

  /// Sends `v` and wakes the receiver. Never waits. Returns false if the
  /// receiver is already gone (then `v` is destroyed: nobody can take it).
  /// Throws: std::logic_error on a second send or a moved-from sender;
  ///   what T's move throws (then nothing was sent and the sender can retry).
  bool send(T v) {
    if (st_ == nullptr) throw std::logic_error("shoal::OneshotSender::send: already sent, or moved from");
    {
      detail::WaitSection sec(st_->lock);
      st_->value.emplace(std::move(v));
      detail::wake_one(st_->waiters, sec);
    }
    const bool received = st_->refs.load(std::memory_order_acquire) == 2;
    std::exchange(st_, nullptr)->release();
    return received;
  }

 private:
  friend std::pair<OneshotSender<T>, OneshotReceiver<T>> oneshot<T>();
  explicit OneshotSender(detail::OneshotState<T>* st) noexcept : st_(st) {}
  void drop() noexcept {
    if (st_ == nullptr) return;
    {
      detail::WaitSection sec(st_->lock);
      st_->sender_gone = true;
      detail::wake_one(st_->waiters, sec);
    }
    std::exchange(st_, nullptr)->release();
  }
  detail::OneshotState<T>* st_;
};

/// The receiving end: receives the one value. Move-only.
/// Thread-safety: one task or thread at a time.
template <class T>
class OneshotReceiver {
 public:
  /// Takes over `o`'s end; `o` is left moved-from.
  OneshotReceiver(OneshotReceiver&& o) noexcept : st_(std::exchange(o.st_, nullptr)) {}
  /// Drops this end as the destructor does, then takes over `o`'s.
  OneshotReceiver& operator=(OneshotReceiver&& o) noexcept {
    if (this != &o) {
      if (st_ != nullptr) st_->release();
      st_ = std::exchange(o.st_, nullptr);
    }
    return *this;
  }
  OneshotReceiver(const OneshotReceiver&) = delete;
  OneshotReceiver& operator=(const OneshotReceiver&) = delete;
  /// A value sent but never received is destroyed with the last end.
  ~OneshotReceiver() {
    if (st_ != nullptr) st_->release();
  }

  /// What recv() returns: `co_await` it for the value.
  class Awaiter final : public detail::LevelWaiter<Awaiter> {
   public:
    /// Waits for the value in `st`; made by recv().
    explicit Awaiter(detail::OneshotState<T>* st) noexcept
        : detail::LevelWaiter<Awaiter>(st->lock, st->waiters, "shoal::OneshotReceiver::recv"), st_(st) {}
    bool ready_locked() const noexcept { return st_->ready_locked(); }
    T await_resume() {
      this->throw_if_cancelled();
      detail::WaitSection sec(st_->lock);  // pairs with the sender's unlock
      return st_->take_locked();
    }

   private:
    detail::OneshotState<T>* st_;
  };

  /// Waits for the value.
  /// Checkpoint: yes (a cancelled task throws even if the value is there);
  ///   a value already there yields once per budget.
  /// Cancellation: the value, if any, stays for a later recv.
  /// Thread-safety: the task that owns the receiver.
  /// Throws: Cancelled; SenderDropped (the sender went without sending);
  ///   std::logic_error once the value was received, on a moved-from
  ///   receiver, or outside a shoal task.
  [[nodiscard]] Awaiter recv() {
    check("recv");
    return Awaiter(st_);
  }

  /// Never waits: the value if it was sent (and not yet received), else
  /// nullopt. Throws SenderDropped once the sender went without sending.
  std::optional<T> try_recv() {
    check("try_recv");
    detail::WaitSection sec(st_->lock);
    if (!st_->ready_locked()) return std::nullopt;
    return st_->take_locked();
  }

  /// Blocks a plain thread until the value comes.
  /// Checkpoint: not applicable. Cancellation: none.
  /// Thread-safety: plain threads and spawn_blocking functions, not a worker.
  /// Throws: SenderDropped; std::logic_error (as recv, and on a worker).
  T recv_blocking() {
    check("recv_blocking");
    (void)detail::wait_level_blocking(st_->lock, st_->waiters, [this] { return st_->ready_locked(); },
                                      "shoal::OneshotReceiver::recv_blocking");
    detail::WaitSection sec(st_->lock);
    return st_->take_locked();
  }

 private:
  friend std::pair<OneshotSender<T>, OneshotReceiver<T>> oneshot<T>();
  explicit OneshotReceiver(detail::OneshotState<T>* st) noexcept : st_(st) {}
  void check(const char* what) const {
    if (st_ == nullptr) throw std::logic_error(std::string("shoal::OneshotReceiver::") + what + ": moved from");
  }
  friend struct detail::OneshotRecvSource<T>;
  detail::OneshotState<T>* st_;
};

namespace detail {
/// on_recv's source for a oneshot receiver (detail::LevelCase).
template <class T>
struct OneshotRecvSource {
  using outcome_type = T;
  static OneshotRecvSource of(OneshotReceiver<T>& rx) {
    rx.check("on_recv");
    return OneshotRecvSource{rx.st_};
  }
  OneshotState<T>* st;
  SpinLock& lock() const noexcept { return st->lock; }
  WaitList& waiters() const noexcept { return st->waiters; }
  bool ready_locked() const noexcept { return st->ready_locked(); }
  T take() {
    WaitSection sec(st->lock);
    return st->take_locked();
  }
};
}  // namespace detail

/// A select case (channel/select.hpp): `rx`'s value, as recv() gives it.
/// Nothing is taken unless this case wins.
/// Throws: std::logic_error for a moved-from receiver; when the case wins,
///   what recv() throws (SenderDropped; std::logic_error once received).
template <class T>
detail::LevelCase<detail::OneshotRecvSource<T>> on_recv(OneshotReceiver<T>& rx) {
  return detail::LevelCase<detail::OneshotRecvSource<T>>(detail::OneshotRecvSource<T>::of(rx));
}

/// A new oneshot: the two ends, sender first. One allocation.
/// Throws: std::bad_alloc.
template <class T>
std::pair<OneshotSender<T>, OneshotReceiver<T>> oneshot() {
  static_assert(std::is_move_constructible_v<T>, "shoal::oneshot<T>: T must be move-constructible");
  auto* st = new detail::OneshotState<T>();
  return {OneshotSender<T>(st), OneshotReceiver<T>(st)};
}

}  // namespace shoal
