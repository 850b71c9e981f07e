// Cancel (or fault) at every suspension point, with the I/O awaitables in
// the mix. One scope runs: a pump over a Unix socketpair with tiny socket
// buffers (a writer doing write_all of kPumpBytes in chunks, so it really
// waits on EAGAIN, then shutdown(write); a reader doing read_some and
// read_exact until the end of the stream), a loopback TCP pair (one child
// accepts, another connects; they exchange a few messages, the server
// waiting with wait_readable before each read), a Unix-domain accept and
// net::connect pair exchanging one message, and a sleeper, so timers are in
// the mix. It runs on the simulated executor (deterministic schedule +
// manual clock) once to count its N task steps, then again for each k <= N
// with the same seed: cancelled exactly after the k-th step, and with a child
// faulting at its first resume after the k-th step. Every run must: rethrow
// the first fault (or return normally after its own cancel), have joined
// every child before the scope returned, free every frame, leave no reactor
// registration once its streams are closed and no file descriptor once run()
// returned, and deliver a byte-exact prefix of what was sent (with no byte
// lost or duplicated: the bytes read plus those left in the socket cover
// every completed write and no more than was offered).
//
// The reactor hands readiness to the simulated executor only when it parks
// (no task ready and no timer left to auto-advance to), and socketpair and
// loopback writes are synchronous in the kernel, so an I/O wait resumes at a
// deterministic step. Should the kernel ever be late (a loopback softirq
// deferred to ksoftirqd under load), a run's step count could differ from
// the counting run's: the sweep tolerates that (an action scheduled after a
// run's last step simply does not happen, which every invariant allows) and
// reports how often the recount disagreed.
//
// The simulated executor polls the reactor (without blocking) before it
// auto-advances the manual clock, so an I/O wait whose event is already in
// the kernel is not beaten by a pending timeout (net::connect's 30 s
// handshake deadline was, before; see ManualClockDeliversPendingIoBeforeAdvancing).
#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "shoal/testing/registrations.hpp"
#include "shoal/testing/step_hook.hpp"
#include "shoal/net/stream.hpp"
#include "support/frame_counter.hpp"
#include "support/process_stats.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::test::open_fds;
using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;
using shoal::net::Address;
using shoal::net::Listener;
using shoal::net::Stream;

struct Boom : std::runtime_error {
  explicit Boom(int id) : std::runtime_error("boom " + std::to_string(id)), id(id) {}
  int id;
};

enum class Action { none, cancel, fault };

constexpr std::size_t kPumpBytes = 256 * 1024;
constexpr std::size_t kWriteChunk = 20 * 1024;  // per write_all
constexpr std::size_t kReadBuf = 2048;          // per read_some
constexpr std::size_t kReadExact = 5000;        // per read_exact (every other read)
constexpr int kSocketBuffer = 4096;             // SO_SNDBUF / SO_RCVBUF of the pump
constexpr int kMessages = 4;                    // ping/pong round trips over TCP
constexpr std::size_t kMessageSize = 16;

/// The pump's byte at offset i: never 0, so a partially filled read_exact
/// buffer (pre-zeroed) tells how much it consumed before it was cut off.
std::byte pattern(std::size_t i) { return static_cast<std::byte>(1 + (i * 131 + i / 4093) % 255); }

using Message = std::array<char, kMessageSize>;
/// "ping 0000000003": the kind, then the round trip's number.
Message message(std::string_view kind, int i) {
  Message m{};
  m.fill('0');
  std::copy(kind.begin(), kind.end(), m.begin());
  m[kind.size()] = ' ';
  for (std::size_t pos = m.size(); i > 0 && pos > kind.size() + 1; i /= 10) m[--pos] = static_cast<char>('0' + i % 10);
  return m;
}

