// The API-sequence fuzzer: decoding, the reference model and the runner.
//
// An input decodes into a seed for RuntimeOptions::deterministic, one to four
// channels (capacity 0, 1 or small N; u32 values take the lock-free ring at
// N >= 2, a value type whose move may throw keeps the lock path), and a
// bounded tree of scopes. Every task runs a decoded list of operations: send,
// recv, try_send, try_recv, close, is_closed, checkpoint, sleep_for(0), throw
// a fault, cancel an enclosing scope, a nested scope, spawn a sibling, start a
// sibling and await its JoinHandle, a deadline (with_timeout or
// move_on_after; zero, tiny or long), shielded, a select (a receive case on
// each of two channels, possibly the same one, and a notification case), a
// notify_one of the run's Notify, and the run's Broadcast (capacity 3) and
// Watch: send, and receive / wait for a change through a receiver each task
// makes at its first use. The model knows every value those hold (the
// executor runs one step at a time), so each receive is checked exactly:
// the next value in order, or a lag that lands on the oldest value kept, or
// the end; a change is the latest version.
//
// The model. Each value sent is a fresh attempt id, so conservation (every
// successful send received exactly once or drained at the end, a failed send
// never received) and per-sender FIFO are checked exactly. Cancellation is a
// walk of a model cancel tree, compared with this_task::cancellation_requested()
// at every step; it is tri-state because a tiny deadline is "maybe" while the
// monitor sleeps (see below). A channel with no awaited operation in flight is "idle": its
// buffer is then known exactly, so try_* results, and awaited operations that
// must complete at once, are predicted exactly (the order too while the
// channel saw only predictable operations or holds one sender's values).
// Scope results follow docs/semantics.md: the first fault the scope saw (on
// one worker, the order faults leave its tasks), else the body's result
// unless an outside cancellation cut a child off, else the cancellation,
// absorbed only if the scope cancelled itself. Every later fault must reach
// on_suppressed_fault exactly once, except that a start()ed child's is the
// awaiter's once its JoinHandle delivered it (reported only if it reaches
// the scope again) and is reported by the scope's exit if it was never
// delivered (when its handle went, or at the exit).
// A JoinHandle whose child a cancellation cut off throws Cancelled only into
// a cancelled awaiter and ChildCancelled (a fault) into any other.
//
// Termination, and telling a hang from a legitimate deadlock: a monitor task
// yields in a loop beside the program. The executor picks a ready task at
// random, so kQuietTurns monitor turns in a row with no program step mean
// that every program task is suspended and not ready (a ready one is missed
// with probability below 2^-64). The model then checks that each wait may
// legitimately last forever (a recv on an empty open channel with no sender
// waiting, a send on a full one, a join on a live child, ...). If one may
// not, shoal lost a wake-up: abort. Otherwise the monitor ends the deadlock as
// the input chose (cancel the program's root scope, then close every
// channel); once every channel is closed nothing may block again.
//
// Time is simulated (RuntimeOptions::simulated: the deterministic executor
// plus the manual clock, which stands still while any task can run and jumps
// to the earliest timer when none can). The monitor is always ready except
// while it sleeps, so a tiny deadline fires exactly while the monitor sleeps
// past it, at a point the model knows; a run is reproducible from its input.
// A hang the monitor cannot see (the worker itself stuck) trips a wall-clock
// watchdog.
#include "fuzz/api_program.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "shoal/shoal.hpp"
#include "support/frame_counter.hpp"

namespace shoal::fuzz {
namespace {

using namespace std::chrono_literals;

// ---- the program -----------------------------------------------------------

enum class OpKind : std::uint8_t {
  send,
  recv,
  try_send,
  try_recv,
  close,
  is_closed,
  checkpoint,
  sleep0,
  fault,
  cancel_scope,
  nested_scope,
  spawn,
  deadline,
  shielded,
  start_join,
  select_recv,
  notify,
  bcast_send,
  bcast_recv,
  watch_send,
  watch_changed,
};
constexpr int kOpKinds = 21;
constexpr const char* kOpNames[kOpKinds] = {"send",         "recv",        "try_send", "try_recv", "close",
                                            "is_closed",    "checkpoint",  "sleep_for(0)", "fault",
                                            "cancel_scope", "scope",       "spawn",    "deadline", "shielded",
                                            "start+join",   "select",      "notify",   "broadcast send",
                                            "broadcast recv", "watch send", "watch changed"};

struct Op {
  OpKind kind = OpKind::checkpoint;
  std::uint8_t arg = 0;  // channel; levels up (cancel_scope); flavour bits (scope, deadline)
  int sub = -1;          // scope: a block; spawn, deadline, shielded: a list
};
struct OpList {
  std::vector<Op> ops;
};
struct Block {
  std::vector<int> children;  // lists, one spawned child each
  int body = -1;              // list
  bool value_body = false;    // Task<int> body (a cut-off body then throws ScopeCancelled)
};
struct ChannelSpec {
  std::size_t capacity = 0;
  bool throwing_move = false;  // value type whose move may throw: the lock path at every capacity
};
struct Program {
  std::uint64_t seed = 0;
  bool break_by_cancel = false;  // end a deadlock by cancelling the root scope before closing channels
  std::vector<ChannelSpec> channels;
  std::vector<OpList> lists;
  std::vector<Block> blocks;  // blocks[0] is the root scope
};

enum class DeadlineKind : std::uint8_t { zero, tiny, long_ };
constexpr auto kTinyDeadline = 300us;
constexpr auto kLongDeadline = 1h;  // never reached: an input runs for milliseconds

int channel_of(const Program& p, const Op& op) { return op.arg % static_cast<int>(p.channels.size()); }
// A select's second receive case (the same channel as the first when the
// high bits say so, or when there is one channel).
int second_channel_of(const Program& p, const Op& op) {
  return (op.arg / 16 + channel_of(p, op)) % static_cast<int>(p.channels.size());
}
int levels_of(const Op& op) { return op.arg % 3; }
bool catches_faults(const Op& op) { return (op.arg & 8) != 0; }
bool is_with_timeout(const Op& op) { return (op.arg & 1) != 0; }
DeadlineKind deadline_kind(const Op& op) {
  switch ((op.arg >> 1) & 3) {
    case 1:
      return DeadlineKind::tiny;
    case 2:
      return DeadlineKind::long_;
    default:
      return DeadlineKind::zero;
  }
}

// Sizes stay small so an input runs in about a millisecond.
constexpr std::size_t kCapacities[] = {0, 1, 2, 3, 4, 8};
constexpr int kMaxChannels = 4, kMaxOps = 96, kMaxLists = 40, kMaxBlocks = 10, kMaxDepth = 3;
constexpr int kMaxChildren = 3, kMaxListLen = 8;

// Any byte string decodes; a missing byte reads as zero.
class Decoder {
 public:
  Decoder(const std::uint8_t* data, std::size_t size) : d_(data), n_(size) {}

  Program decode() {
    for (int i = 0; i < 4; ++i) p_.seed |= std::uint64_t{byte()} << (8 * i);
    const std::uint8_t flags = byte();
    p_.break_by_cancel = (flags & 0x10) != 0;
    const int channels = 1 + flags % kMaxChannels;
    for (int c = 0; c < channels; ++c) {
      const std::uint8_t b = byte();
      p_.channels.push_back({kCapacities[b % std::size(kCapacities)], (b & 0x80) != 0});
    }
    block(0);
    return std::move(p_);
  }

 private:
  std::uint8_t byte() { return i_ < n_ ? d_[i_++] : 0; }

  int block(int depth) {
    const int id = static_cast<int>(p_.blocks.size());
    p_.blocks.emplace_back();
    const std::uint8_t b = byte();
    p_.blocks[static_cast<std::size_t>(id)].value_body = (b & 0x80) != 0;
    const int children = b % (kMaxChildren + 1);
    for (int k = 0; k < children; ++k) {
      const int l = list(depth);
      p_.blocks[static_cast<std::size_t>(id)].children.push_back(l);
    }
    const int body = list(depth);
    p_.blocks[static_cast<std::size_t>(id)].body = body;
    return id;
  }

  int list(int depth) {
    const int id = static_cast<int>(p_.lists.size());
    p_.lists.emplace_back();
    const int n = byte() % (kMaxListLen + 1);
    for (int k = 0; k < n && i_ < n_ && ops_ < kMaxOps; ++k) {
      Op op;
      op.kind = static_cast<OpKind>(byte() % kOpKinds);
      op.arg = byte();
      ++ops_;
      const bool room = depth < kMaxDepth && static_cast<int>(p_.lists.size()) < kMaxLists;
      switch (op.kind) {
        case OpKind::nested_scope:
          if (room && static_cast<int>(p_.blocks.size()) < kMaxBlocks) {
            op.sub = block(depth + 1);
          } else {
            op.kind = OpKind::checkpoint;
          }
          break;
        case OpKind::spawn:
        case OpKind::deadline:
        case OpKind::shielded:
        case OpKind::start_join:
          if (room) {
            op.sub = list(depth + 1);
          } else {
            op.kind = OpKind::checkpoint;
          }
          break;
        default:
          break;
      }
      p_.lists[static_cast<std::size_t>(id)].ops.push_back(op);
    }
    return id;
  }

