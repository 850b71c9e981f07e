// The I/O source's readiness vs a waiter under Relacy's memory model: the
// real readiness loop (IoOp, io_op.cpp), the real wait (io_wait_suspend)
// and the real dispatch (io_dispatch, reactor.cpp) on one IoSource, with
// the reactor setting readiness while a task tries its "syscall", clears
// the bit after EAGAIN and waits, and (in some tests) a cancel of its scope
// or its idle limit's timer ends the wait. The backend (epoll/poll) is not
// run: the peer thread hands io_dispatch the event the backend would have
// harvested, and the socket is an atomic counter of bytes, seq_cst as the
// kernel's socket lock orders it.
// Invariants: no lost readiness (the task ends, whether its wait began
// before or after the event); the data is read at most once, and by a task
// that ends `done`; each suspension is woken exactly once; the operation
// lives in memory the task frees when it is over, so a late touch by the
// reactor, the canceller or the timer is reported; nobody is left queued.
#include <gtest/gtest.h>

#include <chrono>
#include <coroutine>
#include <new>

#include "driver_relacy_support.hpp"
#include "shoal/detail/io_op.hpp"
#include "shoal/detail/stand_in.hpp"
#include "src/runtime/driver/io/backend.hpp"
#include "src/runtime/driver/io/io_source.hpp"
#include "src/runtime/injector.hpp"

namespace {

using shoal::detail::IoOp;
using shoal::detail::IoSource;
using shoal::detail::StandIn;
using shoal::relacy::DriverWorld;
namespace io = shoal::detail::io;

struct IoWorld;
IoWorld* g_world = nullptr;  // the attempt's way to the socket (a plain function pointer)

struct IoWorld : DriverWorld {
  IoSource src;
  shoal::detail::shim::atomic<int> bytes{0};  // the socket's receive buffer
  rl::var<int> taken;                          // reads that got the byte

  void build_io(std::uint32_t ready) {
    build();
    g_world = this;
    src.core = sched.driver().io_core();
    src.state.store(ready, std::memory_order_relaxed);  // as io_register leaves it
    taken($) = 0;
  }
  void check_io() {
    RL_ASSERT(src.waiters.empty());
    RL_ASSERT(timers->size() == 0);
    drop();
  }

  // A non-blocking read: the byte if there is one, else EAGAIN.
  static bool attempt(IoOp&) noexcept {
    if (g_world->bytes.exchange(0, std::memory_order_seq_cst) == 0) return false;
    g_world->taken($) = g_world->taken($) + 1;
    return true;
  }

  // The peer sends a byte; the backend reports the edge and the driver's
  // holder dispatches it.
  void send(std::uint32_t ready = io::readable) {
    bytes.store(1, std::memory_order_seq_cst);
    event(ready);
  }
  // The backend reports an edge and the driver's holder dispatches it.
  // Alone (no byte sent) it is a stale edge: the kernel queued it for data
  // a read took before the driver harvested it, so the readiness says
  // readable and the read says EAGAIN.
  void event(std::uint32_t ready) {
    const io::Event ev{&src, ready};
    shoal::detail::TaskBatch batch;
    shoal::detail::io_dispatch(&ev, 1, batch);
    shoal::detail::schedule_batch(nullptr, batch);
  }

