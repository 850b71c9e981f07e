// The state and waiters of a Once, independent of its value type.
#pragma once

#include <condition_variable>
#include <coroutine>
#include <cstdint>
#include <mutex>
#include <string>

#include "shoal/detail/fiber.hpp"
#include "shoal/detail/sync_shim.hpp"
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
  class Awaiter final : public WaitHook {
   public:
    explicit Awaiter(OnceCore& core) noexcept : core_(core) {}
    bool await_ready() const noexcept { return core_.state() != running; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
      return suspend(fiber_of(h), h);
    }
    void await_resume() const {
      if (cancelled_) throw Cancelled{};
    }
    bool cancel_wait() noexcept override;

   private:
    friend class OnceCore;
    bool suspend(Fiber* f, std::coroutine_handle<> h) noexcept;
    OnceCore& core_;
    Fiber* f_ = nullptr;
    Awaiter* prev_ = nullptr;
    Awaiter* next_ = nullptr;
    bool linked_ = false;
    bool cancelled_ = false;
  };
  /// Blocks a plain thread while running.
  void wait_blocking();

 private:
  shim::atomic<std::uint32_t> state_{empty};
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;  // thread waiters
  int thread_waiters_ = 0;      // guarded by mu_
  Awaiter* head_ = nullptr;     // task waiters, guarded by mu_
};

}  // namespace shoal::detail
