// Allocation failure at every point: for N = 1, 2, 3, ... fail the N-th
// runtime allocation (coroutine frames and reactor registrations
// (IoSource), which all go through detail::frame_allocate; timers allocate
// nothing),
// once and from then on, until a run no longer reaches N; on the simulated
// executor and on 2 workers. Every run must end in success with the right
// result or in std::bad_alloc (the documented out-of-memory error), never
// std::terminate, SyncError or another error; no injected failure may be
// absorbed, and every frame it allocated must be freed. In the task-set
// scenarios a spawn whose child frame fails reports out-of-memory and the
// set goes on; such a run must still end in std::bad_alloc.
//
// Scenarios (each a Task<long> with a fixed result):
//  - spawn_chain, fan_out, channels, timers: nested scopes, a fan-out,
//    a channel pipeline, sleeps/with_timeout/move_on_after.
//  - task_set: an accept loop (spawn, spawn_local, try_spawn on an empty set,
//    admission waits). task_set_full: try_spawn refused by a full set, and a
//    spawn that waits for a slot.
//  - sync_mutex: with_lock with a plain body, contended (the queue) and past
//    the cooperative budget (the yield path); a Task body; a start()ed
//    plain with_lock; plain with_try_lock busy and free.
//  - sync_try_timed: with_lock_timeout (timing out, then in time) and the try
//    forms with a Task body. NOT SWEPT while kKnownDefectTryTimedLockLeakPermitsOnOom
//    is true (clean run only): see that constant.
//  - sync_rw_sem: RwLock with_read_lock / with_write_lock (readers queue
//    behind a writer) / with_try_write_lock; Semaphore with_permit,
//    with_permits(n) (waiters queue behind a holder of all permits),
//    with_try_permit.
//  - sync_once: once_do raced by four callers (a Task init that sleeps and
//    allocates while they wait). Swept on the simulated executor only while
//    kKnownDefectOnceOomBecomesInitFailed is true: see that constant.
//  - sync_cell: with_cell (plain and Task fn); once_do with a plain init.
//  - chan_ops (long) and chan_lock_path (a type whose move is not noexcept):
//    at capacities 0, 1 and 4 (long at 4: the lock-free ring), send/recv,
//    try_send/try_recv, close while receivers and senders wait, and drain.
//  - chan_blocking: send_blocking / recv_blocking from spawn_blocking jobs.
//  - io_streams: a Unix socketpair and a loopback TCP pair (127.0.0.1, port 0):
//    accept, connect, wait_readable, read_exact, read_some, write_all, each
//    with one side waiting.
//  - http_streams: HTTP/1.1 connections on socketpairs whose handler reads
//    its request body as it arrives (Request::read_some) and writes its
//    response as it goes (Response::write, chunked); one leaves the body
//    unread, so its connection lingers on close.
//  - http2_streams: the same two handlers on two streams of one HTTP/2
//    connection (a socketpair, a raw client): the connection drops what
//    the second leaves unread.
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "shoal/http.hpp"
#ifdef SHOAL_TEST_HTTP2
#include "http2/h2_frames.hpp"
#endif
#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Channel;
using shoal::Scope;
using shoal::SpawnStatus;
using shoal::Task;
using shoal::TaskSet;
using shoal::net::Address;
using shoal::net::Listener;
using shoal::net::Stream;

Task<long> leaf(long v) {
  co_await shoal::checkpoint();
  co_return v;
}

// A chain of nested scopes, each spawning the next level and awaiting a leaf.
Task<long> chain(int depth) {
  if (depth == 0) co_return co_await leaf(1);
  long below = 0;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    auto h = s.start(chain(depth - 1));
    const long mine = co_await leaf(depth);
    below = mine + co_await h;
  });
  co_return below;
}

Task<long> spawn_chain() { co_return co_await chain(6); }  // 1 + 1 + 2 + ... + 6 = 22

Task<long> fan_out() {
  std::atomic<long> sum{0};  // children run on any worker
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (long i = 1; i <= 12; ++i) {
      s.spawn([&sum, i]() -> Task<void> { sum.fetch_add(co_await leaf(i)); });
    }
    auto h = s.start(leaf(100));
    sum.fetch_add(co_await h);
  });
  co_return sum.load();  // 78 + 100
}

Task<long> channels() {
  Channel<long> rendezvous(0), buffered(4);
  long sum = 0;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      for (long i = 1; i <= 10; ++i) co_await rendezvous.send(i);
      rendezvous.close();
    });
    s.spawn([&]() -> Task<void> {
      while (auto v = co_await rendezvous.recv()) co_await buffered.send(*v * 2);
      buffered.close();
    });
    while (auto v = co_await buffered.recv()) sum += *v;
  });
  co_return sum;  // 110
}

