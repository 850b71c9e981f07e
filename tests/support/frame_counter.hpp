// The frame counter now ships with shoal::testing.
#pragma once

#include "shoal/testing/frame_counter.hpp"

namespace shoal::test {
using ::shoal::testing::FrameCounter;
}  // namespace shoal::test
