// serve: a task per connection on a task set, with admission backpressure,
// fault isolation and graceful shutdown.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "shoal/sync/event.hpp"
#include "shoal/net/stream.hpp"
#include "shoal/scope/scope.hpp"
#include "shoal/scope/task_set.hpp"
#include "shoal/scope/timeout.hpp"

namespace shoal::net {

/// Triggers a graceful shutdown of the `serve` calls it was given to.
/// One-shot; any thread or task.
class ShutdownSignal {
 public:
  /// Starts the shutdown: wakes every wait(). Idempotent; never waits.
  void trigger() { ev_.set(); }
  /// True once trigger() was called.
  bool triggered() const { return ev_.is_set(); }
  /// Waits until triggered.
  /// Checkpoint: yes (cancellation is checked first); once triggered it
  ///   returns at once (yielding once per budget).
  /// Cancellation: nothing changes.
  /// Thread-safety: from a task (`trigger` from any thread or task).
  /// Throws: Cancelled.
  auto wait() noexcept { return ev_.wait(); }

 private:
  Event ev_;
};

/// How serve() runs: connection limit, idle timeout, graceful shutdown, and
/// where handler faults go.
struct ServeOptions {
  /// Live handlers at most (0 means 1); while full, serve holds the one
  /// connection it accepted last until a slot frees, and the kernel backlog
  /// holds the rest. Nothing is refused at the cap: `on_held_at_cap` says
  /// when it bites.
  std::size_t max_connections = 10'000;
  /// After a shutdown is triggered: how long running handlers may take to
  /// finish before they are cancelled.
  std::chrono::milliseconds grace_period = std::chrono::seconds(10);
  /// Per connection: a read or write that waits this long for the peer
  /// ends the handler (Stream::set_idle_timeout; IdleTimeout, which is not
  /// reported as a fault). Zero (the default): connections may idle forever.
  std::chrono::milliseconds idle_timeout{0};
  /// Starts a graceful shutdown when triggered (optional).
  ShutdownSignal* shutdown = nullptr;
  /// Names each handler's task after its peer ("connection from
  /// 192.0.2.7:51234"), so a task dump (Runtime::dump_tasks, dump_signal)
  /// says which client each handler serves. Costs no allocation: the label
  /// lives in the handler's frame and is written only when a dump asks.
  /// false leaves the tasks unnamed.
  bool name_connections = true;
  /// A handler's fault (never a cancellation, an IdleTimeout, or the peer
  /// resetting the connection: ECONNRESET/EPIPE end a handler quietly).
  /// Default: one line on stderr.
  /// Runs on the handler's task. It should not throw: what it throws is
  /// reported on stderr and ignored.
  std::function<void(std::exception_ptr, const Address& peer)> on_handler_fault;
  /// Called each time an accepted connection has to wait for a handler slot
  /// because `max_connections` handlers are live: the cap is biting (a
  /// counter, a log line; http::ServerStats counts it). Runs on the
  /// accepting task before it waits, so it should be quick. It should not
  /// throw: what it throws is reported on stderr and ignored.
  std::function<void()> on_held_at_cap;
};

}  // namespace shoal::net

namespace shoal::detail {
void report_handler_fault(const net::ServeOptions& o, std::exception_ptr e, const net::Address& peer) noexcept;
void report_held_at_cap(const net::ServeOptions& o) noexcept;

/// A reset or broken pipe from the peer: how a client may end a connection,
/// not a handler fault worth a log line.
bool is_disconnect(const std::exception_ptr& e) noexcept;

/// The peer a handler's fault report names, kept for the connection's
/// lifetime in 32 bytes (an Address is 136): an IP address and port whole; a
/// Unix-socket peer by its family only (accepted Unix peers are almost
/// always unnamed).
class PeerName {
 public:
  PeerName() noexcept = default;
  explicit PeerName(const net::Address& a) noexcept {
    if (a.native_size() <= static_cast<socklen_t>(sizeof sa_)) {
      std::memcpy(&sa_, a.native(), a.native_size());
      len_ = a.native_size();
    } else {
      sa_.sin6_family = static_cast<sa_family_t>(a.family());
      len_ = sizeof(sa_family_t);
    }
  }
  net::Address address() const noexcept {
    return net::Address::from_native(reinterpret_cast<const sockaddr*>(&sa_), len_);
  }

