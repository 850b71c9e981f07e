// Shutdown stress: the main task is cancelled (Runtime::cancel from another
// thread) or faults while its descendants wait on every kind of wait at
// once: long sleeps, recv on empty channels, send on full ones, one-shot
// events, joins of children that never finish, blocking-pool work (waiting
// on an fd, a long bounded wait, a cancellation poll), nested scopes several
// levels deep, deadlines far away, shielded regions that finish by
// themselves, finally cleanups, parallel and race. Random tree shapes, many
// rounds, on 1, 2 and 4 workers.
//
// Invariants per round: Runtime::block_on rethrows Cancelled, shoal::run
// rethrows the fault; no hang (watchdog); every wait ends exactly once, by
// cancellation (a join above a faulting leaf may see the fault instead),
// none returns; every shielded region and cleanup runs to its end without
// seeing the cancellation; nothing is reported as a suppressed fault; every
// frame and every tracked object is destroyed exactly once (FrameCounter
// back to zero after the runtime is gone, per-object destructor counts of
// one). Prints its seed; rerun with SHOAL_SEED.
//
// The canceller does not sleep and hope: each waiter bumps a witness counter
// just before it waits, and the cancel (or the fault) comes once the counter
// shows every planned waiter has arrived. A waiter may still be between its
// bump and its suspension when the cancel lands; that race is wanted.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/frame_counter.hpp"
#include "support/manual_event.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::Channel;
using shoal::Scope;
using shoal::Task;
using namespace std::chrono_literals;

constexpr std::chrono::seconds kDog{300};

struct Fault : std::runtime_error {
  explicit Fault(long round) : std::runtime_error("shutdown stress fault"), round(round) {}
  long round;
};

// ---- the plan: a random tree, drawn before the round runs ------------------

enum class Kind : std::uint8_t {
  // Leaves: one witness arrival, then a wait only cancellation may end.
  sleep,             // sleep_for(1 h)
  recv_empty,        // recv on a channel nobody sends to (capacity 0, 1 or 4)
  send_full,         // send on a channel nobody receives from, full (capacity 0, 1 or 4)
  event,             // an event nobody sets
  blocking_fd,       // spawn_blocking: wait_readable on a pipe nobody writes, no limit
  blocking_bounded,  // spawn_blocking: the same with a 60 s limit
  blocking_poll,     // spawn_blocking: polls cancellation_requested(), bounded at 60 s
  shield,            // a shielded region that ends by itself, then a long sleep
  fault,             // (leaf-fault rounds) waits for every other waiter, then throws
  // Composites.
  scope,     // children spawned into a nested scope; with body_leaf, the last one runs in the body
  join,      // Scope::start(child) and a join of its handle
  timeout,   // with_timeout(1 h, child)
  move_on,   // move_on_after(1 h, child)
  finally,   // finally(child, cleanup)
  parallel,  // parallel(child, child)
  race,      // race(child, child)
};

constexpr Kind kLeafKinds[] = {Kind::sleep,       Kind::recv_empty,       Kind::send_full,     Kind::event,
                               Kind::blocking_fd, Kind::blocking_bounded, Kind::blocking_poll, Kind::shield};
constexpr Kind kCompositeKinds[] = {Kind::scope,   Kind::scope,   Kind::join,     Kind::timeout,
                                    Kind::move_on, Kind::finally, Kind::parallel, Kind::race};

bool is_blocking(Kind k) { return k == Kind::blocking_fd || k == Kind::blocking_bounded || k == Kind::blocking_poll; }

struct Plan {
  Kind kind = Kind::sleep;
  int channel = 0;  // recv_empty / send_full: which channel
  bool body_leaf = false;
  std::vector<Plan> children;
};

constexpr int kMaxDepth = 6;
constexpr int kMaxNodes = 60;
constexpr int kMaxBlocking = 5;

struct Gen {
  std::mt19937_64 rng;
  int nodes = 0;
  int blocking = 0;
};

Plan leaf(Gen& g, Kind k) {
  if (is_blocking(k)) {
    if (g.blocking >= kMaxBlocking) k = Kind::sleep;
    else ++g.blocking;
  }
  Plan p;
  p.kind = k;
  p.channel = static_cast<int>(g.rng() % 3);
  return p;
}

