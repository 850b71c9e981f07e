// Channel<T>: a bounded MPMC queue between tasks (and plain threads).
// Capacity 0 is a rendezvous: a send completes when a receiver takes it.
//
// Waiters are on the one wait queue (detail/wait_queue.hpp): two lists under
// lock_. Invariants (all under lock_): a value moves between a sender, the
// buffer and a receiver only while the lock is held, at the moment the
// waiter is unlinked. A canceller claims a waiter only by unlinking it under
// the same lock, so a value is handed over or the wait is cancelled, never
// both. Wakes happen after the lock is released (WaitSection).
//
// T's move or copy may throw (lock mode only: the ring takes nothrow-movable
// T). Every section that runs it holds the lock through a WaitSection, which
// unlocks and wakes on the way out, and each step moves a value only after
// the step before it succeeded, so a throw leaves every value where it was:
// the caller's operation fails with the exception and the channel is as it
// was. The one move on behalf of another party, the refill of a freed slot
// from a waiting sender during a recv, hands that sender its own exception.
//
// Buffered channels (capacity >= 2, nothrow-movable T) keep their values in a
// lock-free ring (detail/ring.hpp); the lock then guards only the wait lists.
// A waiter announces itself (n_senders_/n_receivers_, seq_cst) before its
// last retry; whoever completes an operation reads that count and,
// if someone waits, performs the waiter's operation on its behalf under the
// lock (a hand-off). Either the waiter's retry sees the new value/slot or the
// completer sees the waiter: no lost wake-up, and values move only through
// the ring or a hand-off under the lock. That is a Dekker pattern: the
// completer's seq_cst CAS on the ring's head or tail, then its seq_cst load
// of the count; the waiter's seq_cst RMW of the count (and a fence), then the
// ring's seq_cst load of head or tail. Checked under Relacy (weak memory):
// tests/relacy/channel_relacy_test.cpp.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <variant>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/ring.hpp"
#include "shoal/detail/spin_lock.hpp"
#include "shoal/detail/thread_wake.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"

namespace shoal {

namespace detail {
template <class T>
class ChannelCase;
}  // namespace detail

/// A send on a closed channel. Catch ChannelClosedError<T> to get the value back.
class ChannelClosed : public std::runtime_error {
 public:
  ChannelClosed() : std::runtime_error("shoal: send on a closed channel (the value is returned in the exception)") {}
};

/// A send of a `T` on a closed channel; `value` hands the value back.
template <class T>
class ChannelClosedError : public ChannelClosed {
 public:
  /// Carries `v`, the value that was not sent.
  explicit ChannelClosedError(T v) : value(std::move(v)) {}
  T value;  ///< The value that was not sent.
};

/// What Channel::try_send did: `sent` (the value is in the channel), `full`
/// (no room now; at capacity 0, no receiver waiting) or `closed`. On `full`
/// and `closed` the value is left with the caller.
enum class SendStatus { sent, full, closed };

/// A bounded multi-producer, multi-consumer queue between tasks, and plain
/// threads through the _blocking forms. Capacity 0 is a rendezvous: a send
/// completes when a receiver takes the value. close() ends it: receivers
/// drain what is buffered, then get nullopt; sends fail.
/// Thread-safety: every member, from any task or thread (tasks use send and
/// recv, plain threads send_blocking and recv_blocking). Not copyable or movable.
template <class T>
class Channel {
  static_assert(std::is_move_constructible_v<T>, "shoal::Channel<T>: T must be move-constructible");

  using Section = detail::WaitSection;
  using Wakes = detail::WakeList;
  // Every waiter in senders_/receivers_: a task's, a thread's, or a
  // select's case (select.hpp), which a waker must claim first.
  struct Waiter : detail::SelectCase {
    Waiter(Channel* c, T* value) noexcept : detail::SelectCase(c->lock_), ch(c), sender(true), data(value) {}
    Waiter(Channel* c, std::optional<T>* slot) noexcept : detail::SelectCase(c->lock_), ch(c), sender(false), data(slot) {}
    Waiter(Channel* c, bool is_sender, void* d) noexcept : detail::SelectCase(c->lock_), ch(c), sender(is_sender), data(d) {}
    Channel* ch;
    const bool sender;  // in senders_ (else receivers_) while queued
    bool done = false;  // the operation completed (value moved / channel closed)
    void* data;         // the sender's T, or the receiver's std::optional<T>
    std::exception_ptr error;  // a sender whose value threw when moved on its behalf
    const char* wait_kind() const noexcept override { return sender ? "shoal::Channel::send" : "shoal::Channel::recv"; }