struct Ctx {
  // Set by the test.
  Action action = Action::none;
  long act_at = 0;  // act after this many steps (0: never)
  // Observed.
  long steps = 0;
  bool armed = false;  // a fault is due at the next child resume
  int first_fault = -1;
  int next_fault_id = 0;
  Scope* scope = nullptr;  // the scenario's scope until it has returned
  long live_children = 0;
  // The pump.
  std::size_t offered = 0;   // bytes handed to write_all calls that started
  std::size_t written = 0;   // bytes of write_all calls that completed
  std::size_t received = 0;  // bytes the reader consumed
  bool shut_down = false, eof = false;
  bool exact_cut = false;  // a read_exact was cut off after consuming part of its buffer
  std::string corrupt;     // first mismatch against the pattern
  // TCP.
  int pings_sent = 0, pings_received = 0, pongs_sent = 0, pongs_received = 0;
  int hellos_sent = 0, hellos_received = 0;  // over the Unix-domain connection
  bool slept = false;

  static void on_step(void* p) noexcept {
    auto* c = static_cast<Ctx*>(p);
    ++c->steps;
    if (c->steps != c->act_at) return;
    if (c->action == Action::cancel && c->scope != nullptr) c->scope->cancel();
    if (c->action == Action::fault) c->armed = true;
  }
  // Children call this after every await: the armed fault fires here.
  void resumed() {
    if (!armed) return;
    armed = false;
    const int id = next_fault_id++;
    if (first_fault < 0) first_fault = id;
    throw Boom(id);
  }
  // Checks `n` bytes read at the pump's offset `received` and counts them.
  void consumed(const std::byte* p, std::size_t n) {
    for (std::size_t i = 0; i < n && corrupt.empty(); ++i) {
      if (p[i] != pattern(received + i)) corrupt = "byte " + std::to_string(received + i) + " differs";
    }
    received += n;
    if (received > kPumpBytes && corrupt.empty()) corrupt = "more bytes than were sent";
  }
};

struct LiveGuard {
  explicit LiveGuard(Ctx& c) : c(c) { ++c.live_children; }
  ~LiveGuard() { --c.live_children; }
  LiveGuard(const LiveGuard&) = delete;
  LiveGuard& operator=(const LiveGuard&) = delete;
  Ctx& c;
};

void set_int_option(int fd, int level, int name, int value) {
  if (::setsockopt(fd, level, name, &value, sizeof value) != 0) {
    throw std::system_error(errno, std::generic_category(), "setsockopt");
  }
}

