// The live connections a graceful shutdown must reach, and how it reaches
// them: shutting a connection's read side wakes whatever waits to read it
// with end of stream, so the server ends it the way a client's close would.
#pragma once

#include <atomic>
#include <mutex>

#include "shoal/detail/intrusive_list.hpp"

namespace shoal {
class Notify;
}

namespace shoal::net {

class ShutdownSignal;

/// The live connections of a server, for a graceful shutdown that closes
/// idle ones at once and lets a request in progress finish. A server
/// registers each connection while it serves it (an Entry), marks it idle
/// while it waits for the client's next request, and busy while it
/// reads or answers one. shutdown() shuts the read side of every idle
/// connection and claims it (it stays closing), so a request that has begun
/// is never cut: a busy connection finishes it, then sees shutting_down()
/// when it goes idle, or at once if it asked to be notified (HTTP/2 tells
/// its client with GOAWAY while its streams run on). A connection without requests (a byte pipe) registers
/// idle and stays so: the shutdown reaches it whenever it comes.
/// Thread-safety: any thread or task; entries on any worker.
class Connections {
 public:
  /// With `signal`, a triggered signal counts as shutting_down() at once,
  /// even before shutdown() is called (which is still what wakes the idle).
  explicit Connections(const ShutdownSignal* signal = nullptr) noexcept : signal_(signal) {}
  Connections(const Connections&) = delete;
  Connections& operator=(const Connections&) = delete;

  /// Shuts the read side of every idle connection, now and as any comes;
  /// idempotent; never waits.
  void shutdown() noexcept;
  /// True once shutdown() was called or the signal given at construction
  /// triggered.
  bool shutting_down() const noexcept;

  /// One connection's registration, for as long as it is served. Destroy
  /// it before the descriptor closes: the shutdown then never touches an fd
  /// that was closed and reused.
  class Entry : public ::shoal::detail::ListHook<> {
   public:
    /// Where the connection is: `busy` (reading or answering a request; the
    /// shutdown leaves it alone), `idle` (waiting for the next request; the
    /// shutdown shuts its read side) or `closing` (claimed by the shutdown).
    enum class State : unsigned char { busy, idle, closing };
    /// `fd`: the connection's socket. An entry registered idle after the
    /// shutdown has its read side shut at once.
    Entry(Connections& set, int fd, State initial = State::busy) noexcept;
    ~Entry();
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    /// Between requests. False: the server is shutting down; close.
    bool go_idle() noexcept;
    /// A request is arriving. False: the shutdown claimed the connection
    /// while it was idle; close.
    bool go_busy() noexcept;
    /// From now on, a shutdown that finds the connection busy notifies
    /// `n` (which must outlive the entry), and one that has begun already
    /// notifies it at once: for a connection that acts on the shutdown
    /// before its requests end.
    void notify_on_shutdown(Notify& n) noexcept;

   private:
    friend class Connections;
    Connections& set_;
    int fd_;
    std::atomic<State> state_;
    Notify* notify_ = nullptr;  // guarded by the set's mu_
  };

 private:
  const ShutdownSignal* signal_;
  std::atomic<bool> down_{false};
  std::mutex mu_;  // guards entries_ and the fds in it
  ::shoal::detail::IntrusiveList<Entry> entries_;
};

}  // namespace shoal::net