 private:
  sockaddr_in6 sa_{};  // holds a sockaddr_in too
  socklen_t len_ = 0;
};

/// A handler task's label, "connection from <peer>" (ServeOptions::
/// name_connections): kept in the handler's frame and written only when a
/// dump asks, so naming costs no allocation per connection.
struct PeerLabel : TaskDescriber {
  const PeerName* peer;
  PeerLabel(const PeerName* p, bool on) noexcept : peer(p) {
    if (!on) return;
    describe = &write;
    describe_task(this);
  }
  ~PeerLabel() {
    if (describe != nullptr) describe_task(nullptr);  // before the frame that holds it goes
  }
  PeerLabel(const PeerLabel&) = delete;
  PeerLabel& operator=(const PeerLabel&) = delete;
  static void write(const TaskDescriber& self, std::string& out);
};

template <class H>
Task<void> run_handler(RootFrame, H* handler, const net::ServeOptions* options, net::Stream conn, PeerName peer) {
  std::exception_ptr fault;
  const PeerLabel label(&peer, options->name_connections);
  try {
    conn.set_idle_timeout(options->idle_timeout);
    co_await std::invoke(*handler, std::move(conn));
  } catch (const net::IdleTimeout&) {
    // the connection idled out: how a keep-alive session normally ends
  } catch (...) {
    fault = std::current_exception();
  }
  if (fault && !is_cancellation(fault) && !is_disconnect(fault)) report_handler_fault(*options, fault, peer.address());
}
}  // namespace shoal::detail

namespace shoal::net {

/// Accepts connections on `listener` and runs `handler(Stream)` (returning
/// Task<void>) for each on a task set, at most `options.max_connections` at
/// once. A handler's fault goes to `on_handler_fault` and never stops the
/// server. Returns normally after a graceful shutdown: stop accepting, let
/// handlers finish within the grace period, then cancel and join the rest.
/// The shutdown closes `listener` at once, so new connections are refused;
/// a connection accepted but not yet handed to a handler (e.g. one waiting
/// for a slot) is closed unserved. A cancellation leaves the listener open.
/// Checkpoint: yes (as a task set: in a cancelled context nothing is accepted).
/// Cancellation: cancelling the awaiting task cancels every handler at once;
///   all have finished when Cancelled is thrown.
/// Thread-safety: any task. `handler` is kept alive until serve returns and
///   is invoked from many handler tasks at once, on any worker.
/// Throws: Cancelled; an accept error other than the ones accept backs off
///   from (std::system_error; std::logic_error for a closed listener), after
///   cancelling and joining every handler.
template <class H>
Task<void> serve(Listener& listener, ServeOptions options, H handler) {
  static_assert(std::is_invocable_r_v<Task<void>, H&, Stream>,
                "shoal::net::serve: the handler must be callable as handler(shoal::net::Stream) -> Task<void>");
  co_await task_set(options.max_connections, [&](TaskSet& set) -> Task<void> {
    co_await scope([&](Scope& accepting) -> Task<void> {
      if (options.shutdown != nullptr) {
        accepting.spawn([&]() -> Task<void> {
          co_await options.shutdown->wait();
          accepting.cancel();  // stop accepting; the handlers are not in this scope
        });
      }
      net::Address peer;  // the accept reports it; each handler keeps a compact copy
      for (;;) {
        Stream conn = co_await listener.accept(peer);
        // The handler's root frame is made here and started as the set's
        // child (no factory wrapper: one frame less per connection). Named
        // first: g++ 12 miscompiles class-type temporaries built inside a
        // co_await expression (docs/compilers.md).
        auto child =
            detail::run_handler(detail::RootFrame{}, &handler, &options, std::move(conn), detail::PeerName(peer));
        // While full this waits: backpressure, the backlog holds the rest.
        if (set.live() >= set.limit() && options.on_held_at_cap) detail::report_held_at_cap(options);
        (void)co_await detail::TaskSetAccess::spawn_made(set, std::move(child));
      }
    });
    // Graceful shutdown: refuse new connections at once (a listener left
    // open would complete handshakes that are reset when it closes later),
    // drain within the grace period, then cut off.
    if (options.shutdown != nullptr && options.shutdown->triggered()) listener.close();
    set.close();
    (void)co_await move_on_after(options.grace_period, [&]() -> Task<void> { co_await set.wait_idle(); }());
    set.cancel();
  });
}

/// `serve` that binds `address` itself and reports the bound address (port 0
/// becomes the real port) through `ready` before it accepts: use with
/// `Scope::start_ready<Address>(...)`. The listener closes when it returns.
/// Checkpoint, Cancellation, Thread-safety: as serve, except that the bind
///   and `ready` come before the first cancellation check.
/// Throws: as serve; std::system_error naming the address if the bind fails
///   (before `ready`: start_ready rethrows it).
template <class H>
Task<void> serve_on(Ready<Address>& ready, Address address, ServeOptions options, H handler) {
  Listener listener = Listener::bind(address);
  ready(listener.local_address());
  co_await serve(listener, std::move(options), std::move(handler));
}

}  // namespace shoal::net