  const std::uint8_t* d_;
  std::size_t n_;
  std::size_t i_ = 0;
  int ops_ = 0;
  Program p_;
};

// ---- the program in readable form -------------------------------------------

void describe_block(const Program& p, int block, int indent, std::string& out);

void describe_list(const Program& p, int list, int indent, std::string& out) {
  const std::string pad(static_cast<std::size_t>(indent) * 2, ' ');
  const auto& ops = p.lists[static_cast<std::size_t>(list)].ops;
  if (ops.empty()) out += pad + "(nothing)\n";
  for (const Op& op : ops) {
    out += pad + kOpNames[static_cast<int>(op.kind)];
    switch (op.kind) {
      case OpKind::send:
      case OpKind::recv:
      case OpKind::try_send:
      case OpKind::try_recv:
      case OpKind::close:
      case OpKind::is_closed:
        out += " c" + std::to_string(channel_of(p, op)) + "\n";
        break;
      case OpKind::select_recv:
        out += " (recv c" + std::to_string(channel_of(p, op)) + ", recv c" + std::to_string(second_channel_of(p, op)) +
               ", notify)\n";
        break;
      case OpKind::cancel_scope:
        out += " (" + std::to_string(levels_of(op)) + " up)\n";
        break;
      case OpKind::nested_scope:
        out += catches_faults(op) ? " (faults caught)\n" : "\n";
        describe_block(p, op.sub, indent + 1, out);
        break;
      case OpKind::spawn:
      case OpKind::shielded:
      case OpKind::start_join:
        out += " {\n";
        describe_list(p, op.sub, indent + 1, out);
        out += pad + "}\n";
        break;
      case OpKind::deadline: {
        static constexpr const char* kKinds[] = {"zero", "tiny", "long"};
        out += std::string(is_with_timeout(op) ? ": with_timeout(" : ": move_on_after(") +
               kKinds[static_cast<int>(deadline_kind(op))] + ")" + (catches_faults(op) ? " (faults caught)" : "") +
               " {\n";
        describe_list(p, op.sub, indent + 1, out);
        out += pad + "}\n";
        break;
      }
      default:
        out += "\n";
        break;
    }
  }
}

void describe_block(const Program& p, int block, int indent, std::string& out) {
  const std::string pad(static_cast<std::size_t>(indent) * 2, ' ');
  const Block& b = p.blocks[static_cast<std::size_t>(block)];
  out += pad + "scope #" + std::to_string(block) + (b.value_body ? " (Task<int> body)" : "") + " {\n";
  for (std::size_t k = 0; k < b.children.size(); ++k) {
    out += pad + "  child " + std::to_string(k) + ":\n";
    describe_list(p, b.children[k], indent + 2, out);
  }
  out += pad + "  body:\n";
  describe_list(p, b.body, indent + 2, out);
  out += pad + "}\n";
}

std::string describe(const Program& p) {
  std::string out = "seed " + std::to_string(p.seed) + "; channels:";
  for (std::size_t c = 0; c < p.channels.size(); ++c) {
    const ChannelSpec& s = p.channels[c];
    out += " c" + std::to_string(c) + " capacity " + std::to_string(s.capacity) +
           (s.throwing_move ? " (throwing move: lock path)" : s.capacity >= 2 ? " (ring)" : "") + ";";
  }
  out += p.break_by_cancel ? " a deadlock is ended by cancelling the root scope, then closing every channel\n"
                           : " a deadlock is ended by closing every channel\n";
  describe_block(p, 0, 0, out);
  return out;
}

// ---- the model ---------------------------------------------------------------

enum class Tri : std::uint8_t { no, maybe, yes };
const char* tri_name(Tri t) { return t == Tri::no ? "no" : t == Tri::yes ? "yes" : "maybe"; }

enum class NodeKind : std::uint8_t { top, scope, deadline, shield };

struct Node {  // a cancel node: a scope, a deadline frame or a shield
  NodeKind kind = NodeKind::scope;
  int parent = -1;
  Tri own = Tri::no;  // cancellation requested on this node itself
  bool alive = true;
  // Scopes.
  int block = -1;
  Scope* scope = nullptr;  // while the body runs or joins
  bool cancel_called = false;
  int live = 0;                            // spawned children not yet finished
  std::vector<std::exception_ptr> faults;  // in the order they reached the scope
  std::vector<int> deferred;  // start()ed children whose later fault awaits delivery
  bool body_done = false;
  std::exception_ptr body_error;
  bool child_cut_off = false;  // a child ended with Cancelled
  // Tiny deadlines.
  bool tiny = false;
  bool tiny_armed = false;
  Clock::time_point tiny_deadline{};  // exact: the clock stands still while tasks run
};

enum class Wait : std::uint8_t { spawned, running, send, recv, yield, join, join_child, done, select, bcast, watch };
constexpr const char* kWaitNames[] = {"spawned, not started", "running", "send", "recv", "yield",
                                      "join", "await JoinHandle of", "done", "select", "broadcast recv",
                                      "watch changed"};

struct FiberModel {
  Wait wait = Wait::spawned;
  int ch = -1;     // send / recv / select
  int ch2 = -1;    // select: its second receive case
  int join = -1;   // join: the scope node; join_child: the child fiber
  std::exception_ptr exit_error;  // done: how it ended
  int node = -1;   // the innermost cancel node, as of its last step
  bool predicted = false;  // its send/recv was predicted to complete at once
  bool started = false;    // a Scope::start child (its result waits for its handle)
  bool deferred_fault = false;  // started, ended with a later fault not delivered yet
};

enum class SendState : std::uint8_t { pending, sent, failed };
struct Attempt {
  int ch = 0;
  int fiber = 0;
  SendState st = SendState::pending;
  int received = 0;
};

struct ChannelModel {
  std::size_t capacity = 0;
  bool closed = false;
  bool saw_eof = false;
  int inflight = 0;    // awaited send/recv whose outcome is not known yet
  bool exact = true;   // `buffer` order is the channel's order
  std::deque<std::uint32_t> buffer;  // when idle: exactly the values in the channel
};

struct Ctx {
  int fiber;
  int node;
};

struct Pred {  // what an awaited channel operation must do, when it is known at its start
  enum Kind : std::uint8_t { none, cancelled, sent, closed, head, eof, one_of } kind = none;
  std::uint32_t value = 0;
  std::vector<std::uint32_t> allowed;  // one_of
};

class FuzzFault : public std::runtime_error {
 public:
  explicit FuzzFault(int id) : std::runtime_error("fuzz fault #" + std::to_string(id)) {}
};

// A value whose move constructor may throw: Channel keeps it on the lock path.
struct ThrowingMove {
  std::uint32_t v = 0;
  explicit ThrowingMove(std::uint32_t x) noexcept : v(x) {}
  ThrowingMove(const ThrowingMove&) = default;
  ThrowingMove(ThrowingMove&& o) noexcept(false) : v(o.v) {}
  ThrowingMove& operator=(const ThrowingMove&) = default;
  ThrowingMove& operator=(ThrowingMove&& o) noexcept(false) {
    v = o.v;
    return *this;
  }
  ~ThrowingMove() = default;
};
static_assert(!std::is_nothrow_move_constructible_v<ThrowingMove>);
std::uint32_t raw(std::uint32_t v) { return v; }
std::uint32_t raw(const ThrowingMove& v) { return v.v; }

std::string what_of(const std::exception_ptr& e) {
  if (!e) return "nothing";
  try {
    std::rethrow_exception(e);
  } catch (const Cancelled&) {
    return "shoal::Cancelled";
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "(unknown exception)";
  }
}
template <class E>
bool holds(const std::exception_ptr& e) {
  if (!e) return false;
  try {
    std::rethrow_exception(e);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

const bool g_trace = std::getenv("SHOAL_FUZZ_TRACE") != nullptr;

class Run {
 public:
  explicit Run(const Program& p) : prog(p) {
    for (const ChannelSpec& s : p.channels) {
      if (s.throwing_move) {
        plain.emplace_back();
        throwing.push_back(std::make_unique<Channel<ThrowingMove>>(s.capacity));
      } else {
        plain.push_back(std::make_unique<Channel<std::uint32_t>>(s.capacity));
        throwing.emplace_back();
      }
      ChannelModel m;
      m.capacity = s.capacity;
      chans.push_back(std::move(m));
    }
    top_node = new_node(NodeKind::top, -1);
  }

  const Program& prog;
  std::vector<std::unique_ptr<Channel<std::uint32_t>>> plain;
  std::vector<std::unique_ptr<Channel<ThrowingMove>>> throwing;
  Notify poke;            // select's notification case
  long notifies = 0;      // notify_one calls
  long notified = 0;      // selects that ended through the notification case
  static constexpr std::size_t kBcastCap = 3;
  Broadcast<std::uint32_t> bcast{kBcastCap};
  std::uint32_t bcast_sent = 0;  // values 0, 1, ... sent so far
  bool bcast_closed = false;
  std::map<int, std::unique_ptr<Broadcast<std::uint32_t>::Receiver>> bcast_rx;  // per fiber
  std::map<int, std::uint32_t> bcast_next;  // the model's next value for each fiber's receiver
  Watch<std::uint32_t> watch{0};
  std::uint32_t watch_version = 0;  // the value is the version
  bool watch_closed = false;
  std::map<int, std::unique_ptr<Watch<std::uint32_t>::Receiver>> watch_rx;
  std::map<int, std::uint32_t> watch_seen;
  std::vector<ChannelModel> chans;
  std::vector<Node> nodes;
  std::vector<FiberModel> fibers;
  std::vector<Attempt> attempts;
  std::map<std::tuple<int, int, int>, std::uint32_t> last_from;  // (receiver, channel, sender) -> value
  std::uint64_t progress = 0;  // program steps; the monitor watches it
  bool program_done = false;
  int top_node = -1;
  int root_scope = -1;
  bool monitor_cancelled_root = false;
  bool monitor_closed_all = false;
  bool monitor_sleeping = false;
  int deadlocks_broken = 0;
  int faults_thrown = 0;
  long suppressed_seen = 0;
  long suppressed_expected = 0;

 private:
  static constexpr std::size_t kRecent = 64;
  std::string recent_[kRecent];
  std::size_t recent_next_ = 0;

 public:

  // ---- reporting ----

  [[noreturn]] __attribute__((format(printf, 2, 3))) void fail(const char* fmt, ...) const {
    std::fprintf(stderr, "\nshoal api fuzz: VIOLATION: ");
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "\n\nfibers:\n");
    for (std::size_t f = 0; f < fibers.size(); ++f) {
      const FiberModel& m = fibers[f];
      std::fprintf(stderr, "  f%zu: %s", f, kWaitNames[static_cast<int>(m.wait)]);
      if (m.wait == Wait::send || m.wait == Wait::recv) std::fprintf(stderr, " c%d", m.ch);
      if (m.wait == Wait::join) std::fprintf(stderr, " scope node %d", m.join);
      if (m.wait == Wait::join_child) std::fprintf(stderr, " f%d", m.join);
      std::fprintf(stderr, " (node %d, cancelled: %s)\n", m.node, m.node >= 0 ? tri_name(cancelled(m.node)) : "-");
    }
    for (std::size_t c = 0; c < chans.size(); ++c) {
      const ChannelModel& m = chans[c];
      std::fprintf(stderr, "  c%zu: %zu buffered, %s, %d in flight\n", c, m.buffer.size(),
                   m.closed ? "closed" : "open", m.inflight);
    }
    const auto t_now = now();  // the simulated time on the worker
    std::fprintf(stderr, "cancel nodes alive:\n");
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      const Node& x = nodes[n];
      if (!x.alive) continue;
      static constexpr const char* kKinds[] = {"top", "scope", "deadline", "shield"};
      std::fprintf(stderr, "  node %zu: %s, parent %d, own %s", n, kKinds[static_cast<int>(x.kind)], x.parent,
                   tri_name(x.own));
      if (x.tiny && x.tiny_armed) {
        std::fprintf(stderr, ", tiny deadline at now%+lld ns",
                     static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(x.tiny_deadline - t_now).count()));
      }
      std::fprintf(stderr, "\n");
    }
    std::fprintf(stderr, "last steps (oldest first):\n");
    for (std::size_t i = 0; i < kRecent; ++i) {
      const std::string& line = recent_[(recent_next_ + i) % kRecent];
      if (!line.empty()) std::fprintf(stderr, "  %s\n", line.c_str());
    }
    std::fprintf(stderr, "runtime state:\n");
    Runtime::dump_all(std::cerr);
    std::cerr.flush();
    std::fprintf(stderr, "\nprogram (rerun with SHOAL_FUZZ_TRACE=1 for every step):\n%s\n", describe(prog).c_str());
    std::fflush(stderr);
    std::abort();
  }

