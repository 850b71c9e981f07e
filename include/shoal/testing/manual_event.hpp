// A one-shot event a test sets by hand and tasks wait on.
#pragma once

#include "shoal/sync/event.hpp"

namespace shoal::testing {

/// `co_await ev.wait()` until `ev.set()` (any thread). Checkpoint: yes.
/// Cancellation: the waiter leaves the event (nothing else happens).
/// Thread-safety: wait from tasks; set from anywhere. Throws: Cancelled.
using ManualEvent = ::shoal::Event;

}  // namespace shoal::testing