/// Closes with a reset rather than a FIN: thousands of runs must not fill the
/// ephemeral port range with TIME_WAIT connections.
void reset_on_close(Stream& s) {
  if (!s.is_open()) return;
  linger l{};
  l.l_onoff = 1;
  l.l_linger = 0;
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

// ---- The children --------------------------------------------------------

Task<void> pump_writer(Ctx& c, Stream& s) {
  LiveGuard g(c);
  std::vector<std::byte> chunk(kWriteChunk);
  for (std::size_t off = 0; off < kPumpBytes; off += kWriteChunk) {
    const std::size_t n = std::min(kWriteChunk, kPumpBytes - off);
    for (std::size_t i = 0; i < n; ++i) chunk[i] = pattern(off + i);
    const std::span<const std::byte> part(chunk.data(), n);
    c.offered = off + n;
    co_await s.write_all(part);
    c.written = off + n;
    c.resumed();
  }
  s.shutdown(shoal::net::Shutdown::write);
  c.shut_down = true;
}

Task<void> pump_reader(Ctx& c, Stream& s) {
  LiveGuard g(c);
  std::vector<std::byte> buf(std::max(kReadBuf, kReadExact));
  for (bool exact = true;; exact = !exact) {
    if (exact && kPumpBytes - c.received >= kReadExact) {
      std::fill(buf.begin(), buf.end(), std::byte{0});
      const std::span<std::byte> part(buf.data(), kReadExact);
      try {
        co_await s.read_exact(part);
      } catch (...) {
        // Cut off (cancelled): what it consumed is the non-zero prefix.
        const auto end = std::find(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(kReadExact), std::byte{0});
        c.consumed(buf.data(), static_cast<std::size_t>(end - buf.begin()));
        c.exact_cut = end != buf.begin();
        throw;
      }
      c.consumed(buf.data(), kReadExact);
      c.resumed();
    } else {
      const std::span<std::byte> part(buf.data(), kReadBuf);
      const std::size_t n = co_await s.read_some(part);
      c.consumed(buf.data(), n);
      if (n == 0) {
        c.eof = true;
        if (c.received != kPumpBytes || !c.shut_down) throw std::logic_error("the pump ended early");
        co_return;
      }
      c.resumed();
    }
  }
}

Task<void> tcp_server(Ctx& c, Listener& listener, Stream& conn) {
  LiveGuard g(c);
  conn = co_await listener.accept();
  c.resumed();
  conn.set_nodelay(true);
  Message in{};
  const std::span<std::byte> in_bytes = std::as_writable_bytes(std::span(in));
  for (int i = 0; i < kMessages; ++i) {
    co_await conn.wait_readable();
    c.resumed();
    co_await conn.read_exact(in_bytes);
    if (in != message("ping", i)) throw std::logic_error("the server got a wrong message");
    ++c.pings_received;
    c.resumed();
    const Message out = message("pong", i);
    const std::span<const std::byte> out_bytes = std::as_bytes(std::span(out));
    co_await conn.write_all(out_bytes);
    ++c.pongs_sent;
    c.resumed();
  }
}

Task<void> tcp_client(Ctx& c, const Address& addr, Stream& conn) {
  LiveGuard g(c);
  conn = co_await shoal::net::connect(addr);  // a TCP handshake: a wait under a 30 s timeout
  conn.set_nodelay(true);
  c.resumed();
  Message in{};
  const std::span<std::byte> in_bytes = std::as_writable_bytes(std::span(in));
  for (int i = 0; i < kMessages; ++i) {
    const Message out = message("ping", i);
    const std::span<const std::byte> out_bytes = std::as_bytes(std::span(out));
    co_await conn.write_all(out_bytes);
    ++c.pings_sent;
    c.resumed();
    co_await conn.read_exact(in_bytes);
    if (in != message("pong", i)) throw std::logic_error("the client got a wrong message");
    ++c.pongs_received;
    c.resumed();
  }
}

// net::connect to a Unix-domain listener: a connect that completes at once.
Task<void> unix_acceptor(Ctx& c, Listener& listener, Stream& conn) {
  LiveGuard g(c);
  conn = co_await listener.accept();
  c.resumed();
  Message in{};
  const std::span<std::byte> in_bytes = std::as_writable_bytes(std::span(in));
  co_await conn.read_exact(in_bytes);
  if (in != message("hello", 1)) throw std::logic_error("the Unix acceptor got a wrong message");
  ++c.hellos_received;
  c.resumed();
}

Task<void> unix_connector(Ctx& c, const Address& addr, Stream& conn) {
  LiveGuard g(c);
  conn = co_await shoal::net::connect(addr);
  c.resumed();
  const Message out = message("hello", 1);
  const std::span<const std::byte> out_bytes = std::as_bytes(std::span(out));
  co_await conn.write_all(out_bytes);
  ++c.hellos_sent;
  c.resumed();
}

Task<void> sleeper(Ctx& c) {
  LiveGuard g(c);
  co_await shoal::sleep_for(150us);
  c.resumed();
  co_await shoal::checkpoint();
  c.resumed();
  co_await shoal::sleep_for(40us);
  c.slept = true;
  c.resumed();
}

// ---- One run ---------------------------------------------------------------

struct Outcome {
  long steps = 0;
  bool faulted = false;
  int fault_id = -1;
  int first_fault = -1;
  bool other_error = false;
  std::string other_what;
  long live_children_after = -1;  // when the scope returned
  long registrations_delta = -1;  // after the streams closed, vs before the scenario
  int fds_delta = -1;             // after run() returned, vs before
  long live_frames = -1;
  // The pump.
  std::size_t offered = 0, written = 0, received = 0, left = 0;
  std::string corrupt;
  bool eof = false, exact_cut = false;
  // TCP.
  int pings_sent = 0, pings_received = 0, pongs_sent = 0, pongs_received = 0;
  int hellos_sent = 0, hellos_received = 0;
  bool slept = false;
};

/// The scenario's sockets: they live in the root task, outside the scope,
/// so none is closed while a child might still use it.
struct Sockets {
  Stream pump_out, pump_in;
  Listener tcp_listener, unix_listener;
  Address tcp_addr, unix_addr;
  Stream tcp_server, tcp_client, unix_server, unix_client;
};

Task<void> scenario_scope(Ctx& c, Sockets& k) {
  auto body = [&](Scope& s) -> Task<void> {
    c.scope = &s;  // until the scope has returned: a cancel may land while it joins
    auto writer = s.start(pump_writer(c, k.pump_out));
    s.spawn(pump_reader(c, k.pump_in));
    s.spawn(tcp_server(c, k.tcp_listener, k.tcp_server));
    auto client = s.start(tcp_client(c, k.tcp_addr, k.tcp_client));
    s.spawn(unix_acceptor(c, k.unix_listener, k.unix_server));
    s.spawn(unix_connector(c, k.unix_addr, k.unix_client));
    s.spawn(sleeper(c));
    co_await writer;
    co_await client;
  };
  co_await shoal::scope(body);
}

/// Reads what is left in the pump's socket (without waiting), checking it
/// continues the pattern where the reader stopped.
std::size_t drain(Ctx& c, Stream& in, std::string& corrupt) {
  std::size_t left = 0;
  std::array<std::byte, 4096> buf{};
  for (;;) {
    const ssize_t n = ::recv(in.native_handle(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n && corrupt.empty(); ++i) {
      if (buf[static_cast<std::size_t>(i)] != pattern(c.received + left + static_cast<std::size_t>(i))) {
        corrupt = "left-over byte " + std::to_string(c.received + left + static_cast<std::size_t>(i)) + " differs";
      }
    }
    left += static_cast<std::size_t>(n);
  }
  return left;
}

Task<void> scenario(Ctx& c, Outcome& o) {
  const std::size_t registrations_before = shoal::testing::io_registrations();
  std::exception_ptr error;
  {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
      throw std::system_error(errno, std::generic_category(), "socketpair");
    }
    Sockets k;
    k.pump_out = Stream(sv[0]);
    k.pump_in = Stream(sv[1]);
    for (int fd : sv) {
      set_int_option(fd, SOL_SOCKET, SO_SNDBUF, kSocketBuffer);
      set_int_option(fd, SOL_SOCKET, SO_RCVBUF, kSocketBuffer);
    }
    k.tcp_listener = Listener::bind(Address::parse("127.0.0.1:0"));
    k.tcp_addr = k.tcp_listener.local_address();
    // The abstract namespace: nothing to unlink; unique across processes and runs.
    static long unix_serial = 0;
    k.unix_listener = Listener::bind(Address::parse("unix:@shoal-io-sweep-" + std::to_string(::getpid()) + "-" +
                                                    std::to_string(++unix_serial)));
    k.unix_addr = k.unix_listener.local_address();
    try {
      co_await scenario_scope(c, k);
    } catch (...) {
      error = std::current_exception();
    }
    c.scope = nullptr;
    o.live_children_after = c.live_children;
    o.left = drain(c, k.pump_in, o.corrupt);
    reset_on_close(k.tcp_server);
    reset_on_close(k.tcp_client);
  }
  o.registrations_delta = static_cast<long>(shoal::testing::io_registrations()) - static_cast<long>(registrations_before);
  if (error) std::rethrow_exception(error);
}

Outcome run_once(std::uint64_t seed, Action action, long act_at) {
  Ctx c;
  c.action = action;
  c.act_at = act_at;
  shoal::testing::StepHook hook{&Ctx::on_step, &c};
  Outcome o;
  const int fds_before = open_fds();
  {
    shoal::test::FrameCounter frames;
    shoal::testing::set_step_hook(&hook);
    try {
      shoal::run(scenario(c, o), shoal::RuntimeOptions::simulated(seed));
    } catch (const Boom& b) {
      o.faulted = true;
      o.fault_id = b.id;
    } catch (const std::exception& e) {
      o.other_error = true;
      o.other_what = e.what();
    } catch (const shoal::Cancelled&) {  // nothing cancels the root
      o.other_error = true;
      o.other_what = "Cancelled escaped the scope";
    }
    shoal::testing::set_step_hook(nullptr);
    o.live_frames = frames.live();
  }
  o.fds_delta = open_fds() - fds_before;
  o.steps = c.steps;
  o.first_fault = c.first_fault;
  o.offered = c.offered;
  o.written = c.written;
  o.received = c.received;
  if (o.corrupt.empty()) o.corrupt = c.corrupt;
  o.eof = c.eof;
  o.exact_cut = c.exact_cut;
  o.pings_sent = c.pings_sent;
  o.pings_received = c.pings_received;
  o.pongs_sent = c.pongs_sent;
  o.pongs_received = c.pongs_received;
  o.hellos_sent = c.hellos_sent;
  o.hellos_received = c.hellos_received;
  o.slept = c.slept;
  return o;
}

/// The invariants every run keeps, whatever was done to it.
void check_invariants(const Outcome& o, const std::string& where) {
  EXPECT_EQ(o.live_children_after, 0) << where << ": the scope returned before joining its children";
  EXPECT_EQ(o.live_frames, 0) << where << ": frames (or reactor registrations) leaked";
  EXPECT_EQ(o.registrations_delta, 0) << where << ": a reactor registration outlived its stream";
  EXPECT_EQ(o.fds_delta, 0) << where << ": a file descriptor leaked";
  EXPECT_EQ(o.corrupt, "") << where << ": the pump delivered bytes that are not a prefix of those sent";
  // No byte lost or duplicated: read + left in the socket covers every
  // completed write_all and no more than the write_all calls were given.
  EXPECT_GE(o.received + o.left, o.written) << where << ": the pump lost bytes";
  EXPECT_LE(o.received + o.left, o.offered) << where << ": the pump delivered bytes never sent";
  EXPECT_LE(o.pings_received, o.pings_sent) << where;
  EXPECT_LE(o.pongs_received, o.pongs_sent) << where;
  EXPECT_LE(o.pongs_sent, o.pings_received) << where;
  EXPECT_LE(o.hellos_received, o.hellos_sent) << where;
}

TEST(IoSuspensionSweep, CancelOrFaultAtEveryStepKeepsTheInvariants) {
  const std::uint64_t base = shoal::test::test_seed("IoSuspensionSweep");
  const std::uint64_t seeds = static_cast<std::uint64_t>(shoal::test::scaled(32, 4));
  long runs = 0, total_steps = 0, faulted = 0, cut_short = 0, fault_runs = 0, cancel_runs = 0;
  long recount_differs = 0, beyond_last_step = 0;
  long write_all_cut = 0, read_exact_cut = 0;  // runs that interrupted one mid-way
  for (std::uint64_t seed = base; seed < base + seeds; ++seed) {
    // One seed's sweep takes about 0.3 s (1.2 s under TSan): a watchdog per
    // seed catches a hang quickly at any SHOAL_STRESS_SCALE.
    shoal::test::Watchdog dog(std::chrono::seconds(60), "IoSuspensionSweep SHOAL_SEED=" + std::to_string(seed));
    const Outcome clean = run_once(seed, Action::none, 0);
    const std::string at_seed = "SHOAL_SEED=" + std::to_string(seed);
    ASSERT_FALSE(clean.faulted || clean.other_error) << clean.other_what << " " << at_seed;
    check_invariants(clean, at_seed + " clean run");
    ASSERT_FALSE(::testing::Test::HasFailure());
    ASSERT_TRUE(clean.eof) << at_seed;
    ASSERT_EQ(clean.received, kPumpBytes) << at_seed;
    ASSERT_EQ(clean.pongs_received, kMessages) << at_seed;
    ASSERT_EQ(clean.hellos_received, 1) << at_seed;
    ASSERT_TRUE(clean.slept) << at_seed;
    // With socket buffers that never fill, the scenario takes about 20 steps:
    // more than 50 means the pump really waited on EAGAIN, again and again.
    ASSERT_GT(clean.steps, 50) << at_seed;
    // The same seed should give the same schedule; tolerated if the kernel
    // was late once (see the header comment), but counted.
    const Outcome again = run_once(seed, Action::none, 0);
    if (again.steps != clean.steps) {
      ++recount_differs;
      std::printf("[io-sweep] note: SHOAL_SEED=%llu took %ld steps, then %ld\n", static_cast<unsigned long long>(seed),
                  clean.steps, again.steps);
    }
    total_steps += clean.steps;
    for (long k = 1; k <= clean.steps; ++k) {
      for (Action a : {Action::cancel, Action::fault}) {
        const Outcome o = run_once(seed, a, k);
        ++runs;
        fault_runs += a == Action::fault ? 1 : 0;
        cancel_runs += a == Action::cancel ? 1 : 0;
        faulted += o.faulted ? 1 : 0;
        beyond_last_step += o.steps < k ? 1 : 0;
        write_all_cut += o.written < o.offered ? 1 : 0;
        read_exact_cut += o.exact_cut ? 1 : 0;
        cut_short += (a == Action::cancel && (o.received < kPumpBytes || o.pongs_received < kMessages ||
                                              o.hellos_received < 1))
                         ? 1
                         : 0;
        const std::string where =
            at_seed + (a == Action::cancel ? " cancel" : " fault") + " at step " + std::to_string(k);
        EXPECT_FALSE(o.other_error) << where << ": " << o.other_what;
        check_invariants(o, where);
        if (a == Action::cancel) {
          EXPECT_FALSE(o.faulted) << where << ": a self-cancelled scope returns normally";
        } else if (o.first_fault >= 0) {
          EXPECT_TRUE(o.faulted) << where << ": the fault was lost";
          EXPECT_EQ(o.fault_id, o.first_fault) << where << ": not the first fault";
        } else {
          EXPECT_FALSE(o.faulted) << where;
        }
        if (!o.faulted && !o.other_error && o.eof) {
          EXPECT_EQ(o.received, kPumpBytes) << where << ": the reader saw the end of the stream early";
        }
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
  std::printf("[io-sweep] %ld runs over %ld steps (%llu seeds); %ld faulted, %ld cancels cut work short\n", runs,
              total_steps, static_cast<unsigned long long>(seeds), faulted, cut_short);
  std::printf("[io-sweep] %ld runs cut a write_all short, %ld a read_exact after part of its buffer\n",
              write_all_cut, read_exact_cut);
  std::printf("[io-sweep] step recount differed for %ld seeds; %ld runs ended before their action's step\n",
              recount_differs, beyond_last_step);
  // Not vacuous: injected faults surfaced and cancels interrupted work.
  EXPECT_GT(faulted, fault_runs / 2);
  EXPECT_GT(cut_short, cancel_runs / 2);
  // ... including inside the I/O awaitables' waits.
  EXPECT_GT(write_all_cut, 0);
  EXPECT_GT(read_exact_cut, 0);
}

// The manual clock must not jump to the earliest timer while an I/O event
// is already in the kernel: it used to, so a read whose data was there lost
// to any pending timeout, and net::connect (a 30 s handshake deadline)
// always threw TimedOut on the simulated executor.
TEST(IoSuspensionSweep, ManualClockDeliversPendingIoBeforeAdvancing) {
  shoal::test::Watchdog dog(std::chrono::seconds(60), "ManualClockAndIo");
  bool read_in_time = false;
  shoal::run(
      [](bool& ok) -> Task<void> {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) co_return;
        Stream a(sv[0]), b(sv[1]);
        std::array<std::byte, 4> buf{};
        auto body = [&](Scope& s) -> Task<void> {
          s.spawn([&]() -> Task<void> {
            ok = co_await shoal::move_on_after(1s, b.read_exact(buf));  // waits: nothing written yet
          });
          co_await shoal::checkpoint();                    // the reader is now waiting
          co_await a.write_all(std::string_view("ping"));  // the data is in the kernel at once
        };
        co_await shoal::scope(body);
      }(read_in_time),
      shoal::RuntimeOptions::simulated(1));
  EXPECT_TRUE(read_in_time) << "a 1 s timeout fired although the data was readable at virtual time 0";
}

}  // namespace
