// One stdio-proxy session: a connection wired to a freshly spawned command.
// The two directions are sibling tasks in one scope, so a failure on either
// side cancels the other; an idle session is suspended frames and three
// reactor registrations, never a thread, and holds no buffer.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "shoal/shoal.hpp"

namespace stdio_proxy {

/// How a session went: for its log line.
struct Report {
  std::string peer;
  pid_t pid = 0;
  std::optional<shoal::process::ExitStatus> status;  ///< none if it never had to be waited for
  std::size_t bytes_in = 0;   ///< client -> command
  std::size_t bytes_out = 0;  ///< command -> client
  std::chrono::milliseconds duration{0};
};

struct Config {
  std::vector<std::string> argv;  ///< the command run for each connection (in its own process group)
  /// After the client ends its side (EOF, a reset, the idle timeout, or the
  /// proxy shutting down), the command gets this long to finish its output
  /// and exit before its process group is sent SIGTERM. The same after the
  /// command exits, for what it left running in its group.
  std::chrono::milliseconds linger = std::chrono::seconds(5);
  /// After SIGTERM: how long before SIGKILL.
  std::chrono::milliseconds kill_grace = std::chrono::seconds(1);
  /// A client that sends nothing for this long is treated as gone (0: never).
  std::chrono::milliseconds idle_timeout{0};
  /// TCP keepalive probes after this much silence (0: off), so a client that
  /// vanished without a FIN is noticed in about idle + 60 s.
  std::chrono::seconds keepalive{60};
  /// Where sessions register (optional): its shutdown() ends each live
  /// session (and any that starts later) as if its client had closed its
  /// side, by shutting the read side of its connection, so the client ->
  /// command copy sees end of stream. One call for the whole proxy, no task
  /// per session.
  shoal::net::Connections* sessions = nullptr;
  /// Called once per session as it ends (e.g. to log it). Must not throw.
  std::function<void(const Report&)> on_end;
};

/// The peer going away is how a session ends, not a fault worth a log line.
inline bool is_disconnect(const std::system_error& e) {
  return e.code() == std::errc::connection_reset || e.code() == std::errc::broken_pipe;
}

/// Copies what `from` has now to `to`, until `from` would wait (then it
/// returns false) or ends (true). Its own coroutine, so that the buffer and
/// the read and write exist only while bytes flow.
inline shoal::Task<bool> forward_burst(shoal::net::Stream& from, shoal::net::Stream& to, std::size_t& total) {
  std::vector<std::byte> buf(16 * 1024);
  for (;;) {
    const std::size_t n = co_await from.read_some(buf);
    if (n == 0) co_return true;
    co_await to.write_all(std::span<const std::byte>(buf.data(), n));
    total += n;
    if (n < buf.size()) co_return false;  // drained: back to waiting, holding nothing
  }
}

/// Copies `from` to `to` until `from` ends, counting into `total`. A
/// disconnect on either side, or an idle timeout, ends the copy like an EOF.
/// An idle session's pump is this frame waiting for readiness: no buffer.
inline shoal::Task<void> pump(shoal::net::Stream& from, shoal::net::Stream& to, std::size_t& total) {
  try {
    for (;;) {
      co_await from.wait_readable();
      const bool ended = co_await forward_burst(from, to, total);  // named: see docs/task_sets.md on g++ 12
      if (ended) break;
    }
  } catch (const std::system_error& e) {
    if (!is_disconnect(e)) throw;
  } catch (const shoal::net::IdleTimeout&) {
    // the client was silent too long: as if it had gone
  }
}

/// After `linger`, SIGTERM to the command's group; after the grace, SIGKILL.
inline shoal::Task<void> stop_group(shoal::process::Child& child, const Config& config) {
  co_await shoal::sleep_for(config.linger);
  child.kill_group(SIGTERM);
  co_await shoal::sleep_for(config.kill_grace);
  child.kill_group(SIGKILL);
}

/// Reaps a command that has not exited yet: waits the grace, then SIGTERM,
/// then SIGKILL. Its own coroutine: a session's frame, which lives as long
/// as the session, need not hold these awaits.
inline shoal::Task<shoal::process::ExitStatus> reap(shoal::process::Child& child, const Config& config) {
  auto status = co_await shoal::move_on_after(config.kill_grace, child.wait());
  if (!status) {
    child.kill_group(SIGTERM);
    status = co_await shoal::move_on_after(config.kill_grace, child.wait());
  }
  if (!status) {
    child.kill_group(SIGKILL);
    status = co_await shoal::shielded(child.wait());  // SIGKILL: short
  }
  co_return *status;
}

inline void set_keepalive(shoal::net::Stream& conn, std::chrono::seconds idle) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (idle.count() <= 0 || ::getsockname(conn.native_handle(), reinterpret_cast<sockaddr*>(&ss), &len) != 0 ||
      (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)) {
    return;  // off, or not TCP
  }
  const int on = 1, secs = static_cast<int>(idle.count()), interval = 10, probes = 6;
  ::setsockopt(conn.native_handle(), SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(conn.native_handle(), IPPROTO_TCP, TCP_KEEPIDLE, &secs, sizeof secs);
  ::setsockopt(conn.native_handle(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(conn.native_handle(), IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
}

/// Runs one session to its end: spawns the command in a process group of its
/// own with piped stdin and stdout (stderr is inherited), forwards bytes
/// both ways, and reaps it.
///
/// It ends when the command's stdout ends. The client ending its side (or
/// the shutdown) closes the command's stdin and, after `linger`, stops the
/// group (SIGTERM, then SIGKILL after `kill_grace`); the command exiting
/// while something it started still holds its stdout stops the group the
/// same way. When this returns the command is reaped and its group stopped:
/// no zombie, nothing it started left running.
inline shoal::Task<void> run_session(shoal::net::Stream conn, const Config& config) {
  const auto started = std::chrono::steady_clock::now();
  Report report;
  try {
    report.peer = conn.peer_address().to_string();
  } catch (const std::exception&) {
    report.peer = "?";
  }
  set_keepalive(conn, config.keepalive);
  conn.set_idle_timeout(config.idle_timeout);
  shoal::process::Options opts;
  opts.in = shoal::process::Stdio::pipe;
  opts.out = shoal::process::Stdio::pipe;
  opts.process_group = true;
  auto child = shoal::process::spawn(config.argv, opts);
  report.pid = child.pid();
  // Registered idle for its whole life: a session is a byte pipe, with no
  // request a shutdown should let finish.
  std::optional<shoal::net::Connections::Entry> registered;
  if (config.sessions != nullptr) {
    registered.emplace(*config.sessions, conn.native_handle(), shoal::net::Connections::Entry::State::idle);
  }
  try {
    co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
      s.spawn([&]() -> shoal::Task<void> {
        co_await pump(conn, child.in(), report.bytes_in);
        child.in().close();  // the command's EOF
        co_await stop_group(child, config);
      });
      s.spawn([&]() -> shoal::Task<void> {
        report.status = co_await child.wait();
        co_await stop_group(child, config);  // what it started may still hold its stdout
      });
      // command -> client. Its end ends the session: the client gets EOF and
      // the other tasks are cancelled.
      co_await pump(child.out(), conn, report.bytes_out);
      try {
        conn.shutdown(shoal::net::Shutdown::write);
      } catch (const std::system_error&) {
        // the client is already gone
      }
      s.cancel();
    });
    if (!report.status) report.status = co_await reap(child, config);
    child.kill_group(SIGKILL);  // anything it left in its group
  } catch (...) {
    // Cancelled (or a fault): ~Child SIGKILLs the group of an unreaped
    // command; after a reap only this reaches what it left behind.
    if (report.status) child.kill_group(SIGKILL);
    throw;
  }
  report.duration = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  if (config.on_end) config.on_end(report);
}

/// The session's log line: peer, pid, exit status, bytes each way, duration.
inline std::string describe(const Report& r) {
  return "session " + r.peer + " pid " + std::to_string(r.pid) + " " +
         (r.status ? r.status->to_string() : std::string("not reaped")) + ", " + std::to_string(r.bytes_in) +
         " bytes in, " + std::to_string(r.bytes_out) + " bytes out, " + std::to_string(r.duration.count()) + " ms";
}

}  // namespace stdio_proxy