  // Keeps the last kRecent steps for a violation report; prints them all
  // with SHOAL_FUZZ_TRACE.
  __attribute__((format(printf, 2, 3))) void trace(const char* fmt, ...) {
    char buf[200];
    const int head = std::snprintf(buf, sizeof buf, "[%llu] ", static_cast<unsigned long long>(progress));
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf + head, sizeof buf - static_cast<std::size_t>(head), fmt, ap);
    va_end(ap);
    recent_[recent_next_] = buf;
    recent_next_ = (recent_next_ + 1) % kRecent;
    if (g_trace) std::fprintf(stderr, "[fuzz] %s\n", buf);
  }

  // ---- cancellation model ----

  int new_node(NodeKind kind, int parent) {
    Node n;
    n.kind = kind;
    n.parent = parent;
    nodes.push_back(std::move(n));
    return static_cast<int>(nodes.size()) - 1;
  }
  Node& node(int n) { return nodes[static_cast<std::size_t>(n)]; }

  Tri cancelled(int n) const {
    Tri r = Tri::no;
    for (; n >= 0; n = nodes[static_cast<std::size_t>(n)].parent) {
      const Node& x = nodes[static_cast<std::size_t>(n)];
      r = std::max(r, x.own);
      if (r == Tri::yes || x.kind == NodeKind::shield) break;
    }
    return r;
  }

  // The model and shoal must agree wherever the model is sure.
  void check_cancel_view(const Ctx& ctx, const char* where) const {
    const Tri t = cancelled(ctx.node);
    const bool real = this_task::cancellation_requested();
    if ((t == Tri::yes && !real) || (t == Tri::no && real)) {
      fail("f%d at %s: the model says cancelled=%s but this_task::cancellation_requested() is %d", ctx.fiber,
           where, tri_name(t), real ? 1 : 0);
    }
  }
  // A Cancelled surfaced in `ctx`: only legitimate if the context is cancelled.
  void saw_cancelled(const Ctx& ctx, const char* where) const {
    if (cancelled(ctx.node) == Tri::no || !this_task::cancellation_requested()) {
      fail("f%d: %s threw Cancelled although its context is not cancelled (model %s, cancellation_requested %d)",
           ctx.fiber, where, tri_name(cancelled(ctx.node)), this_task::cancellation_requested() ? 1 : 0);
    }
  }

  // The `levels`-th enclosing program scope (clamped to the root scope).
  int enclosing_scope(int n, int levels) const {
    int found = -1;
    for (; n >= 0; n = nodes[static_cast<std::size_t>(n)].parent) {
      if (nodes[static_cast<std::size_t>(n)].kind != NodeKind::scope) continue;
      found = n;
      if (levels-- == 0) break;
    }
    if (found < 0) fail("internal: no enclosing scope");
    return found;
  }

  void cancel_scope(int s, const char* who) {
    Node& n = node(s);
    if (n.scope == nullptr) fail("internal: cancelling scope node %d that is not running", s);
    trace("%s cancels scope node %d (block %d)", who, s, n.block);
    n.scope->cancel();
    n.cancel_called = true;
    n.own = Tri::yes;
  }

  // ---- fibers ----

  int new_fiber(int scope_node) {
    FiberModel f;
    f.node = scope_node;
    fibers.push_back(f);
    return static_cast<int>(fibers.size()) - 1;
  }
  FiberModel& fiber(int f) { return fibers[static_cast<std::size_t>(f)]; }

  void step(const Ctx& ctx) {
    ++progress;
    fiber(ctx.fiber).node = ctx.node;
  }

  void begin_wait(const Ctx& ctx, Wait w, int ch, bool predicted) {
    step(ctx);
    FiberModel& f = fiber(ctx.fiber);
    f.wait = w;
    f.ch = ch;
    f.predicted = predicted;
  }
  void end_wait(const Ctx& ctx) {
    step(ctx);
    FiberModel& f = fiber(ctx.fiber);
    f.wait = Wait::running;
    f.ch = -1;
    f.predicted = false;
  }

  // A task (spawned child) or a scope body ended with `err` in scope `s`.
  void record_exit(int s, const Ctx& ctx, const std::exception_ptr& err, const char* who, bool child) {
    if (!err) return;
    if (is_cancellation(err)) {
      saw_cancelled(ctx, who);
      if (child) node(s).child_cut_off = true;
      return;
    }
    Node& n = node(s);
    n.faults.push_back(err);
    trace("%s leaves scope node %d with fault \"%s\" (%zu so far)", who, s, what_of(err).c_str(), n.faults.size());
    if (n.faults.size() == 1) {
      n.own = Tri::yes;  // the first fault cancels the scope
    } else if (err == n.faults.front()) {
      // The first fault again (delivered by a JoinHandle, rethrown): not a second one.
    } else if (child && fiber(ctx.fiber).started) {
      fiber(ctx.fiber).deferred_fault = true;  // its handle may deliver it yet
      n.deferred.push_back(ctx.fiber);
    } else {
      ++suppressed_expected;
    }
  }

  // ---- channels ----

  ChannelModel& chan(int c) { return chans[static_cast<std::size_t>(c)]; }
  Attempt& attempt(std::uint32_t v) { return attempts[v]; }

  std::uint32_t new_attempt(int c, int f) {
    Attempt a;
    a.ch = c;
    a.fiber = f;
    attempts.push_back(a);
    return static_cast<std::uint32_t>(attempts.size() - 1);
  }

  // When idle, the buffer is exactly known; if it holds one sender's values
  // (or none), their order is known as well.
  void settle(int c) {
    ChannelModel& m = chan(c);
    if (m.inflight != 0 || m.exact) return;
    for (std::uint32_t v : m.buffer) {
      if (attempt(v).fiber != attempt(m.buffer.front()).fiber) return;
    }
    std::sort(m.buffer.begin(), m.buffer.end());
    m.exact = true;
  }

  // The oldest buffered value of each sender: what a receive may return.
  std::vector<std::uint32_t> heads(int c) {
    std::map<int, std::uint32_t> oldest;
    for (std::uint32_t v : chan(c).buffer) {
      auto [it, fresh] = oldest.emplace(attempt(v).fiber, v);
      if (!fresh) it->second = std::min(it->second, v);
    }
    std::vector<std::uint32_t> out;
    for (auto& [f, v] : oldest) out.push_back(v);
    return out;
  }

  void buffer_push(int c, std::uint32_t v) { chan(c).buffer.push_back(v); }
  bool buffer_erase(int c, std::uint32_t v) {
    auto& b = chan(c).buffer;
    auto it = std::find(b.begin(), b.end(), v);
    if (it == b.end()) return false;
    b.erase(it);
    return true;
  }

  // `receiver` took `v` from channel `c` (-1: the final drain). `removed`:
  // the model already took it out of the buffer.
  void received(int c, std::uint32_t v, int receiver, bool removed) {
    if (v >= attempts.size()) fail("c%d delivered %u, a value never sent", c, v);
    Attempt& a = attempt(v);
    if (a.ch != c) fail("c%d delivered value %u, which was sent on c%d", c, v, a.ch);
    if (a.st == SendState::failed) fail("c%d delivered value %u although its send reported failure", c, v);
    if (++a.received > 1) fail("c%d delivered value %u twice", c, v);
    auto [it, fresh] = last_from.emplace(std::make_tuple(receiver, c, a.fiber), v);
    if (!fresh) {
      if (it->second >= v) {
        fail("per-sender FIFO broken on c%d: receiver f%d got %u from sender f%d after %u", c, receiver, v, a.fiber,
             it->second);
      }
      it->second = v;
    }
    if (!removed && !buffer_erase(c, v) && a.st == SendState::sent) {
      fail("internal: c%d delivered %u, sent but not in the model buffer", c, v);
    }
    trace("f%d received %u (from f%d) on c%d", receiver, v, a.fiber, c);
  }

