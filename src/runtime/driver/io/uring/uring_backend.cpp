// io_uring backend: each registered fd has one multishot poll request
// (edge-triggered: io_uring's poll is, unless IORING_POLL_ADD_LEVEL); wakes
// are a read of an eventfd, re-armed as it completes. Any thread may add or
// remove (the submission queue is under mu_, and each change is submitted
// at once, so a remove has taken effect in the kernel before the caller
// closes the fd: a poll request holds a reference to the file, and a socket
// under one would not close). Only the driver holder waits and reaps.
#include "src/platform/platform.hpp"
#if defined(SHOAL_HAVE_URING)
#include "src/runtime/driver/io/uring/uring_backend.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "shoal/detail/task_record.hpp"
#include "src/runtime/driver/io/completion.hpp"

namespace shoal::detail::io {
namespace {

// User data: a poll's fd and generation (bits 63 and 62 clear), an
// operation's address with bit 62 set (user-space addresses are below it),
// or one of these.
constexpr std::uint64_t kInternal = std::uint64_t{1} << 63;
constexpr std::uint64_t kOperation = std::uint64_t{1} << 62;
constexpr std::uint64_t kWake = kInternal;           // the read of the wake eventfd
constexpr std::uint64_t kRemoved = kInternal | 1;    // a cancel's own completion
constexpr std::uint64_t kProbe = kInternal | 2;      // the set-up's multishot poll
constexpr std::uint32_t kGenerationMask = 0x3fffffff;

constexpr std::uint32_t kAll = readable | writable | read_closed | write_closed;

[[noreturn]] void fail(const char* what, int err) { throw std::system_error(err, std::generic_category(), what); }

std::uint32_t to_poll(std::uint32_t interest) noexcept {
  std::uint32_t ev = EPOLLRDHUP;
  if ((interest & readable) != 0) ev |= EPOLLIN;
  if ((interest & writable) != 0) ev |= EPOLLOUT;
  return ev;
}

std::uint32_t from_poll(std::uint32_t mask) noexcept {
  std::uint32_t ready = 0;
  if ((mask & (EPOLLIN | EPOLLRDHUP)) != 0) ready |= readable;
  if ((mask & EPOLLOUT) != 0) ready |= writable;
  if ((mask & EPOLLRDHUP) != 0) ready |= read_closed;
  if ((mask & (EPOLLERR | EPOLLHUP)) != 0) ready |= kAll;
  return ready;
}

void drain(int fd) noexcept {
  std::uint64_t v;
  [[maybe_unused]] auto r = ::read(fd, &v, sizeof v);
}

std::uint64_t poll_data(int fd, std::uint32_t generation) noexcept {
  return (std::uint64_t{generation & kGenerationMask} << 32) | static_cast<std::uint32_t>(fd);
}

std::uint64_t op_data(const CompletionOp& op) noexcept { return kOperation | reinterpret_cast<std::uintptr_t>(&op); }

void prepare(io_uring_sqe* sqe, const io::Submission& s) noexcept {
  sqe->fd = s.fd;
  sqe->addr = reinterpret_cast<std::uintptr_t>(s.addr);
  sqe->len = s.len;
  sqe->off = s.offset;
  switch (s.op) {
    case OpCode::read:
      sqe->opcode = IORING_OP_READ;
      break;
    case OpCode::write:
      sqe->opcode = IORING_OP_WRITE;
      // Straight to the ring's workers: ext4 refuses a buffered write that
      // must not block, so the kernel's inline try fails and the write is
      // punted anyway, and the failed try cost more than the hand-off (4 KiB
      // writes: 152-164 MiB/s with it, 256-362 without; docs/fs.md).
      sqe->flags |= IOSQE_ASYNC;
      break;
    case OpCode::fsync:
      sqe->opcode = IORING_OP_FSYNC;
      break;
    case OpCode::fdatasync:
      sqe->opcode = IORING_OP_FSYNC;
      sqe->fsync_flags = IORING_FSYNC_DATASYNC;
      break;
    case OpCode::openat:
      sqe->opcode = IORING_OP_OPENAT;
      sqe->fd = AT_FDCWD;
      sqe->open_flags = s.flags;
      break;
    case OpCode::close:
      sqe->opcode = IORING_OP_CLOSE;
      break;
    case OpCode::accept:
      // A listener is non-blocking; the ring still waits for a connection
      // (it polls the socket itself) rather than say EAGAIN.
      sqe->opcode = IORING_OP_ACCEPT;
      sqe->off = reinterpret_cast<std::uintptr_t>(s.addr2);
      sqe->len = 0;
      sqe->accept_flags = s.flags;
      break;
  }
}

}  // namespace

UringBackend::UringBackend()
    : ring_(256, 4096,
            {IORING_OP_POLL_ADD, IORING_OP_ASYNC_CANCEL, IORING_OP_READ, IORING_OP_WRITE, IORING_OP_FSYNC,
             IORING_OP_OPENAT, IORING_OP_CLOSE, IORING_OP_ACCEPT},
            IORING_FEAT_NODROP | IORING_FEAT_EXT_ARG) {
  // Blocking: the ring's read of it waits (a non-blocking one says EAGAIN).
  wakefd_ = ::eventfd(0, EFD_CLOEXEC);
  if (wakefd_ < 0) fail("shoal: eventfd", errno);
  try {
    std::lock_guard<std::mutex> lock(mu_);
    // Multishot poll (5.13+) has no opcode of its own to probe: an older
    // kernel refuses the flag in the request's completion. Ask for one.
    wake();
    arm_locked(wakefd_, readable, kProbe);
    submit_locked();
    bool seen = false;
    int refused = 0;
    for (int tries = 0; !seen && tries < 3; ++tries) {
      if (const int r = ring_.wait(std::chrono::seconds(1)); r < 0 && r != -EINTR && r != -ETIME) {
        fail("shoal: io_uring_enter", -r);
      }
      ring_.reap(64, [&](const io_uring_cqe& c) {
        if (c.user_data != kProbe) return;
        seen = true;
        if (c.res < 0 || (c.flags & IORING_CQE_F_MORE) == 0) refused = c.res < 0 ? -c.res : EINVAL;
      });
    }
    if (!seen) throw RingUnavailable("this kernel's io_uring never completed a poll of a ready eventfd");
    if (refused != 0) {
      throw RingUnavailable(std::string("this kernel's io_uring refused a multishot poll (") + std::strerror(refused) +
                            "; 5.13+ needed)");
    }
    cancel_locked(kProbe);
    drain(wakefd_);  // the probe's wake
    arm_wake_locked();
    submit_locked();
  } catch (...) {
    ::close(wakefd_);
    throw;
  }
}

// The ring (a member, destroyed after this) cancels every request as it
// closes, and drops their references to the files.
UringBackend::~UringBackend() { ::close(wakefd_); }

void UringBackend::arm_locked(int fd, std::uint32_t interest, std::uint64_t data) {
  io_uring_sqe* sqe = take_sqe_locked();
  sqe->opcode = IORING_OP_POLL_ADD;
  sqe->fd = fd;
  sqe->poll32_events = to_poll(interest);
  sqe->len = IORING_POLL_ADD_MULTI;
  sqe->user_data = data;
}

void UringBackend::arm_wake_locked() {
  io_uring_sqe* sqe = take_sqe_locked();
  sqe->opcode = IORING_OP_READ;
  sqe->fd = wakefd_;
  sqe->addr = reinterpret_cast<std::uint64_t>(&wake_count_);
  sqe->len = sizeof wake_count_;
  sqe->user_data = kWake;
}

void UringBackend::cancel_locked(std::uint64_t data) { fill_cancel(take_sqe_locked(), data); }

void UringBackend::fill_cancel(io_uring_sqe* sqe, std::uint64_t data) noexcept {
  sqe->opcode = IORING_OP_ASYNC_CANCEL;
  sqe->addr = data;
  sqe->user_data = kRemoved;
}

io_uring_sqe* UringBackend::take_sqe_locked() {
  io_uring_sqe* sqe = ring_.next_sqe();
  if (sqe == nullptr) {  // full: hand the queue over and take a slot again
    submit_locked();
    sqe = ring_.next_sqe();
  }
  return sqe;
}

io_uring_sqe* UringBackend::try_sqe_locked() noexcept {
  io_uring_sqe* sqe = ring_.next_sqe();
  if (sqe == nullptr) {
    (void)ring_.submit();
    sqe = ring_.next_sqe();
  }
  return sqe;
}

bool UringBackend::submit(CompletionOp& op, const TaskRecord* f) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  io_uring_sqe* sqe = try_sqe_locked();
  if (sqe == nullptr) return false;
  prepare(sqe, op.submission());
  sqe->user_data = op_data(op);
  // Read under mu_, after queueing: a canceller whose cancel (under mu_)
  // came before this found nothing to cancel, and set the flag before.
  if (f != nullptr && f->cancelled(std::memory_order_seq_cst)) {
    if (io_uring_sqe* c = try_sqe_locked()) fill_cancel(c, op_data(op));
  }
  (void)ring_.submit();  // a failure leaves the entries to the next submit or wait
  return true;
}

