// CompletionOp (completion.hpp). Who resumes the task: only the dispatch of
// the operation's completion. A canceller never claims the wait (cancel_wait
// returns false): it submits the kernel's cancel and leaves the wake to the
// completion, which the kernel posts either way. The cancel is handed to
// the kernel inside cancel_wait, and the dispatch disarms (waiting out a
// canceller that is looking) before it schedules the task, so the frame
// cannot be reused, and its address be another operation's, while a cancel
// aimed at it is still on its way.
#include "src/runtime/driver/io/completion.hpp"

#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "shoal/runtime/errors.hpp"
#include "src/runtime/scheduler.hpp"

namespace shoal::detail {

bool CompletionOp::start(TaskRecord* f, std::coroutine_handle<> h) noexcept {
  record_ = f;
  if (f == nullptr) return false;  // await_resume says so
  if (cancellable_ && f->cancelled()) return false;  // nothing submitted
  f->resume = h;
  publish_hook(f, this);
  // A canceller that saw the hook before the submission below sent its
  // cancel for nothing; it set the flag first, and the backend reads the
  // flag under the lock the cancel took, after queueing: it queues a cancel
  // of its own then. From here the completion owns the wake.
  submitted_ = true;
  if (f->sched->driver().submit_op(*this, cancellable_ ? f : nullptr)) return true;
  disarm_wait(f, this);
  result_ = -EBUSY;  // the kernel took no submission: said as the error it is
  return false;
}

int CompletionOp::await_resume() const {
  if (record_ == nullptr) throw std::logic_error("shoal: kernel I/O must be awaited from a shoal task");
  if (!submitted_) detail::raise_cancelled();
  if (cancellable_ && record_->cancelled()) {
    if (result_ == -ECANCELED) detail::raise_cancelled();
    if (sub_.op == io::OpCode::accept && result_ >= 0) {
      // It completed while (or after) the cancel was on its way: the
      // connection has no one to serve it, and a task that was cancelled
      // must not come back holding something new.
      ::close(result_);
      detail::raise_cancelled();
    }
  }
  return result_;
}

TaskRecord* CompletionOp::finish() noexcept {
  TaskRecord* f = record_;
  disarm_wait(f, this);  // waits out a canceller inside cancel_wait
  return f;
}

bool CompletionOp::cancel_wait() noexcept {
  if (cancellable_) record_->sched->driver().cancel_op(*this);
  return false;  // the completion wakes the task, cancelled or not
}

const char* CompletionOp::wait_kind() const noexcept {
  switch (sub_.op) {
    case io::OpCode::read:
      return "file read (io_uring)";
    case io::OpCode::write:
      return "file write (io_uring)";
    case io::OpCode::fsync:
    case io::OpCode::fdatasync:
      return "file sync (io_uring)";
    case io::OpCode::openat:
      return "file open (io_uring)";
    case io::OpCode::close:
      return "file close (io_uring)";
    case io::OpCode::accept:
      return "accept (io_uring)";
  }
  return "file I/O (io_uring)";
}

}  // namespace shoal::detail
