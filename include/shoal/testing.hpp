// shoal::testing: what shoal's own tests use, for yours (link shoal::testing).
// The simulated runtime itself is RuntimeOptions::simulated(seed) (runtime/run.hpp).
#pragma once

#include "shoal/testing/frame_counter.hpp"
#include "shoal/testing/frame_hooks.hpp"
#include "shoal/testing/manual_event.hpp"
#include "shoal/testing/registrations.hpp"
#include "shoal/testing/step_hook.hpp"
#include "shoal/testing/watchdog.hpp"
