// Child processes: posix_spawnp with piped stdio (vfork and exec when the
// child must die with its parent: posix_spawn cannot set that), an async
// wait on a pidfd, or on kqueue's EVFILT_PROC where there is none.
#include "shoal/process/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include "src/runtime/driver/io/async_io.hpp"
#include "shoal/time/sleep.hpp"
#include "src/platform/platform.hpp"

extern char** environ;

namespace shoal::process {
namespace {

// Children whose owner was destroyed before they were reaped: SIGKILLed and
// reaped (without blocking) by later process calls.
std::mutex g_orphans_mu;
std::vector<pid_t> g_orphans;

void reap_orphans() {
  std::lock_guard<std::mutex> g(g_orphans_mu);
  for (std::size_t i = 0; i < g_orphans.size();) {
    if (::waitpid(g_orphans[i], nullptr, WNOHANG) != 0) {
      g_orphans[i] = g_orphans.back();
      g_orphans.pop_back();
    } else {
      ++i;
    }
  }
}

ExitStatus decode(int st) {
  ExitStatus s;
  if (WIFEXITED(st)) s.code = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) s.signal = WTERMSIG(st);
  return s;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::system_error(err, std::generic_category(), "shoal::process::spawn " + what);
}

}  // namespace

std::string ExitStatus::to_string() const {
  if (signal != 0) {
    const char* d = ::sigabbrev_np(signal);
    return std::string("killed by ") + (d != nullptr ? std::string("SIG") + d : "signal " + std::to_string(signal));
  }
  return "exit code " + std::to_string(code);
}

// posix_spawnp's work, by hand, for what it cannot do: the child asks to
// be killed when its parent dies. Between vfork and exec the child shares
// our memory and runs on this thread's stack, so it only makes system calls,
// with every signal blocked until its handlers are back to their defaults
// (as glibc's posix_spawn does). A failure before or at exec comes back as
// its errno through a close-on-exec pipe, whose end (exec closed it) also
// says the prctl is done: that holds where vfork is a fork too (under
// ThreadSanitizer), where the spawning thread could otherwise end first.
#if defined(__linux__)
pid_t spawn_dying_with_parent(const char* file, char* const* args, char* const* envs, const int (&dup_from)[3],
                              const bool (&null_in)[3], const char* cwd, bool group) {
  int report[2];
  if (detail::platform::make_pipe(report, false) != 0) return -errno;
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t parent = ::getpid();
  const pid_t pid = ::vfork();
  if (pid == 0) {
    auto die = [&](int e) {
      (void)!::write(report[1], &e, sizeof e);
      ::_exit(127);
    };
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die(errno);
    if (::getppid() != parent) die(ESRCH);  // the parent died before the prctl
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) (void)::sigaction(sig, &dfl, nullptr);  // glibc's own fail: harmless
    if (group && ::setpgid(0, 0) != 0) die(errno);
    for (int i = 0; i < 3; ++i) {
      if (dup_from[i] == i && ::fcntl(i, F_SETFD, 0) != 0) die(errno);  // already there: keep it across exec
      if (dup_from[i] >= 0 && dup_from[i] != i && ::dup2(dup_from[i], i) < 0) die(errno);
      if (null_in[i]) {
        const int fd = ::open("/dev/null", i == 0 ? O_RDONLY : O_WRONLY);
        if (fd < 0) die(errno);
        if (fd != i && (::dup2(fd, i) < 0 || ::close(fd) != 0)) die(errno);
      }
    }
    if (cwd != nullptr && ::chdir(cwd) != 0) die(errno);
    sigset_t none;
    sigemptyset(&none);
    ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(file, args, envs);
    die(errno);
  }
  const int fork_err = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    return -fork_err;
  }
  int err = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof err)) {
    ::waitpid(pid, nullptr, 0);  // it exited at once
    return -err;
  }
  return pid;
}
#endif  // __linux__: PR_SET_PDEATHSIG