  // The task's read: IoOp awaited, in memory freed once it is over, its
  // coroutine a stand-in that notes the resume. A wake makes the task run
  // what its record says (the op's stand-in) as a worker would.
  IoOp::End read(std::chrono::milliseconds limit) {
    shoal::relacy::set_current_record(&f);
    struct Cont {
      StandIn in{&Cont::resume, this};
      bool resumed = false;
      static void resume(void* frame) noexcept { StandIn::owner_of<Cont>(frame).resumed = true; }
    } cont;
    void* mem = rl::rl_malloc(sizeof(IoOp), RL_INFO);
    auto* op = new (mem) IoOp(&src, io::readable, &IoWorld::attempt, limit);
    int suspensions = 0;
    if (op->await_suspend(cont.in.handle())) {
      while (!cont.resumed) {
        ++suspensions;
        while (f.wakes.load(std::memory_order_acquire) < suspensions) rl::yield(1, RL_INFO);
        f.resume.resume();  // IoOp::on_wake: retries, waits again, or resumes `cont`
      }
    }
    RL_ASSERT(f.wakes.load(std::memory_order_relaxed) == suspensions);  // one wake per wait
    const IoOp::End end = op->end();
    RL_ASSERT(taken($) == (end == IoOp::End::done ? 1 : 0));
    op->~IoOp();
    rl::rl_free(mem, RL_INFO);
    leave();
    return end;
  }
};

// The source starts out assumed ready (as io_register leaves it), so the
// task tries first, finds EAGAIN, clears the bit and waits; the event may
// come at any point of that, and between the task's read of the state and
// its clear (the tick makes the clear fail then).
struct ReadyVsWaiter : rl::test_suite<ReadyVsWaiter, 2>, IoWorld {
  void before() { build_io(io::readable | io::writable); }
  void after() { check_io(); }
  void thread(unsigned id) {
    if (id == 0) {
      send();
    } else {
      RL_ASSERT(read(std::chrono::milliseconds(0)) == IoOp::End::done);
    }
  }
};

// The same from a source whose readiness is already cleared, with an event
// that reports readability and writability at once (as a hang-up sets every
// bit): the read waiter is served; nothing else is queued.
struct ClearedSourceVsWaiter : rl::test_suite<ClearedSourceVsWaiter, 2>, IoWorld {
  void before() { build_io(io::writable); }
  void after() {
    RL_ASSERT((src.state.load(std::memory_order_relaxed) & io::writable) != 0);
    check_io();
  }
  void thread(unsigned id) {
    if (id == 0) {
      send(io::readable | io::writable);
    } else {
      RL_ASSERT(read(std::chrono::milliseconds(0)) == IoOp::End::done);
    }
  }
};

// A cancel of the task's scope races the event: the read ends done or
// cancelled, woken once either way, and reads the byte only if done.
struct ReadyVsWaiterVsCancel : rl::test_suite<ReadyVsWaiterVsCancel, 3>, IoWorld {
  void before() { build_io(io::readable | io::writable); }
  void after() { check_io(); }
  void thread(unsigned id) {
    if (id == 0) {
      send();
    } else if (id == 1) {
      const IoOp::End end = read(std::chrono::milliseconds(0));
      RL_ASSERT(end == IoOp::End::done || end == IoOp::End::cancelled);
    } else {
      node.cancel(true);
    }
  }
};

// The read's idle limit (its timer entry, allocated while it waits and
// freed after timer_cancel_and_wait) fires as the event comes: the read
// ends done or idle_expired; the timer never touches the entry or the
// waiter once the task freed them.
struct ReadyVsIdleLimit : rl::test_suite<ReadyVsIdleLimit, 3>, IoWorld {
  void before() { build_io(io::readable | io::writable); }
  void after() { check_io(); }
  void thread(unsigned id) {
    if (id == 0) {
      send();
    } else if (id == 1) {
      const IoOp::End end = read(std::chrono::milliseconds(1));
      RL_ASSERT(end == IoOp::End::done || end == IoOp::End::idle_expired);
    } else {
      shoal::relacy::fire_timers(*timers, over);
    }
  }
};

// A stale edge lands as the read with an idle limit waits: a wait it
// ends before the read suspends leaves the timer queued, and the read,
// EAGAIN again, waits once more. It ends idle_expired (no byte ever
// comes); the timer is out of the wheel before it is queued again, and
// `expired` is read only once the timer can no longer write it. The
// driver turns until the task is over: a later wait queues the timer
// again after a turn found it gone.
struct StaleEventVsIdleLimit : rl::test_suite<StaleEventVsIdleLimit, 3>, IoWorld {
  void before() { build_io(io::readable | io::writable); }
  void after() { check_io(); }
  void thread(unsigned id) {
    if (id == 0) {
      event(io::readable);
    } else if (id == 1) {
      RL_ASSERT(read(std::chrono::milliseconds(1)) == IoOp::End::idle_expired);
    } else {
      for (;;) {
        shoal::relacy::fire_timers(*timers, over);
        if (over.load(std::memory_order_acquire)) return;
      }
    }
  }
};

TEST(RelacyIoSource, AnEventRacesAReaderThatFoundEagain) {
  EXPECT_TRUE(shoal::relacy::check<ReadyVsWaiter>(shoal::relacy::search_or("bound")));
}
TEST(RelacyIoSource, AnEventOnAClearedSourceRacesAReader) {
  EXPECT_TRUE(shoal::relacy::check<ClearedSourceVsWaiter>(shoal::relacy::search_or("bound")));
}
TEST(RelacyIoSource, AnEventRacesAReaderAndACancel) {
  EXPECT_TRUE(shoal::relacy::check<ReadyVsWaiterVsCancel>(shoal::relacy::search_or("random")));
}
TEST(RelacyIoSource, AnEventRacesAReadersIdleLimit) {
  EXPECT_TRUE(shoal::relacy::check<ReadyVsIdleLimit>(shoal::relacy::search_or("random")));
}
TEST(RelacyIoSource, AStaleEventEndsAWaitOfAReaderWhoseIdleLimitThenExpires) {
  EXPECT_TRUE(shoal::relacy::check<StaleEventVsIdleLimit>(shoal::relacy::search_or("random")));
}

}  // namespace
