// Reactor registrations, for leak checks.
#pragma once

#include "shoal/version.hpp"

#include <cstddef>

namespace shoal::testing {

/// Sources registered with the calling task's runtime (0 outside a task):
/// a socket or pipe that leaked its registration shows up here.
std::size_t io_registrations() noexcept;

/// Operations the kernel runs for the calling task's runtime (io_uring:
/// file reads and writes) submitted and not yet completed (0 outside a
/// task, and on a backend that runs none).
std::size_t operations_in_flight() noexcept;

}  // namespace shoal::testing