Child spawn(const std::vector<std::string>& argv, const Options& options) {
  if (argv.empty() || argv[0].empty()) throw std::invalid_argument("shoal::process::spawn: argv is empty");
  reap_orphans();
  const std::string prog = "\"" + argv[0] + "\"";
  // [0] = the child's end, [1] = ours (non-blocking), per stream.
  Fd ends[3][2];
  const Stdio kinds[3] = {options.in, options.out, options.err};
  for (int i = 0; i < 3; ++i) {
    if (kinds[i] != Stdio::pipe) continue;
    int p[2];
    if (detail::platform::make_pipe(p, false) != 0) fail(prog + ": pipe", errno);
    const bool child_reads = i == 0;
    ends[i][0].fd = child_reads ? p[0] : p[1];
    ends[i][1].fd = child_reads ? p[1] : p[0];
    ::fcntl(ends[i][1].fd, F_SETFL, ::fcntl(ends[i][1].fd, F_GETFL) | O_NONBLOCK);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  struct Cleanup {
    posix_spawn_file_actions_t* fa;
    posix_spawnattr_t* attr;
    ~Cleanup() {
      posix_spawn_file_actions_destroy(fa);
      posix_spawnattr_destroy(attr);
    }
  } cleanup{&fa, &attr};
  for (int i = 0; i < 3; ++i) {
    if (kinds[i] == Stdio::pipe) posix_spawn_file_actions_adddup2(&fa, ends[i][0].fd, i);
    if (kinds[i] == Stdio::null) posix_spawn_file_actions_addopen(&fa, i, "/dev/null", i == 0 ? O_RDONLY : O_WRONLY, 0);
  }
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, options.cwd.c_str());
  // The child starts with default signal handling and an empty mask: the
  // runtime ignores SIGPIPE, and an ignored disposition survives exec.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (options.process_group) {
    posix_spawnattr_setpgroup(&attr, 0);  // a new group, led by the child
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envs;
  if (options.env) {
    for (const auto& e : *options.env) envs.push_back(const_cast<char*>(e.c_str()));
    envs.push_back(nullptr);
  }
  pid_t pid = -1;
  char* const* const env_ptr = options.env ? envs.data() : environ;
  if (options.die_with_parent) {
    int dup_from[3];
    bool null_in[3];
    for (int i = 0; i < 3; ++i) {
      dup_from[i] = kinds[i] == Stdio::pipe ? ends[i][0].fd : -1;
      null_in[i] = kinds[i] == Stdio::null;
    }
#if defined(__linux__)
    pid = spawn_dying_with_parent(argv[0].c_str(), args.data(), env_ptr, dup_from, null_in,
                                  options.cwd.empty() ? nullptr : options.cwd.c_str(), options.process_group);
    if (pid < 0) fail(prog, -pid);
#else
    (void)dup_from;
    (void)null_in;
    throw std::system_error(ENOTSUP, std::generic_category(),
                            "shoal::process::spawn " + prog + ": die_with_parent needs Linux's PR_SET_PDEATHSIG");
#endif
  } else {
    const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &fa, &attr, args.data(), env_ptr);
    if (rc != 0) fail(prog, rc);
  }

  Child c;
  c.pid_ = pid;
  c.group_ = options.process_group ? pid : 0;
#if defined(SHOAL_LINUX_CALLS) && defined(SYS_pidfd_open)
  c.pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // -1 (ENOSYS) on old kernels: wait polls
  if (c.pidfd_ >= 0) ::fcntl(c.pidfd_, F_SETFD, FD_CLOEXEC);
#endif  // elsewhere wait() watches the pid through the backend (kqueue), or polls
  if (kinds[0] == Stdio::pipe) c.in_.emplace(ends[0][1].release());
  if (kinds[1] == Stdio::pipe) c.out_.emplace(ends[1][1].release());
  if (kinds[2] == Stdio::pipe) c.err_.emplace(ends[2][1].release());
  return c;  // the child's ends close here
}