Plan make(Gen& g, int depth, bool force_composite = false) {
  ++g.nodes;
  const bool nest = depth < kMaxDepth && g.nodes < kMaxNodes && (force_composite || g.rng() % 100 < 45);
  if (!nest) return leaf(g, kLeafKinds[g.rng() % std::size(kLeafKinds)]);
  Plan p;
  p.kind = kCompositeKinds[g.rng() % std::size(kCompositeKinds)];
  switch (p.kind) {
    case Kind::scope: {
      const int n = 1 + static_cast<int>(g.rng() % 4);
      for (int i = 0; i < n; ++i) p.children.push_back(make(g, depth + 1));
      p.body_leaf = g.rng() % 2 == 0;
      break;
    }
    case Kind::parallel:
    case Kind::race:
      p.children.push_back(make(g, depth + 1));
      p.children.push_back(make(g, depth + 1));
      break;
    default:
      p.children.push_back(make(g, depth + 1));
  }
  return p;
}

// The root's tree: some random subtrees, one leaf of every kind (so every
// kind of wait is pending at once), and a chain of composites to full depth.
Plan make_tree(std::uint64_t seed) {
  Gen g{std::mt19937_64(seed)};
  Plan top;
  top.kind = Kind::scope;
  for (Kind k : kLeafKinds) top.children.push_back(leaf(g, k));
  top.children.push_back(make(g, 1, /*force_composite=*/true));
  Plan* chain = &top.children.back();
  for (int d = 2; d < kMaxDepth && !chain->children.empty(); ++d) {
    chain->children.back() = make(g, d, /*force_composite=*/true);
    chain = &chain->children.back();
  }
  const int extra = 1 + static_cast<int>(g.rng() % 3);
  for (int i = 0; i < extra; ++i) top.children.push_back(make(g, 1));
  return top;
}

struct Shape {
  long arrivals = 0;  // witness bumps
  long waits = 0;     // waits that only cancellation (or the fault) may end
  long shields = 0;
  long finallys = 0;
};

void tally(const Plan& p, Shape& s) {
  switch (p.kind) {
    case Kind::fault:
      break;
    case Kind::shield:
      ++s.shields;
      [[fallthrough]];
    case Kind::sleep:
    case Kind::recv_empty:
    case Kind::send_full:
    case Kind::event:
    case Kind::blocking_fd:
    case Kind::blocking_bounded:
    case Kind::blocking_poll:
      ++s.arrivals;
      ++s.waits;
      break;
    case Kind::join:
      ++s.arrivals;  // the joiner
      ++s.waits;
      break;
    case Kind::finally:
      ++s.finallys;
      break;
    default:
      break;
  }
  for (const Plan& c : p.children) tally(c, s);
}

// Leaves other than shields (a shield ends by itself; it cannot fault), each
// with the number of joins above it: a fault there may reach each of those
// joiners as the child's fault instead of as a cancellation.
void collect_leaves(Plan& p, int joins_above, std::vector<std::pair<Plan*, int>>& out) {
  if (p.children.empty() && p.kind != Kind::shield && p.kind != Kind::scope) out.emplace_back(&p, joins_above);
  for (Plan& c : p.children) collect_leaves(c, joins_above + (p.kind == Kind::join ? 1 : 0), out);
}

// ---- the round's shared state ----------------------------------------------

// Per-object destructor counts: slot i counts how often object i was destroyed.
struct ProbeBook {
  static constexpr long kCapacity = 1L << 15;
  std::atomic<long> next{0};
  std::unique_ptr<std::atomic<int>[]> destroyed{new std::atomic<int>[kCapacity]()};
};

// Counts its own destruction; every instance gets a fresh id (copies and
// moved-from objects are objects too). Lives in frames, captures and channels.
class Probe {
 public:
  explicit Probe(ProbeBook& b) : b_(&b), id_(b.next.fetch_add(1)) {}
  Probe(const Probe& o) : Probe(*o.b_) {}
  Probe(Probe&& o) noexcept : Probe(*o.b_) {}
  Probe& operator=(const Probe&) noexcept { return *this; }  // identity stays
  Probe& operator=(Probe&&) noexcept { return *this; }
  ~Probe() {
    if (id_ < ProbeBook::kCapacity) b_->destroyed[static_cast<std::size_t>(id_)].fetch_add(1);
  }

