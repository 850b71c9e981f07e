// The one place shoal takes atomics and thread primitives from. Model and
// Relacy tests swap these (see docs/reliability.md) the way Tokio swaps std
// for loom.
#pragma once

#include "shoal/version.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHOAL_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define SHOAL_TSAN 1
#endif

#if defined(SHOAL_MODEL)

// Model tests supply the shim from their own include path
// (tests/model/shoal_model_shim.hpp): every operation is a scheduling point
// of the model checker.
#include "shoal_model_shim.hpp"

#elif defined(SHOAL_RELACY)

// Relacy tests supply the shim from their own include path
// (tests/relacy/shoal_relacy_shim.hpp): Relacy's C++ memory model, with its
// relaxed-memory outcomes and fences.
#include "shoal_relacy_shim.hpp"

#else  // neither SHOAL_MODEL nor SHOAL_RELACY

namespace shoal::detail::shim {

template <class T>
using atomic = std::atomic<T>;
using mutex = std::mutex;
using condition_variable = std::condition_variable;
using thread = std::thread;
template <class M>
using lock_guard = std::lock_guard<M>;
template <class M>
using unique_lock = std::unique_lock<M>;
/// A plain field that threads hand to each other through a protocol's
/// atomics: the field itself here; the Relacy shim checks its accesses.
template <class T>
using plain = T;

inline void spin_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");  // the spin-wait hint, as PAUSE is on x86
#else
  std::this_thread::yield();
#endif
}

inline void thread_yield() noexcept { std::this_thread::yield(); }

}  // namespace shoal::detail::shim

// The only standalone fence in shoal. TSan does not model fences, so under
// TSan it becomes a seq_cst RMW on a private atomic, which TSan does see.
#if defined(SHOAL_TSAN)
namespace shoal::detail::shim {
inline std::atomic<int> tsan_fence_word{0};
}
#define SHOAL_FENCE_SEQ_CST() \
  ((void)::shoal::detail::shim::tsan_fence_word.fetch_add(0, std::memory_order_seq_cst))
#else
#define SHOAL_FENCE_SEQ_CST() std::atomic_thread_fence(std::memory_order_seq_cst)
#endif

#endif  // SHOAL_MODEL, SHOAL_RELACY

namespace shoal::detail {

/// The one way shoal waits for another thread's next few instructions (a
/// lock holder leaving, a canceller inspecting a hook, a timer firing): a
/// bounded spin, then yields. On 2 cores shared with a load generator the
/// other party is often preempted; spinning on would burn the rest of our
/// time slice before it can run again.
class SpinWait {
 public:
  static constexpr unsigned kSpins = 64;
  /// Spins `spins` times before the first yield.
  explicit SpinWait(unsigned spins = kSpins) noexcept : spins_(spins) {}
  void pause() noexcept {
    if (count_ < spins_) {
      shim::spin_pause();
    } else {
      shim::thread_yield();
    }
    ++count_;
  }
  /// Pauses so far (tests check that the wait yields).
  unsigned count() const noexcept { return count_; }

 private:
  unsigned spins_;
  unsigned count_ = 0;
};

}  // namespace shoal::detail
