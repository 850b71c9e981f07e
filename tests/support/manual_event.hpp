// Tests wait on shoal's internal one-shot event.
#pragma once

#include "shoal/detail/event.hpp"

namespace shoal::test {
using ManualEvent = ::shoal::detail::Event;
}  // namespace shoal::test