  void send_failed(std::uint32_t v, const char* how) {
    Attempt& a = attempt(v);
    a.st = SendState::failed;
    if (a.received != 0) fail("value %u was delivered but its send reported %s", v, how);
  }

  // Called at the start of an awaited send (the value is already an attempt).
  Pred predict_send(int c, std::uint32_t v, const Ctx& ctx) {
    settle(c);
    ChannelModel& m = chan(c);
    const Tri t = cancelled(ctx.node);
    Pred p;
    if (m.inflight != 0 || t == Tri::maybe) return p;
    if (t == Tri::yes) {
      p.kind = Pred::cancelled;
    } else if (m.closed) {
      p.kind = Pred::closed;
    } else if (m.buffer.size() < m.capacity) {
      p.kind = Pred::sent;
      attempt(v).st = SendState::sent;
      buffer_push(c, v);
    }
    return p;
  }

  void finish_send(int c, std::uint32_t v, const Pred& p, int result, const Ctx& ctx) {
    // result: 0 sent, 1 ChannelClosed, 2 Cancelled
    static constexpr const char* kResults[] = {"sent", "ChannelClosedError", "Cancelled"};
    ChannelModel& m = chan(c);
    trace("f%d send %u on c%d: %s", ctx.fiber, v, c, kResults[result]);
    if (p.kind != Pred::none) {
      const int want = p.kind == Pred::sent ? 0 : p.kind == Pred::closed ? 1 : 2;
      if (result != want) {
        fail("f%d: send on idle c%d (capacity %zu, %zu buffered, %s) should have %s at once but %s", ctx.fiber, c,
             m.capacity, m.buffer.size(), m.closed ? "closed" : "open", kResults[want], kResults[result]);
      }
      if (result != 0) send_failed(v, kResults[result]);
      return;
    }
    if (result == 0) {
      attempt(v).st = SendState::sent;
      if (attempt(v).received == 0) buffer_push(c, v);
    } else if (result == 1) {
      if (!m.closed) fail("f%d: send on c%d threw ChannelClosedError but the channel was never closed", ctx.fiber, c);
      send_failed(v, "ChannelClosedError");
    } else {
      send_failed(v, "Cancelled");
    }
  }

  Pred predict_recv(int c, const Ctx& ctx) {
    settle(c);
    ChannelModel& m = chan(c);
    const Tri t = cancelled(ctx.node);
    Pred p;
    if (m.inflight != 0 || t == Tri::maybe) return p;
    if (t == Tri::yes) {
      p.kind = Pred::cancelled;
    } else if (!m.buffer.empty() && m.exact) {
      p.kind = Pred::head;
      p.value = m.buffer.front();
      m.buffer.pop_front();
    } else if (!m.buffer.empty()) {
      p.kind = Pred::one_of;
      p.allowed = heads(c);
    } else if (m.closed) {
      p.kind = Pred::eof;
    }
    return p;
  }

  void finish_recv(int c, const Pred& p, const std::optional<std::uint32_t>& got, bool was_cancelled,
                   const Ctx& ctx) {
    ChannelModel& m = chan(c);
    if (was_cancelled) {
      trace("f%d recv on c%d: Cancelled", ctx.fiber, c);
      if (p.kind != Pred::none && p.kind != Pred::cancelled) {
        fail("f%d: recv on idle c%d should have completed at once but threw Cancelled", ctx.fiber, c);
      }
      return;
    }
    if (p.kind == Pred::cancelled) fail("f%d: recv in a cancelled context did not throw Cancelled", ctx.fiber);
    if (!got) {
      trace("f%d recv on c%d: end of stream", ctx.fiber, c);
      if (p.kind != Pred::none && p.kind != Pred::eof) {
        fail("f%d: recv on idle c%d with %zu buffered reported end of stream", ctx.fiber, c, m.buffer.size());
      }
      if (!m.closed) fail("f%d: recv on c%d reported end of stream but the channel is open", ctx.fiber, c);
      if (m.inflight == 0 && !m.buffer.empty()) {
        fail("f%d: recv on c%d reported end of stream while %zu values are still buffered", ctx.fiber, c,
             m.buffer.size());
      }
      m.saw_eof = true;
      return;
    }
    const std::uint32_t v = *got;
    if (p.kind == Pred::eof) fail("f%d: recv on closed, drained c%d returned value %u", ctx.fiber, c, v);
    if (p.kind == Pred::head && v != p.value) {
      fail("f%d: recv on idle c%d returned %u; the channel's head was %u", ctx.fiber, c, v, p.value);
    }
    if (p.kind == Pred::one_of && std::find(p.allowed.begin(), p.allowed.end(), v) == p.allowed.end()) {
      fail("f%d: recv on idle c%d returned %u, not the oldest value of any sender", ctx.fiber, c, v);
    }
    received(c, v, ctx.fiber, p.kind == Pred::head);
  }

  // ---- deadlock handling (the monitor) ----

  bool tiny_deadline_pending() const {
    for (const Node& n : nodes) {
      if (n.alive && n.tiny && n.own != Tri::yes) return true;
    }
    return false;
  }
  // While the monitor sleeps, tiny deadlines fire in deadline order among
  // the tasks they wake: the model cannot tell which fired yet.
  void monitor_sleeps() {
    monitor_sleeping = true;
    for (Node& n : nodes) {
      if (n.alive && n.tiny && n.own == Tri::no) n.own = Tri::maybe;
    }
  }
  // Woken at `t`: every deadline up to `t` has fired, no later one has.
  void monitor_wakes(Clock::time_point t) {
    monitor_sleeping = false;
    for (Node& n : nodes) {
      if (n.alive && n.tiny && n.own == Tri::maybe) n.own = n.tiny_armed && n.tiny_deadline <= t ? Tri::yes : Tri::no;
    }
  }

  bool someone_waits(Wait w, int c) const {
    for (const FiberModel& f : fibers) {
      if (f.wait == w && f.ch == c) return true;
    }
    return false;
  }

  // Nothing in the program can run. Each wait must be one that may last forever.
  void check_deadlock_is_legitimate() const {
    for (std::size_t i = 0; i < fibers.size(); ++i) {
      const FiberModel& f = fibers[i];
      const int id = static_cast<int>(i);
      switch (f.wait) {
        case Wait::done:
          break;
        case Wait::spawned:
          fail("stuck: f%d was spawned but never started", id);
        case Wait::running:
          fail("stuck: f%d is not at any wait, yet it never runs (a lost wake-up)", id);
        case Wait::yield:
          fail("stuck: f%d yielded (checkpoint/sleep_for(0)) and was never resumed", id);
        case Wait::join:
          if (nodes[static_cast<std::size_t>(f.join)].live == 0) {
            fail("stuck: f%d waits to join scope node %d whose children have all finished", id, f.join);
          }
          break;
        case Wait::join_child:
          if (fibers[static_cast<std::size_t>(f.join)].wait == Wait::done) {
            fail("stuck: f%d awaits the JoinHandle of f%d, which has finished", id, f.join);
          }
          if (cancelled(f.node) == Tri::yes) {
            fail("stuck: f%d's JoinHandle await was not woken by the cancellation of its context", id);
          }
          break;
        case Wait::bcast:
          if (cancelled(f.node) == Tri::yes) fail("stuck: f%d's broadcast recv was not woken by its cancellation", id);
          if (bcast_closed) fail("stuck: f%d's broadcast recv was not woken by close()", id);
          if (bcast_next.at(id) != bcast_sent) {
            fail("stuck: f%d's broadcast recv waits although value %u is there", id, bcast_next.at(id));
          }
          break;
        case Wait::watch:
          if (cancelled(f.node) == Tri::yes) fail("stuck: f%d's watch changed was not woken by its cancellation", id);
          if (watch_closed) fail("stuck: f%d's watch changed was not woken by close()", id);
          if (watch_seen.at(id) != watch_version) {
            fail("stuck: f%d's watch changed waits although version %u is newer than %u", id, watch_version,
                 watch_seen.at(id));
          }
          break;
        case Wait::select:
          // A receive on each channel, each of which must be able to wait forever.
          for (int c : {f.ch, f.ch2}) {
            const ChannelModel& m = chans[static_cast<std::size_t>(c)];
            if (cancelled(f.node) == Tri::yes) fail("stuck: f%d's select was not woken by the cancellation of its context", id);
            if (m.closed) fail("stuck: f%d's select was not woken by the close() of c%d", id, c);
            if (!m.buffer.empty()) fail("stuck: f%d's select waits although c%d holds %zu values", id, c, m.buffer.size());
            if (someone_waits(Wait::send, c)) fail("stuck: f%d's select and another task's send wait on c%d", id, c);
          }
          break;
        case Wait::send:
        case Wait::recv: {
          const bool send = f.wait == Wait::send;
          const ChannelModel& m = chans[static_cast<std::size_t>(f.ch)];
          const char* op = send ? "send" : "recv";
          if (f.predicted) fail("stuck: f%d's %s on c%d should have completed at once", id, op, f.ch);
          if (cancelled(f.node) == Tri::yes) {
            fail("stuck: f%d's %s on c%d was not woken by the cancellation of its context", id, op, f.ch);
          }
          if (m.closed) fail("stuck: f%d's %s on c%d was not woken by close()", id, op, f.ch);
          if (send && m.capacity == 0 && someone_waits(Wait::recv, f.ch)) {
            fail("stuck: f%d's send and another task's recv wait on rendezvous c%d", id, f.ch);
          }
          if (send && m.buffer.size() < m.capacity) {
            fail("stuck: f%d's send on c%d waits although only %zu of %zu slots are used", id, f.ch, m.buffer.size(),
                 m.capacity);
          }
          if (!send && !m.buffer.empty()) {
            fail("stuck: f%d's recv on c%d waits although %zu values are buffered", id, f.ch, m.buffer.size());
          }
          if (!send && someone_waits(Wait::send, f.ch)) {
            fail("stuck: f%d's recv and another task's send wait on c%d", id, f.ch);
          }
          break;
        }
      }
    }
  }

