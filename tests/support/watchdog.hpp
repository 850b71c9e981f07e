// The watchdog now ships with shoal::testing.
#pragma once

#include "shoal/testing/watchdog.hpp"

namespace shoal::test {
using ::shoal::testing::Watchdog;
}  // namespace shoal::test
