// Channel<T>: a bounded MPMC queue between tasks (and plain threads).
// Capacity 0 is a rendezvous: a send completes when a receiver takes it.
//
// Invariants (all under lock_): a waiter is in at most one wait list, and a
// value moves between a sender, the buffer and a receiver only while the lock
// is held, at the moment the waiter is unlinked. A canceller claims a waiter
// only by unlinking it under the same lock, so a value is handed over or the
// wait is cancelled, never both. Wakes (disarm + schedule) happen after the
// lock is released (the wait protocol in detail/fiber.hpp forbids disarming
// under a lock that cancel_wait takes).
//
// T's move or copy may throw (lock mode only: the ring takes nothrow-movable
// T). Every section that runs it holds the lock through a Section, which
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
// the ring or a hand-off under the lock.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "shoal/detail/fiber.hpp"
#include "shoal/detail/ring.hpp"
#include "shoal/detail/spin_lock.hpp"
#include "shoal/detail/thread_wake.hpp"
#include "shoal/runtime/errors.hpp"

namespace shoal {

/// A send on a closed channel. Catch ChannelClosedError<T> to get the value back.
class ChannelClosed : public std::runtime_error {
 public:
  ChannelClosed() : std::runtime_error("shoal: send on a closed channel (the value is returned in the exception)") {}
};

template <class T>
class ChannelClosedError : public ChannelClosed {
 public:
  explicit ChannelClosedError(T v) : value(std::move(v)) {}
  T value;  ///< The value that was not sent.
};

enum class SendStatus { sent, full, closed };

template <class T>
class Channel {
  static_assert(std::is_move_constructible_v<T>, "shoal::Channel<T>: T must be move-constructible");

  struct WaitList;
  struct Waiter : detail::WaitHook {
    Channel* ch = nullptr;
    detail::Fiber* fiber = nullptr;       // a task, or
    detail::ThreadWake* thread = nullptr;  // a plain thread
    Waiter* prev = nullptr;
    Waiter* next = nullptr;
    WaitList* list = nullptr;
    bool linked = false;
    bool cancelled = false;
    bool done = false;  // the operation completed (value moved / channel closed)
    std::exception_ptr error;  // a sender whose value threw when moved on its behalf

    bool cancel_wait() noexcept override {
      detail::SpinLock& l = ch->lock_;
      l.lock();
      const bool claimed = linked;
      if (claimed) {
        ch->unlink(this);
        cancelled = true;
      }
      l.unlock();
      return claimed;
    }
  };

  struct WaitList {
    Waiter* head = nullptr;
    Waiter* tail = nullptr;
  };

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
    if (senders_.head != nullptr || receivers_.head != nullptr) {
      std::fprintf(stderr, "shoal: Channel at %p destroyed while tasks or threads wait on it\n",
                   static_cast<void*>(this));
      std::abort();
    }
  }

  std::size_t capacity() const noexcept { return capacity_; }

  class SendAwaiter final : private Waiter {
   public:
    SendAwaiter(Channel* c, T v) : value_(std::move(v)) { this->ch = c; }
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
      detail::Fiber* f = detail::fiber_of(h);
      this->fiber = f;
      if (f == nullptr) throw std::logic_error("shoal::Channel::send awaited outside a shoal task");
      if (f->cancelled()) {
        this->cancelled = true;
        return false;
      }
      Channel& c = *this->ch;
      const int fast = c.send_now(value_);
      if (fast != kWouldBlock) return finish_fast(fast == kDone, h, f);
      f->resume = h;
      detail::publish_hook(f, this);
      const int r = c.register_or_retry_armed(true, this, &value_, nullptr, f);
      if (r == kSuspended) return true;
      detail::disarm_wait(f, this);
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
    void await_resume() {
      if (closed_) throw ChannelClosedError<T>(std::move(value_));
      if (this->cancelled) throw Cancelled{};
      if (this->error) std::rethrow_exception(this->error);
      if (!this->done) throw ChannelClosedError<T>(std::move(value_));  // woken by close()
    }

   private:
    friend class Channel;
    bool finish_fast(bool sent, std::coroutine_handle<> h, detail::Fiber* f) {
      if (!sent) {
        closed_ = true;
        return false;
      }
      this->done = true;
      if (!detail::consume_budget(f)) return false;
      detail::yield_from(f, h, this);  // out of budget: a schedule point
      return true;
    }
    T value_;
    bool closed_ = false;
  };