  void break_deadlock() {
    ++deadlocks_broken;
    if (prog.break_by_cancel && !monitor_cancelled_root) {
      monitor_cancelled_root = true;
      cancel_scope(root_scope, "the monitor (deadlock)");
      return;
    }
    if (monitor_closed_all) fail("stuck although every channel is closed");
    monitor_closed_all = true;
    trace("the monitor closes every channel (deadlock)");
    for (std::size_t c = 0; c < chans.size(); ++c) {
      if (plain[c]) plain[c]->close();
      if (throwing[c]) throwing[c]->close();
      chans[c].closed = true;
    }
    bcast.close();
    bcast_closed = true;
    watch.close();
    watch_closed = true;
  }

  // ---- the end ----

  template <class T>
  void drain(int c, Channel<T>& ch) {
    ChannelModel& m = chan(c);
    settle(c);
    std::size_t drained = 0;
    while (std::optional<T> x = ch.try_recv()) {
      const std::uint32_t v = raw(*x);
      if (m.exact && !m.buffer.empty() && m.buffer.front() != v) {
        fail("final drain of c%d: got %u, the model's head is %u", c, v, m.buffer.front());
      }
      received(c, v, -1, false);
      ++drained;
    }
    if (m.saw_eof && drained != 0) {
      fail("c%d held %zu values after a receiver was told it was closed and drained", c, drained);
    }
    if (!m.buffer.empty()) fail("c%d lost %zu values (first: %u)", c, m.buffer.size(), m.buffer.front());
  }

  void final_checks() {
    for (std::size_t c = 0; c < chans.size(); ++c) {
      if (plain[c]) drain(static_cast<int>(c), *plain[c]);
      if (throwing[c]) drain(static_cast<int>(c), *throwing[c]);
    }
    for (std::size_t v = 0; v < attempts.size(); ++v) {
      const Attempt& a = attempts[v];
      if (a.st == SendState::pending) fail("the send of value %zu never finished", v);
      if (a.st == SendState::sent && a.received != 1) fail("value %zu was sent but received %d times", v, a.received);
    }
    for (std::size_t f = 0; f < fibers.size(); ++f) {
      if (fibers[f].wait != Wait::done) fail("f%zu never finished", f);
    }
    if (notified > notifies) fail("%ld selects were woken by the notification, but it was notified %ld times", notified, notifies);
    if (suppressed_seen != suppressed_expected) {
      fail("on_suppressed_fault was called %ld times; the model expects %ld (the later faults nobody handled)",
           suppressed_seen, suppressed_expected);
    }
  }
};

// ---- the runner: one coroutine per construct -----------------------------------

Task<void> run_list(Run* r, int list, Ctx ctx);

template <class T>
Task<void> do_send(Run* r, Channel<T>& ch, int c, Ctx ctx) {
  const std::uint32_t v = r->new_attempt(c, ctx.fiber);
  const Pred p = r->predict_send(c, v, ctx);
  if (p.kind == Pred::none) {
    ++r->chan(c).inflight;
    r->chan(c).exact = false;
  }
  r->begin_wait(ctx, Wait::send, c, p.kind != Pred::none);
  int result = 0;
  std::exception_ptr cancel;
  try {
    co_await ch.send(T(v));
  } catch (ChannelClosedError<T>& e) {
    result = 1;
    if (raw(e.value) != v) r->fail("ChannelClosedError on c%d carries %u, not the value %u sent", c, raw(e.value), v);
  } catch (const Cancelled&) {
    result = 2;
    cancel = std::current_exception();
  } catch (...) {
    r->fail("send on c%d threw %s", c, what_of(std::current_exception()).c_str());
  }
  r->end_wait(ctx);
  if (p.kind == Pred::none) --r->chan(c).inflight;
  if (cancel) r->saw_cancelled(ctx, "send");
  r->finish_send(c, v, p, result, ctx);
  if (cancel) std::rethrow_exception(cancel);
}

template <class T>
Task<void> do_recv(Run* r, Channel<T>& ch, int c, Ctx ctx) {
  Pred p = r->predict_recv(c, ctx);
  const bool counted = p.kind == Pred::none || p.kind == Pred::one_of;
  if (counted) {
    ++r->chan(c).inflight;
    if (p.kind == Pred::none) r->chan(c).exact = false;
  }
  r->begin_wait(ctx, Wait::recv, c, p.kind != Pred::none);
  std::optional<std::uint32_t> got;
  std::exception_ptr cancel;
  try {
    std::optional<T> x = co_await ch.recv();
    if (x) got = raw(*x);
  } catch (const Cancelled&) {
    cancel = std::current_exception();
  } catch (...) {
    r->fail("recv on c%d threw %s", c, what_of(std::current_exception()).c_str());
  }
  r->end_wait(ctx);
  if (counted) --r->chan(c).inflight;
  if (cancel) r->saw_cancelled(ctx, "recv");
  r->finish_recv(c, p, got, cancel != nullptr, ctx);
  if (cancel) std::rethrow_exception(cancel);
}

// A select over a receive on each of two channels and the run's Notify.
// Nothing is predicted: the model counts both channels busy while it waits,
// and checks what it took (a value sent once, on that channel, never also
// taken by anyone else) against the conservation ledger.
Task<void> do_select(Run* r, int c1, int c2, Ctx ctx) {
  Channel<std::uint32_t>& a = *r->plain[static_cast<std::size_t>(c1)];
  Channel<std::uint32_t>& b = *r->plain[static_cast<std::size_t>(c2)];
  for (int c : {c1, c2}) {
    ++r->chan(c).inflight;
    r->chan(c).exact = false;
  }
  r->begin_wait(ctx, Wait::select, c1, false);
  r->fiber(ctx.fiber).ch2 = c2;
  int index = -1;
  std::optional<std::uint32_t> got;
  std::exception_ptr cancel;
  try {
    auto res = co_await select(on_recv(a), on_recv(b), on_notify(r->poke));
    index = static_cast<int>(res.index());
    if (index == 0) got = std::get<0>(res);
    if (index == 1) got = std::get<1>(res);
  } catch (const Cancelled&) {
    cancel = std::current_exception();
  } catch (...) {
    r->fail("select on c%d, c%d threw %s", c1, c2, what_of(std::current_exception()).c_str());
  }
  r->end_wait(ctx);
  r->fiber(ctx.fiber).ch2 = -1;
  for (int c : {c1, c2}) --r->chan(c).inflight;
  if (cancel) {
    r->saw_cancelled(ctx, "select");
    r->trace("f%d select on c%d, c%d: Cancelled", ctx.fiber, c1, c2);
    std::rethrow_exception(cancel);
  }
  if (index == 2) {
    ++r->notified;
    r->trace("f%d select: notified", ctx.fiber);
    co_return;
  }
  const int c = index == 0 ? c1 : c2;
  if (!got) {
    r->trace("f%d select: c%d ended", ctx.fiber, c);
    if (!r->chan(c).closed) r->fail("f%d: select's recv on c%d reported end of stream but the channel is open", ctx.fiber, c);
    co_return;
  }
  r->received(c, *got, ctx.fiber, false);
}

// A broadcast receive through this fiber's receiver (subscribed at its
// first use: it sees what is sent from then on).
Task<void> do_bcast_recv(Run* r, Ctx ctx) {
  auto& rx = r->bcast_rx[ctx.fiber];
  if (!rx) {
    rx = std::make_unique<Broadcast<std::uint32_t>::Receiver>(r->bcast.subscribe());
    r->bcast_next[ctx.fiber] = r->bcast_sent;
  }
  r->begin_wait(ctx, Wait::bcast, -1, false);
  std::optional<BroadcastResult<std::uint32_t>> got;
  std::exception_ptr cancel;
  try {
    got = co_await rx->recv();
  } catch (const Cancelled&) {
    cancel = std::current_exception();
  } catch (...) {
    r->fail("broadcast recv threw %s", what_of(std::current_exception()).c_str());
  }
  r->end_wait(ctx);
  if (cancel) {
    r->saw_cancelled(ctx, "broadcast recv");
    std::rethrow_exception(cancel);
  }
  std::uint32_t& next = r->bcast_next[ctx.fiber];
  const std::uint32_t oldest = r->bcast_sent > Run::kBcastCap ? r->bcast_sent - static_cast<std::uint32_t>(Run::kBcastCap) : 0;
  if (got->lagged()) {
    r->trace("f%d broadcast recv: lagged by %llu", ctx.fiber, static_cast<unsigned long long>(got->missed()));
    if (next >= oldest || next + got->missed() != oldest) {
      r->fail("f%d: broadcast lag of %llu from %u, but the oldest value kept is %u", ctx.fiber,
              static_cast<unsigned long long>(got->missed()), next, oldest);
    }
    next = oldest;
  } else if (got->closed()) {
    r->trace("f%d broadcast recv: closed", ctx.fiber);
    if (!r->bcast_closed) r->fail("f%d: broadcast recv reported closed, but it is open", ctx.fiber);
    if (next != r->bcast_sent) r->fail("f%d: broadcast closed with value %u still unread", ctx.fiber, next);
  } else {
    r->trace("f%d broadcast recv: %u", ctx.fiber, **got);
    if (next < oldest) r->fail("f%d: broadcast gave %u although value %u was overwritten (no lag)", ctx.fiber, **got, next);
    if (**got != next) r->fail("f%d: broadcast gave %u, the next value for it is %u", ctx.fiber, **got, next);
    ++next;
  }
}