   private:
    void left_locked() noexcept override { ch->unannounce(sender); }
  };
  template <class U>
  friend class detail::ChannelCase;

 public:
  /// Capacity 0: rendezvous. Throws std::bad_alloc for the buffer.
  explicit Channel(std::size_t capacity) : capacity_(capacity) {
    if (capacity == 0) return;
    // Capacity 1 is hand-off dominated: the lock path's direct hand-off wins
    // there (ping-pong 117 vs 170 ns); larger buffers take the ring.
    if constexpr (std::is_nothrow_move_constructible_v<T>) {
      if (capacity >= 2) {
        ring_ = std::make_unique<detail::Ring<T>>(capacity);
      } else {
        buffer_ = std::make_unique<std::optional<T>[]>(capacity);
      }
    } else {
      buffer_ = std::make_unique<std::optional<T>[]>(capacity);
    }
  }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  /// Destroying a channel that tasks or threads still wait on is a bug:
  /// it aborts with a message instead of leaving them hanging.
  ~Channel() {
    if (!senders_.empty() || !receivers_.empty()) {
      std::fprintf(stderr, "shoal: Channel at %p destroyed while tasks or threads wait on it\n",
                   static_cast<void*>(this));
      std::abort();
    }
  }

  /// The capacity given at construction (0: rendezvous).
  std::size_t capacity() const noexcept { return capacity_; }

  /// What send() returns: `co_await` it to send the value.
  class SendAwaiter final : private Waiter {
   public:
    /// A send of `v` on `c`; made by send().
    SendAwaiter(Channel* c, T v) : Waiter(c, &value_), value_(std::move(v)) {}
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
      detail::TaskRecord* f = detail::record_of(h);
      this->record = f;
      if (f == nullptr) throw std::logic_error("shoal::Channel::send awaited outside a shoal task");
      if (f->cancelled()) {
        this->cancelled = true;
        return false;
      }
      Channel& c = *this->ch;
      bool contended = false;
      const int fast = c.send_now(value_, &contended);
      if (fast != kWouldBlock) return finish_fast(fast == kDone, contended, h, f);
      const int r = c.wait_task(true, this, &value_, nullptr, f, h);
      if (r == kSuspended) return true;
      if (r == kWouldBlock) {
        this->cancelled = true;
      } else if (r == kClosed) {
        closed_ = true;
      } else {
        this->done = true;
      }
      return false;
    }
    /// Throws Cancelled (value not sent), ChannelClosedError<T> (value
    /// returned), or what T's move threw when the channel took the value.
    [[gnu::always_inline]] void await_resume() {  // see CheckpointAwaiter::await_resume
      if (closed_) throw ChannelClosedError<T>(std::move(value_));
      if (this->cancelled) detail::raise_cancelled();
      if (this->error) std::rethrow_exception(this->error);
      if (!this->done) throw ChannelClosedError<T>(std::move(value_));  // woken by close()
    }

   private:
    friend class Channel;
    bool finish_fast(bool sent, bool contended, std::coroutine_handle<> h, detail::TaskRecord* f) {
      if (!sent) {
        closed_ = true;
        return false;
      }
      this->done = true;
      if (contended && this->ch->gather(f, h, this)) return true;
      if (!detail::consume_budget(f)) return false;
      detail::yield_from(f, h, this);  // out of budget: a schedule point
      return true;
    }
    T value_;
    bool closed_ = false;
  };