  class RecvAwaiter final : private Waiter {
   public:
    explicit RecvAwaiter(Channel* c) noexcept { this->ch = c; }
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
      detail::Fiber* f = detail::fiber_of(h);
      this->fiber = f;
      if (f == nullptr) throw std::logic_error("shoal::Channel::recv awaited outside a shoal task");
      if (f->cancelled()) {
        this->cancelled = true;
        return false;
      }
      Channel& c = *this->ch;
      if (c.recv_now(slot_) != kWouldBlock) {
        this->done = true;
        if (!detail::consume_budget(f)) return false;
        detail::yield_from(f, h, this);  // out of budget: a schedule point
        return true;
      }
      f->resume = h;
      detail::publish_hook(f, this);
      const int r = c.register_or_retry_armed(false, this, nullptr, &slot_, f);
      if (r == kSuspended) return true;
      detail::disarm_wait(f, this);
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
    std::optional<T> await_resume() {
      if (slot_) return std::move(slot_);
      if (this->cancelled) throw Cancelled{};
      return std::nullopt;
    }

   private:
    friend class Channel;
    std::optional<T> slot_;
  };

  /// Waits for room (or a receiver, at capacity 0), then enqueues `v`.
  /// Checkpoint: yes. Cancellation: nothing is enqueued.
  /// Throws: Cancelled; ChannelClosedError<T> (carrying `v`) once closed.
  /// Thread-safety: any task; plain threads use send_blocking.
  [[nodiscard]] SendAwaiter send(T v) { return SendAwaiter(this, std::move(v)); }

  /// Waits for a value. Returns nullopt once closed and drained.
  /// Checkpoint: yes. Cancellation: no value is taken.
  [[nodiscard]] RecvAwaiter recv() noexcept { return RecvAwaiter(this); }

