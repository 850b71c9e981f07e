// What the runtime's task dumps and its worker's wait clock ask of a task's
// wait. Defined by the cancellation protocol (src/scope/cancel_protocol.cpp),
// whose calls for public templates are in shoal/detail/task_record.hpp.
#pragma once

#include <cstdint>

#include "shoal/detail/task_record.hpp"

namespace shoal::detail {

/// track_waits(true/false): a runtime starts or stops keeping wait start
/// times (TaskRecord::wait_since), in wait_clock_ms().
void track_waits(bool on) noexcept;
std::uint32_t wait_clock_ms() noexcept;
/// Claims `f`'s hook as a canceller does, so the task cannot leave its wait
/// (and destroy the hook) until end_inspect: false if it is not waiting.
/// Spin-waits out a canceller that holds it. Hold no wait primitive's lock.
bool inspect_hook(TaskRecord* f, WaitHook*& h) noexcept;
void end_inspect(TaskRecord* f, WaitHook* h) noexcept;

}  // namespace shoal::detail
