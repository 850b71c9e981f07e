// The manual event now ships with shoal::testing.
#pragma once

#include "shoal/testing/manual_event.hpp"

namespace shoal::test {
using ::shoal::testing::ManualEvent;
}  // namespace shoal::test
