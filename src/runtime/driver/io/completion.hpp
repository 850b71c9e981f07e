// An operation the kernel runs to completion (io_uring), awaited in the
// frame of the task that started it: the completion path beside the
// readiness loop (IoOp). The structured part is the cancel: a cancelled
// task asks the kernel to cancel and still waits for the operation's own
// completion, so no frame or buffer the kernel may still write goes away
// first (docs/uring.md).
#pragma once

#include <coroutine>
#include <cstdint>

#include "shoal/detail/task_record.hpp"

namespace shoal::detail {

namespace io {

enum class OpCode : std::uint8_t { read, write, fsync, fdatasync, openat, close, accept };

/// What to ask of the kernel: the fields of a submission entry, by meaning.
struct Submission {
  OpCode op = OpCode::read;
  int fd = -1;
  const void* addr = nullptr;  // the buffer; the path (openat); the peer's sockaddr or null (accept)
  void* addr2 = nullptr;       // accept: the socklen_t of `addr`
  std::uint32_t len = 0;       // bytes; the mode (openat)
  std::uint64_t offset = 0;
  std::uint32_t flags = 0;     // open(2) flags (openat); accept4(2) flags (accept)
};

}  // namespace io

/// One operation in flight on the driver's backend (Backend::runs_operations).
/// Lives in the awaiting frame. co_await yields the kernel's result: >= 0,
/// or -errno.
/// Checkpoint: yes for a cancellable op (a cancelled task submits nothing and
///   throws Cancelled); it always suspends, so it needs no budget yield.
/// Cancellation: the kernel is asked to cancel and the task resumes at the
///   operation's own completion: Cancelled if the kernel cancelled it
///   (nothing was done), else its result (it finished first), except an
///   accept's: the connection it took is closed and Cancelled thrown, since
///   nobody is left to serve it.
class CompletionOp final : public WaitHook {
 public:
  CompletionOp(const io::Submission& s, bool cancellable) noexcept : sub_(s), cancellable_(cancellable) {}
  CompletionOp(const CompletionOp&) = delete;
  CompletionOp& operator=(const CompletionOp&) = delete;

  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    return start(record_of(h), h);
  }
  /// The result (>= 0, or -errno). Throws Cancelled (not submitted, or
  /// cancelled by the kernel); std::logic_error outside a shoal task.
  int await_resume() const;

  const io::Submission& submission() const noexcept { return sub_; }
  /// The backend, as it reaps the completion.
  void set_result(int res) noexcept { result_ = res; }
  /// The driver's dispatch, once the completion is reaped: disarms the
  /// task's wait and returns it to schedule. Nothing may touch *this after.
  TaskRecord* finish() noexcept;

  bool cancel_wait() noexcept override;
  const char* wait_kind() const noexcept override;

 private:
  bool start(TaskRecord* f, std::coroutine_handle<> h) noexcept;

  io::Submission sub_;
  TaskRecord* record_ = nullptr;
  int result_ = 0;
  bool cancellable_;
  bool submitted_ = false;
};

}  // namespace shoal::detail