 private:
  ProbeBook* b_;
  long id_;
};

struct Ctx {
  Ctx(long round_, ProbeBook& book_) : round(round_), book(book_) {
    for (std::size_t i = 0; i < 3; ++i) {
      empty[i] = std::make_unique<Channel<Probe>>(kCaps[i]);
      full[i] = std::make_unique<Channel<Probe>>(kCaps[i]);
      for (std::size_t k = 0; k < kCaps[i]; ++k) {
        if (full[i]->try_send(Probe(book)) != shoal::SendStatus::sent) violation("could not fill a channel");
      }
    }
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
  }
  ~Ctx() {
    ::close(fds[0]);
    ::close(fds[1]);
  }

  void arrive() {
    const long n = arrived.fetch_add(1) + 1;
    if (n == target) {
      {
        std::lock_guard<std::mutex> g(mu);
      }
      cv.notify_all();
      all_arrived.set();
    } else if (n > target) {
      violation("more waiters arrived than planned");
    }
  }
  void wait_all_arrived() {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [this] { return arrived.load() >= target; });
  }
  void violation(const std::string& what) {
    violations.fetch_add(1);
    std::lock_guard<std::mutex> g(mu);
    if (first_violation.empty()) first_violation = what;
  }

  static constexpr std::size_t kCaps[3] = {0, 1, 4};
  const long round;
  ProbeBook& book;
  long target = 0;
  std::atomic<long> arrived{0};
  std::mutex mu;
  std::condition_variable cv;
  shoal::test::ManualEvent all_arrived;
  shoal::test::ManualEvent never;
  std::atomic<bool> released{false};  // shields may finish
  std::unique_ptr<Channel<Probe>> empty[3], full[3];
  int fds[2] = {-1, -1};

  std::atomic<long> ended_cancelled{0}, ended_other{0};
  std::atomic<long> shields_entered{0}, shields_done{0};
  std::atomic<long> cleanups{0}, cleanups_done{0};
  std::atomic<long> entered{0}, exited{0};
  std::atomic<long> violations{0};
  std::string first_violation;
};

struct TaskGuard {
  Ctx& c;
  explicit TaskGuard(Ctx& c_) : c(c_) { c.entered.fetch_add(1); }
  ~TaskGuard() { c.exited.fetch_add(1); }
};

// Awaits `expr`, a wait only cancellation may end (a join may also see the
// fault of a faulting child). Counts how it ended.
#define SHOAL_WAIT_UNTIL_CANCELLED(c, expr)                      \
  do {                                                     \
    try {                                                  \
      (void)(co_await expr);                               \
    } catch (const shoal::Cancelled&) {                    \
      (c).ended_cancelled.fetch_add(1);                    \
      throw;                                               \
    } catch (...) {                                        \
      (c).ended_other.fetch_add(1);                        \
      throw;                                               \
    }                                                      \
    (c).violation("a wait ended without a cancellation");  \
  } while (0)

// ---- running a plan ----------------------------------------------------------

Task<void> run_node(Ctx& c, const Plan& p, Probe probe);

Task<void> shield_body(Ctx& c, Probe probe) {
  TaskGuard guard(c);
  shoal::test::escape(probe);
  c.arrive();
  std::mt19937_64 rng(static_cast<std::uint64_t>(c.round) * 7 + static_cast<std::uint64_t>(c.shields_entered.load()));
  // Ends by itself once released: polling a flag with short sleeps, not a wait
  // for the cancellation, which cannot reach in here.
  while (!c.released.load()) co_await shoal::sleep_for(std::chrono::microseconds(20 + rng() % 200));
  if (shoal::this_task::cancellation_requested()) c.violation("a cancellation reached into a shielded region");
  Channel<Probe> local(1);
  co_await local.send(Probe(c.book));
  if (!(co_await local.recv())) c.violation("a shielded channel round trip failed");
  co_await shoal::sleep_for(std::chrono::microseconds(rng() % 100));
  if (shoal::this_task::cancellation_requested()) c.violation("a cancellation reached into a shielded region");
}

