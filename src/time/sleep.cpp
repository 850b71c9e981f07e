// Out-of-line parts of sleeping.
#include <cstddef>
#include <new>
#include <stdexcept>

#include "shoal/time/sleep.hpp"

namespace shoal::detail {

void SleepAwaiter::await_resume() const {
  if (f_ == nullptr) throw std::logic_error("shoal::sleep_for/sleep_until: awaited outside a shoal task");
  if (cancelled_ || f_->cancelled()) throw Cancelled{};
}

void SleepAwaiter::on_fire(TimerEntry* e) noexcept {
  SleepAwaiter* self = static_cast<Entry*>(e)->owner;
  TaskRecord* f = self->f_;
  disarm_wait(f, self);
  schedule(f);  // self may be gone from here on
}

}  // namespace shoal::detail
