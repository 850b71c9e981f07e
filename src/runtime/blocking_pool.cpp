// Blocking pool and wait_readable.
//
// A job is claimed exactly once: by a pool thread (popped under the pool's
// lock) or by a canceller (unlinked under it before it ran). A running job's waiter is
// resumed by the pool thread after run() returns: disarm, then schedule.
// wait_readable's wake fd is created under the job's wake mutex, and the
// cancellation flag is read after that, so a cancel that happened before
// the fd existed is still seen.
#include "src/runtime/blocking_pool.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <system_error>
#include <thread>

#include "shoal/detail/thread_wake.hpp"
#include "src/runtime/frame_slabs.hpp"
#include "src/platform/platform.hpp"
#include "src/runtime/scheduler.hpp"
#if defined(SHOAL_LINUX_CALLS)
#include <sys/eventfd.h>
#endif

namespace shoal::detail {
namespace {
thread_local BlockingJob* tls_job = nullptr;
}

BlockingJob* current_blocking_job() noexcept { return tls_job; }

BlockingJob::~BlockingJob() {
  if (wake_write_ >= 0 && wake_write_ != wake_fd_) ::close(wake_write_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

int BlockingJob::wake_fd() noexcept {
  shim::lock_guard<shim::mutex> g(wake_mu_);
  if (wake_fd_ < 0) {
#if defined(SHOAL_LINUX_CALLS)
    wake_fd_ = wake_write_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
#else
    int fds[2];
    if (platform::make_pipe(fds, true) == 0) {
      wake_fd_ = fds[0];
      wake_write_ = fds[1];
    }
#endif
  }
  return wake_fd_;
}

void BlockingJob::signal_cancel() noexcept {
  shim::lock_guard<shim::mutex> g(wake_mu_);
  if (wake_write_ >= 0) {
    std::uint64_t one = 1;  // an eventfd takes 8 bytes; a pipe takes any
    [[maybe_unused]] auto r = ::write(wake_write_, &one, sizeof one);
  }
}

void BlockingJob::after_cancel(bool claimed) noexcept {
  if (claimed) {  // never ran: the awaiter throws Cancelled once the canceller schedules it
    waiter->sched->blocking_finished();
    return;
  }
  signal_cancel();  // running: it sees the flag; we resume when it returns
}

void BlockingJob::bind_pool(Scheduler* s) noexcept { bind(s->blocking().lock()); }

bool blocking_submit(Scheduler* s, BlockingJob* job) noexcept {
  s->blocking_started();
  if (s->blocking().submit(job, job->waiter)) return true;
  s->blocking_finished();
  return false;
}

namespace {
// An idle pool thread, queued on the pool's idle list.
struct IdleThread final : Waiter {
  explicit IdleThread(SpinLock& lock) noexcept : Waiter(lock) {}
};
}  // namespace

bool BlockingPool::submit(BlockingJob* job, const TaskRecord* unless) noexcept {
  bool start_thread = false;
  {
    WaitSection sec(lock_);
    if (unless != nullptr && unless->cancelled()) return false;
    job->link_locked(jobs_);
    if (Waiter* idle = idle_.pop_front()) {
      sec.wake(idle);  // claimed: the next submit cannot count it again
    } else if (threads_ < max_threads_) {
      ++threads_;
      start_thread = true;
    }  // else: at the cap, the job waits for a busy thread
  }
  if (start_thread) {
    live_threads_.fetch_add(1, std::memory_order_relaxed);
    try {
      std::thread([this] { thread_main(); }).detach();
    } catch (...) {
      // No thread: the job waits for a busy one (there is at least one, or
      // this is the first and the job would never run: say so).
      live_threads_.fetch_sub(1, std::memory_order_relaxed);
      WaitSection sec(lock_);
      --threads_;
      if (threads_ == 0) std::fputs("shoal: could not start a blocking-pool thread\n", stderr);
    }
  }
  return true;
}

std::size_t BlockingPool::threads() const noexcept {
  WaitSection sec(lock_);
  return threads_;
}

std::size_t BlockingPool::queued() const noexcept {
  WaitSection sec(lock_);
  std::size_t n = 0;
  for (const Waiter* w = jobs_.front(); w != nullptr; w = jobs_.next(w)) ++n;
  return n;
}

bool BlockingPool::wait_idle() noexcept {
  IdleThread me(lock_);
  ThreadWake wake;
  {
    WaitSection sec(lock_);
    if (shutdown_) return false;
    me.wait_by_thread(wake);
    me.link_locked(idle_);
  }
  if (wake.wait_until(std::chrono::steady_clock::now() + keep_alive_)) return true;
  {
    WaitSection sec(lock_);
    if (me.is_linked()) {  // idle too long and nobody claimed us: leave
      me.unlink_locked();
      return false;
    }
  }
  wake.wait();  // claimed as the keep-alive ran out: the wake is on the way
  return true;
}

// A thread runs jobs while there are any, then waits on the idle list until
// a submit claims it, the pool shuts down, or keep_alive passes.
void BlockingPool::thread_main() noexcept {
  for (;;) {
    BlockingJob* job;
    {
      WaitSection sec(lock_);
      job = static_cast<BlockingJob*>(jobs_.pop_front());
    }
    if (job == nullptr) {
      frame_cache_flush_remote();  // a job's frees of frames go home before the thread idles
      if (wait_idle()) continue;
      break;  // idle too long, or shutting down
    }
    tls_job = job;
    job->run();
    tls_job = nullptr;
    TaskRecord* f = job->waiter;
    Scheduler* s = f->sched;
    disarm_wait(f, job);
    schedule(f);  // job may be gone from here on
    s->blocking_finished();  // after the wake, so a manual clock never skips ahead of it
  }
  {
    WaitSection sec(lock_);
    --threads_;
  }
  live_threads_.fetch_sub(1, std::memory_order_release);
  live_threads_.notify_all();
}

BlockingPool::~BlockingPool() {
  {
    WaitSection sec(lock_);
    shutdown_ = true;
    while (Waiter* idle = idle_.pop_front()) sec.wake(idle);
  }
  for (std::size_t n = live_threads_.load(std::memory_order_acquire); n != 0;
       n = live_threads_.load(std::memory_order_acquire)) {
    live_threads_.wait(n, std::memory_order_acquire);
  }
}

}  // namespace shoal::detail

namespace shoal::this_task {

WaitResult wait_readable(int fd, std::chrono::milliseconds timeout) {
  detail::BlockingJob* job = detail::current_blocking_job();
  if (job == nullptr && detail::on_worker_thread()) {
    throw std::logic_error("shoal::this_task::wait_readable: called on a runtime worker (use spawn_blocking)");
  }
  pollfd fds[2] = {{fd, POLLIN, 0}, {-1, POLLIN, 0}};
  nfds_t n = 1;
  if (job != nullptr) {
    fds[1].fd = job->wake_fd();
    if (fds[1].fd >= 0) n = 2;
    if (job->cancelled()) return WaitResult::cancelled;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int ms = -1;
    if (timeout.count() >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      ms = static_cast<int>(std::max<long long>(0, left.count()));
    }
    // Without a wake fd (it could not be made) poll in slices so a cancel is still seen.
    if (job != nullptr && n == 1 && (ms < 0 || ms > 50)) ms = 50;
    int r = ::poll(fds, n, ms);
    if (r < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      throw std::system_error(err, std::generic_category(), "shoal::this_task::wait_readable: poll");
    }
    if (n == 2 && fds[1].revents != 0) return WaitResult::cancelled;
    if (fds[0].revents != 0) return WaitResult::readable;
    if (job != nullptr && job->cancelled()) return WaitResult::cancelled;
    if (timeout.count() >= 0 && std::chrono::steady_clock::now() >= deadline) return WaitResult::timed_out;
  }
}

}  // namespace shoal::this_task
