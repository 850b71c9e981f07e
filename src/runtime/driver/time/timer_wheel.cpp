// The timing wheel (see timer_wheel.hpp).
//
// Invariant: an entry at level L >= 1 shares every tick bit above level L
// with `elapsed_` and its slot at level L is after elapsed_'s; at level 0 it
// shares the bits above level 0 and its slot is at or after elapsed_'s.
// `elapsed_` only moves to the start of the earliest occupied slot, or to
// `now` once every slot that began by then was processed, so the invariant
// survives each move; a level-L slot whose time came is emptied and its
// entries filed again, one level lower or more.
#include "src/runtime/driver/time/timer_wheel.hpp"

#include <algorithm>
#include <bit>

namespace shoal::detail {

TimerWheel::TimerWheel(std::int64_t now_ns) noexcept : elapsed_(tick_of(now_ns)) {}

void TimerWheel::file(TimerEntry* e) noexcept {
  const std::uint64_t t = std::max(tick_of(e->deadline), elapsed_);
  if (((t ^ elapsed_) >> kWheelBits) != 0) {  // past the top level's span: waits for time to get there
    e->slot = kOverflow;
    overflow_.push_back(e);
    return;
  }
  const std::uint64_t differs = (t ^ elapsed_) | (kSlots - 1);
  const int level = (63 - std::countl_zero(differs)) / kSlotBits;
  const int slot = static_cast<int>((t >> (level * kSlotBits)) & (kSlots - 1));
  e->slot = static_cast<std::uint16_t>(level * kSlots + slot);
  Slot& list = slots_[level][slot];
  occupied_[level] |= std::uint64_t{1} << slot;
  if (level == 0 && t == elapsed_) {
    current_min_ = std::min(current_min_, e->deadline);
    if (current_sorted_) {  // keep it sorted: after the last entry not later (new ones tend to come last)
      TimerEntry* after = list.back();
      while (after != nullptr && after->deadline > e->deadline) after = list.prev(after);
      list.insert_before(after == nullptr ? list.front() : list.next(after), e);
      return;
    }
  }
  list.push_back(e);
}

void TimerWheel::enter_tick(std::uint64_t tick) noexcept {
  if (tick == elapsed_) return;
  elapsed_ = tick;
  current_min_ = kNever;
  current_sorted_ = false;
}

namespace {

// A stable merge sort of a chain linked through the hooks' `prev` (free
// once an entry is off its list): no allocation.
TimerEntry* chain_next(TimerEntry* e) noexcept { return static_cast<TimerEntry*>(e->prev); }

TimerEntry* merge_sort(TimerEntry* head, std::size_t n) noexcept {
  if (n <= 1) {
    if (head != nullptr) head->prev = nullptr;
    return head;
  }
  TimerEntry* mid = head;
  for (std::size_t i = 0; i < n / 2; ++i) mid = chain_next(mid);
  TimerEntry* a = merge_sort(head, n / 2);
  TimerEntry* b = merge_sort(mid, n - n / 2);
  TimerEntry* out = nullptr;
  TimerEntry* last = nullptr;
  auto append = [&](TimerEntry*& from) {
    TimerEntry* next = chain_next(from);
    if (last != nullptr) {
      last->prev = from;
    } else {
      out = from;
    }
    last = from;
    from = next;
  };
  while (a != nullptr && b != nullptr) append(b->deadline < a->deadline ? b : a);  // ties from a: stable
  TimerEntry* rest = a != nullptr ? a : b;
  if (last != nullptr) {
    last->prev = rest;
  } else {
    out = rest;
  }
  return out;
}

}  // namespace

void TimerWheel::sort_by_deadline(Slot& list) noexcept {
  TimerEntry* head = nullptr;
  TimerEntry* last = nullptr;
  std::size_t n = 0;
  while (TimerEntry* e = list.pop_front()) {
    e->prev = nullptr;
    if (last != nullptr) {
      last->prev = e;
    } else {
      head = e;
    }
    last = e;
    ++n;
  }
  for (TimerEntry* e = merge_sort(head, n); e != nullptr;) {
    TimerEntry* next = chain_next(e);
    list.push_back(e);
    e = next;
  }
}

void TimerWheel::unfile(TimerEntry* e) noexcept {
  if (e->slot == kOverflow) {
    Slot::unlink(e);
    return;
  }
  const int level = e->slot / kSlots;
  const int slot = e->slot % kSlots;
  Slot::unlink(e);
  if (slots_[level][slot].empty()) occupied_[level] &= ~(std::uint64_t{1} << slot);
}

void TimerWheel::insert(TimerEntry* e) noexcept {
  file(e);
  ++size_;
}

void TimerWheel::remove(TimerEntry* e) noexcept {
  unfile(e);
  --size_;
}

bool TimerWheel::next_expiration(Expiration& x) const noexcept {
  for (int level = 0; level < kLevels; ++level) {
    const int shift = level * kSlotBits;
    const int now_slot = static_cast<int>((elapsed_ >> shift) & (kSlots - 1));
    // Level 0's current slot counts; a higher level's never holds anything.
    const std::uint64_t from = level == 0 ? now_slot : now_slot + 1;
    const std::uint64_t bits = from >= kSlots ? 0 : occupied_[level] & (~std::uint64_t{0} << from);
    if (bits == 0) continue;
    const int slot = std::countr_zero(bits);
    const std::uint64_t block = shift + kSlotBits >= 64 ? 0 : elapsed_ & ~((std::uint64_t{1} << (shift + kSlotBits)) - 1);
    x = Expiration{level, slot, block | (static_cast<std::uint64_t>(slot) << shift)};
    return true;
  }
  if (overflow_.empty()) return false;
  x = Expiration{kLevels, 0, (elapsed_ | kWheelMask) + 1};  // the top level's next span
  return true;
}

std::int64_t TimerWheel::next_deadline() const noexcept {
  Expiration x;
  if (!next_expiration(x)) return kNever;
  if (x.level == 0 && x.tick == elapsed_ && current_min_ != kNever) return current_min_;
  constexpr std::uint64_t kLastTick = static_cast<std::uint64_t>(kNever) >> kTickShift;
  return static_cast<std::int64_t>(std::min(x.tick, kLastTick) << kTickShift);  // nothing there is due before its tick
}

std::size_t TimerWheel::take_due(std::int64_t now, TimerEntry** out, std::size_t max) noexcept {
  const std::uint64_t now_tick = tick_of(now);
  std::size_t n = 0;
  Expiration x;
  while (n < max && next_expiration(x) && x.tick <= now_tick) {
    enter_tick(x.tick);
    if (x.level == kLevels) {
      // Time reached the next span of the top level: what waited for it files in.
      Slot waiting;
      while (TimerEntry* e = overflow_.pop_front()) waiting.push_back(e);
      while (TimerEntry* e = waiting.pop_front()) file(e);
      continue;
    }
    Slot& list = slots_[x.level][x.slot];
    if (x.level > 0) {
      // Its time has begun: file its entries again against the new
      // elapsed_; each lands at least one level lower.
      occupied_[x.level] &= ~(std::uint64_t{1} << x.slot);
      while (TimerEntry* e = list.pop_front()) file(e);
      continue;
    }
    if (x.tick == now_tick && !current_sorted_) {
      // Now's tick hands over only what has passed, perhaps over many looks:
      // sort it once, then each look takes from the front.
      sort_by_deadline(list);
      current_sorted_ = true;
    }
    // A slot before now's tick is due whole (in filing order).
    while (n < max) {
      TimerEntry* e = list.front();
      if (e == nullptr || (current_sorted_ && e->deadline > now)) break;
      list.remove(e);
      out[n++] = e;
      --size_;
    }
    const TimerEntry* left = list.front();
    current_min_ = left == nullptr ? kNever : left->deadline;  // exact once sorted; else a past tick's, due
    if (left == nullptr) occupied_[0] &= ~(std::uint64_t{1} << x.slot);
    if (x.tick == now_tick) break;  // what is left here is not due yet
  }
  // Unless the caller is full, every slot that began by now was processed:
  // time moves on to now.
  if (n < max && now_tick > elapsed_) enter_tick(now_tick);
  return n;
}

}  // namespace shoal::detail