// A wait for a newer watch value through this fiber's receiver (made at its
// first use, having seen the value of that moment).
Task<void> do_watch_changed(Run* r, Ctx ctx) {
  auto& rx = r->watch_rx[ctx.fiber];
  if (!rx) {
    rx = std::make_unique<Watch<std::uint32_t>::Receiver>(r->watch.subscribe());
    r->watch_seen[ctx.fiber] = r->watch_version;
  }
  r->begin_wait(ctx, Wait::watch, -1, false);
  bool changed = false;
  std::exception_ptr cancel;
  try {
    changed = co_await rx->changed();
  } catch (const Cancelled&) {
    cancel = std::current_exception();
  } catch (...) {
    r->fail("watch changed threw %s", what_of(std::current_exception()).c_str());
  }
  r->end_wait(ctx);
  if (cancel) {
    r->saw_cancelled(ctx, "watch changed");
    std::rethrow_exception(cancel);
  }
  std::uint32_t& seen = r->watch_seen[ctx.fiber];
  if (!changed) {
    r->trace("f%d watch changed: closed", ctx.fiber);
    if (!r->watch_closed) r->fail("f%d: watch changed returned false, but the watch is open", ctx.fiber);
    if (seen != r->watch_version) r->fail("f%d: watch closed before it saw version %u", ctx.fiber, r->watch_version);
    co_return;
  }
  const std::uint32_t v = rx->get();
  r->trace("f%d watch changed: %u", ctx.fiber, v);
  if (seen == r->watch_version) r->fail("f%d: watch changed with nothing newer than %u", ctx.fiber, seen);
  if (v != r->watch_version) r->fail("f%d: watch shows %u, the latest is %u", ctx.fiber, v, r->watch_version);
  seen = v;
}

template <class T>
void do_try_send(Run* r, Channel<T>& ch, int c, const Ctx& ctx) {
  r->settle(c);
  ChannelModel& m = r->chan(c);
  const std::uint32_t v = r->new_attempt(c, ctx.fiber);
  const SendStatus s = ch.try_send(T(v));
  static constexpr const char* kNames[] = {"sent", "full", "closed"};
  r->trace("f%d try_send %u on c%d: %s", ctx.fiber, v, c, kNames[static_cast<int>(s)]);
  if (m.closed && s != SendStatus::closed) r->fail("try_send on closed c%d returned %s", c, kNames[static_cast<int>(s)]);
  if (!m.closed && s == SendStatus::closed) r->fail("try_send on open c%d returned closed", c);
  if (m.inflight == 0 && !m.closed) {
    const SendStatus want = m.buffer.size() < m.capacity ? SendStatus::sent : SendStatus::full;
    if (s != want) {
      r->fail("try_send on idle c%d (capacity %zu, %zu buffered) returned %s, expected %s", c, m.capacity,
              m.buffer.size(), kNames[static_cast<int>(s)], kNames[static_cast<int>(want)]);
    }
  }
  if (s == SendStatus::sent) {
    r->attempt(v).st = SendState::sent;
    if (r->attempt(v).received == 0) r->buffer_push(c, v);
    if (m.inflight != 0) m.exact = false;  // it may have gone straight to a waiting receiver
  } else {
    r->send_failed(v, kNames[static_cast<int>(s)]);
  }
}

template <class T>
void do_try_recv(Run* r, Channel<T>& ch, int c, const Ctx& ctx) {
  r->settle(c);
  ChannelModel& m = r->chan(c);
  const bool idle = m.inflight == 0;
  const std::vector<std::uint32_t> allowed = idle && !m.exact ? r->heads(c) : std::vector<std::uint32_t>{};
  std::optional<T> x = ch.try_recv();
  r->trace("f%d try_recv on c%d: %s", ctx.fiber, c, x ? std::to_string(raw(*x)).c_str() : "nothing");
  if (!x) {
    if (idle && !m.buffer.empty()) r->fail("try_recv on idle c%d found nothing; %zu values are buffered", c, m.buffer.size());
    if (idle && m.closed) m.saw_eof = true;
    return;
  }
  const std::uint32_t v = raw(*x);
  if (idle && m.buffer.empty()) r->fail("try_recv on idle, empty c%d returned %u", c, v);
  if (idle && m.exact && m.buffer.front() != v) {
    r->fail("try_recv on idle c%d returned %u; the channel's head was %u", c, v, m.buffer.front());
  }
  if (idle && !m.exact && std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
    r->fail("try_recv on idle c%d returned %u, not the oldest value of any sender", c, v);
  }
  if (!idle) m.exact = false;
  r->received(c, v, ctx.fiber, false);
}

Task<void> do_yield(Run* r, Ctx ctx, bool sleep) {
  const Tri before = r->cancelled(ctx.node);
  r->begin_wait(ctx, Wait::yield, -1, false);
  std::exception_ptr cancel;
  try {
    if (sleep) {
      co_await sleep_for(0ns);
    } else {
      co_await checkpoint();
    }
  } catch (const Cancelled&) {
    cancel = std::current_exception();
  } catch (...) {
    r->fail("a checkpoint threw %s", what_of(std::current_exception()).c_str());
  }
  r->end_wait(ctx);
  const char* what = sleep ? "sleep_for(0)" : "checkpoint";
  r->trace("f%d %s: %s", ctx.fiber, what, cancel ? "Cancelled" : "resumed");
  if (cancel) {
    r->saw_cancelled(ctx, what);
    std::rethrow_exception(cancel);
  }
  if (before == Tri::yes) r->fail("f%d: %s in a cancelled context did not throw", ctx.fiber, what);
  if (r->cancelled(ctx.node) == Tri::yes) {
    r->fail("f%d: %s returned although its context was cancelled when it resumed", ctx.fiber, what);
  }
}

// A spawned child: runs its list, then reports how it ended to its scope.
Task<void> child_main(Run* r, int list, int fiber, int scope_node) {
  const Ctx ctx{fiber, scope_node};
  r->step(ctx);
  r->fiber(fiber).wait = Wait::running;
  r->check_cancel_view(ctx, "child start");
  r->trace("f%d starts in scope node %d", fiber, scope_node);
  std::exception_ptr err;
  try {
    co_await run_list(r, list, ctx);
  } catch (...) {
    err = std::current_exception();
  }
  r->step(ctx);
  r->record_exit(scope_node, ctx, err, "a child", true);
  r->fiber(fiber).wait = Wait::done;
  r->fiber(fiber).exit_error = err;
  --r->node(scope_node).live;
  r->trace("f%d ends: %s", fiber, what_of(err).c_str());
  if (err) std::rethrow_exception(err);
}

// Scope::start's child: a spawned child with a value.
Task<int> started_main(Run* r, int list, int fiber, int scope_node) {
  co_await child_main(r, list, fiber, scope_node);
  co_return list + 5000;
}

// Starts a child into the innermost scope and awaits its JoinHandle at once.
Task<void> do_start_join(Run* r, int list, Ctx ctx) {
  const int s = r->enclosing_scope(ctx.node, 0);
  const int child = r->new_fiber(s);
  r->fiber(child).started = true;
  ++r->node(s).live;
  r->trace("start f%d into scope node %d and await it", child, s);
  JoinHandle<int> h = r->node(s).scope->start(started_main(r, list, child, s));
  const Tri before = r->cancelled(ctx.node);
  r->begin_wait(ctx, Wait::join_child, -1, false);
  r->fiber(ctx.fiber).join = child;
  int value = -1;
  std::exception_ptr err;
  try {
    value = co_await h;
  } catch (...) {
    err = std::current_exception();
  }
  r->end_wait(ctx);
  r->fiber(ctx.fiber).join = -1;
  const FiberModel& c = r->fiber(child);
  const bool child_done = c.wait == Wait::done;
  r->trace("f%d: JoinHandle of f%d gave %s", ctx.fiber, child, err ? what_of(err).c_str() : std::to_string(value).c_str());
  if (before == Tri::yes && !is_cancellation(err)) {
    r->fail("f%d: awaiting a JoinHandle in a cancelled context gave %s, not Cancelled", ctx.fiber,
            err ? what_of(err).c_str() : "a value");
  }
  if (!err) {
    if (!child_done || c.exit_error) r->fail("f%d: JoinHandle of f%d gave a value, but it %s", ctx.fiber, child, child_done ? "failed" : "is still running");
    if (value != list + 5000) r->fail("f%d: JoinHandle of f%d gave %d, not %d", ctx.fiber, child, value, list + 5000);
  } else if (is_cancellation(err)) {
    // Only the awaiter's own cancellation; a cut-off child's is ChildCancelled here.
    if (r->cancelled(ctx.node) == Tri::no || !this_task::cancellation_requested()) {
      r->fail("f%d: JoinHandle of f%d threw Cancelled although the awaiter's context is not cancelled (the child %s)",
              ctx.fiber, child,
              !child_done                     ? "still runs"
              : is_cancellation(c.exit_error) ? "ended with Cancelled"
                                              : "did not end with Cancelled");
    }
  } else if (child_done && err == c.exit_error) {
    // The child's fault, delivered: the awaiter's now. It goes on (rethrown below)
    // unless something above catches it.
    if (c.deferred_fault) {
      r->fiber(child).deferred_fault = false;
      r->trace("f%d: f%d's later fault was delivered; not reported unless it reaches the scope again", ctx.fiber,
               child);
    }
  } else if (holds<ChildCancelled>(err)) {
    if (!child_done || !is_cancellation(c.exit_error)) {
      r->fail("f%d: JoinHandle of f%d threw ChildCancelled, but the child %s", ctx.fiber, child,
              child_done ? "did not end with Cancelled" : "still runs");
    }
    if (r->cancelled(ctx.node) == Tri::yes || this_task::cancellation_requested()) {
      r->fail("f%d: JoinHandle of f%d threw ChildCancelled into a cancelled awaiter (expected Cancelled)", ctx.fiber,
              child);
    }
  } else {
    r->fail("f%d: JoinHandle of f%d threw \"%s\", which is not how the child ended", ctx.fiber, child,
            what_of(err).c_str());
  }
  if (err) std::rethrow_exception(err);
}