Task<void> cleanup(Ctx& c, Probe probe) {
  TaskGuard guard(c);
  shoal::test::escape(probe);
  c.cleanups.fetch_add(1);
  co_await shoal::sleep_for(std::chrono::microseconds(static_cast<long>(c.cleanups.load() % 7) * 30));
  if (shoal::this_task::cancellation_requested()) c.violation("a cancellation reached into a finally cleanup");
  c.cleanups_done.fetch_add(1);
}

Task<void> leaf_wait(Ctx& c, const Plan& p) {
  switch (p.kind) {
    case Kind::sleep:
      c.arrive();
      SHOAL_WAIT_UNTIL_CANCELLED(c, shoal::sleep_for(1h));
      break;
    case Kind::recv_empty:
      c.arrive();
      SHOAL_WAIT_UNTIL_CANCELLED(c, c.empty[p.channel]->recv());
      break;
    case Kind::send_full:
      c.arrive();
      SHOAL_WAIT_UNTIL_CANCELLED(c, c.full[p.channel]->send(Probe(c.book)));
      break;
    case Kind::event:
      c.arrive();
      SHOAL_WAIT_UNTIL_CANCELLED(c, c.never.wait());
      break;
    case Kind::blocking_fd:
    case Kind::blocking_bounded: {
      const auto limit =
          p.kind == Kind::blocking_fd ? std::chrono::milliseconds(-1) : std::chrono::milliseconds(60'000);
      const auto r = co_await shoal::spawn_blocking([&c, limit] {
        c.arrive();
        return shoal::this_task::wait_readable(c.fds[0], limit);
      });
      // The job started (it arrived), so it is never dropped: it returns.
      if (r != shoal::this_task::WaitResult::cancelled) c.violation("wait_readable did not report the cancellation");
      SHOAL_WAIT_UNTIL_CANCELLED(c, shoal::checkpoint());
      break;
    }
    case Kind::blocking_poll: {
      const bool saw = co_await shoal::spawn_blocking([&c] {
        c.arrive();
        for (int i = 0; i < 600'000; ++i) {  // at most ~60 s
          if (shoal::this_task::cancellation_requested()) return true;
          std::this_thread::sleep_for(100us);
        }
        return false;
      });
      if (!saw) c.violation("blocking work never saw the cancellation");
      SHOAL_WAIT_UNTIL_CANCELLED(c, shoal::checkpoint());
      break;
    }
    case Kind::shield:
      c.shields_entered.fetch_add(1);
      co_await shoal::shielded(shield_body(c, Probe(c.book)));
      c.shields_done.fetch_add(1);
      SHOAL_WAIT_UNTIL_CANCELLED(c, shoal::sleep_for(1h));
      break;
    case Kind::fault:
      co_await c.all_arrived.wait();
      c.released.store(true);
      throw Fault(c.round);
    default:
      c.violation("not a leaf");
  }
}

Task<void> run_node(Ctx& c, const Plan& p, Probe probe) {
  TaskGuard guard(c);
  shoal::test::escape(probe);
  switch (p.kind) {
    case Kind::scope:
      co_await shoal::scope([&](Scope& s) -> Task<void> {
        const std::size_t spawned = p.children.size() - (p.body_leaf ? 1 : 0);
        for (std::size_t i = 0; i < spawned; ++i) s.spawn(run_node(c, p.children[i], Probe(c.book)));
        if (p.body_leaf) co_await run_node(c, p.children.back(), Probe(c.book));
      });
      // A body that returned is completion: the scope may return normally once
      // its cancelled children are joined. The cancellation is still pending.
      co_await shoal::checkpoint();
      break;
    case Kind::join:
      co_await shoal::scope([&](Scope& s) -> Task<void> {
        auto h = s.start(run_node(c, p.children[0], Probe(c.book)));
        c.arrive();
        SHOAL_WAIT_UNTIL_CANCELLED(c, h);
      });
      break;
    case Kind::timeout:
      co_await shoal::with_timeout(1h, run_node(c, p.children[0], Probe(c.book)));
      break;
    case Kind::move_on:
      (void)co_await shoal::move_on_after(1h, run_node(c, p.children[0], Probe(c.book)));
      break;
    case Kind::finally:
      co_await shoal::finally(run_node(c, p.children[0], Probe(c.book)), cleanup(c, Probe(c.book)));
      break;
    case Kind::parallel:
      (void)co_await shoal::parallel(run_node(c, p.children[0], Probe(c.book)),
                                     run_node(c, p.children[1], Probe(c.book)));
      break;
    case Kind::race:
      co_await shoal::race(run_node(c, p.children[0], Probe(c.book)), run_node(c, p.children[1], Probe(c.book)));
      break;
    default:
      co_await leaf_wait(c, p);
  }
  c.violation("a subtree that never finishes returned (kind " + std::to_string(static_cast<int>(p.kind)) + ")");
}

enum class Ending { runtime_cancel, main_fault, leaf_fault };

// The main task: the tree's top scope. It waits too (on an event), or, when
// it is the one to fault, waits until everyone else waits and then throws.
Task<void> main_task(Ctx& c, const Plan& top, Ending ending) {
  TaskGuard guard(c);
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (const Plan& child : top.children) s.spawn(run_node(c, child, Probe(c.book)));
    if (ending == Ending::main_fault) {
      co_await c.all_arrived.wait();
      c.released.store(true);
      throw Fault(c.round);
    }
    c.arrive();
    SHOAL_WAIT_UNTIL_CANCELLED(c, c.never.wait());
  });
  c.violation("the main task's scope returned");
}

