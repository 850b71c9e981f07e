// The state and waiters of a Once, independent of its value type.
#pragma once

#include <coroutine>
#include <cstdint>
#include <string>

#include "shoal/detail/task_record.hpp"
#include "shoal/detail/sync_shim.hpp"
#include "shoal/detail/wait_queue.hpp"
#include "shoal/runtime/errors.hpp"

namespace shoal::detail {

class OnceCore {
 public:
  enum State : std::uint32_t { empty = 0, running = 1, done = 2, failed = 3 };

  explicit OnceCore(std::string what) : what_(std::move(what)) {}
  /// Aborts, naming the Once, if anyone still waits (a Once must outlive
  /// every once_do on it).
  ~OnceCore();
  OnceCore(const OnceCore&) = delete;
  OnceCore& operator=(const OnceCore&) = delete;

  State state() const noexcept { return static_cast<State>(state_.load(std::memory_order_acquire)); }
  /// empty -> running: the caller runs init.
  bool try_begin() noexcept {
    std::uint32_t e = empty;
    return state_.compare_exchange_strong(e, running, std::memory_order_acq_rel, std::memory_order_acquire);
  }
  /// running -> done / failed / empty (a cancelled init: someone else runs it). Wakes every waiter.
  void finish(State to) noexcept;
  const std::string& what() const noexcept { return what_; }
  [[noreturn]] void throw_failed() const;

  /// Waits (a task) while running. Checkpoint: yes.
  class Awaiter final : public Waiter {
   public:
    explicit Awaiter(OnceCore& core) noexcept : Waiter(core.lock_), core_(core) {}
    const char* wait_kind() const noexcept override { return "another task's run of a once initializer"; }
    bool await_ready() const noexcept { return core_.state() != running; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
      return suspend(record_of(h), h);
    }
    [[gnu::always_inline]] void await_resume() const {  // see CheckpointAwaiter::await_resume
      if (cancelled) detail::raise_cancelled();
    }

   private:
    bool suspend(TaskRecord* f, std::coroutine_handle<> h) noexcept;
    OnceCore& core_;
  };
  /// Blocks a plain thread while running.
  void wait_blocking() noexcept;

 private:
  shim::atomic<std::uint32_t> state_{empty};
  std::string what_;
  SpinLock lock_;
  WaitList waiters_;  // tasks and threads, guarded by lock_
};

}  // namespace shoal::detail