Task<long> timers() {
  std::atomic<long> sum{0};
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (long i = 1; i <= 4; ++i) {
      s.spawn([&sum, i]() -> Task<void> {
        co_await shoal::sleep_for(std::chrono::microseconds(50 * i));
        sum.fetch_add(i);
      });
    }
    sum.fetch_add(co_await shoal::with_timeout(1h, leaf(10)));
    const bool finished = co_await shoal::move_on_after(1ms, [&]() -> Task<void> {
      shoal::Channel<int> never(1);
      (void)co_await never.recv();
    }());
    sum.fetch_add(finished ? 1000 : 100);
  });
  co_return sum.load();  // 10 + 10 + 100
}

// What the task-set scenario's spawns returned in the current run.
struct SpawnTally {
  std::atomic<long> started{0}, closed{0}, out_of_memory{0};
  void reset() {
    started.store(0);
    closed.store(0);
    out_of_memory.store(0);
  }
  void count(SpawnStatus s) {
    (s == SpawnStatus::started ? started : s == SpawnStatus::closed ? closed : out_of_memory).fetch_add(1);
  }
};
SpawnTally g_spawns;

// An accept loop: a producer feeds items through a channel to a task set
// whose limit is smaller than the number of items, so the body also waits
// for admission. Each child checkpoints and adds its item (odd items through
// spawn_local); one child, started by try_spawn, awaits a nested task. A
// child frame that cannot be allocated makes that spawn report out-of-memory
// (try_spawn: false) and the set go on; the set then ends in bad_alloc.
Task<long> task_set_accept() {
  std::atomic<long> sum{0};  // children run on any worker
  Channel<long> incoming(2);
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      for (long i = 1; i <= 10; ++i) co_await incoming.send(i);
      incoming.close();
    });
    co_await shoal::task_set(3, [&](TaskSet& set) -> Task<void> {
      // The set is empty and open: only out-of-memory refuses this one.
      const bool nested = set.try_spawn([&sum]() -> Task<void> { sum.fetch_add(co_await leaf(100)); });
      g_spawns.count(nested ? SpawnStatus::started : SpawnStatus::out_of_memory);
      while (auto item = co_await incoming.recv()) {
        auto child = [&sum, v = *item]() -> Task<void> {
          co_await shoal::checkpoint();
          sum.fetch_add(v);
        };
        // Not `count(odd ? co_await a : co_await b)`: g++ 12 runs the
        // await_suspend of both arms there, and the other arm takes a slot.
        if (*item % 2 != 0) {
          g_spawns.count(co_await set.spawn_local(child));
        } else {
          g_spawns.count(co_await set.spawn(child));
        }
      }
    });
  });
  co_return sum.load();  // 55 + 100
}

// ---- The sync library ------------------------------------------------------

// More calls than a task's cooperative budget (detail::kBudget, 128) in one
// step: a plain with_lock then finds its budget spent once, takes the slow
// path and yields in acquire_permits (one frame) although the lock is free.
constexpr int kLockCalls = 140;
static_assert(kLockCalls > static_cast<int>(shoal::detail::kBudget) + 2);

// Mutex: a Task body holds it across a sleep while three tasks make 140
// plain with_lock calls each (the first ones queue: the slow path, one
// acquire_permits frame each; later ones find the budget spent: the yield
// path, also a frame) and a start()ed plain with_lock returns a value;
// with_try_lock (plain) while held, from the holder itself (busy), and
// after the scope (runs).
Task<long> sync_mutex() {
  shoal::Mutex m("alloc-sweep");
  long guarded = 0;  // only touched under m
  std::atomic<long> sum{0};
  Channel<int> held(0);  // closed as a signal
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(shoal::with_lock(m, [&]() -> Task<void> {  // a Task body (locked())
      held.close();  // the callers below now queue behind this holder
      co_await shoal::sleep_for(100us);
      guarded += 1000;
      co_await shoal::checkpoint();
      const auto busy = co_await shoal::with_try_lock(m, [] { return 1L; });
      sum.fetch_add(busy.has_value() ? 1'000'000 : 1);
    }));
    for (int t = 0; t < 3; ++t) {
      s.spawn([&]() -> Task<void> {
        (void)co_await held.recv();
        for (int i = 0; i < kLockCalls; ++i) co_await shoal::with_lock(m, [&] { ++guarded; });
      });
    }
    auto valued = s.start(shoal::with_lock(m, [] { return 10L; }));  // a LockCall as a Task
    sum.fetch_add(co_await valued);
  });
  const auto free_plain = co_await shoal::with_try_lock(m, [&] { return guarded; });
  co_return sum.load() + (free_plain ? *free_plain : -1);  // 1 + 10 + (1000 + 3 * 140) = 1431
}

// KNOWN DEFECT (found by this sweep): try_locked and timed_locked
// (detail/sync_ops.hpp) take the permits, then create run_held's frame,
// which constructs the Held guard. When that frame cannot be allocated the
// call throws std::bad_alloc with the permits still taken: the lock stays
// held forever (later callers hang; destroying it aborts "destroyed while
// held"). Hit by with_lock_timeout (any body) and the try forms with a Task
// body (uncontended: the 2nd allocation of a with_try_lock with a Task body,
// the 6th of a with_lock_timeout). While true,
// sync_try_timed runs clean only; set it to false once the permits are
// released when that frame cannot be created (tried locally: the scenario
// then sweeps clean, 34 points per mode).
constexpr bool kKnownDefectTryTimedLockLeakPermitsOnOom = false;

