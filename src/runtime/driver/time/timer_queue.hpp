// The runtime's timers: one timing wheel per worker plus one for every other
// thread, each behind its own spin lock. A task files its timers on its own
// worker's wheel (O(1), no allocation, no lock shared with other workers); a
// cancel takes the lock of the wheel the entry is on. Each wheel publishes
// its earliest deadline, and the driver sleeps until the earliest over all
// of them and fires every wheel's due timers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "shoal/detail/spin_lock.hpp"
#include "shoal/detail/task_record.hpp"
#include "shoal/detail/timer.hpp"
#include "src/runtime/driver/time/timer_wheel.hpp"

namespace shoal::detail {

class TimerQueue {
 public:
  static constexpr std::int64_t kNever = TimerWheel::kNever;

  /// `shards` wheels (the scheduler's workers plus one), starting at `now_ns`.
  TimerQueue(std::size_t shards, std::int64_t now_ns);

  /// Files `e` on the wheel it is bound to (see timer_insert).
  TimerInsert insert(TimerEntry* e, const TaskRecord* unless) noexcept;
  bool remove(TimerEntry* e) noexcept;
  /// Takes every entry due at `now` off every wheel (marking them firing)
  /// and runs their callbacks outside the locks. Returns how many fired.
  std::size_t fire_due(std::int64_t now) noexcept;
  /// The earliest deadline over all wheels (kNever if none), or a lower
  /// bound of it; seq_cst loads (the driver's half of the wake protocol).
  std::int64_t next_deadline() const noexcept;
  std::size_t size() const noexcept;

 private:
  struct alignas(64) Shard {
    explicit Shard(std::int64_t now_ns) noexcept : wheel(now_ns) {}
    SpinLock lock;
    // seq_cst: pairs with the driver announcing its sleep (driver.cpp). Only
    // SC/TSan-checked: the Relacy test's stand-in driver never sleeps.
    shim::atomic<std::int64_t> next{kNever};
    TimerWheel wheel;
    void publish() noexcept { next.store(wheel.next_deadline(), std::memory_order_seq_cst); }
  };
  std::size_t fire_shard(Shard& s, std::int64_t now) noexcept;

  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace shoal::detail