// ---- the test ------------------------------------------------------------------

struct Totals {
  long rounds = 0, waits = 0, shields = 0;
  std::chrono::nanoseconds max_unwind{0};  // Runtime::cancel to block_on returning (printed, not asserted)
};

// One round on a fresh runtime (Runtime::block_on for a cancel from outside,
// shoal::run for the faults), so that afterwards no frame and nothing the
// runtime allocated through the frame allocator may be left.
void run_round(std::size_t workers, shoal::test::FrameCounter& frames, std::uint64_t seed, long round,
               Ending ending, Totals& totals) {
  std::mt19937_64 rng(seed);
  Plan top = make_tree(rng());
  long joins_above_fault = 0;
  if (ending == Ending::leaf_fault) {
    std::vector<std::pair<Plan*, int>> leaves;
    collect_leaves(top, 0, leaves);
    const auto& pick = leaves[rng() % leaves.size()];
    pick.first->kind = Kind::fault;
    joins_above_fault = pick.second;
  }
  Shape shape;
  tally(top, shape);
  if (ending != Ending::main_fault) ++shape.arrivals, ++shape.waits;  // the main task's own wait
  const long spin_us = static_cast<long>(rng() % 3) * 100;  // 0: cancel at once; else after a short spin

  ProbeBook book;
  std::atomic<long> suppressed{0};
  shoal::RuntimeOptions opts = shoal::RuntimeOptions::with_workers(workers);
  opts.on_suppressed_fault = [&suppressed](std::exception_ptr) { suppressed.fetch_add(1); };
  auto c = std::make_unique<Ctx>(round, book);
  c->target = shape.arrivals;
  bool got_expected = false;
  std::thread canceller;
  std::atomic<std::int64_t> cancelled_at{0};
  try {
    if (ending == Ending::runtime_cancel) {
      // Runtime::cancel needs the runtime: block_on on our own.
      shoal::Runtime rt(std::move(opts));
      canceller = std::thread([&rt, &c = *c, &cancelled_at, spin_us] {
        c.wait_all_arrived();
        // Sometimes let the last arrivals suspend first; correctness does not depend on it.
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
        while (std::chrono::steady_clock::now() < until) {
        }
        cancelled_at.store(std::chrono::steady_clock::now().time_since_epoch().count());
        rt.cancel();
        c.released.store(true);
      });
      struct Join {  // the runtime must outlive the canceller's call
        std::thread& t;
        ~Join() {
          if (t.joinable()) t.join();
        }
      } join{canceller};
      rt.block_on(main_task(*c, top, ending));
    } else {
      shoal::run(main_task(*c, top, ending), std::move(opts));
    }
    ADD_FAILURE() << "run/block_on returned normally";
  } catch (const shoal::Cancelled&) {
    got_expected = ending == Ending::runtime_cancel;
    const auto latency = std::chrono::steady_clock::now().time_since_epoch().count() - cancelled_at.load();
    totals.max_unwind = std::max(totals.max_unwind, std::chrono::nanoseconds(latency));
  } catch (const Fault& f) {
    got_expected = ending != Ending::runtime_cancel && f.round == round;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "run/block_on threw " << e.what();
  }
  EXPECT_TRUE(got_expected) << "run/block_on did not rethrow the expected Cancelled or fault";

  EXPECT_EQ(c->violations.load(), 0) << "first: " << c->first_violation;
  EXPECT_EQ(c->arrived.load(), shape.arrivals);
  EXPECT_EQ(c->ended_cancelled.load() + c->ended_other.load(), shape.waits) << "a wait did not end exactly once";
  EXPECT_LE(c->ended_other.load(), joins_above_fault) << "a wait ended by something other than Cancelled";
  EXPECT_EQ(c->shields_entered.load(), shape.shields);
  EXPECT_EQ(c->shields_done.load(), shape.shields) << "a shielded region did not finish";
  EXPECT_EQ(c->cleanups.load(), shape.finallys);
  EXPECT_EQ(c->cleanups_done.load(), shape.finallys) << "a finally cleanup did not finish";
  EXPECT_EQ(c->entered.load(), c->exited.load()) << "a task body was never unwound";
  EXPECT_EQ(suppressed.load(), 0) << "faults reported as suppressed";
  c.reset();  // channels and their buffered probes go too (the runtime is gone already)

  EXPECT_EQ(frames.live(), 0) << "frames leaked";
  const long probes = book.next.load();
  ASSERT_LT(probes, ProbeBook::kCapacity);
  long wrong = 0;
  for (long i = 0; i < probes; ++i) wrong += book.destroyed[static_cast<std::size_t>(i)].load() != 1;
  EXPECT_EQ(wrong, 0) << "of " << probes << " tracked objects, these were not destroyed exactly once";
  ++totals.rounds;
  totals.waits += shape.waits;
  totals.shields += shape.shields;
}

