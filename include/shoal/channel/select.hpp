// select: wait on several channel operations, events, notifications and a
// deadline at once; exactly one of them happens.
//
//   std::string line = "hello";
//   auto r = co_await shoal::select(shoal::on_recv(numbers), shoal::on_send(out, line),
//                                   shoal::on_notify(stop), shoal::on_timeout(1s));
//   switch (r.index()) {
//     case 0: if (auto v = std::get<0>(std::move(r))) use(*v); else numbers_closed(); break;
//     case 1: /* line was sent (moved from) */ break;
//     case 2: /* stop was notified */ break;
//     case 3: /* a second passed: nothing else happened */ break;
//   }
//
// How it works (the protocol is in detail/wait_queue.hpp): the select takes
// the locks of every primitive it names, in address order, and tries each
// case once, in an order that starts at a random case (so one busy channel
// cannot starve the others). If none can complete, it links one waiter per
// case, arms the deadline, parks, and lets go of the locks. The first party
// to claim the select's word (a sender, a receiver, set(), notify, the
// timer, or a canceller) decides the outcome; every other case is dead and
// is unlinked. A waker that cannot hand a value over under its lock (a
// buffered channel's lock-free ring) only claims and wakes the case, which
// then takes its value itself; if another receiver took it first, the
// select goes round again. The waking worker does that clean-up and retry
// at a stand-in frame, so the coroutine resumes only once the select is over.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "shoal/channel/channel.hpp"
#include "shoal/detail/stand_in.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/detail/timer.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"
#include "shoal/sync/event.hpp"