void UringBackend::cancel(const CompletionOp& op) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  // With no entry to be had (the kernel refuses to take any), the operation
  // runs to its own end: a file operation ends by itself.
  if (io_uring_sqe* c = try_sqe_locked()) {
    fill_cancel(c, op_data(op));
    (void)ring_.submit();
  }
}

void UringBackend::submit_locked() {
  if (const int r = ring_.submit(); r < 0) fail("shoal: io_uring_enter(submit)", -r);
}

void UringBackend::add(int fd, std::uint32_t interest, void* token) {
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<std::size_t>(fd) >= regs_.size()) regs_.resize(static_cast<std::size_t>(fd) + 1);
  Registration& r = regs_[static_cast<std::size_t>(fd)];
  r.generation = (r.generation + 1) & kGenerationMask;
  r.token = token;
  r.interest = interest;
  arm_locked(fd, interest, poll_data(fd, r.generation));
  submit_locked();
  r.live = true;
}

void UringBackend::remove(int fd) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<std::size_t>(fd) >= regs_.size()) return;
  Registration& r = regs_[static_cast<std::size_t>(fd)];
  if (!r.live) return;
  r.live = false;  // from here its completions are dropped
  // A cancel, not IORING_OP_POLL_REMOVE: a remove that finds the request
  // busy posting an event fails (EALREADY) and leaves it armed for good,
  // holding the file (a closed socket that never sends its FIN:
  // BufferedReaderTest hung on four workers). A cancel marks the request,
  // which ends itself once free. Submitted now: a poll request holds the
  // file, so the caller's close would not close it.
  try {
    cancel_locked(poll_data(fd, r.generation));
    submit_locked();
  } catch (const std::system_error&) {
    // The entry stays queued and goes with the next submit.
  }
}