  /// What recv() returns: `co_await` it for the next value.
  class RecvAwaiter final : private Waiter {
   public:
    /// A receive from `c`; made by recv().
    explicit RecvAwaiter(Channel* c) noexcept : Waiter(c, &slot_) {}
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
      detail::TaskRecord* f = detail::record_of(h);
      this->record = f;
      if (f == nullptr) throw std::logic_error("shoal::Channel::recv awaited outside a shoal task");
      if (f->cancelled()) {
        this->cancelled = true;
        return false;
      }
      Channel& c = *this->ch;
      bool contended = false;
      if (c.recv_now(slot_, &contended) != kWouldBlock) {
        this->done = true;
        if (contended && c.gather(f, h, this)) return true;
        if (!detail::consume_budget(f)) return false;
        detail::yield_from(f, h, this);  // out of budget: a schedule point
        return true;
      }
      const int r = c.wait_task(false, this, nullptr, &slot_, f, h);
      if (r == kSuspended) return true;
      if (r == kWouldBlock) {
        this->cancelled = true;
      } else {
        this->done = true;
      }
      return false;
    }
    /// The next value, or nullopt once the channel is closed and drained.
    /// A value handed over wins over a cancellation that came at the same time.
    /// (Returning it moves it once more; if that move throws, the value,
    /// already out of the channel, is destroyed, as with any by-value return.)
    [[gnu::always_inline]] std::optional<T> await_resume() {  // see CheckpointAwaiter::await_resume
      // A new optional from the value, not a copy of slot_: the pop just
      // wrote the value and the flag apart, and one wide load of both
      // would wait for those stores to retire (a store-forwarding stall,
      // 40 % of a one-worker chan_throughput).
      if (slot_) return std::optional<T>(std::move(*slot_));
      if (this->cancelled) detail::raise_cancelled();
      return std::nullopt;
    }

