// Reactor registrations, for leak checks.
#pragma once

#include "shoal/version.hpp"

#include <cstddef>

namespace shoal::testing {

/// Sources registered with the calling task's runtime (0 outside a task):
/// a socket or pipe that leaked its registration shows up here.
std::size_t io_registrations() noexcept;

}  // namespace shoal::testing