std::size_t UringBackend::wait(std::chrono::nanoseconds timeout, std::span<Event> out) {
  if (!ring_.completions_pending()) {
    if (timeout.count() == 0) return 0;  // a busy worker's poll: no syscall
    {
      // Entries a failed submit left (the kernel said EAGAIN or EBUSY) go
      // now: an operation among them may be what this wait is for.
      std::lock_guard<std::mutex> lock(mu_);
      if (ring_.unsubmitted()) (void)ring_.submit();
    }
    const int r = ring_.wait(timeout);
    if (r < 0 && r != -ETIME && r != -EINTR) fail("shoal: io_uring_enter(wait)", -r);
  } else if (!ring_.completions_ready()) {
    (void)ring_.wait(std::chrono::nanoseconds(0));  // flushes the completions the kernel held back
  }
  std::size_t count = 0;
  bool rearmed = false;
  int fds[kMaxEvents];
  std::lock_guard<std::mutex> lock(mu_);
  ring_.reap(std::min(out.size(), kMaxEvents), [&](const io_uring_cqe& c) {
    const bool more = (c.flags & IORING_CQE_F_MORE) != 0;
    if (c.user_data == kWake) {
      // The read took every wake so far; one from now on completes the
      // next read at once, so a wake is never lost between two waits.
      arm_wake_locked();
      rearmed = true;
      return;
    }
    if ((c.user_data & kInternal) != 0) return;  // a cancel's own completion
    if ((c.user_data & kOperation) != 0) {
      auto* op = reinterpret_cast<CompletionOp*>(static_cast<std::uintptr_t>(c.user_data & ~kOperation));
      op->set_result(c.res);
      fds[count] = -1;
      out[count++] = Event{op, completed};
      return;
    }
    const auto fd = static_cast<std::size_t>(static_cast<std::uint32_t>(c.user_data));
    if (fd >= regs_.size()) return;
    Registration& r = regs_[fd];
    if (!r.live || poll_data(static_cast<int>(fd), r.generation) != c.user_data) return;  // removed: its last word
    std::uint32_t ready = c.res >= 0 ? from_poll(static_cast<std::uint32_t>(c.res)) : kAll;
    if (!more && (c.res >= 0 || c.res == -ECANCELED)) {
      // The kernel ended the request (its completion queue overflowed, or
      // the thread that submitted it exited): arm it again, and report both
      // directions, since an edge may have come and gone in between.
      arm_locked(static_cast<int>(fd), r.interest, c.user_data);
      rearmed = true;
      ready |= r.interest;
    }
    // Any other error ends it for good and reports everything: each
    // operation's own syscall then says what is wrong.
    fds[count] = static_cast<int>(fd);
    out[count++] = Event{r.token, ready};
  });
  if (rearmed || ring_.unsubmitted()) (void)ring_.submit();  // a failure leaves them for the next submit
  return confirm_readable(out.first(count), fds);
}

// A poll completion carries the readiness of its wake-up (or of the arming),
// not of now: data that was there may have been read since (the arming's
// report comes after the first read of a source that assumed it readable).
// epoll reports what is ready when it is asked, and the reactor's trust in
// an edge rests on that: `wait_readable` returns without a syscall after a
// readable edge, and the HTTP/2 connection then read with no limit and hung
// on a client that had sent nothing more. So one poll(2) over this turn's
// readable reports drops those that no longer hold. (The completion path,
// docs/uring.md, replaces readiness on the server path.)
std::size_t UringBackend::confirm_readable(std::span<Event> events, const int* fds) noexcept {
  pollfd polls[kMaxEvents];
  std::size_t map[kMaxEvents];
  nfds_t n = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    // A closed direction is final and an error reports everything: both hold.
    if ((events[i].ready & readable) == 0 || (events[i].ready & read_closed) != 0) continue;
    polls[n] = pollfd{fds[i], POLLIN, 0};
    map[n++] = i;
  }
  if (n == 0) return events.size();
  int r;
  do {
    r = ::poll(polls, n, 0);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return events.size();  // keep the reports: an op's own syscall sorts them out
  for (nfds_t k = 0; k < n; ++k) {
    if (polls[k].revents == 0) events[map[k]].ready &= ~readable;
  }
  return events.size();
}

void UringBackend::wake() noexcept {
  std::uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(wakefd_, &one, sizeof one);
}

}  // namespace shoal::detail::io

#endif  // SHOAL_HAVE_URING
