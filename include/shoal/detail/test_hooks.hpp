// Hooks the deterministic executor offers tests (not part of the API).
#pragma once

namespace shoal::detail {

/// Called by the deterministic executor after every task step (a resume
/// that returned: the task suspended, yielded or finished), on the worker
/// thread with no task running. Lets a test act exactly at the k-th
/// suspension, e.g. cancel a scope there. `ctx` is passed back.
struct StepHook {
  void (*after_step)(void* ctx) noexcept = nullptr;
  void* ctx = nullptr;
};

/// Installs `hook` (null removes it) for every deterministic runtime.
void set_step_hook(const StepHook* hook) noexcept;

}  // namespace shoal::detail