Child::Child(Child&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      group_(std::exchange(o.group_, 0)),
      pidfd_(std::exchange(o.pidfd_, -1)),
      status_(o.status_),
      in_(std::move(o.in_)),
      out_(std::move(o.out_)),
      err_(std::move(o.err_)) {}

Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    release();
    pid_ = std::exchange(o.pid_, -1);
    group_ = std::exchange(o.group_, 0);
    pidfd_ = std::exchange(o.pidfd_, -1);
    status_ = o.status_;
    in_ = std::move(o.in_);
    out_ = std::move(o.out_);
    err_ = std::move(o.err_);
  }
  return *this;
}

Child::~Child() { release(); }

void Child::release() noexcept {
  in_.reset();
  out_.reset();
  err_.reset();
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    if (::waitpid(pid_, nullptr, WNOHANG) == 0) {
      try {
        std::lock_guard<std::mutex> g(g_orphans_mu);
        g_orphans.push_back(pid_);
      } catch (...) {  // no memory to remember it: reap now (SIGKILL makes this short)
        ::waitpid(pid_, nullptr, 0);
      }
    }
  }
  // What the child left in its group. Only while the child is unreaped: its
  // pid then pins the group's id, which cannot have been reused.
  if (group_ > 0 && !status_) ::kill(-group_, SIGKILL);
  if (pidfd_ >= 0) ::close(pidfd_);
  group_ = 0;
  pid_ = -1;
  pidfd_ = -1;
}

namespace {
net::Stream& pipe_or_throw(std::optional<net::Stream>& s, const char* which) {
  if (!s) throw std::logic_error(std::string("shoal::process::Child::") + which + ": that stream is not Stdio::pipe");
  return *s;
}
}  // namespace

net::Stream& Child::in() { return pipe_or_throw(in_, "in"); }
net::Stream& Child::out() { return pipe_or_throw(out_, "out"); }
net::Stream& Child::err() { return pipe_or_throw(err_, "err"); }

void Child::kill(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

void Child::kill_group(int sig) {
  if (group_ <= 0) {
    throw std::logic_error("shoal::process::Child::kill_group: the child was not spawned with Options::process_group");
  }
  ::kill(-group_, sig);  // ESRCH: the group is empty
}

Task<ExitStatus> Child::wait() {
  if (status_) co_return *status_;
  if (pid_ <= 0) throw std::logic_error("shoal::process::Child::wait: no child (moved from)");
  reap_orphans();
  struct Watch {  // the pidfd's registration, or the pid's (kqueue), for this wait
    detail::IoSlot src;
    detail::IoSource* proc = nullptr;
    ~Watch() {
      src.release();
      if (proc != nullptr) detail::io_deregister(proc);
    }
  } watch;
  // Reaps the child if it has exited. EINTR is retried.
  auto reap = [this]() -> std::optional<ExitStatus> {
    for (;;) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) return status_ = decode(st);
      if (r == 0) return std::nullopt;
      if (errno != EINTR) {
        throw std::system_error(errno, std::generic_category(), "shoal::process::Child::wait " + std::to_string(pid_));
      }
    }
  };
  if (pidfd_ >= 0) {
    // A pidfd turns readable when the child exits: the first attempt
    // happens at once, later ones on its edge.
    detail::IoSource* src = watch.src.get(pidfd_, detail::io::readable);
    co_return co_await detail::async_io(src, detail::io::readable,
                                        [&reap](detail::IoAttempt&) { return reap(); });
  }
  // No pidfd: the backend's process event (kqueue's EVFILT_PROC), registered
  // before the first attempt so an exit in between is still an event.
  if ((watch.proc = detail::io_register_process(pid_)) != nullptr) {
    co_return co_await detail::async_io(watch.proc, detail::io::readable,
                                        [&reap](detail::IoAttempt&) { return reap(); });
  }
  auto backoff = std::chrono::milliseconds(1);
  for (;;) {  // neither: poll, backing off
    detail::io_check_cancelled();
    if (auto st = reap()) co_return *st;
    co_await sleep_for(backoff);
    if (backoff < std::chrono::milliseconds(50)) backoff *= 2;
  }
}

}  // namespace shoal::process
