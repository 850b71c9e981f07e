// io_uring backend (Linux, SHOAL_IO_BACKEND=uring): readiness through
// multishot poll requests on one ring, a read of an eventfd for wakes
// (docs/uring.md: step 1 of the completion backend).
#pragma once

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "src/runtime/driver/io/backend.hpp"
#include "src/runtime/driver/io/uring/ring.hpp"

namespace shoal::detail::io {

class UringBackend final : public Backend {
 public:
  /// Sets up the ring and probes what it needs. Throws RingUnavailable
  /// naming why io_uring cannot be used here (make_backend falls back to
  /// epoll), std::system_error for any other failure.
  UringBackend();
  ~UringBackend() override;
  const char* name() const noexcept override { return "uring"; }
  void add(int fd, std::uint32_t interest, void* token) override;
  void remove(int fd) noexcept override;
  bool runs_operations() const noexcept override { return true; }
  bool submit(CompletionOp& op, const TaskRecord* f) noexcept override;
  void cancel(const CompletionOp& op) noexcept override;
  std::size_t wait(std::chrono::nanoseconds timeout, std::span<Event> out) override;
  void wake() noexcept override;

 private:
  // What an fd number is registered as. A poll request's user data carries
  // the fd and the registration's generation, so a completion of a removed
  // registration (the kernel may post it after the remove, or it may sit
  // unharvested while the number is reused) is recognised and dropped.
  struct Registration {
    void* token = nullptr;
    std::uint32_t generation = 0;
    std::uint32_t interest = 0;
    bool live = false;
  };
  /// Queues a multishot poll for `fd`. Under mu_, as all below.
  void arm_locked(int fd, std::uint32_t interest, std::uint64_t data);
  /// Queues the read of the wake eventfd (one at a time, re-armed as it completes).
  void arm_wake_locked();
  /// Queues the cancel of the request whose user data is `data`.
  void cancel_locked(std::uint64_t data);
  /// Makes `sqe` the cancel of the request whose user data is `data`.
  static void fill_cancel(io_uring_sqe* sqe, std::uint64_t data) noexcept;
  /// A submission entry or null, without throwing (a failed hand-over of a
  /// full queue leaves it full).
  io_uring_sqe* try_sqe_locked() noexcept;
  /// A submission entry, handing the queue over first if it is full.
  io_uring_sqe* take_sqe_locked();
  /// Drops the readable bit of the events whose fd (`fds`, by index) is
  /// not readable now. Returns events.size().
  static std::size_t confirm_readable(std::span<Event> events, const int* fds) noexcept;
  static constexpr std::size_t kMaxEvents = 64;  // reported per wait
  /// Submits what is queued. Under mu_. Throws std::system_error.
  void submit_locked();

  Ring ring_;
  int wakefd_ = -1;
  std::uint64_t wake_count_ = 0;    // where the ring reads the wake eventfd into
  std::mutex mu_;                   // the submission queue and regs_
  std::vector<Registration> regs_;  // by fd number
};

}  // namespace shoal::detail::io