void spawn_child(Run* r, int list, int scope_node) {
  const int f = r->new_fiber(scope_node);
  Node& n = r->node(scope_node);
  ++n.live;
  r->trace("spawn f%d into scope node %d", f, scope_node);
  n.scope->spawn(child_main(r, list, f, scope_node));
}

Task<void> body_main(Run* r, int block, int scope_node, int fiber, Scope& s) {
  const Ctx ctx{fiber, scope_node};
  r->step(ctx);
  Node& n = r->node(scope_node);
  n.scope = &s;
  const Block& b = r->prog.blocks[static_cast<std::size_t>(block)];
  for (int l : b.children) spawn_child(r, l, scope_node);
  std::exception_ptr err;
  try {
    co_await run_list(r, b.body, ctx);
  } catch (...) {
    err = std::current_exception();
  }
  r->step(ctx);
  r->record_exit(scope_node, ctx, err, "a scope body", false);
  Node& after = r->node(scope_node);  // nodes may have grown meanwhile
  after.body_done = true;
  after.body_error = err;
  FiberModel& f = r->fiber(fiber);
  f.wait = Wait::join;
  f.join = scope_node;
  if (err) std::rethrow_exception(err);
}

void check_scope_result(Run* r, int block, int s, const Ctx& ctx, Tri entry, bool value_body, int value,
                        const std::exception_ptr& err) {
  Node& n = r->node(s);
  n.alive = false;
  n.scope = nullptr;
  FiberModel& f = r->fiber(ctx.fiber);
  f.wait = Wait::running;
  f.join = -1;
  r->trace("f%d: scope node %d (block %d) returned %s", ctx.fiber, s, block, what_of(err).c_str());
  if (is_cancellation(err)) r->saw_cancelled(ctx, "a scope");
  if (!n.body_done) {
    if (entry == Tri::no) r->fail("scope #%d never ran its body although its context was not cancelled", block);
    if (!is_cancellation(err)) r->fail("scope #%d entered in a cancelled context returned %s", block, what_of(err).c_str());
    return;
  }
  if (entry == Tri::yes) r->fail("scope #%d ran its body although entered in a cancelled context", block);
  if (n.live != 0) r->fail("scope #%d returned while %d of its children were still running", block, n.live);
  // Later faults of start()ed children that no handle delivered: reported by
  // the scope's exit (when the handle went, or at the exit).
  for (int f : n.deferred) {
    if (!r->fiber(f).deferred_fault) continue;
    ++r->suppressed_expected;
    r->trace("scope #%d: f%d's later fault was never delivered; reported by scope exit", block, f);
  }
  if (!n.faults.empty()) {
    if (err != n.faults.front()) {
      r->fail("scope #%d ended with %s; the first fault it saw was \"%s\"", block, what_of(err).c_str(),
              what_of(n.faults.front()).c_str());
    }
  } else if (!n.body_error && n.child_cut_off && !n.cancel_called) {
    // A child cut off by a cancellation from outside: not a completion.
    if (!is_cancellation(err)) {
      r->fail("scope #%d: a child was cut off by an outside cancellation, yet it returned %s", block,
              err ? what_of(err).c_str() : "normally");
    }
  } else if (!n.body_error) {
    if (err) r->fail("scope #%d: body and children succeeded, yet it threw %s", block, what_of(err).c_str());
    if (value_body && value != block + 1000) r->fail("scope #%d returned %d, not its body's value", block, value);
  } else if (n.cancel_called) {
    if (value_body && !holds<ScopeCancelled>(err)) {
      r->fail("scope #%d (Task<int>) cancelled itself before its value; expected ScopeCancelled, got %s", block,
              what_of(err).c_str());
    }
    if (!value_body && err) {
      r->fail("scope #%d cancelled itself; expected it to absorb that, got %s", block, what_of(err).c_str());
    }
  } else if (!is_cancellation(err)) {
    r->fail("scope #%d: body cancelled from outside; expected Cancelled to pass on, got %s", block,
            what_of(err).c_str());
  }
}

Task<void> run_block(Run* r, int block, Ctx ctx, bool catch_faults) {
  const Block& b = r->prog.blocks[static_cast<std::size_t>(block)];
  const int s = r->new_node(NodeKind::scope, ctx.node);
  r->node(s).block = block;
  if (block == 0) r->root_scope = s;
  const Tri entry = r->cancelled(ctx.node);
  int value = -1;
  std::exception_ptr err;
  const int fiber = ctx.fiber;
  try {
    if (b.value_body) {
      value = co_await scope([r, block, s, fiber](Scope& sc) -> Task<int> {
        co_await body_main(r, block, s, fiber, sc);
        co_return block + 1000;
      });
    } else {
      co_await scope([r, block, s, fiber](Scope& sc) -> Task<void> { co_await body_main(r, block, s, fiber, sc); });
    }
  } catch (...) {
    err = std::current_exception();
  }
  r->step(ctx);
  check_scope_result(r, block, s, ctx, entry, b.value_body, value, err);
  if (err && (is_cancellation(err) || !catch_faults)) std::rethrow_exception(err);
}

struct InnerResult {
  bool started = false;
  bool ok = false;
  std::exception_ptr err;
};

// The task a deadline or a shield wraps.
Task<void> inner_main(Run* r, int list, Ctx ctx, InnerResult* out) {
  r->step(ctx);
  out->started = true;
  Node& n = r->node(ctx.node);
  if (n.tiny) {
    // The deadline was computed when the deadline op was awaited; the
    // manual clock has not moved since.
    n.tiny_armed = true;
    n.tiny_deadline = now() + kTinyDeadline;
  }
  r->check_cancel_view(ctx, "a deadline or shield's task start");
  try {
    co_await run_list(r, list, ctx);
  } catch (...) {
    out->err = std::current_exception();
  }
  r->step(ctx);
  if (is_cancellation(out->err)) r->saw_cancelled(ctx, "a deadline or shield's task");
  if (out->err) std::rethrow_exception(out->err);
  out->ok = true;
}

Task<void> run_deadline(Run* r, const Op& op, Ctx ctx) {
  const DeadlineKind kind = deadline_kind(op);
  const bool timeout = is_with_timeout(op);
  const int fnode = r->new_node(NodeKind::deadline, ctx.node);
  Node& n = r->node(fnode);
  n.own = kind == DeadlineKind::zero ? Tri::yes : kind == DeadlineKind::tiny && r->monitor_sleeping ? Tri::maybe : Tri::no;
  n.tiny = kind == DeadlineKind::tiny;
  const Tri entry = r->cancelled(ctx.node);
  r->trace("f%d enters %s deadline node %d", ctx.fiber, kind == DeadlineKind::zero ? "a zero" : kind == DeadlineKind::tiny ? "a tiny" : "a long", fnode);
  const std::chrono::nanoseconds d = kind == DeadlineKind::zero   ? std::chrono::nanoseconds(0)
                                     : kind == DeadlineKind::tiny ? std::chrono::nanoseconds(kTinyDeadline)
                                                                  : std::chrono::nanoseconds(kLongDeadline);
  InnerResult in;
  std::exception_ptr err;
  bool completed = true;  // move_on_after's answer
  try {
    if (timeout) {
      co_await with_timeout(d, inner_main(r, op.sub, Ctx{ctx.fiber, fnode}, &in));
    } else {
      completed = co_await move_on_after(d, inner_main(r, op.sub, Ctx{ctx.fiber, fnode}, &in));
    }
  } catch (...) {
    err = std::current_exception();
  }
  r->step(ctx);
  const Tri fired = r->node(fnode).own;
  r->node(fnode).alive = false;
  const char* name = timeout ? "with_timeout" : "move_on_after";
  r->trace("f%d: %s returned %s (completed %d)", ctx.fiber, name, what_of(err).c_str(), completed ? 1 : 0);
  if (is_cancellation(err)) r->saw_cancelled(ctx, name);
  if (!in.started) {
    if (entry == Tri::no) r->fail("%s never ran its task although its context was not cancelled", name);
    if (!is_cancellation(err)) r->fail("%s entered in a cancelled context returned %s", name, what_of(err).c_str());
  } else if (entry == Tri::yes) {
    r->fail("%s ran its task although entered in a cancelled context", name);
  } else if (in.ok) {
    if (err || !completed) r->fail("%s: the task completed, yet the deadline reported %s", name, what_of(err).c_str());
  } else if (!is_cancellation(in.err)) {
    if (err != in.err) {
      r->fail("%s: the task's fault \"%s\" came out as %s", name, what_of(in.err).c_str(), what_of(err).c_str());
    }
  } else {
    // The task was cut off: by this deadline (TimedOut / false) unless an
    // outer cancellation is pending too (Cancelled goes on).
    const Tri outer = r->cancelled(ctx.node);
    const bool timed_out = timeout ? holds<TimedOut>(err) : (!err && !completed);
    const bool may_time_out = fired != Tri::no && outer != Tri::yes;
    const bool may_cancel = outer != Tri::no;
    if (!(timed_out && may_time_out) && !(is_cancellation(err) && may_cancel)) {
      r->fail("%s: task cancelled (deadline fired: %s, outer cancelled: %s) but it reported %s%s", name,
              tri_name(fired), tri_name(outer), what_of(err).c_str(), !timeout && !err ? " / false" : "");
    }
  }
  if (err && (is_cancellation(err) || !catches_faults(op))) std::rethrow_exception(err);
}