// The forms that defect blocks: with_lock_timeout times out behind a
// holder, then succeeds; the try forms with a Task body (with_try_lock,
// with_try_write_lock, with_try_permit) are busy while held (by another
// task, or by the caller itself) and run when free.
Task<long> sync_try_timed() {
  shoal::Mutex m("alloc-sweep-timed");
  shoal::RwLock rw("alloc-sweep-timed");
  shoal::Semaphore sem(1, "alloc-sweep-timed");
  std::atomic<long> sum{0};
  Channel<int> held(0), release(0);  // closed as signals
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(shoal::with_lock(m, [&]() -> Task<void> {
      held.close();
      (void)co_await release.recv();
    }));
    s.spawn([&]() -> Task<void> {
      (void)co_await held.recv();
      const auto late = co_await shoal::with_lock_timeout(m, 1ms, [] { return 1L; });
      sum.fetch_add(late.has_value() ? 1'000'000 : 1);
      const auto busy = co_await shoal::with_try_lock(m, []() -> Task<long> { co_return 1L; });
      sum.fetch_add(busy.has_value() ? 1'000'000 : 2);
      release.close();
      const auto in_time = co_await shoal::with_lock_timeout(m, 1h, []() -> Task<long> {
        co_await shoal::checkpoint();
        co_return 10L;
      });
      sum.fetch_add(in_time.has_value() ? *in_time : 1'000'000);
    });
    co_return;
  });
  const auto free_lock = co_await shoal::with_try_lock(m, []() -> Task<long> {
    co_await shoal::checkpoint();
    co_return 100L;
  });
  const long busy_write = co_await shoal::with_read_lock(rw, [&]() -> Task<long> {
    const auto w = co_await shoal::with_try_write_lock(rw, []() -> Task<long> { co_return 1L; });
    co_return w.has_value() ? 1'000'000L : 1000L;
  });
  const auto free_write = co_await shoal::with_try_write_lock(rw, []() -> Task<long> { co_return 10'000L; });
  const long busy_permit = co_await shoal::with_permit(sem, [&]() -> Task<long> {
    const auto p = co_await shoal::with_try_permit(sem, []() -> Task<long> { co_return 1L; });
    co_return p.has_value() ? 1'000'000L : 100'000L;
  });
  const auto free_permit = co_await shoal::with_try_permit(sem, []() -> Task<long> { co_return 1'000'000L; });
  co_return sum.load() + (free_lock ? *free_lock : -1) + busy_write + (free_write ? *free_write : -1) + busy_permit +
      (free_permit ? *free_permit : -1);  // 1 + 2 + 10 + 100 + 1000 + 10000 + 100000 + 1000000 = 1111113
}

// RwLock and Semaphore. A writer (Task body) holds the RwLock across a sleep
// while three readers queue with plain bodies, then take it with a Task body
// that asks with_try_write_lock (busy: a read lock is held). A holder of all
// 3 permits of a Semaphore sleeps (with_try_permit inside: busy) while four
// with_permit (Task bodies that checkpoint) and one with_permits(2) (plain)
// wait. After the scope the try forms succeed.
Task<long> sync_rwlock_semaphore() {
  shoal::RwLock rw("alloc-sweep");
  shoal::Semaphore sem(3, "alloc-sweep");
  long table = 0;  // written under the write lock only
  std::atomic<long> sum{0};
  Channel<int> writing(0), all_permits(0);
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(shoal::with_write_lock(rw, [&]() -> Task<void> {
      writing.close();
      co_await shoal::sleep_for(100us);
      table = 7;
    }));
    for (int t = 0; t < 3; ++t) {
      s.spawn([&]() -> Task<void> {
        (void)co_await writing.recv();
        for (int i = 0; i < 3; ++i) sum.fetch_add(co_await shoal::with_read_lock(rw, [&] { return table; }));
        co_await shoal::with_read_lock(rw, [&]() -> Task<void> {
          co_await shoal::checkpoint();
          const auto w = co_await shoal::with_try_write_lock(rw, [] { return 1L; });
          sum.fetch_add(w.has_value() ? 1'000'000 : 100);
        });
      });
    }
    s.spawn(shoal::with_permits(sem, 3, [&]() -> Task<void> {
      all_permits.close();
      co_await shoal::sleep_for(100us);
      const auto p = co_await shoal::with_try_permit(sem, [] { return 1L; });
      sum.fetch_add(p.has_value() ? 1'000'000 : 1000);
    }));
    for (int t = 0; t < 4; ++t) {
      s.spawn([&]() -> Task<void> {
        (void)co_await all_permits.recv();
        sum.fetch_add(co_await shoal::with_permit(sem, []() -> Task<long> {
          co_await shoal::checkpoint();
          co_return 10'000L;
        }));
      });
    }
    s.spawn([&]() -> Task<void> {
      (void)co_await all_permits.recv();
      sum.fetch_add(co_await shoal::with_permits(sem, 2, [] { return 50'000L; }));
    });
    co_return;
  });
  const auto w = co_await shoal::with_try_write_lock(rw, [&] { return table * 100'000; });
  const auto p = co_await shoal::with_try_permit(sem, [] { return 1'000'000L; });
  co_return sum.load() + (w ? *w : -1) + (p ? *p : -1);
  // 3 * (3 * 7 + 100) + 1000 + 4 * 10000 + 50000 + 700000 + 1000000 = 1791363
}

// KNOWN DEFECT (found by this sweep, on 2 workers only): an init that
// throws std::bad_alloc fails a Once for good, so every other caller gets
// SyncError{init_failed}. A caller on the other worker can throw that
// before the winner's bad_alloc reaches the scope, and the run then ends in
// SyncError although the only failure was out of memory: "shoal::once_do:
// the init of shoal::Once "alloc-sweep" threw ...", fail-once at point 11
// (then the timer heap of the init's sleep, which allocates nothing since
// the timing wheels; 10 is the init's frame), in 1 of
// 300 two-worker sweeps of this scenario and 5 of 100 of an earlier, busier
// one. On the simulated executor the winner's fault always comes first, so
// sync_once is swept there; while this is true it runs clean only on 2
// workers.
constexpr bool kKnownDefectOnceOomBecomesInitFailed = false;

// Once: four tasks race on a Once whose init is a Task that sleeps (the
// others wait in once_do's slow path) and then allocates.
Task<long> sync_once() {
  shoal::Once<long> once("alloc-sweep");
  std::atomic<long> sum{0}, inits{0};
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (int t = 0; t < 4; ++t) {
      s.spawn([&]() -> Task<void> {
        const long& v = co_await shoal::once_do(once, [&]() -> Task<long> {
          inits.fetch_add(1);
          co_await shoal::sleep_for(100us);  // the other callers wait in once_do meanwhile
          co_return co_await leaf(42);        // an allocation while they wait
        });
        sum.fetch_add(v);
      });
    }
    co_return;
  });
  co_return sum.load() + inits.load() * 1000;  // 4 * 42 + 1000 = 1168
}

// Cell, and a Once with a plain init (nothing in it can fail): four tasks
// each call once_do, then update the Cell with a plain fn and a Task fn.
Task<long> sync_cell() {
  shoal::Once<long> once("alloc-sweep-plain");
  shoal::Cell<long> cell(0, "alloc-sweep");
  std::atomic<long> sum{0}, inits{0};
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (int t = 0; t < 4; ++t) {
      s.spawn([&]() -> Task<void> {
        sum.fetch_add(co_await shoal::once_do(once, [&] {
          inits.fetch_add(1);
          return 1000L;
        }));
        co_await shoal::with_cell(cell, [](long c) { return c + 1; });
        co_await shoal::with_cell(cell, [](long c) -> Task<long> {
          co_await shoal::checkpoint();
          co_return c + 10;
        });
      });
    }
    co_return;
  });
  long in_cell = 0;
  co_await shoal::with_cell(cell, [&](long c) {
    in_cell = c;
    return c;
  });
  co_return sum.load() + inits.load() * 100'000 + in_cell * 1'000'000;  // 4000 + 100000 + 44000000 = 44104000
}