namespace shoal {

namespace detail {

/// A cheap per-thread random number for a select's scan order (xorshift64*).
inline std::uint32_t select_random() noexcept {
  thread_local std::uint64_t state = 0x9e3779b97f4a7c15ull ^ reinterpret_cast<std::uintptr_t>(&state);
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return static_cast<std::uint32_t>((state * 0x2545f4914f6cdd1dull) >> 32);
}

/// A uniformly random scan order over a select's N cases (Fisher-Yates).
/// A random start alone is not fair: a ready case right after k not-ready
/// ones would be first whenever the start falls on any of them.
template <std::size_t N>
void select_shuffle(std::uint8_t (&order)[N]) noexcept {
  for (std::size_t i = 0; i < N; ++i) order[i] = static_cast<std::uint8_t>(i);
  for (std::size_t i = N - 1; i > 0; --i) {
    const std::size_t j = select_random() % (i + 1);
    const std::uint8_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

// Every case type offers the same small interface to Select:
//   int poll_fast()                without any lock: 1 completed, 0 not ready,
//                                  -1 cannot tell without the lock
//   SpinLock* lock()               the primitive's lock (null: none)
//   bool poll_locked(WakeList&)    under all the select's locks: complete
//                                  now if it can (true)
//   bool link_locked(WakeList&, SelectClaim&, index, TaskRecord*)
//                                  then, if no case could: link its waiter
//                                  (false), or complete after all (true: a
//                                  value came through a lock-free ring)
//   void after_unlock()            work due once the locks are released,
//                                  after the case completed under them
//   void disarm_locked()           unlink the waiter if it is still linked
//   bool finish()                  the select's claim named this case: is
//                                  the outcome there (retrying if need be)?
//   outcome_type take()            the outcome (may throw, e.g. ChannelClosed)

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

/// An Event or Notify case: completes when the event is set, or takes a
/// notification.
template <class Prim>
class SignalCase final : public SelectCase {
 public:
  using outcome_type = std::monostate;
  explicit SignalCase(Prim& p) noexcept : SelectCase(p.lock_), prim_(&p) {}
  SignalCase(SignalCase&& o) noexcept : SelectCase(o.prim_->lock_), prim_(o.prim_) {}

  int poll_fast() noexcept { return -1; }
  SpinLock* lock() noexcept { return &prim_->lock_; }
  bool poll_locked(WakeList&) noexcept { return prim_->take_locked(); }
  bool link_locked(WakeList&, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept {
    enter_select(claim, index);
    record = f;
    prim_->waiters_.push_back(this);
    return false;
  }
  void after_unlock() noexcept {}
  void disarm_locked() noexcept {
    if (is_linked()) unlink_locked();
  }
  bool finish() noexcept { return true; }  // the claim was the notification
  void reset() noexcept { in_select = false; }
  outcome_type take() noexcept { return {}; }

 private:
  Prim* prim_;
};

/// The deadline case: a timer entry that claims the select when it fires.
class DeadlineCase {
 public:
  using outcome_type = std::monostate;
  explicit DeadlineCase(std::chrono::steady_clock::time_point at) noexcept : at_(at) {}
  DeadlineCase(DeadlineCase&& o) noexcept : at_(o.at_) {}

  int poll_fast() noexcept { return -1; }
  SpinLock* lock() noexcept { return nullptr; }
  bool poll_locked(WakeList&) noexcept { return at_ <= clock_now(); }
  bool link_locked(WakeList&, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept {
    entry_.owner = this;
    entry_.fire = &DeadlineCase::on_fire;
    entry_.deadline = to_ns(at_);
    entry_.state.store(TimerEntry::idle, std::memory_order_relaxed);
    claim_ = &claim;
    index_ = index;
    f_ = f;
    timer_bind(f->sched, &entry_);
    (void)timer_insert(f->sched, &entry_);  // no cancel check: the select's own re-check covers it
    armed_ = true;
    return false;
  }
  void after_unlock() noexcept {}
  void disarm_locked() noexcept {
    if (armed_) timer_cancel_and_wait(f_->sched, &entry_);  // waits out a firing in progress
    armed_ = false;
  }
  bool finish() noexcept { return true; }
  void reset() noexcept {}
  outcome_type take() noexcept { return {}; }

 private:
  struct Entry : TimerEntry {
    DeadlineCase* owner = nullptr;
  };
  static void on_fire(TimerEntry* e) noexcept {
    DeadlineCase& c = *static_cast<Entry*>(e)->owner;
    bool wake = false;
    if (c.claim_->try_win(c.index_, wake) && wake) {
      TaskRecord* f = c.f_;
      disarm_wait(f, c.claim_);
      schedule(f);
    }
    // The select waits for this store (disarm_locked) before the entry goes.
    e->state.store(TimerEntry::done, std::memory_order_release);
  }

  std::chrono::steady_clock::time_point at_;
  Entry entry_;
  SelectClaim* claim_ = nullptr;
  TaskRecord* f_ = nullptr;
  std::uint32_t index_ = 0;
  bool armed_ = false;
};

}  // namespace detail

/// The awaiter `select(...)` returns. Await it once, at once.
template <class... Cases>
class [[nodiscard]] Select {
  static constexpr std::size_t N = sizeof...(Cases);
  static_assert(N >= 1, "shoal::select needs at least one case");
  static_assert(N <= detail::MultiSection::kMax, "shoal::select: too many cases");

 public:
  /// What `co_await` yields: the completed case's outcome at the case's
  /// position (std::optional<T> for on_recv, std::monostate for the others).
  using result_type = std::variant<typename Cases::outcome_type...>;

  /// A select over `cases`; made by select().
  explicit Select(Cases&&... cases) noexcept : cases_(std::move(cases)...) {}
  Select(const Select&) = delete;
  Select& operator=(const Select&) = delete;

  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) {
    f_ = detail::record_of(h);
    if (f_ == nullptr) throw std::logic_error("shoal::select awaited outside a shoal task");
    cont_ = h;
    if (f_->cancelled()) {
      cancelled_ = true;
      return false;
    }
    if (arm()) return true;  // parked: nothing may touch *this from here on
    if (won_ < 0 || !detail::consume_budget(f_)) return false;
    detail::yield_from(f_, h, this);  // completed without waiting: a schedule point once per budget
    return true;
  }

  /// The outcome of the case that completed, at its index.
  [[gnu::always_inline]] result_type await_resume() {  // see CheckpointAwaiter::await_resume
    if (won_ < 0) detail::raise_cancelled();
    return take<0>();
  }

 private:
  // One round: under every lock, try each case in a random order and link
  // it if it cannot complete; then park. True: parked. False: over (won_ is
  // the case that completed, or -1 when cancelled).
  bool arm() noexcept {
    std::uint8_t order[N];
    detail::select_shuffle(order);
    // Lock-free first, in scan order, up to the first case that needs its
    // lock; the locked scan below starts from the same case, so the order
    // of preference is one scan's either way.
    for (std::size_t k = 0; k < N; ++k) {
      const std::size_t i = order[k];
      const int r = visit_int(i, [](auto& c) { return c.poll_fast(); });
      if (r > 0) {
        won_ = static_cast<int>(i);
        return false;
      }
      if (r < 0) break;
    }
    detail::SpinLock* locks[N] = {};
    std::size_t n = 0;
    for_each([&](auto& c, std::size_t) {
      if (detail::SpinLock* l = c.lock()) locks[n++] = l;
    });
    int completed = -1;
    {
      detail::MultiSection sec(locks, n);
      for (std::size_t k = 0; k < N && completed < 0; ++k) {
        const std::size_t i = order[k];
        if (visit(i, [&](auto& c) { return c.poll_locked(sec); })) completed = static_cast<int>(i);
      }
      std::size_t linked = 0;  // in scan order
      for (; completed < 0 && linked < N; ++linked) {
        const std::size_t i = order[linked];
        if (visit(i, [&](auto& c) { return c.link_locked(sec, claim_, static_cast<std::uint32_t>(i), f_); })) {
          completed = static_cast<int>(i);
        }
      }
      if (completed < 0) {
        f_->resume = stand_in_.handle();
        detail::publish_hook(f_, &claim_);
        // A cancel that came before the hook was visible is seen here
        // (Dekker with the canceller); a timer or canceller that got the
        // claim word first makes park() fail.
        if (!f_->cancelled(std::memory_order_seq_cst) && claim_.park()) return true;
        for (std::size_t k = 0; k < N; ++k) visit(k, [](auto& c) { c.disarm_locked(); return false; });
        // Released before disarming the hook: never disarm under a lock cancel_wait takes.
      } else {
        for (std::size_t k = 0; k < linked; ++k) visit(order[k], [](auto& c) { c.disarm_locked(); return false; });
      }
    }
    if (completed >= 0) {
      visit(static_cast<std::size_t>(completed), [](auto& c) { c.after_unlock(); return false; });
      won_ = completed;
      return false;
    }
    detail::disarm_wait(f_, &claim_);
    const int w = claim_.winner();  // the timer, if it was not a cancel
    won_ = w >= 0 && finish(w) ? w : -1;
    return false;
  }

  // Woken (by whoever claimed the select): unlink what is left, then take
  // the outcome, or go round again when the claimed case came to nothing.
  static void on_wake(void* frame) noexcept {
    Select& s = detail::StandIn::owner_of<Select>(frame);
    s.disarm_all();
    const int w = s.claim_.winner();
    if (w >= 0 && s.finish(w)) {
      s.won_ = w;
    } else if (w >= 0 && !s.f_->cancelled()) {
      s.claim_.reset();
      s.for_each([](auto& c, std::size_t) { c.reset(); });
      if (s.arm()) return;  // parked again; the coroutine never saw the wake
    } else {
      s.won_ = -1;  // cancelled
    }
    const std::coroutine_handle<> c = s.cont_;  // *this may be gone once c runs
    c.resume();
  }

  void disarm_all() noexcept {
    detail::SpinLock* locks[N] = {};
    std::size_t n = 0;
    for_each([&](auto& c, std::size_t) {
      if (detail::SpinLock* l = c.lock()) locks[n++] = l;
    });
    detail::MultiSection sec(locks, n);
    for_each([](auto& c, std::size_t) { c.disarm_locked(); });
  }

  bool finish(int w) noexcept {
    return visit(static_cast<std::size_t>(w), [](auto& c) { return c.finish(); });
  }

  template <class F>
  void for_each(F&& fn) {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (fn(std::get<I>(cases_), I), ...); }(std::index_sequence_for<Cases...>{});
  }
  template <class F>
  bool visit(std::size_t i, F&& fn) {
    bool r = false;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (void)((i == I ? (r = fn(std::get<I>(cases_)), true) : false) || ...);
    }(std::index_sequence_for<Cases...>{});
    return r;
  }
  template <class F>
  int visit_int(std::size_t i, F&& fn) {
    int r = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (void)((i == I ? (r = fn(std::get<I>(cases_)), true) : false) || ...);
    }(std::index_sequence_for<Cases...>{});
    return r;
  }
  template <std::size_t I>
  result_type take() {
    if constexpr (I + 1 < N) {
      if (won_ != static_cast<int>(I)) return take<I + 1>();
    }
    return result_type(std::in_place_index<I>, std::get<I>(cases_).take());
  }

