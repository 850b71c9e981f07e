// The one readiness loop every I/O operation runs, as an awaiter: wait
// until the cached readiness says the syscall may succeed, try it, and on
// EAGAIN drop the readiness and wait for the next edge (the shape of Tokio's
// Registration::async_io). The wait lives in the awaiting frame: an
// operation costs no frame of its own, and an idle connection holds only
// this awaiter and its registration (src/runtime/driver/io/reactor.cpp has the protocol).
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <variant>

#include "shoal/detail/stand_in.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/detail/wait_queue.hpp"

namespace shoal::detail {

struct IoSource;
struct IoIdleEntry;

/// One task waiting on an IoSource's readiness. Lives in the awaiting frame.
struct IoWaiter : Waiter {
  IoWaiter(IoSource* s, SpinLock& source_lock, std::uint8_t bits) noexcept
      : Waiter(source_lock), interest(bits), src(s) {}
  std::uint8_t interest;  // io::Interest bits (with `expired`, they fill Waiter's tail)
  // The wait's idle limit passed: written by its timer's fire under the
  // source's lock, read under that lock or once the timer has finished.
  shim::plain<bool> expired = false;
  IoSource* src;
  const char* wait_kind() const noexcept override;
};

/// A select case (channel/select.hpp) on a stream's readability: it
/// completes when a read would not wait, reading nothing: at once when the
/// stream holds bytes already (`pending`: a reader's buffer, TLS's), else
/// when the source's cached readiness says data, the end of the stream or
/// an error. The reactor wakes it as it wakes a readable IoWaiter. Made by
/// net::on_readable.
class ReadableCase final : public SelectCase {
 public:
  using outcome_type = std::monostate;
  ReadableCase(IoSource* s, bool pending) noexcept;
  ReadableCase(ReadableCase&& o) noexcept : SelectCase(o.Waiter::lock()), src_(o.src_), pending_(o.pending_) {}
  /// The stream holds bytes a read takes without waiting.
  void set_pending() noexcept { pending_ = true; }

  int poll_fast() noexcept { return pending_ || ready() ? 1 : 0; }
  SpinLock* lock() noexcept { return &Waiter::lock(); }
  bool poll_locked(WakeList&) noexcept { return pending_ || ready(); }
  bool link_locked(WakeList&, SelectClaim& claim, std::uint32_t index, TaskRecord* f) noexcept;
  void after_unlock() noexcept {}
  void disarm_locked() noexcept {
    if (is_linked()) unlink_locked();
  }
  bool finish() noexcept { return true; }  // woken by readiness, which only a read drops
  void reset() noexcept { in_select = false; }
  std::monostate take() noexcept { return {}; }
  const char* wait_kind() const noexcept override { return "I/O: readable (select)"; }

 private:
  bool ready() noexcept;
  IoSource* src_;
  bool pending_;
};

/// An I/O operation's readiness loop. `attempt(op)` makes the syscall once
/// (retrying EINTR itself): true when the operation is over (done, or an
/// error it recorded for await_resume), false on EAGAIN. It runs on the
/// awaiting task's worker, either inside await_suspend (the syscall did not
/// have to wait) or when a readiness event schedules the task: then the
/// task's coroutine is resumed only once the operation is over, through a
/// stand-in frame (see `StandIn`), so a spurious wake-up costs no resume.
/// A null `attempt` moves nothing and never waits: a checkpoint only.
/// Checkpoint: yes (cancellation is checked before the first attempt); after
/// an attempt that did not wait, the task yields once per budget.
class IoOp {
 public:
  using AttemptFn = bool (*)(IoOp& op) noexcept;
  enum class End : std::uint8_t { done, cancelled, idle_expired, no_memory };

  /// `limit` > 0: each wait ends with End::idle_expired after that long
  /// without an event (its timer is allocated only while the op waits).
  IoOp(IoSource* s, std::uint8_t interest, AttemptFn attempt, std::chrono::milliseconds limit) noexcept;
  /// Moves an operation that was not awaited yet.
  IoOp(IoOp&& o) noexcept;
  IoOp& operator=(IoOp&&) = delete;
  ~IoOp() = default;

  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    return start(record_of(h), h);
  }
  void await_resume() const noexcept {}

  /// How the operation ended (after the await).
  End end() const noexcept { return end_; }
  /// A readiness event (not a first try) led to this attempt.
  bool woken() const noexcept { return woken_; }
  /// For an attempt that succeeded but left its direction not ready (a short
  /// read drained the socket, a short write filled it): the next operation
  /// waits for an edge instead of making a syscall that would say EAGAIN.
  void drain() noexcept { drained_ = true; }
  int fd() const noexcept;
  std::chrono::milliseconds limit() const noexcept { return std::chrono::milliseconds(limit_ms_); }

 private:
  bool start(TaskRecord* f, std::coroutine_handle<> h) noexcept;
  /// The loop from a readiness state: true if the op is over, false if it
  /// is now waiting (nothing may touch it then).
  bool run(TaskRecord* f) noexcept;
  bool wait(TaskRecord* f) noexcept;
  /// After a wait that did not end in readiness: sets end_ (true if so).
  bool wait_ended() noexcept;
  /// Frees the limit's timer entry once it cannot fire.
  void release_limit() noexcept;
  static void on_wake(void* frame) noexcept;

  StandIn stand_in_{&IoOp::on_wake, this};  // what a waiting op parks its task at
  IoWaiter w_;
  AttemptFn attempt_;
  std::coroutine_handle<> cont_;  // the awaiting coroutine
  IoIdleEntry* idle_ = nullptr;   // the limit's timer while a limited wait is queued
  std::uint32_t limit_ms_;  // 0: none (a longer limit is clamped to 49 days)
  End end_ = End::done;
  bool woken_ = false;
  bool drained_ = false;
};

}  // namespace shoal::detail