// ---- Channels --------------------------------------------------------------

// Never throws, but its move constructor is not noexcept: a Channel keeps
// such values on the lock path at every capacity (no lock-free ring).
struct Boxed {
  long v = 0;
  Boxed(long x) : v(x) {}  // NOLINT: implicit, like the long it stands for
  Boxed(const Boxed& o) : v(o.v) {}
  Boxed(Boxed&& o) : v(o.v) {}  // NOLINT: deliberately not noexcept
  Boxed& operator=(const Boxed& o) {
    v = o.v;
    return *this;
  }
  Boxed& operator=(Boxed&& o) {  // NOLINT: deliberately not noexcept
    v = o.v;
    return *this;
  }
};
static_assert(!std::is_nothrow_move_constructible_v<Boxed>);

long value_of(long v) { return v; }
long value_of(const Boxed& b) { return b.v; }

// Every channel operation at one capacity: try_send until full and try_recv
// on an idle channel (exact counts), a producer and a consumer (send/recv,
// close and drain), receivers waiting on an empty channel and senders on a
// full one when both are closed (nullopt; ChannelClosedError carrying the
// value), try_send on a closed channel, and draining what close left.
template <class T>
Task<long> channel_round(std::size_t capacity) {
  std::atomic<long> sum{0};
  Channel<T> pipe(capacity), empty(capacity), full(capacity);
  long accepted = 0;
  for (long i = 0; i < 6; ++i) {
    if (full.try_send(T(100 + i)) == shoal::SendStatus::sent) ++accepted;
  }
  if (accepted != static_cast<long>(capacity)) throw std::logic_error("try_send filled a wrong number of slots");
  if (empty.try_recv()) throw std::logic_error("try_recv on an empty channel gave a value");
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      for (long i = 1; i <= 6; ++i) co_await pipe.send(T(i));
      pipe.close();
    });
    s.spawn([&]() -> Task<void> {
      while (auto v = co_await pipe.recv()) sum.fetch_add(value_of(*v));
    });
    for (int t = 0; t < 2; ++t) {
      s.spawn([&]() -> Task<void> {
        const auto v = co_await empty.recv();
        sum.fetch_add(v ? 1'000'000 : 1);
      });
      s.spawn([&]() -> Task<void> {
        try {
          co_await full.send(T(1000));
          sum.fetch_add(1'000'000);
        } catch (const shoal::ChannelClosedError<T>& e) {
          sum.fetch_add(value_of(e.value));
        }
      });
    }
    co_await shoal::sleep_for(50us);  // the four above now wait
    empty.close();
    full.close();
  });
  if (full.try_send(T(1)) != shoal::SendStatus::closed) throw std::logic_error("try_send on a closed channel");
  while (auto v = full.try_recv()) sum.fetch_add(value_of(*v));  // what was buffered before the close
  co_return accepted * 10'000 + sum.load();
}
// capacity c: 10000 c + 21 + 2 + 2000 + (100 + ... + 100 + c - 1)
constexpr long channel_round_value(long c) { return 10'000 * c + 2023 + c * 100 + c * (c - 1) / 2; }

constexpr std::size_t kCapacities[] = {0, 1, 4};

// Capacities 0 and 1 on the lock path, 4 on the lock-free ring.
Task<long> channel_ops() {
  long sum = 0;
  for (const std::size_t c : kCapacities) sum += co_await channel_round<long>(c);
  co_return sum;
}
// A type that is not nothrow-movable: the lock path at 0, 1 and 4.
Task<long> channel_ops_lock_path() {
  long sum = 0;
  for (const std::size_t c : kCapacities) sum += co_await channel_round<Boxed>(c);
  co_return sum;
}
constexpr long kChannelOps = channel_round_value(0) + channel_round_value(1) + channel_round_value(4);

// Closes a channel however the enclosing frame ends.
template <class T>
struct CloseOnExit {
  Channel<T>& ch;
  ~CloseOnExit() { ch.close(); }
};

// The thread bridge: a spawn_blocking job drains one channel with
// recv_blocking while the task sends, and another fills a second with
// send_blocking while the task receives. The body closes both however it
// ends, so a job never blocks on a channel nobody serves any more.
Task<long> channel_blocking() {
  Channel<long> to_job(1), from_job(1);
  std::atomic<long> sum{0};
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    CloseOnExit<long> close_to{to_job}, close_from{from_job};
    s.spawn([&]() -> Task<void> {
      sum.fetch_add(co_await shoal::spawn_blocking([&] {
        long got = 0;
        while (auto v = to_job.recv_blocking()) got += *v;
        return got;
      }));
    });
    s.spawn([&]() -> Task<void> {
      sum.fetch_add(co_await shoal::spawn_blocking([&] {
        long sent = 0;
        try {
          for (long i = 10; i <= 14; ++i) {
            from_job.send_blocking(i);
            ++sent;
          }
        } catch (const shoal::ChannelClosedError<long>&) {  // the task side ended first (out of memory)
        }
        from_job.close();
        return sent * 1000;
      }));
    });
    for (long i = 1; i <= 5; ++i) co_await to_job.send(i);
    to_job.close();
    while (auto v = co_await from_job.recv()) sum.fetch_add(*v * 100);
  });
  co_return sum.load();  // 15 + 5000 + 6000
}