   private:
    friend class Channel;
    std::optional<T> slot_;
  };

  /// Waits for room (or a receiver, at capacity 0), then enqueues `v`.
  /// Checkpoint: yes; a send that need not wait yields once per budget (the
  ///   value is sent, and the send returns normally even if cancelled then).
  /// Cancellation: nothing is enqueued; `v` is destroyed with the awaiter
  ///   (only ChannelClosedError hands it back).
  /// Thread-safety: any task; plain threads use send_blocking.
  /// Throws: Cancelled; ChannelClosedError<T> (carrying `v`) once closed, or
  ///   when close() wakes the waiting send; what T's move throws when the
  ///   channel takes `v` (then nothing is enqueued); std::logic_error when
  ///   awaited outside a shoal task.
  [[nodiscard]] SendAwaiter send(T v) { return SendAwaiter(this, std::move(v)); }

  /// Waits for a value. Returns nullopt once closed and drained.
  /// Checkpoint: yes; a recv that need not wait yields once per budget
  ///   (keeping the value it took).
  /// Cancellation: no value is taken. A value handed over wins over a
  ///   cancellation at the same moment: it is returned, and the next
  ///   checkpoint throws.
  /// Thread-safety: any task; plain threads use recv_blocking.
  /// Throws: Cancelled; what T's move throws (the value stays in the
  ///   channel); std::logic_error when awaited outside a shoal task.
  [[nodiscard]] RecvAwaiter recv() noexcept { return RecvAwaiter(this); }

  /// Never waits. On anything but `sent`, `v` is left untouched.
  SendStatus try_send(T&& v) {
    const int r = send_now(v);
    return r == kDone ? SendStatus::sent : r == kClosed ? SendStatus::closed : SendStatus::full;
  }
  /// Never waits: sends a copy of `v` (made even when the result is not `sent`).
  SendStatus try_send(const T& v) {
    T copy(v);
    return try_send(std::move(copy));
  }

  /// Never waits: a value, or nullopt when empty (see is_closed()).
  std::optional<T> try_recv() {
    std::optional<T> out;
    recv_now(out);
    return out;
  }

  /// Stops sends; receivers drain what is buffered, then get nullopt.
  /// Waiting senders fail with ChannelClosedError (their value returned).
  void close() noexcept {
    if (ring_) ring_->close();  // sends fail from here on; buffered values stay
    Section sec(lock_);
    closed_ = true;
    while (Waiter* w = claim_front(receivers_)) {
      unlink(w);
      if (ring_ && !w->in_select) ring_->try_pop(receiver_slot(w));  // a value a sender was still writing
      w->done = !w->in_select;  // a select's case retries: it takes such a value itself
      sec.wake(w);
    }
    while (Waiter* w = claim_front(senders_)) {
      unlink(w);  // not done: the sender still holds its value
      sec.wake(w);
    }
  }

  /// True once close() was called (buffered values may still be waiting for
  /// receivers). A snapshot.
  bool is_closed() const noexcept {
    lock_.lock();
    bool c = closed_;
    lock_.unlock();
    return c;
  }

  // ---- the thread bridge: blocking forms for plain threads ------------------

  /// Blocks the calling thread until `v` is enqueued.
  /// Checkpoint: not applicable (a thread is in no scope: nothing cancels it).
  /// Cancellation: none; close() is how to end the wait.
  /// Thread-safety: plain threads and spawn_blocking functions, not a worker.
  /// Throws: ChannelClosedError<T> (carrying `v`) once closed; what T's move
  ///   throws; std::logic_error on a runtime worker.
  void send_blocking(T v) {
    check_not_worker("send_blocking");
    ThreadSend w(this, std::move(v));
    int r = send_now(w.value);
    if (r == kWouldBlock) r = wait_thread(true, &w, &w.value, nullptr, w.wake);
    if (r == kSuspended) {
      w.wake.wait();
      Section sec(lock_);  // pairs with the waker's unlock: see the outcome
      r = w.done ? kDone : kClosed;
    }
    if (w.error) std::rethrow_exception(w.error);
    if (r == kClosed) throw ChannelClosedError<T>(std::move(w.value));
  }

  /// Blocks the calling thread until a value arrives, or returns nullopt
  /// once closed and drained.
  /// Checkpoint, Cancellation, Thread-safety: as send_blocking.
  /// Throws: what T's move throws; std::logic_error on a runtime worker.
  std::optional<T> recv_blocking() {
    check_not_worker("recv_blocking");
    std::optional<T> out;  // the waiter fills the caller's result: no move after the hand-off
    ThreadRecv w(this, out);
    int r = recv_now(out);
    if (r == kWouldBlock) r = wait_thread(false, &w, nullptr, &out, w.wake);
    if (r == kSuspended) {
      w.wake.wait();
      Section sec(lock_);  // pairs with the waker's unlock: see the value
    }
    return out;
  }

 private:
  static constexpr int kDone = 0, kClosed = 1, kWouldBlock = 2, kSuspended = 3;

  // One attempt that never waits. Ring: lock-free, then hand-offs to
  // waiters. Lock mode: under the lock, waking whoever it completed.
  int send_now(T& v, bool* contended = nullptr) {
    if (ring_) {
      bool lost = false;
      const int r = ring_->try_push(v, lost);
      if (contended != nullptr) *contended = lost;
      if (r == kDone && n_receivers_.load(std::memory_order_seq_cst) != 0) settle(true);
      return r;
    }
    Section sec(lock_);
    return try_send_locked(v, sec);
  }
  int recv_now(std::optional<T>& out, bool* contended = nullptr) {
    if (ring_) {
      bool lost = false;
      const int r = ring_->try_pop(out, lost);
      if (contended != nullptr) *contended = lost;
      if (r == kDone && n_senders_.load(std::memory_order_seq_cst) != 0) settle(false);
      return r;
    }
    Section sec(lock_);
    return try_recv_locked(out, sec);
  }

  // A task whose ring operation met one from another worker moves to the
  // channel's home worker (the first to meet contention there), where its
  // peers' operations stay in one core's cache instead of moving each slot
  // and index between cores. True: `f` was handed over. Pinned there until
  // its next wait, 64 budget yields, or a budget yield after a long poll:
  // tasks that compute between operations must not lose their parallelism
  // (docs/scheduler.md, "A channel's tasks gather").
  bool gather(detail::TaskRecord* f, std::coroutine_handle<> h, const void* awaiter) noexcept {
    std::uint8_t home = home_.load(std::memory_order_relaxed);
    if (home == detail::TaskRecord::kNoWorker) {
      home_.compare_exchange_strong(home, f->worker, std::memory_order_relaxed);
      return false;
    }
    return home != f->worker && detail::migrate_from(f, h, home, /*end_at_long_poll=*/true, awaiter);
  }

  // The waiting half, on the wait queue: under the lock, announce (ring
  // mode), retry, and either link (kSuspended) or report the retry's result;
  // kWouldBlock then means "cancelled". Throws what T's move throws (lock
  // mode), with nothing queued and the hook disarmed.
  int wait_task(bool send, Waiter* w, T* v, std::optional<T>* out, detail::TaskRecord* f, std::coroutine_handle<> h) {
    int r = kWouldBlock;
    const detail::WaitStep step = detail::wait_step(*w, f, h, lock_, send ? senders_ : receivers_,
                                                    [&](Section& sec) { return (r = retry_locked(send, v, out, sec)) != kWouldBlock; });
    if (step == detail::WaitStep::suspended) return kSuspended;
    if (step == detail::WaitStep::cancelled && ring_) unannounce(send);
    if (ring_ && r == kDone) settle(send);
    return r;
  }
  int wait_thread(bool send, Waiter* w, T* v, std::optional<T>* out, detail::ThreadWake& wake) {
    int r = kWouldBlock;
    const detail::WaitStep step = detail::wait_step_thread(*w, wake, lock_, send ? senders_ : receivers_,
                                                           [&](Section& sec) { return (r = retry_locked(send, v, out, sec)) != kWouldBlock; });
    if (step == detail::WaitStep::suspended) return kSuspended;
    if (ring_ && r == kDone) settle(send);
    return r;
  }
  // The last try before linking, under the lock. Ring mode announces the
  // waiter first (a seq_cst RMW: with the retry's seq_cst load of the ring's
  // head or tail it pairs with the completer's CAS and its load of the
  // count, settle()), and withdraws the announcement if it will not wait
  // after all.
  int retry_locked(bool send, T* v, std::optional<T>* out, Wakes& sec) {
    if (!ring_) return send ? try_send_locked(*v, sec) : try_recv_locked(*out, sec);
    shim_counter& waiting = send ? n_senders_ : n_receivers_;
    waiting.fetch_add(1, std::memory_order_seq_cst);
    const int r = send ? ring_->try_push(*v) : ring_->try_pop(*out);
    if (r != kWouldBlock) waiting.fetch_sub(1, std::memory_order_seq_cst);
    return r;
  }
  // A sender (or receiver) left the wait list without being served, or was
  // claimed by a waker: ring mode's count of announced waiters drops.
  void unannounce(bool sender) noexcept {
    if (ring_) (sender ? n_senders_ : n_receivers_).fetch_sub(1, std::memory_order_seq_cst);
  }

  // Ring mode, after an operation completed: while a waiter of the other
  // kind can now proceed, complete its operation for it. Each step moves one
  // value, and each completed hand-off may unblock the other side in turn.
  void settle(bool sent) noexcept {
    for (;;) {
      if (!(sent ? handoff_to_receiver() : handoff_from_sender())) return;
      sent = !sent;
    }
  }
  // No fence needed before the load: the operation that just completed was
  // a seq_cst CAS on the ring's head or tail, and a waiter's retry reads
  // those (seq_cst) after announcing itself (seq_cst RMW); in the single
  // total order one of the two sees the other.
  bool handoff_to_receiver() noexcept {
    if (n_receivers_.load(std::memory_order_seq_cst) == 0) return false;
    bool moved = false;
    Section sec(lock_);
    if (Waiter* w = claim_front(receivers_)) {
      if (w->in_select) {  // a select takes the value itself (a claimed case cannot give it back)
        unlink(w);
        sec.wake(w);
        return false;
      }
      const int r = ring_->try_pop(receiver_slot(w));
      if (r != kWouldBlock) {  // a value, or closed and drained
        unlink(w);
        w->done = true;
        sec.wake(w);
        moved = (r == kDone);
      }
    }
    return moved;
  }
  bool handoff_from_sender() noexcept {
    if (n_senders_.load(std::memory_order_seq_cst) == 0) return false;
    bool moved = false;
    Section sec(lock_);
    if (Waiter* w = claim_front(senders_)) {
      if (w->in_select) {  // a select sends its value itself
        unlink(w);
        sec.wake(w);
        return false;
      }
      if (ring_->try_push(sender_value(w)) == kDone) {
        unlink(w);
        w->done = true;
        sec.wake(w);
        moved = true;
      }
    }
    return moved;
  }

  struct ThreadSend final : Waiter {
    ThreadSend(Channel* c, T v) : Waiter(c, &value), value(std::move(v)) {}
    T value;
    detail::ThreadWake wake;
  };
  struct ThreadRecv final : Waiter {
    ThreadRecv(Channel* c, std::optional<T>& out) : Waiter(c, &out), slot(&out) {}
    std::optional<T>* slot;
    detail::ThreadWake wake;
  };

  static void check_not_worker(const char* what) {
    if (detail::on_worker_thread()) {
      throw std::logic_error(std::string("shoal::Channel::") + what +
                             ": called on a runtime worker (it would block the worker; use co_await)");
    }
  }

  // The first waiter a waker may complete (claimed), dropping dead select
  // cases on the way; still linked.
  Waiter* claim_front(detail::WaitList& l) noexcept {
    return static_cast<Waiter*>(detail::claim_front(l, [this](detail::Waiter* w) noexcept {
      unannounce(static_cast<Waiter*>(w)->sender);
    }));
  }
  // A waker's claim (under the lock): out of its list, and out of the count.
  void unlink(Waiter* w) noexcept {
    unannounce(w->sender);
    w->unlink_locked();
  }

  static T& sender_value(Waiter* w) noexcept { return *static_cast<T*>(w->data); }
  static std::optional<T>& receiver_slot(Waiter* w) noexcept { return *static_cast<std::optional<T>*>(w->data); }

  // Index of the slot `n` places after head_ (no division on the hot path).
  std::size_t slot_after(std::size_t n) const noexcept {
    std::size_t i = head_ + n;
    return i >= capacity_ ? i - capacity_ : i;
  }

  int try_send_locked(T& v, Wakes& sec) {
    if (closed_) return kClosed;
    if (Waiter* r = claim_front(receivers_)) {  // only when the buffer is empty
      receiver_slot(r).emplace(std::move(v));
      unlink(r);
      r->done = true;
      sec.wake(r);
      return kDone;
    }
    if (count_ < capacity_) {
      buffer_[slot_after(count_)].emplace(std::move(v));
      ++count_;
      return kDone;
    }
    return kWouldBlock;
  }

  int try_recv_locked(std::optional<T>& out, Wakes& sec) {
    if (count_ > 0) {
      out.emplace(std::move(*buffer_[head_]));
      buffer_[head_].reset();
      if (++head_ == capacity_) head_ = 0;
      --count_;
      if (Waiter* s = claim_front(senders_)) {  // refill from the longest-waiting sender
        unlink(s);
        try {
          buffer_[slot_after(count_)].emplace(std::move(sender_value(s)));
          ++count_;
          s->done = true;
        } catch (...) {
          s->error = std::current_exception();  // the sender's send throws it; our value is ours
        }
        sec.wake(s);
      }
      return kDone;
    }
    if (Waiter* s = claim_front(senders_)) {  // rendezvous
      out.emplace(std::move(sender_value(s)));
      unlink(s);
      s->done = true;
      sec.wake(s);
      return kDone;
    }
    return closed_ ? kClosed : kWouldBlock;
  }

  using shim_counter = detail::shim::atomic<std::size_t>;

  const std::size_t capacity_;
  detail::shim::atomic<std::uint8_t> home_{detail::TaskRecord::kNoWorker};  // ring mode: see gather()
  std::unique_ptr<detail::Ring<T>> ring_;            // buffered, nothrow-movable T
  std::unique_ptr<std::optional<T>[]> buffer_;       // buffered, other T (lock mode)
  shim_counter n_senders_{0};                         // ring mode: waiters announced
  shim_counter n_receivers_{0};
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  bool closed_ = false;
  detail::WaitList senders_;
  detail::WaitList receivers_;
  mutable detail::SpinLock lock_;
};

