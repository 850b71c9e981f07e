// select: wait on several channel operations, events, notifications, a
// stream becoming readable and a deadline at once; exactly one of them
// happens.
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

#include "shoal/detail/stand_in.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"

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

}  // namespace detail

/// The awaiter `select(...)` returns. Await it once, at once.
template <detail::SelectableCase... Cases>
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
template <detail::SelectableCase... Cases>
Select<Cases...> select(Cases... cases) noexcept {
  return Select<Cases...>(std::move(cases)...);
}

}  // namespace shoal