// ---- I/O -------------------------------------------------------------------

/// Closes with a reset rather than a FIN: hundreds of runs must not fill the
/// ephemeral port range with TIME_WAIT connections.
void reset_on_close(Stream& s) {
  if (!s.is_open()) return;
  linger l{};
  l.l_onoff = 1;
  l.l_linger = 0;
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

std::span<const std::byte> bytes_of(std::string_view text) { return std::as_bytes(std::span(text.data(), text.size())); }
bool same(std::span<const std::byte> got, std::string_view want) {
  return got.size() == want.size() && std::equal(got.begin(), got.end(), bytes_of(want).begin());
}

// Streams over a Unix socketpair and a loopback TCP pair (127.0.0.1, port
// 0, no name resolution), each with one side waiting: every first
// operation registers an IoSource (an allocation) and the waits go through
// the reactor. The sockets live in the root task, outside the scope, so
// none is closed while a child might still wait on it.
Task<long> io_streams() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
    throw std::system_error(errno, std::generic_category(), "socketpair");
  }
  Stream a(sv[0]), b(sv[1]);
  Listener listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const Address addr = listener.local_address();
  Stream server, client;
  std::atomic<long> sum{0};
  std::exception_ptr error;
  try {
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {  // socketpair reader: waits before anything is written
        co_await b.wait_readable();
        std::array<std::byte, 8> head{};
        co_await b.read_exact(head);
        if (!same(head, "12345678")) throw std::logic_error("socketpair: wrong bytes");
        std::array<std::byte, 16> rest{};
        const std::size_t n = co_await b.read_some(rest);
        if (!same(std::span(rest).first(n), "abcd")) throw std::logic_error("socketpair: wrong tail");
        sum.fetch_add(static_cast<long>(head.size() + n));
      });
      s.spawn([&]() -> Task<void> {  // socketpair writer
        co_await shoal::sleep_for(100us);
        co_await a.write_all(std::string_view("12345678"));
        co_await shoal::checkpoint();
        co_await a.write_all(std::string_view("abcd"));
      });
      s.spawn([&]() -> Task<void> {  // TCP server: accept, wait, read, answer
        server = co_await listener.accept();
        co_await server.wait_readable();
        std::array<std::byte, 4> ping{};
        bool ended = false;
        try {
          co_await server.read_exact(ping);
        } catch (const shoal::net::EndOfStream&) {
          // connect() failed after the handshake (out of memory) and closed
          // its socket: its bad_alloc is the run's fault, and may be
          // recorded after this would be on the other worker.
          ended = true;
        }
        if (ended) co_return;  // the sum then misses 100: a wrong result, unless the run fails
        if (!same(ping, "ping")) throw std::logic_error("tcp: wrong ping");
        co_await server.write_all(std::string_view("pong!"));
        sum.fetch_add(100);
      });
      s.spawn([&]() -> Task<void> {  // TCP client
        client = co_await shoal::net::connect(addr, 10s);
        co_await client.write_all(std::string_view("ping"));
        std::array<std::byte, 5> pong{};
        co_await client.read_exact(pong);
        if (!same(pong, "pong!")) throw std::logic_error("tcp: wrong pong");
        sum.fetch_add(1000);
      });
      co_return;
    });
  } catch (...) {
    error = std::current_exception();
  }
  reset_on_close(server);
  reset_on_close(client);
  if (error) std::rethrow_exception(error);
  co_return sum.load();  // 12 + 100 + 1000
}

