// The Relacy binary's stand-in for the scheduler (SHOAL_RELACY): the real
// src/runtime/scheduler.hpp needs futexes, threads and the epoll/timerfd
// backend, none of which run under Relacy. Found first on the include path
// (-I tests/relacy), so the driver's protocol files (timer_queue.cpp,
// reactor.cpp, io_op.cpp) compile unchanged against it: a Scheduler is only
// its driver, and the driver only its timer queue and reactor core. What
// the real Driver adds (the backend, its sleep/wake handshake with
// add_timer, the release stack) is not modelled here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "shoal/detail/task_record.hpp"
#include "src/runtime/driver/io/io_source.hpp"
#include "src/runtime/driver/time/timer_queue.hpp"

namespace shoal::detail {

class Driver {
 public:
  TimerQueue* timers = nullptr;  // built by the test, inside its Relacy suite
  IoCore core;
  // As the real Driver's, without waking a driver asleep past the deadline.
  TimerInsert add_timer(TimerEntry* e, const TaskRecord* unless) noexcept { return timers->insert(e, unless); }
  bool remove_timer(TimerEntry* e) noexcept { return timers->remove(e); }
  IoCore* io_core() noexcept { return &core; }
  // Registration and the backend: no Relacy test reaches them.
  void io_add(IoSource*) { std::abort(); }
  void io_release(IoSource*) noexcept { std::abort(); }
  void io_rearm(int, std::uint32_t, const IoSource*) noexcept {}
  bool watches_processes() const noexcept { return false; }
  std::size_t ops_in_flight() const noexcept { return 0; }
};

class Scheduler {
 public:
  Driver& driver() noexcept { return driver_; }
  std::size_t timer_shard() const noexcept { return 0; }  // one wheel

 private:
  Driver driver_;
};

}  // namespace shoal::detail
