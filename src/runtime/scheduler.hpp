// The work-stealing scheduler behind shoal::Runtime (private).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <ostream>
#include <random>
#include <thread>
#include <vector>

#include "shoal/detail/fiber.hpp"
#include "shoal/detail/io_source.hpp"
#include "shoal/runtime/run.hpp"
#include "src/io/backend.hpp"
#include "src/runtime/blocking_pool.hpp"
#include "src/runtime/idle.hpp"
#include "src/runtime/injector.hpp"
#include "src/runtime/parker.hpp"
#include "src/runtime/steal_queue.hpp"
#include "src/time/timer_queue.hpp"

namespace shoal::detail {

class Scheduler;

struct Worker {
  Scheduler* sched = nullptr;
  std::size_t index = 0;
  StealQueue<Fiber*> local;
  Fiber* lifo = nullptr;  // owner only
  // Fibers pinned here (spawn_local): never stolen. Owner-only FIFO, plus
  // an inbox (a lock-free stack) for wakes from other threads.
  Fiber* pinned_head = nullptr;
  Fiber* pinned_tail = nullptr;
  shim::atomic<Fiber*> inbox{nullptr};
  std::uint32_t tick = 0;
  std::uint32_t lifo_streak = 0;
  bool searching = false;
  std::minstd_rand rng;
  Parker parker;
  shim::atomic<std::uint64_t> polls{0};
  shim::atomic<int> activity{0};  // 0 running, 1 searching, 2 parked (for dumps)
  shim::thread thread;
};

class Scheduler {
 public:
  explicit Scheduler(RuntimeOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void schedule(Fiber* f) noexcept;
  void schedule_spawn(Fiber* f) noexcept;
  void schedule_yield(Fiber* f) noexcept;
  void schedule_batch(FiberBatch& batch) noexcept;
  void inject(Fiber* f) noexcept;

  bool on_own_worker() const noexcept;
  void pin_to_current_worker(Fiber* f) noexcept;
  std::size_t worker_count() const noexcept { return workers_.size(); }

  void add_root(CancelNode* n);
  void remove_root(CancelNode* n) noexcept;
  void cancel_roots() noexcept;

  void report_suppressed(const std::exception_ptr& e) noexcept;
  void dump(std::ostream& out) const;
  void dump_node(std::ostream& out, CancelNode* n, int depth) const;

  // Parking support.
  bool try_lock_driver() noexcept { return !driver_busy_.exchange(true, std::memory_order_acquire); }
  void unlock_driver() noexcept { driver_busy_.store(false, std::memory_order_release); }
  void wake_driver() noexcept { backend_->wake(); }
  /// The driver holder blocks in the backend until a wake, I/O, or the
  /// earliest timer; then fires due timers.
  void drive() noexcept;
  /// The backend's wait; aborts with a message if the backend cannot wait.
  std::size_t backend_wait(std::chrono::nanoseconds timeout, std::span<io::Event> out) noexcept;
  io::Backend& backend() noexcept { return *backend_; }

  // Reactor (src/io/reactor.cpp).
  IoCore* io_core() noexcept { return io_core_; }
  void io_add(IoSource* s);
  void io_release(IoSource* s) noexcept;
  /// Poll backend: arms `interest` again for `fd` if it is still registered
  /// with `token` (which is only compared, never followed).
  void io_rearm(int fd, std::uint32_t interest, const IoSource* token) noexcept;
  /// Driver holder only: frees released sources, hands events to waiters.
  void reclaim_io() noexcept;
  void dispatch_io(const io::Event* events, std::size_t n) noexcept;
  /// A busy worker's non-blocking turn of the reactor (if nobody drives).
  bool poll_io_now() noexcept;

  // Timers.
  TimerInsert add_timer(TimerEntry* e, const Fiber* unless) noexcept;
  TimerQueue& timers() noexcept { return timers_; }
  BlockingPool& blocking() noexcept { return blocking_; }
  /// Fires due timers; true if any fired.
  bool fire_timers() noexcept;
  /// The runtime's time in ns (the manual clock's, if it has one).
  std::int64_t now_ns() const noexcept {
    return manual_clock_ ? manual_now_.load(std::memory_order_acquire) : to_ns(Clock::now());
  }
  bool manual_clock() const noexcept { return manual_clock_; }
  // Blocking jobs queued or running: a manual clock does not advance past
  // them. Counted only with a manual clock (no shared RMW per job otherwise).
  void blocking_started() noexcept {
    if (manual_clock_) blocking_in_flight_.fetch_add(1, std::memory_order_seq_cst);
  }
  void blocking_finished() noexcept;

 private:
  void worker_main(Worker& w) noexcept;
  void deterministic_main(Worker& w) noexcept;
  Fiber* next_local(Worker& w) noexcept;
  Fiber* search(Worker& w) noexcept;
  Fiber* from_injector(Worker& w) noexcept;
  void push_local(Worker& w, Fiber* f) noexcept;
  void push_pinned_remote(Fiber* f) noexcept;
  void drain_inbox(Worker& w) noexcept;
  Fiber* pop_pinned(Worker& w) noexcept;
  void notify_parked() noexcept;
  bool work_pending() const noexcept;
  void park(Worker& w) noexcept;
  void run_fiber(Worker& w, Fiber* f) noexcept;

  bool advance_manual_clock() noexcept;

  RuntimeOptions options_;
  bool deterministic_ = false;
  bool manual_clock_ = false;
  shim::atomic<std::int64_t> manual_now_{0};
  shim::atomic<std::size_t> blocking_in_flight_{0};
  std::unique_ptr<io::Backend> backend_;
  IoCore* io_core_;
  shim::atomic<IoSource*> io_released_{nullptr};
  shim::atomic<bool> driver_busy_{false};
  // -1: nobody sleeps in the driver; else the deadline it sleeps until.
  shim::atomic<std::int64_t> driver_sleep_until_{-1};
  TimerQueue timers_;
  std::vector<std::unique_ptr<Worker>> workers_;
  Injector injector_;
  Idle idle_;
  shim::atomic<bool> shutdown_{false};

  // Deterministic executor: one ready list, picked at random from a seed.
  shim::mutex det_mu_;
  std::vector<Fiber*> det_ready_;
  FiberBatch det_overflow_;  // ready fibers det_ready_ had no memory for
  void det_push_locked(Fiber* f) noexcept;
  std::mt19937_64 det_rng_;

  mutable shim::mutex roots_mu_;
  std::vector<CancelNode*> roots_;

  BlockingPool blocking_;
};

}  // namespace shoal::detail
