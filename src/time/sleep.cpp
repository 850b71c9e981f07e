// Out-of-line parts of sleeping.
#include <cstddef>
#include <new>
#include <stdexcept>

#include "shoal/time/sleep.hpp"

namespace shoal::detail {

void SleepAwaiter::throw_outside_task() {
  throw std::logic_error("shoal::sleep_for/sleep_until: awaited outside a shoal task");
}

// No `done` store: a sleep's entry is only ever removed (cancel_wait), never
// waited out; the wake goes through disarm_wait and schedule, which order
// the rest (tests/relacy/timer_relacy_test.cpp).
void SleepAwaiter::on_fire(TimerEntry* e) noexcept {
  SleepAwaiter* self = &OwnedTimer<SleepAwaiter>::owner_of(e);
  TaskRecord* f = self->f_;
  disarm_wait(f, self);
  schedule(f);  // self may be gone from here on
}

}  // namespace shoal::detail
