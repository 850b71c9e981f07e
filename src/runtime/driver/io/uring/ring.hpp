// One io_uring instance: the submission and completion rings the kernel
// shares with us, mapped, and the three calls around them (set up, register,
// enter). The set-up and register calls go through a seam (sys::uring_setup,
// sys::uring_register, sys::uring_disabled_sysctl) so a test can make
// io_uring unavailable in each of the ways a machine does.
#pragma once

#include <linux/io_uring.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>

namespace shoal::detail::sys {

/// io_uring_setup(2): the ring's fd, or -1 and errno.
using UringSetup = int (*)(unsigned entries, io_uring_params* params);
extern UringSetup uring_setup;
/// io_uring_register(2): 0 (or a count), or -1 and errno.
using UringRegister = int (*)(int fd, unsigned opcode, void* arg, unsigned nr_args);
extern UringRegister uring_register;
/// kernel.io_uring_disabled (0, 1 or 2), or -1 where the kernel has no such sysctl.
using UringDisabledSysctl = int (*)();
extern UringDisabledSysctl uring_disabled_sysctl;

}  // namespace shoal::detail::sys

namespace shoal::detail::io {

/// io_uring cannot be used on this machine; what() says why (seccomp, the
/// sysctl, a kernel without a feature or an opcode the backend needs).
class RingUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The rings of one io_uring instance. Submission is single-producer and
/// completion single-consumer: the owner serialises each side.
class Ring {
 public:
  /// Sets up a ring of `entries` submissions and `cq_entries` completions,
  /// and checks that the kernel has every opcode in `ops` and the
  /// `features` (IORING_FEAT_*). Throws RingUnavailable naming what is
  /// missing; std::system_error if mapping the rings fails.
  Ring(unsigned entries, unsigned cq_entries, std::initializer_list<std::uint8_t> ops, std::uint32_t features);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  int fd() const noexcept { return fd_; }

  /// A zeroed submission entry, or nullptr when the queue is full (submit
  /// first). Not visible to the kernel until `submit`.
  io_uring_sqe* next_sqe() noexcept;
  /// Hands the kernel every entry taken and not yet consumed (one a failed
  /// submit left goes with the next). The number submitted, or -errno.
  int submit() noexcept;
  /// True when entries were taken that the kernel has not consumed (a
  /// failed submit left them).
  bool unsubmitted() const noexcept {
    return sq_local_tail_ != std::atomic_ref<unsigned>(*sq_head_).load(std::memory_order_acquire);
  }
  /// Blocks until a completion is ready or `timeout` passes (negative:
  /// forever). 0, or -errno (-ETIME: the time passed; -EINTR).
  int wait(std::chrono::nanoseconds timeout) noexcept;
  /// True when completions are ready to reap.
  bool completions_ready() const noexcept {
    return std::atomic_ref<unsigned>(*cq_tail_).load(std::memory_order_acquire) != *cq_head_;
  }
  /// True when completions are ready to reap, or the kernel holds some back
  /// (an overflowed queue, which an enter flushes).
  bool completions_pending() const noexcept;

  /// Calls `f(const io_uring_cqe&)` for each ready completion, at most
  /// `max`, and frees their slots. Returns how many.
  template <class F>
  std::size_t reap(std::size_t max, F&& f) noexcept {
    unsigned head = *cq_head_;  // only we move it
    const unsigned tail = std::atomic_ref<unsigned>(*cq_tail_).load(std::memory_order_acquire);
    std::size_t n = 0;
    while (head != tail && n < max) {
      f(cqes_[head & cq_mask_]);
      ++head;
      ++n;
    }
    // Release: our reads of the entries happen before the kernel reuses them.
    std::atomic_ref<unsigned>(*cq_head_).store(head, std::memory_order_release);
    return n;
  }

 private:
  void unmap() noexcept;

  int fd_ = -1;
  void* sq_map_ = nullptr;
  std::size_t sq_map_len_ = 0;
  void* cq_map_ = nullptr;  // == sq_map_ with IORING_FEAT_SINGLE_MMAP
  std::size_t cq_map_len_ = 0;
  io_uring_sqe* sqes_ = nullptr;
  std::size_t sqes_len_ = 0;
  unsigned* sq_head_ = nullptr;
  unsigned* sq_tail_ = nullptr;
  unsigned* sq_flags_ = nullptr;
  unsigned* sq_array_ = nullptr;
  unsigned sq_mask_ = 0;
  unsigned sq_entries_ = 0;
  unsigned sq_local_tail_ = 0;  // taken by next_sqe, not yet published
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned cq_mask_ = 0;
  io_uring_cqe* cqes_ = nullptr;
};

}  // namespace shoal::detail::io
