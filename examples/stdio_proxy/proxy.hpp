// One stdio-proxy session: a connection wired to a freshly spawned command.
// The two directions are sibling tasks in one scope, so a failure on either
// side cancels the other; an idle session is two suspended frames and three
// reactor registrations, never a thread.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "shoal/shoal.hpp"

namespace stdio_proxy {

struct Config {
  std::vector<std::string> argv;  ///< the command run for each connection
  /// After the client ends its side (EOF on its stream), the command gets
  /// this long to finish its output and exit before it is sent SIGTERM.
  std::chrono::milliseconds linger = std::chrono::seconds(5);
  /// After SIGTERM: how long before SIGKILL.
  std::chrono::milliseconds kill_grace = std::chrono::seconds(1);
};

/// The peer going away is how a session ends, not a fault worth a log line.
inline bool is_disconnect(const std::system_error& e) {
  return e.code() == std::errc::connection_reset || e.code() == std::errc::broken_pipe;
}

/// Copies `from` to `to` until `from` ends; returns the bytes copied. A
/// disconnect on either side ends the copy like an EOF would.
inline shoal::Task<std::size_t> pump(shoal::net::Stream& from, shoal::net::Stream& to) {
  std::vector<std::byte> buf(16 * 1024);
  std::size_t total = 0;
  for (;;) {
    std::size_t n = 0;
    try {
      // Idle sessions wait without holding the buffer's pages hot; the
      // buffer itself lives as long as the session (one per direction).
      n = co_await from.read_some(buf);
      if (n == 0) co_return total;
      co_await to.write_all(std::span<const std::byte>(buf.data(), n));
    } catch (const std::system_error& e) {
      if (!is_disconnect(e)) throw;
      co_return total;
    }
    total += n;
  }
}

/// Runs one session to its end: spawns the command with piped stdin and
/// stdout (stderr is inherited), forwards bytes both ways, and reaps the
/// command. Ends when the command closes its stdout (normally: it exited),
/// or when the client has ended its side and the command has not finished
/// within `linger`. Either way the command is gone when this returns.
inline shoal::Task<void> run_session(shoal::net::Stream conn, const Config& config) {
  shoal::process::Options opts;
  opts.in = shoal::process::Stdio::pipe;
  opts.out = shoal::process::Stdio::pipe;
  auto child = shoal::process::spawn(config.argv, opts);
  co_await shoal::scope([&](shoal::Scope& s) -> shoal::Task<void> {
    // client -> command. EOF from the client closes the command's stdin
    // (its EOF); a command that ignores that is stopped after `linger`.
    s.spawn([&]() -> shoal::Task<void> {
      co_await pump(conn, child.in());
      child.in().close();
      co_await shoal::sleep_for(config.linger);
      child.kill(SIGTERM);
    });
    // command -> client. The command's stdout ending ends the session: the
    // client gets EOF and the other direction is cancelled.
    co_await pump(child.out(), conn);
    if (conn.is_open()) {
      try {
        conn.shutdown(shoal::net::Shutdown::write);
      } catch (const std::system_error&) {
        // the client is already gone
      }
    }
    s.cancel();
  });
  // Reap it: normally it has exited already; if not, SIGTERM then SIGKILL.
  auto reaped = co_await shoal::move_on_after(config.kill_grace, child.wait());
  if (!reaped) {
    child.kill(SIGTERM);
    reaped = co_await shoal::move_on_after(config.kill_grace, child.wait());
  }
  if (!reaped) child.kill(SIGKILL);  // and ~Child reaps it
}

}  // namespace stdio_proxy
