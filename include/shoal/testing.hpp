// shoal::testing: what shoal's own tests use, for yours (link shoal::testing).
// The simulated runtime itself is RuntimeOptions::simulated(seed) (runtime/run.hpp).
// Coroutine tests for GoogleTest (SHOAL_TEST) are in shoal/testing/gtest.hpp,
// not included here: only a GoogleTest program can include it.
#pragma once

#include "shoal/testing/checkpoints.hpp"
#include "shoal/testing/frame_counter.hpp"
#include "shoal/testing/frame_hooks.hpp"
#include "shoal/testing/manual_event.hpp"
#include "shoal/testing/registrations.hpp"
#include "shoal/testing/step_hook.hpp"
#include "shoal/testing/stream_pair.hpp"
#include "shoal/testing/watchdog.hpp"
