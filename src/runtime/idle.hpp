// Idle-worker bookkeeping: how many workers are unparked and how many of
// them are searching for work, packed into one word, plus the sleeper list.
//
// Wake-up protocol (no lost wakeups, no thundering herd): a producer makes
// work visible, then runs a seq_cst fence and reads the state; it wakes one
// sleeper only if nobody is searching. A worker going to sleep updates the
// state with a seq_cst RMW and then, if it was the last searcher, re-checks
// every queue. Either the producer sees the sleeper or the sleeper sees the
// work. A searcher that finds work and was the last searcher wakes another,
// so a burst fans out one worker at a time.
//
// Orderings: the handshake is fence to fence. The producer's seq_cst fence
// below pairs with the one the worker runs after park()'s or end_search()'s
// RMW when it was the last searcher (worker_pool.cpp): with a fence on each
// side, the producer reads the worker's RMW or the worker's re-check reads
// the producer's work, whatever the orders of the accesses around them. The
// sleeper list is the mutex's. The seq_cst RMWs keep the watch's Dekker pair
// on the unparked count (watch.cpp: a worker's count goes up before it reads
// watch_deep_), which the Relacy test does not model. Checked under Relacy:
// tests/relacy/park_relacy_test.cpp (the fence removed is caught; each
// seq_cst on state_ made relaxed, all of them at once too, is not: the
// fences and the mutex carry the wake protocol).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "shoal/detail/sync_shim.hpp"

namespace shoal::detail {

class Idle {
  static constexpr std::uint32_t kUnparkedOne = 1u << 16;
  static constexpr std::uint32_t kSearchMask = kUnparkedOne - 1;

 public:
  explicit Idle(std::size_t workers)
      : workers_(static_cast<std::uint32_t>(workers)),
        state_(static_cast<std::uint32_t>(workers) * kUnparkedOne),
        sleeping_(workers, 0) {
    sleepers_.reserve(workers);
  }

  /// A worker with nothing local tries to become a searcher; at most half
  /// the workers search at once.
  bool try_begin_search() noexcept {
    std::uint32_t s = state_.load(std::memory_order_seq_cst);
    for (;;) {
      if (2 * (s & kSearchMask) >= workers_) return false;
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_seq_cst)) return true;
    }
  }

  /// True if the caller was the last searcher (it should wake another).
  bool end_search() noexcept { return (state_.fetch_sub(1, std::memory_order_seq_cst) & kSearchMask) == 1; }

  /// Returns the index of a sleeper to wake, or -1. Cheap when nobody sleeps
  /// or somebody is already searching. Prefers the latest sleeper for which
  /// `avoid(idx)` is false (the scheduler avoids the one in the driver: a
  /// futex sleeper can take the work and leave the driver where it is).
  template <class Avoid>
  long pick_sleeper_to_wake(Avoid&& avoid) noexcept {
    SHOAL_FENCE_SEQ_CST();
    std::uint32_t s = state_.load(std::memory_order_seq_cst);
    if ((s & kSearchMask) != 0 || (s >> 16) >= workers_) return -1;
    std::lock_guard<shim::mutex> g(mu_);
    s = state_.load(std::memory_order_seq_cst);
    if ((s & kSearchMask) != 0 || (s >> 16) >= workers_ || sleepers_.empty()) return -1;
    std::size_t pick = sleepers_.size() - 1;
    for (std::size_t i = sleepers_.size(); i-- > 0;) {
      if (!avoid(sleepers_[i])) {
        pick = i;
        break;
      }
    }
    const std::size_t idx = sleepers_[pick];
    sleepers_[pick] = sleepers_.back();
    sleepers_.pop_back();
    sleeping_[idx] = 0;
    // The woken worker starts out searching.
    state_.fetch_add(kUnparkedOne + 1, std::memory_order_seq_cst);
    return static_cast<long>(idx);
  }
  long pick_sleeper_to_wake() noexcept {
    return pick_sleeper_to_wake([](std::size_t) { return false; });
  }

  /// Registers `idx` as asleep. True if it was the last searcher.
  bool park(std::size_t idx, bool searching) noexcept {
    std::lock_guard<shim::mutex> g(mu_);
    std::uint32_t dec = kUnparkedOne + (searching ? 1 : 0);
    std::uint32_t prev = state_.fetch_sub(dec, std::memory_order_seq_cst);
    sleepers_.push_back(idx);
    sleeping_[idx] = 1;
    return searching && (prev & kSearchMask) == 1;
  }

  /// After waking: true if a producer woke us (we are now a searcher); false
  /// if the wake was spurious, in which case we take ourselves off the list.
  bool unpark(std::size_t idx) noexcept {
    std::lock_guard<shim::mutex> g(mu_);
    if (!sleeping_[idx]) return true;
    sleeping_[idx] = 0;
    for (std::size_t i = 0; i < sleepers_.size(); ++i) {
      if (sleepers_[i] == idx) {
        sleepers_[i] = sleepers_.back();
        sleepers_.pop_back();
        break;
      }
    }
    state_.fetch_add(kUnparkedOne, std::memory_order_seq_cst);
    return false;
  }

  std::uint32_t searching() const noexcept { return state_.load(std::memory_order_relaxed) & kSearchMask; }
  std::uint32_t unparked() const noexcept { return state_.load(std::memory_order_relaxed) >> 16; }
  /// The same, ordered: the driver watch's half of its handshake with a
  /// worker leaving park (see watch.cpp).
  std::uint32_t unparked_seq_cst() const noexcept { return state_.load(std::memory_order_seq_cst) >> 16; }

 private:
  const std::uint32_t workers_;
  shim::atomic<std::uint32_t> state_;
  shim::mutex mu_;
  std::vector<std::size_t> sleepers_;
  std::vector<char> sleeping_;
};

}  // namespace shoal::detail
