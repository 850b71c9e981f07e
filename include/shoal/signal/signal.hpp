// Signals as awaitables: the usual trigger for a graceful shutdown.
#pragma once

#include <initializer_list>

#include "shoal/runtime/task.hpp"

namespace shoal::signal {

/// Waits until one of `signals` arrives and returns its number.
/// The first wait for a signal installs shoal's handler for it, process-wide
/// and for good (its default action, e.g. terminating on SIGINT, no longer
/// happens). From then on no delivery is lost: one that arrives while no
/// task waits is kept and returned by the next wait that asks for it.
/// Checkpoint: yes. Throws std::invalid_argument for an empty set, a number
/// out of range, or SIGKILL/SIGSTOP (which cannot be caught), naming it.
Task<int> wait(std::initializer_list<int> signals);

}  // namespace shoal::signal