namespace detail {

/// A receive or send case on a Channel<T>. Its waiter is one of the
/// channel's own (Channel<T>::Waiter), so every waker path of the channel
/// meets it as it meets any other waiter.
template <class T>
class ChannelCase : public Channel<T>::Waiter {
  using Base = typename Channel<T>::Waiter;
  static constexpr int kDone = Channel<T>::kDone, kClosed = Channel<T>::kClosed,
                       kWouldBlock = Channel<T>::kWouldBlock;

 public:
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "shoal::select: a channel case needs a T whose move cannot throw (a value claimed for a select "
                "must not be lost to a throwing move)");

  /// A receive case.
  explicit ChannelCase(Channel<T>& ch) noexcept : Base(&ch, &slot_) {}
  /// A send case of `*value` (moved from only if this case completes).
  ChannelCase(Channel<T>& ch, T* value) noexcept : Base(&ch, value) {}
  ChannelCase(ChannelCase&& o) noexcept : Base(o.ch, o.sender, o.sender ? o.data : &slot_) {}

  SpinLock* lock() noexcept { return &this->ch->lock_; }

  // A buffered channel's ring moves without the lock: try it first, so a
  // select whose value is there takes no lock at all.
  int poll_fast() noexcept {
    Channel<T>& c = *this->ch;
    if (!c.ring_) return -1;
    if (!completed(this->sender ? c.ring_->try_push(*value_ptr()) : c.ring_->try_pop(slot_), true)) return 0;
    after_unlock();
    return 1;
  }
  // Polling never links, so a select can never meet its own case as the
  // other side of an operation.
  bool poll_locked(WakeList& sec) noexcept {
    Channel<T>& c = *this->ch;
    int r;
    if (c.ring_) {
      r = this->sender ? c.ring_->try_push(*value_ptr()) : c.ring_->try_pop(slot_);
    } else {
      r = this->sender ? c.try_send_locked(*value_ptr(), sec) : c.try_recv_locked(slot_, sec);
    }
    return completed(r, c.ring_ != nullptr);
  }
  bool link_locked(WakeList& sec, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept {
    Channel<T>& c = *this->ch;
    // The ring moves without the lock: announce, then try once more, so a
    // completer that misses the try sees the count (the channel's own wait
    // protocol). Under the lock nothing else can change.
    if (c.ring_ && completed(c.retry_locked(this->sender, value_ptr(), &slot_, sec), true)) return true;
    this->enter_select(claim, index);
    this->record = f;
    (this->sender ? c.senders_ : c.receivers_).push_back(this);
    return false;
  }
  void after_unlock() noexcept {
    if (settle_) this->ch->settle(this->sender);
    settle_ = false;
  }
  void disarm_locked() noexcept {
    if (this->is_linked()) this->ch->unlink(this);
  }
  bool finish() noexcept {
    if (this->done) return true;  // a waker moved the value under the lock
    // Claimed without a hand-off (the ring, or close()): do it now.
    Channel<T>& c = *this->ch;
    const int r = this->sender ? c.send_now(*value_ptr()) : c.recv_now(slot_);
    if (r == kWouldBlock) return false;  // another party got there first: go round again
    closed_ = r == kClosed;
    return true;
  }
  /// Re-armable for another round.
  void reset() noexcept {
    this->done = false;
    this->in_select = false;
  }

 protected:
  T* value_ptr() noexcept { return this->sender ? static_cast<T*>(this->data) : nullptr; }
  bool completed(int r, bool ring) noexcept {
    if (r == kWouldBlock) return false;
    closed_ = r == kClosed;
    settle_ = ring && r == kDone;  // then waiters of the other kind may proceed
    return true;
  }
  std::optional<T> slot_;
  bool closed_ = false;
  bool settle_ = false;
};

template <class T>
class RecvCase : public ChannelCase<T> {
 public:
  using outcome_type = std::optional<T>;
  using ChannelCase<T>::ChannelCase;
  /// The value, or nullopt: the channel is closed and drained.
  outcome_type take() noexcept { return std::move(this->slot_); }
};

template <class T>
class SendCase : public ChannelCase<T> {
 public:
  using outcome_type = std::monostate;
  using ChannelCase<T>::ChannelCase;
  outcome_type take() {
    if (this->closed_) throw ChannelClosed();
    return {};
  }
};

}  // namespace detail

/// A select case: receive one value from `ch`.
template <class T>
detail::RecvCase<T> on_recv(Channel<T>& ch) noexcept {
  return detail::RecvCase<T>(ch);
}

/// A select case: send `value` on `ch`. `value` is moved from only if this
/// case completes; otherwise it stays yours (which is why it must be an
/// lvalue that outlives the select).
template <class T>
detail::SendCase<T> on_send(Channel<T>& ch, T& value) noexcept {
  return detail::SendCase<T>(ch, &value);
}
template <class T>
void on_send(Channel<T>&, T&&) = delete;  // pass an lvalue: an unsent value stays in it

}  // namespace shoal
