// One shard's timers: a hierarchical timing wheel (private; the caller's
// lock guards it). Six levels of 64 slots; a level-0 slot is one tick of
// 2^20 ns (1.05 ms) and a level-L slot spans 64^L ticks, so six levels
// reach 2^36 ticks (about 2.2 years; later deadlines wait on an overflow list
// that files in when time reaches the top level's next span). An entry sits in the slot of the level where
// its tick first differs from the wheel's `elapsed` tick, which keeps every
// level's entries after `elapsed`: the earliest occupied slot of the lowest
// occupied level holds the earliest entry, found with one bit scan per level.
// Insert and remove are O(1) (an intrusive list per slot, a bitmap per level).
//
// Deadlines stay exact (ns): a slot is processed when its tick has begun;
// entries in the current tick's slot fire only once their deadline has
// passed, and the earliest of those left is kept, so a sleeper is never
// woken early and the manual clock lands on each deadline exactly. Within a
// slot, entries fire in the order they were filed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "shoal/detail/intrusive_list.hpp"
#include "shoal/detail/timer.hpp"

namespace shoal::detail {

class TimerWheel {
 public:
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
  static constexpr int kTickShift = 20;
  static constexpr int kLevels = 6;
  static constexpr int kSlotBits = 6;
  static constexpr int kSlots = 1 << kSlotBits;
  static constexpr int kWheelBits = kLevels * kSlotBits;  // ticks the levels span: 2^36
  static constexpr std::uint64_t kWheelMask = (std::uint64_t{1} << kWheelBits) - 1;
  static constexpr std::uint16_t kOverflow = kLevels * kSlots;  // TimerEntry::slot of a deadline past the levels

  explicit TimerWheel(std::int64_t now_ns) noexcept;
  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;

  /// Files `e` by its deadline.
  void insert(TimerEntry* e) noexcept;
  /// Takes out `e`, which is filed here.
  void remove(TimerEntry* e) noexcept;
  /// Takes out up to `max` entries due at `now` into `out`; returns how many.
  /// Fewer than `max`: none is left due.
  std::size_t take_due(std::int64_t now, TimerEntry** out, std::size_t max) noexcept;
  /// The earliest deadline, or a lower bound of it no later than the start
  /// of its tick (kNever if empty). Never later than the true earliest.
  std::int64_t next_deadline() const noexcept;
  std::size_t size() const noexcept { return size_; }

 private:
  using Slot = IntrusiveList<TimerEntry, TimerEntry::WheelTag>;
  struct Expiration {
    int level;
    int slot;
    std::uint64_t tick;  // the slot's first tick
  };
  static std::uint64_t tick_of(std::int64_t ns) noexcept {
    return ns <= 0 ? 0 : static_cast<std::uint64_t>(ns) >> kTickShift;
  }
  bool next_expiration(Expiration& x) const noexcept;
  void file(TimerEntry* e) noexcept;
  void enter_tick(std::uint64_t tick) noexcept;
  static void sort_by_deadline(Slot& list) noexcept;
  void unfile(TimerEntry* e) noexcept;

  Slot slots_[kLevels][kSlots];
  Slot overflow_;  // deadlines past the top level's span, unordered
  std::uint64_t occupied_[kLevels] = {};
  std::uint64_t elapsed_;
  // A lower bound of the deadlines in level 0's slot for `elapsed_` (the
  // exact earliest after a scan of it).
  std::int64_t current_min_ = kNever;
  // That slot is sorted by deadline (after its first scan, and kept so by
  // filing in order): later scans take from the front and stop.
  bool current_sorted_ = false;
  std::size_t size_ = 0;
};

}  // namespace shoal::detail