// Both protocols' handler: reads the request's body as it comes (on /all
// all of it, on /some one piece), then answers "<bytes read>" and "!" in
// two writes.
Task<void> count_then_answer(const shoal::http::Request& req, shoal::http::Response& res) {
  std::array<std::byte, 4> buf{};
  std::size_t total = 0;
  while (const std::size_t n = co_await req.read_some(buf)) {
    total += n;
    if (req.target() == "/some") break;
  }
  co_await res.write(std::to_string(total));
  co_await res.write("!");
}

// HTTP/1.1 over socketpairs, both bodies streamed: the handler reads the
// request's body as the client sends it, in two writes, and writes its
// answer in two chunks. On /all it reads the whole body; on /some one
// piece, so the connection closes after the answer and lingers (drains
// the rest) until the client closes.
Task<long> http_streams() {
  shoal::http::ServerOptions options;
  options.stream_request_body = true;
  shoal::http::Server server(options);
  const auto handler = &count_then_answer;
  long result = 0;
  for (const std::string_view target : {"/all", "/some"}) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
      throw std::system_error(errno, std::generic_category(), "socketpair");
    }
    Stream served(sv[0]), client(sv[1]);
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn(server.serve_connection(std::move(served), handler));
      const std::string head = "POST " + std::string(target) + " HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n"
                             "Connection: close\r\n\r\n";
      co_await client.write_all(head + "01234");
      co_await shoal::checkpoint();
      co_await client.write_all(std::string_view("56789"));
      std::string got;
      std::array<std::byte, 256> buf{};
      while (const std::size_t n = co_await client.read_some(buf)) {
        got.append(reinterpret_cast<const char*>(buf.data()), n);
      }
      client.close();  // what ends the server's lingering close
      // A failed allocation in the server answers 500 or cuts the chunked
      // body, and the server's task then ends in it: the run's error.
      const std::string_view want = target == "/all" ? "\r\n\r\n2\r\n10\r\n1\r\n!\r\n0\r\n\r\n"
                                                     : "\r\n\r\n1\r\n4\r\n1\r\n!\r\n0\r\n\r\n";
      if (got.ends_with(want)) result += target == "/all" ? 10'000 : 20'000;
    });
  }
  co_return result;
}