class ShutdownStress : public ::testing::TestWithParam<std::size_t> {
 protected:
  void run_rounds(Ending ending, const char* name) {
    const std::uint64_t seed = shoal::test::test_seed(name);
    shoal::test::Watchdog dog(kDog, name);
    shoal::test::FrameCounter frames;
    std::mt19937_64 rng(seed);
    Totals totals;
    const long rounds = shoal::test::scaled(500, 20);
    for (long r = 0; r < rounds; ++r) {
      const std::uint64_t round_seed = rng();
      run_round(GetParam(), frames, round_seed, r, ending, totals);
      if (HasFailure()) {
        ADD_FAILURE() << "round " << r << " of SHOAL_SEED=" << seed << " failed";
        return;
      }
    }
    std::printf("%ld rounds, %ld waits ended, %ld shielded regions finished\n", totals.rounds, totals.waits,
                totals.shields);
    if (ending == Ending::runtime_cancel) {
      std::printf("slowest Runtime::cancel to block_on returning: %.1f ms\n",
                  std::chrono::duration<double, std::milli>(totals.max_unwind).count());
    }
  }
};

// Runtime::cancel() from another thread once every waiter waits.
TEST_P(ShutdownStress, RuntimeCancelUnwindsEveryKindOfWait) {
  run_rounds(Ending::runtime_cancel, "ShutdownStress.RuntimeCancelUnwindsEveryKindOfWait");
}

// The main task throws once every waiter waits.
TEST_P(ShutdownStress, MainTaskFaultUnwindsEveryKindOfWait) {
  run_rounds(Ending::main_fault, "ShutdownStress.MainTaskFaultUnwindsEveryKindOfWait");
}

// A leaf somewhere in the tree throws once every other waiter waits; the
// fault climbs through whatever composites lie above it.
TEST_P(ShutdownStress, DescendantFaultUnwindsEveryKindOfWait) {
  run_rounds(Ending::leaf_fault, "ShutdownStress.DescendantFaultUnwindsEveryKindOfWait");
}

INSTANTIATE_TEST_SUITE_P(Workers, ShutdownStress,
                         ::testing::Values(std::size_t{1}, std::size_t{2}, std::size_t{4}, std::size_t{16}),
                         shoal::test::worker_param_name);

}  // namespace