Task<void> run_shielded(Run* r, const Op& op, Ctx ctx) {
  const int sh = r->new_node(NodeKind::shield, ctx.node);
  InnerResult in;
  std::exception_ptr err;
  try {
    co_await shielded(inner_main(r, op.sub, Ctx{ctx.fiber, sh}, &in));
  } catch (...) {
    err = std::current_exception();
  }
  r->step(ctx);
  r->node(sh).alive = false;
  if (!in.started) r->fail("shielded did not run its task");
  if (err != in.err) {
    r->fail("shielded: the task ended with %s but shielded reported %s", what_of(in.err).c_str(), what_of(err).c_str());
  }
  if (err) std::rethrow_exception(err);
}

Task<void> run_list(Run* r, int list, Ctx ctx) {
  const OpList& ol = r->prog.lists[static_cast<std::size_t>(list)];
  for (const Op& op : ol.ops) {
    r->step(ctx);
    r->check_cancel_view(ctx, kOpNames[static_cast<int>(op.kind)]);
    const int c = channel_of(r->prog, op);
    auto& plain = r->plain[static_cast<std::size_t>(c)];
    auto& throwing = r->throwing[static_cast<std::size_t>(c)];
    switch (op.kind) {
      case OpKind::send:
        if (plain) {
          co_await do_send(r, *plain, c, ctx);
        } else {
          co_await do_send(r, *throwing, c, ctx);
        }
        break;
      case OpKind::recv:
        if (plain) {
          co_await do_recv(r, *plain, c, ctx);
        } else {
          co_await do_recv(r, *throwing, c, ctx);
        }
        break;
      case OpKind::try_send:
        if (plain) {
          do_try_send(r, *plain, c, ctx);
        } else {
          do_try_send(r, *throwing, c, ctx);
        }
        break;
      case OpKind::try_recv:
        if (plain) {
          do_try_recv(r, *plain, c, ctx);
        } else {
          do_try_recv(r, *throwing, c, ctx);
        }
        break;
      case OpKind::close:
        r->trace("f%d closes c%d", ctx.fiber, c);
        if (plain) {
          plain->close();
        } else {
          throwing->close();
        }
        r->chan(c).closed = true;
        break;
      case OpKind::is_closed: {
        const bool real = plain ? plain->is_closed() : throwing->is_closed();
        if (real != r->chan(c).closed) r->fail("is_closed() on c%d is %d, the model says %d", c, real, r->chan(c).closed);
        break;
      }
      case OpKind::checkpoint:
      case OpKind::sleep0:
        co_await do_yield(r, ctx, op.kind == OpKind::sleep0);
        break;
      case OpKind::fault: {
        const int id = ++r->faults_thrown;
        r->trace("f%d throws fuzz fault #%d", ctx.fiber, id);
        throw FuzzFault(id);
      }
      case OpKind::cancel_scope:
        r->cancel_scope(r->enclosing_scope(ctx.node, levels_of(op)), "a task");
        break;
      case OpKind::nested_scope:
        co_await run_block(r, op.sub, ctx, catches_faults(op));
        break;
      case OpKind::spawn:
        spawn_child(r, op.sub, r->enclosing_scope(ctx.node, 0));
        break;
      case OpKind::deadline:
        co_await run_deadline(r, op, ctx);
        break;
      case OpKind::shielded:
        co_await run_shielded(r, op, ctx);
        break;
      case OpKind::start_join:
        co_await do_start_join(r, op.sub, ctx);
        break;
      case OpKind::select_recv: {
        const int c2 = second_channel_of(r->prog, op);
        if (plain && r->plain[static_cast<std::size_t>(c2)]) {
          co_await do_select(r, c, c2, ctx);
        } else if (plain) {  // channel cases need a T whose move cannot throw: a plain recv instead
          co_await do_recv(r, *plain, c, ctx);
        } else {
          co_await do_recv(r, *throwing, c, ctx);
        }
        break;
      }
      case OpKind::notify:
        r->trace("f%d notifies", ctx.fiber);
        ++r->notifies;
        r->poke.notify_one();
        break;
      case OpKind::bcast_send: {
        const std::size_t to = r->bcast.send(r->bcast_sent);
        r->trace("f%d broadcasts %u to %zu", ctx.fiber, r->bcast_sent, to);
        if (r->bcast_closed) {
          if (to != 0) r->fail("a closed broadcast took value %u", r->bcast_sent);
        } else {
          if (to != r->bcast_rx.size()) r->fail("broadcast send reached %zu receivers; %zu exist", to, r->bcast_rx.size());
          if (to != 0) ++r->bcast_sent;  // with nobody subscribed the value is dropped
        }
        break;
      }
      case OpKind::bcast_recv:
        co_await do_bcast_recv(r, ctx);
        break;
      case OpKind::watch_send: {
        const bool took = r->watch.send(r->watch_version + 1);
        r->trace("f%d watch send %u: %s", ctx.fiber, r->watch_version + 1, took ? "taken" : "closed");
        if (took == r->watch_closed) r->fail("watch send: took %d, but the watch is %s", took, r->watch_closed ? "closed" : "open");
        if (took) ++r->watch_version;
        break;
      }
      case OpKind::watch_changed:
        co_await do_watch_changed(r, ctx);
        break;
    }
  }
}

// Yields beside the program; at a standstill, checks it and ends it.
constexpr int kQuietTurns = 64;

Task<void> monitor(Run* r) {
  std::uint64_t last = r->progress;
  int quiet = 0;
  while (!r->program_done) {
    co_await checkpoint();
    if (r->progress != last) {
      last = r->progress;
      quiet = 0;
      continue;
    }
    if (++quiet < kQuietTurns) continue;
    quiet = 0;
    if (r->tiny_deadline_pending()) {
      // Every pending deadline was armed at or before now (the clock stood
      // still since), so each is due before t.
      const Clock::time_point t = now() + kTinyDeadline + 1us;
      r->trace("the monitor sleeps past the tiny deadlines");
      r->monitor_sleeps();
      co_await sleep_until(t);
      r->monitor_wakes(t);
      continue;
    }
    r->trace("the monitor sees a standstill");
    r->check_deadlock_is_legitimate();
    r->break_deadlock();
  }
}

Task<void> program_main(Run* r) {
  const int f = r->new_fiber(r->top_node);
  const Ctx ctx{f, r->top_node};
  r->step(ctx);
  r->fiber(f).wait = Wait::running;
  try {
    co_await run_block(r, 0, ctx, false);
  } catch (...) {
    r->trace("the program ended with %s", what_of(std::current_exception()).c_str());
  }
  r->step(ctx);
  r->fiber(f).wait = Wait::done;
  r->program_done = true;
}

Task<void> top(Run* r) {
  co_await scope([r](Scope& s) -> Task<void> {
    s.spawn(monitor(r));
    s.spawn(program_main(r));
    co_return;
  });
}

// ---- wall-clock watchdog ---------------------------------------------------------

constexpr auto kHangLimit = 8s;  // before libFuzzer's -timeout=10, so the report has the runtime dump

class HangWatchdog {
 public:
  static HangWatchdog& instance() {
    static HangWatchdog w;
    return w;
  }
  void arm(const Program* p) {
    std::lock_guard<std::mutex> g(mu_);
    program_ = p;
    deadline_ = std::chrono::steady_clock::now() + kHangLimit;
    cv_.notify_one();
  }
  void disarm() {
    std::lock_guard<std::mutex> g(mu_);
    program_ = nullptr;
  }
  ~HangWatchdog() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  HangWatchdog() : thread_([this] { loop(); }) {}
  void loop() {
    std::unique_lock<std::mutex> g(mu_);
    while (!stop_) {
      if (program_ == nullptr) {
        cv_.wait(g);
        continue;
      }
      if (cv_.wait_until(g, deadline_) == std::cv_status::timeout && program_ != nullptr &&
          std::chrono::steady_clock::now() >= deadline_) {
        std::fprintf(stderr,
                     "\nshoal api fuzz: VIOLATION: the program did not finish within %lld s: a hang the monitor "
                     "could not see (the worker itself is stuck?)\nprogram:\n%s\n",
                     static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(kHangLimit).count()),
                     describe(*program_).c_str());
        Runtime::dump_all(std::cerr);
        std::cerr.flush();
        std::abort();
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  const Program* program_ = nullptr;
  std::chrono::steady_clock::time_point deadline_{};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

void run_api_input(const std::uint8_t* data, std::size_t size) {
  const Program prog = Decoder(data, size).decode();
  if (g_trace) std::fprintf(stderr, "%s", describe(prog).c_str());
  Run r(prog);
  {
    test::FrameCounter frames;
    RuntimeOptions o = RuntimeOptions::simulated(prog.seed);
    o.on_suppressed_fault = [&r](std::exception_ptr) { ++r.suppressed_seen; };
    HangWatchdog::instance().arm(&prog);
    run(top(&r), std::move(o));
    HangWatchdog::instance().disarm();
    if (frames.live() != 0) r.fail("%ld coroutine frames are still alive after the run", frames.live());
  }
  if (!r.program_done) r.fail("the runtime returned before the program finished");
  r.final_checks();
}

std::string describe_api_input(const std::uint8_t* data, std::size_t size) {
  return describe(Decoder(data, size).decode());
}

}  // namespace shoal::fuzz