#ifdef SHOAL_TEST_HTTP2
// HTTP/2 over a socketpair, both bodies streamed: stream 1 (/all) reads its
// body as the client's two DATA frames arrive, stream 3 (/some) reads one
// piece and ends, and the connection drops the rest of its body. Each
// answers in two writes. The client is raw frames, so that its only
// allocations are its own reads (covered by io_streams).
Task<long> http2_streams() {
  namespace h2 = shoal::test::h2;
  shoal::http::ServerOptions options;
  options.stream_request_body = true;
  shoal::http::Server server(options);
  const auto handler = &count_then_answer;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
    throw std::system_error(errno, std::generic_category(), "socketpair");
  }
  Stream served(sv[0]);
  h2::Client client{Stream(sv[1]), {}};
  long result = 0;
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(shoal::http2::serve_connection(server, std::move(served), handler));
    co_await client.send(std::string(shoal::http2::kClientPreface) + h2::frame(h2::kSettings, 0, 0, "") +
                         h2::post(1, "/all") + h2::data(1, "01234", false) + h2::post(3, "/some") +
                         h2::data(3, "01234", false));
    co_await shoal::checkpoint();
    co_await client.send(h2::data(1, "56789", true) + h2::data(3, "56789", true));
    // Each stream's body, until both ended (END_STREAM or a reset) or the
    // connection did.
    std::string body[2];
    bool ended[2] = {false, false};
    while (!ended[0] || !ended[1]) {
      const std::optional<h2::Frame> f = co_await client.next();
      if (!f) break;
      if (f->stream != 1 && f->stream != 3) continue;
      const int i = f->stream == 1 ? 0 : 1;
      if (f->type == h2::kData) body[i] += f->payload;
      if (f->type == h2::kRstStream || ((f->type == h2::kData || f->type == h2::kHeaders) &&
                                        (f->flags & h2::kEndStream) != 0)) {
        ended[i] = true;
      }
    }
    client.conn.close();  // the server's task ends, in the first handler fault if there was one
    // A failed allocation in the server answers 500 or resets the stream.
    if (body[0] == "10!") result += 10'000;
    if (body[1] == "4!") result += 20'000;
  });
  co_return result;
}
#endif

// ---- Task sets on a full set -----------------------------------------------

SpawnTally g_full_spawns;

// A set of limit 2 whose children wait for a token: spawn and spawn_local
// fill it, try_spawn is then refused without allocating (full: neither
// started nor out-of-memory), and a spawn waits for admission until one
// token frees a slot. A child frame that cannot be allocated makes that
// spawn report out-of-memory and the set end in bad_alloc.
Task<long> task_set_full() {
  std::atomic<long> sum{0};
  Channel<int> tokens(4);  // one per started child, sent by the body
  co_await shoal::task_set(2, [&](TaskSet& set) -> Task<void> {
    auto child = [&sum, &tokens](long v) -> Task<void> {
      (void)co_await tokens.recv();
      sum.fetch_add(v);
    };
    long started = 0;
    const SpawnStatus first = co_await set.spawn(child, 1L);
    g_full_spawns.count(first);
    started += first == SpawnStatus::started ? 1 : 0;
    const SpawnStatus second = co_await set.spawn_local(child, 2L);
    g_full_spawns.count(second);
    started += second == SpawnStatus::started ? 1 : 0;
    const bool third = set.try_spawn(child, 4L);
    if (started == 2) {
      if (third) throw std::logic_error("try_spawn admitted a child into a full set");
    } else {  // not full: only out-of-memory refuses it
      g_full_spawns.count(third ? SpawnStatus::started : SpawnStatus::out_of_memory);
      started += third ? 1 : 0;
    }
    (void)tokens.try_send(0);  // frees a slot (once a child takes it)
    const SpawnStatus fourth = co_await set.spawn(child, 8L);  // full: waits for that slot
    g_full_spawns.count(fourth);
    started += fourth == SpawnStatus::started ? 1 : 0;
    for (long i = 1; i < started; ++i) {
      if (tokens.try_send(0) != shoal::SendStatus::sent) throw std::logic_error("token channel full");
    }
  });
  co_return sum.load();  // 1 + 2 + 8
}

struct Scenario {
  const char* name;
  Task<long> (*make)();
  long expected;
  SpawnTally* spawns;  // the scenario's task-set spawns, if it has any
  // A known defect blocks the sweep (see the kKnownDefect... constants): it
  // then runs clean only (result and frames checked), everywhere or on
  // several workers only.
  bool known_defect = false;
  bool known_defect_on_workers = false;
};