  /// Never waits. On anything but `sent`, `v` is left untouched.
  SendStatus try_send(T&& v) {
    const int r = send_now(v);
    return r == kDone ? SendStatus::sent : r == kClosed ? SendStatus::closed : SendStatus::full;
  }
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
    Section sec(*this);
    closed_ = true;
    while (Waiter* w = receivers_.head) {
      unlink(w);
      if (ring_) ring_->try_pop(receiver_slot(w));  // a value a sender was still writing
      w->done = true;
      sec.woken.push(w);
    }
    while (Waiter* w = senders_.head) {
      unlink(w);  // not done: the sender still holds its value
      sec.woken.push(w);
    }
  }

  bool is_closed() const noexcept {
    lock_.lock();
    bool c = closed_;
    lock_.unlock();
    return c;
  }

  // ---- the thread bridge: blocking forms for plain threads ------------------

  /// Blocks the calling thread until `v` is enqueued. Throws
  /// ChannelClosedError<T> once closed; std::logic_error on a runtime worker.
  void send_blocking(T v) {
    check_not_worker("send_blocking");
    ThreadSend w(this, std::move(v));
    int r = send_now(w.value);
    if (r == kWouldBlock) r = register_or_retry(true, &w, &w.value, nullptr, nullptr);
    if (r == kSuspended) {
      w.wake.wait();
      Section sec(*this);  // pairs with the waker's unlock: see the outcome
      r = w.done ? kDone : kClosed;
    }
    if (w.error) std::rethrow_exception(w.error);
    if (r == kClosed) throw ChannelClosedError<T>(std::move(w.value));
  }

  /// Blocks the calling thread until a value arrives, or returns nullopt
  /// once closed and drained. std::logic_error on a runtime worker.
  std::optional<T> recv_blocking() {
    check_not_worker("recv_blocking");
    std::optional<T> out;  // the waiter fills the caller's result: no move after the hand-off
    ThreadRecv w(this, out);
    int r = recv_now(out);
    if (r == kWouldBlock) r = register_or_retry(false, &w, nullptr, &out, nullptr);
    if (r == kSuspended) {
      w.wake.wait();
      Section sec(*this);  // pairs with the waker's unlock: see the value
    }
    return out;
  }

 private:
  static constexpr int kDone = 0, kClosed = 1, kWouldBlock = 2, kSuspended = 3;

  // One attempt that never waits. Ring: lock-free, then hand-offs to
  // waiters. Lock mode: under the lock, waking whoever it completed.
  int send_now(T& v) {
    if (ring_) {
      const int r = ring_->try_push(v);
      if (r == kDone) settle(true);
      return r;
    }
    Section sec(*this);
    return try_send_locked(v, sec.woken);
  }
  int recv_now(std::optional<T>& out) {
    if (ring_) {
      const int r = ring_->try_pop(out);
      if (r == kDone) settle(false);
      return r;
    }
    Section sec(*this);
    return try_recv_locked(out, sec.woken);
  }

  // The waiting half (for a task: after publishing its hook). Under the lock:
  // announce, retry, and either register (kSuspended) or report the retry's
  // result; kWouldBlock then means "cancelled". `f` is null for a thread.
  // Throws what T's move throws (lock mode), with w not linked.
  int register_or_retry(bool send, Waiter* w, T* v, std::optional<T>* out, detail::Fiber* f) {
    if (ring_) {
      const int r = ring_register_or_retry(send, w, v, out, f);
      if (r == kDone) settle(send);
      return r;
    }
    Section sec(*this);
    const int r = send ? try_send_locked(*v, sec.woken) : try_recv_locked(*out, sec.woken);
    if (r == kWouldBlock && (f == nullptr || !f->cancelled())) {
      link(send ? senders_ : receivers_, w);
      return kSuspended;
    }
    return r;
  }
  int ring_register_or_retry(bool send, Waiter* w, T* v, std::optional<T>* out, detail::Fiber* f) noexcept {
    shim_counter& waiting = send ? n_senders_ : n_receivers_;
    Section sec(*this);
    waiting.fetch_add(1, std::memory_order_seq_cst);
    SHOAL_FENCE_SEQ_CST();  // announce, then retry: pairs with settle()'s fence
    const int r = send ? ring_->try_push(*v) : ring_->try_pop(*out);
    if (r == kWouldBlock && (f == nullptr || !f->cancelled())) {
      link(send ? senders_ : receivers_, w);  // keeps the announcement
      return kSuspended;
    }
    waiting.fetch_sub(1, std::memory_order_seq_cst);
    return r;
  }
  // For a task that published its hook: a throw disarms it on the way out.
  int register_or_retry_armed(bool send, Waiter* w, T* v, std::optional<T>* out, detail::Fiber* f) {
    try {
      return register_or_retry(send, w, v, out, f);
    } catch (...) {
      detail::disarm_wait(f, w);
      throw;
    }
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
    Section sec(*this);
    if (Waiter* w = receivers_.head) {
      const int r = ring_->try_pop(receiver_slot(w));
      if (r != kWouldBlock) {  // a value, or closed and drained
        unlink(w);
        w->done = true;
        sec.woken.push(w);
        moved = (r == kDone);
      }
    }
    return moved;
  }
  bool handoff_from_sender() noexcept {
    if (n_senders_.load(std::memory_order_seq_cst) == 0) return false;
    bool moved = false;
    Section sec(*this);
    if (Waiter* w = senders_.head) {
      if (ring_->try_push(sender_value(w)) == kDone) {
        unlink(w);
        w->done = true;
        sec.woken.push(w);
        moved = true;
      }
    }
    return moved;
  }

  struct ThreadSend : Waiter {
    ThreadSend(Channel* c, T v) : value(std::move(v)) {
      this->ch = c;
      this->thread = &wake;
    }
    T value;
    detail::ThreadWake wake;
  };
  struct ThreadRecv : Waiter {
    ThreadRecv(Channel* c, std::optional<T>& out) : slot(&out) {
      this->ch = c;
      this->thread = &wake;
    }
    std::optional<T>* slot;
    detail::ThreadWake wake;
  };

  // Waiters to wake once the lock is released, linked through `next`.
  struct WakeList {
    Waiter* head = nullptr;
    void push(Waiter* w) noexcept {
      w->next = head;
      head = w;
    }
  };

  // The lock held for one step: released on every way out (a throwing move
  // of T included), then whoever the step completed is woken.
  class Section {
   public:
    explicit Section(Channel& c) noexcept : c_(c) { c_.lock_.lock(); }
    ~Section() {
      c_.lock_.unlock();
      c_.wake_all(woken);
    }
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;
    WakeList woken;

   private:
    Channel& c_;
  };

  static void check_not_worker(const char* what) {
    if (detail::on_worker_thread()) {
      throw std::logic_error(std::string("shoal::Channel::") + what +
                             ": called on a runtime worker (it would block the worker; use co_await)");
    }
  }

  void wake_all(WakeList& woken) noexcept {
    Waiter* w = woken.head;
    woken.head = nullptr;
    while (w != nullptr) {
      Waiter* next = w->next;
      if (w->fiber != nullptr) {
        detail::Fiber* f = w->fiber;
        detail::disarm_wait(f, w);
        detail::schedule(f);  // w may be gone from here on
      } else {
        w->thread->notify();
      }
      w = next;
    }
  }

  void link(WaitList& l, Waiter* w) noexcept {
    w->linked = true;
    w->list = &l;
    w->next = nullptr;
    w->prev = l.tail;
    if (l.tail != nullptr) {
      l.tail->next = w;
    } else {
      l.head = w;
    }
    l.tail = w;
  }
  void unlink(Waiter* w) noexcept {
    WaitList& l = *w->list;
    if (ring_) (&l == &senders_ ? n_senders_ : n_receivers_).fetch_sub(1, std::memory_order_seq_cst);
    if (w->prev != nullptr) {
      w->prev->next = w->next;
    } else {
      l.head = w->next;
    }
    if (w->next != nullptr) {
      w->next->prev = w->prev;
    } else {
      l.tail = w->prev;
    }
    w->linked = false;
    w->prev = w->next = nullptr;
  }

  static T& sender_value(Waiter* w) noexcept {
    if (w->fiber != nullptr) return static_cast<SendAwaiter*>(w)->value_;
    return static_cast<ThreadSend*>(w)->value;
  }
  static std::optional<T>& receiver_slot(Waiter* w) noexcept {
    if (w->fiber != nullptr) return static_cast<RecvAwaiter*>(w)->slot_;
    return *static_cast<ThreadRecv*>(w)->slot;
  }

  // Index of the slot `n` places after head_ (no division on the hot path).
  std::size_t slot_after(std::size_t n) const noexcept {
    std::size_t i = head_ + n;
    return i >= capacity_ ? i - capacity_ : i;
  }

  int try_send_locked(T& v, WakeList& woken) {
    if (closed_) return kClosed;
    if (Waiter* r = receivers_.head) {  // only when the buffer is empty
      receiver_slot(r).emplace(std::move(v));
      unlink(r);
      r->done = true;
      woken.push(r);
      return kDone;
    }
    if (count_ < capacity_) {
      buffer_[slot_after(count_)].emplace(std::move(v));
      ++count_;
      return kDone;
    }
    return kWouldBlock;
  }

  int try_recv_locked(std::optional<T>& out, WakeList& woken) {
    if (count_ > 0) {
      out.emplace(std::move(*buffer_[head_]));
      buffer_[head_].reset();
      if (++head_ == capacity_) head_ = 0;
      --count_;
      if (Waiter* s = senders_.head) {  // refill from the longest-waiting sender
        unlink(s);
        try {
          buffer_[slot_after(count_)].emplace(std::move(sender_value(s)));
          ++count_;
          s->done = true;
        } catch (...) {
          s->error = std::current_exception();  // the sender's send throws it; our value is ours
        }
        woken.push(s);
      }
      return kDone;
    }
    if (Waiter* s = senders_.head) {  // rendezvous
      out.emplace(std::move(sender_value(s)));
      unlink(s);
      s->done = true;
      woken.push(s);
      return kDone;
    }
    return closed_ ? kClosed : kWouldBlock;
  }

  using shim_counter = detail::shim::atomic<std::size_t>;

  const std::size_t capacity_;
  std::unique_ptr<detail::Ring<T>> ring_;            // buffered, nothrow-movable T
  std::unique_ptr<std::optional<T>[]> buffer_;       // buffered, other T (lock mode)
  shim_counter n_senders_{0};                         // ring mode: waiters announced
  shim_counter n_receivers_{0};
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  bool closed_ = false;
  WaitList senders_;
  WaitList receivers_;
  mutable detail::SpinLock lock_;
};

}  // namespace shoal
