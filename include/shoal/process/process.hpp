// Child processes with piped stdio and an async wait: a stdio proxy needs
// no thread per session.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "shoal/net/stream.hpp"
#include "shoal/runtime/task.hpp"

/// Child processes with piped stdio and an async wait: spawn() and Child.
namespace shoal::process {

/// What a child's stdin, stdout or stderr is connected to: `inherit` (the
/// parent's), `pipe` (a pipe whose other end is Child::in(), out() or err())
/// or `null` (/dev/null).
enum class Stdio { inherit, pipe, null };

/// How spawn() starts a child: its stdio, working directory, environment and
/// process group.
struct Options {
  /// The child's stdin.
  Stdio in = Stdio::inherit;
  /// The child's stdout.
  Stdio out = Stdio::inherit;
  /// The child's stderr.
  Stdio err = Stdio::inherit;
  std::string cwd;                              ///< empty: the parent's
  std::optional<std::vector<std::string>> env;  ///< "K=V" entries; none: the parent's environment
  /// The child leads a new process group (its pgid is its pid), so
  /// Child::kill_group reaches what it starts too (`sh -c`, `npx`), and a
  /// terminal's signals to the parent's group do not reach it.
  bool process_group = false;
  /// The child is sent SIGKILL when its parent dies, even by SIGKILL
  /// (Linux's PR_SET_PDEATHSIG), so that it cannot outlive a gateway or
  /// supervisor killed without a chance to stop it. Linux ties this to the
  /// thread that spawned it: a child spawned from a shoal task dies when
  /// the runtime's worker that ran the spawn exits (the runtime's end), or
  /// with the process. (It reaches the child only, not what it starts.)
  /// Linux only: elsewhere spawn throws std::system_error (ENOTSUP).
  bool die_with_parent = false;
};

/// How a child ended.
struct ExitStatus {
  int code = -1;    ///< the exit code, or -1 if a signal ended it
  int signal = 0;   ///< the signal that ended it, or 0
  /// True if the child exited with code 0 (not ended by a signal).
  bool success() const noexcept { return code == 0; }
  /// "exit code N" or "killed by SIGNAME", for messages.
  std::string to_string() const;
};

/// A running (or finished) child. Move-only.
/// The destructor of a child that was never waited for kills it (SIGKILL)
/// and reaps it without blocking: no zombie, no orphan left running. With
/// Options::process_group, the destructor SIGKILLs the whole group, so a
/// grandchild the child left behind does not outlive it either (once the
/// child was waited for, kill_group is how to reach what is left).
class Child {
 public:
  /// Takes over `o`'s child and pipes; `o` is left moved-from.
  Child(Child&& o) noexcept;
  /// Releases this Child's process as the destructor does (an unwaited child
  /// is killed and reaped), then takes over `o`'s.
  Child& operator=(Child&& o) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  /// The child's process id (kept after it was reaped; -1 when moved from).
  pid_t pid() const noexcept { return pid_; }
  /// The pipe ends (Stdio::pipe only; std::logic_error otherwise). Move the
  /// stdin end out (or close it) to send end-of-file.
  net::Stream& in();
  /// The read end of the child's stdout pipe (Options::out must be Stdio::pipe).
  net::Stream& out();
  /// The read end of the child's stderr pipe (Options::err must be Stdio::pipe).
  net::Stream& err();

  /// Waits for the child to exit and reaps it (a pidfd where available, else
  /// polling with sleeps of 1 ms doubling up to 64 ms).
  /// Checkpoint: yes until the status is known; once it is, a later wait
  ///   returns it at once, even in a cancelled context. No budget yield.
  /// Cancellation: the child is left running and unreaped; a later wait
  ///   still gets its status (and the destructor kills an unwaited child).
  /// Thread-safety: one waiting task at a time per Child.
  /// Throws: Cancelled; std::system_error if waitpid fails (e.g. ECHILD) or
  ///   the reactor refuses the pidfd; std::logic_error for a moved-from Child.
  Task<ExitStatus> wait();
  /// Sends `sig` (default SIGTERM); a no-op once the child was reaped.
  void kill(int sig = 15);
  /// Sends `sig` to the child's process group: the child and whatever it
  /// started that stayed in the group, also after the child itself exited
  /// (a no-op once the group is empty). Throws std::logic_error unless the
  /// child was spawned with Options::process_group.
  void kill_group(int sig = 15);

 private:
  friend Child spawn(const std::vector<std::string>& argv, const Options& options);
  Child() = default;
  void release() noexcept;
  pid_t pid_ = -1;
  pid_t group_ = 0;  // the child's pgid with Options::process_group, else 0
  int pidfd_ = -1;
  std::optional<ExitStatus> status_;
  std::optional<net::Stream> in_, out_, err_;
};

/// Starts argv[0] (searched in PATH) with argv. Throws std::system_error
/// naming the program if it cannot be started (e.g. no such file), and
/// std::invalid_argument for an empty argv.
Child spawn(const std::vector<std::string>& argv, const Options& options = {});

}  // namespace shoal::process