const Scenario kScenarios[] = {
    {"spawn_chain", &spawn_chain, 22, nullptr},
    {"fan_out", &fan_out, 178, nullptr},
    {"channels", &channels, 110, nullptr},
    {"timers", &timers, 120, nullptr},
    {"task_set", &task_set_accept, 155, &g_spawns},
    {"sync_mutex", &sync_mutex, 1'431, nullptr},
    {"sync_try_timed", &sync_try_timed, 1'111'113, nullptr, kKnownDefectTryTimedLockLeakPermitsOnOom},
    {"sync_rw_sem", &sync_rwlock_semaphore, 1'791'363, nullptr},
    {"sync_once", &sync_once, 1'168, nullptr, false, kKnownDefectOnceOomBecomesInitFailed},
    {"sync_cell", &sync_cell, 44'104'000, nullptr},
    {"chan_ops", &channel_ops, kChannelOps, nullptr},
    {"chan_lock_path", &channel_ops_lock_path, kChannelOps, nullptr},
    {"chan_blocking", &channel_blocking, 11'015, nullptr},
    {"io_streams", &io_streams, 1'112, nullptr},
    {"http_streams", &http_streams, 30'000, nullptr},
#ifdef SHOAL_TEST_HTTP2
    {"http2_streams", &http2_streams, 30'000, nullptr},
#endif
    {"task_set_full", &task_set_full, 11, &g_full_spawns},
};

enum class Outcome { success, out_of_memory };

// Runs `sc` once with the N-th allocation failing; returns how it ended.
// `reached` tells whether the failure point was reached at all.
Outcome run_failing_at(const Scenario& sc, long n, bool forever, const shoal::RuntimeOptions& opts, bool& reached,
                       std::string& error) {
  if (sc.spawns != nullptr) sc.spawns->reset();
  shoal::test::FrameCounter frames;
  frames.fail_at(n, forever);
  Outcome out = Outcome::success;
  try {
    const long v = shoal::run(sc.make(), opts);
    if (v != sc.expected) error = "wrong result " + std::to_string(v);
  } catch (const std::bad_alloc&) {
    out = Outcome::out_of_memory;
  } catch (const std::exception& e) {
    error = std::string("unexpected error: ") + e.what();
  } catch (...) {
    error = "unexpected non-std error";
  }
  reached = frames.failures() > 0;
  if (out == Outcome::out_of_memory && !reached) error = "bad_alloc without an injected failure";
  if (sc.spawns != nullptr) {
    // A spawn that reported out-of-memory makes the whole set out-of-memory.
    if (sc.spawns->out_of_memory.load() > 0 && out != Outcome::out_of_memory && error.empty()) {
      error = std::to_string(sc.spawns->out_of_memory.load()) + " spawns reported out-of-memory, yet the run succeeded";
    }
    if (sc.spawns->closed.load() > 0) {
      error += std::string(error.empty() ? "" : "; ") + "a spawn into a set nobody closed reported closed";
    }
  }
  if (frames.live() != 0) error += " (" + std::to_string(frames.live()) + " frames leaked)";
  return out;
}

void sweep(shoal::RuntimeOptions opts, const char* mode, bool workers) {
  opts.on_suppressed_fault = [](std::exception_ptr) {};  // later bad_allocs in a failing scope are expected
  for (const Scenario& sc : kScenarios) {
    if (sc.known_defect || (workers && sc.known_defect_on_workers)) {
      // Not swept (a known defect would fail it); its clean run must still
      // give the right result and free every frame.
      bool reached = false;
      std::string error;
      run_failing_at(sc, std::numeric_limits<long>::max() / 2, false, opts, reached, error);
      ASSERT_TRUE(error.empty()) << sc.name << " (" << mode << ") clean run: " << error;
      std::printf("[alloc] %-14s %-9s NOT SWEPT: known defect (clean run only)\n", sc.name, mode);
      continue;
    }
    for (bool forever : {false, true}) {
      long n = 1, ooms = 0, survived = 0, oom_spawn_runs = 0;
      for (;; ++n) {
        bool reached = false;
        std::string error;
        const Outcome o = run_failing_at(sc, n, forever, opts, reached, error);
        ASSERT_TRUE(error.empty()) << sc.name << " (" << mode << (forever ? ", fail-forever" : ", fail-once")
                                   << ") failing allocation " << n << ": " << error;
        if (!reached) break;  // past the last allocation: a clean run
        (o == Outcome::out_of_memory ? ooms : survived) += 1;
        if (sc.spawns != nullptr && sc.spawns->out_of_memory.load() > 0) ++oom_spawn_runs;
        ASSERT_LT(n, 5000) << sc.name << ": allocation count does not converge";
      }
      std::printf("[alloc] %-14s %-9s %-12s %3ld failure points: %ld out-of-memory, %ld absorbed\n", sc.name, mode,
                  forever ? "fail-forever" : "fail-once", n - 1, ooms, survived);
      if (sc.spawns != nullptr) {
        // Not vacuous: some failures hit a child frame, so a spawn itself
        // reported out-of-memory (rather than the set's own frame failing).
        std::printf("[alloc] %-14s %-9s %-12s %3ld runs had a spawn report out-of-memory\n", sc.name, mode,
                    forever ? "fail-forever" : "fail-once", oom_spawn_runs);
        EXPECT_GT(oom_spawn_runs, 0) << sc.name << ": no failure reached a child frame";
      }
      // Several points even where clang elides frames it can prove local.
      EXPECT_GE(n - 1, 3) << sc.name << ": the scenario should allocate several frames";
      // Every injected failure surfaced: none was swallowed or retried away.
      EXPECT_EQ(survived, 0) << sc.name;
    }
  }
}

TEST(AllocationFailure, EveryFramePointOnTheSimulatedExecutor) {
  shoal::test::Watchdog dog(std::chrono::seconds(240), "AllocationFailure");
  sweep(shoal::RuntimeOptions::simulated(shoal::test::test_seed("AllocationFailure")), "simulated", false);
}

TEST(AllocationFailure, EveryFramePointOnTwoWorkers) {
  shoal::test::Watchdog dog(std::chrono::seconds(240), "AllocationFailure");
  sweep(shoal::RuntimeOptions::with_workers(2), "2 workers", true);
}

}  // namespace
