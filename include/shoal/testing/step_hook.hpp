// The deterministic executor's step hook: a test acts exactly at the k-th
// suspension of a seeded run (cancel a scope there, fail a child there).
#pragma once

#include "shoal/version.hpp"

namespace shoal::testing {

/// Called by the deterministic executor after every task step (a resume
/// that returned: the task suspended, yielded or finished), on the worker
/// thread with no task running. `ctx` is passed back.
struct StepHook {
  /// Called after each step with `ctx`; null: nothing is called.
  void (*after_step)(void* ctx) noexcept = nullptr;
  /// Passed back to `after_step`.
  void* ctx = nullptr;
};

/// Installs `hook` (null removes it) for every deterministic runtime.
void set_step_hook(const StepHook* hook) noexcept;

}  // namespace shoal::testing