  std::tuple<Cases...> cases_;
  detail::SelectClaim claim_;
  detail::StandIn stand_in_{&Select::on_wake, this};
  detail::TaskRecord* f_ = nullptr;
  std::coroutine_handle<> cont_;
  int won_ = -1;
  bool cancelled_ = false;
};

/// Waits until exactly one of `cases` happens and returns its outcome, as a
/// std::variant whose index is the case's position: on_recv gives
/// std::optional<T> (nullopt: closed and drained), the others
/// std::monostate. Every other case leaves its primitive as it was: no
/// value taken, none sent, no notification consumed. Among cases ready at
/// once, each is equally likely to be chosen (the cases are tried in a
/// fresh random order every time). Tasks only (plain threads use the channels' blocking forms).
/// Checkpoint: yes: a cancelled task throws before any case is tried; a
///   select that completes without waiting yields once per budget.
/// Cancellation: no case completed (nothing taken or sent). A case completed
///   by another party at the moment of the cancellation wins: its outcome is
///   returned, and the next checkpoint throws.
/// Thread-safety: any task; each primitive may be used by others meanwhile.
/// Throws: Cancelled; ChannelClosed when an on_send case's channel is closed
///   (its value stays in the variable); std::logic_error outside a shoal task.
template <class... Cases>
Select<Cases...> select(Cases... cases) noexcept {
  return Select<Cases...>(std::move(cases)...);
}

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

/// A select case: the event is set (nothing is consumed).
inline detail::SignalCase<Event> on_event(Event& ev) noexcept { return detail::SignalCase<Event>(ev); }

/// A select case: take one notification (a stored permit, or the next
/// notify_one / notify_all).
inline detail::SignalCase<Notify> on_notify(Notify& n) noexcept { return detail::SignalCase<Notify>(n); }

/// A select case: `deadline` passed (the runtime's clock, shoal::now()).
inline detail::DeadlineCase on_deadline(std::chrono::steady_clock::time_point deadline) noexcept {
  return detail::DeadlineCase(deadline);
}

/// A select case: `d` passed, counted from this call.
template <class Rep, class Period>
detail::DeadlineCase on_timeout(std::chrono::duration<Rep, Period> d) noexcept {
  return detail::DeadlineCase(detail::clock_now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(d));
}

}  // namespace shoal
