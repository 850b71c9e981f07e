// The checkpoint contract, checked: every call of shoal's that can wait is
// a checkpoint, and a call of yours built on them should be one too (as
// trio.testing's assert_checkpoints checks).
//
//   shoal::Channel<int> ch(4);
//   shoal::testing::assert_checkpoints("send", [&] { return ch.send(1); },
//                                      [&] { return ch.try_recv() == std::nullopt; });  // nothing was sent
//   shoal::testing::assert_yields_per_budget("send then recv", [&]() -> shoal::Task<void> {
//     co_await ch.send(1);
//     (void)co_await ch.recv();
//   });
#pragma once

#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "shoal/runtime/errors.hpp"
#include "shoal/runtime/run.hpp"
#include "shoal/runtime/task.hpp"
#include "shoal/scope/cancel.hpp"
#include "shoal/scope/scope.hpp"

namespace shoal::detail {
/// assert_checkpoints' call: op(scope) or op().
template <class F>
Task<void> await_checkpoint_op(F& op, Scope& s) {
  if constexpr (std::is_invocable_v<F&, Scope&>) {
    co_await op(s);
  } else {
    co_await op();
  }
}
}  // namespace shoal::detail

namespace shoal::testing {

/// A call broke the checkpoint contract; what() names the call and how.
class CheckpointViolation : public std::logic_error {
 public:
  /// An error whose what() is `what`.
  explicit CheckpointViolation(const std::string& what) : std::logic_error(what) {}
};

/// Checks that `op` is a cancel point: awaited in a cancelled scope (on a
/// runtime of its own), what `op()` returns throws Cancelled, and then
/// `unchanged()` (if given) is still true: nothing was taken, sent, started
/// or run. `op` is called as op() or op(scope) (to start children in it) and
/// returns something to co_await (a Task, a call's awaitable).
/// Call it from a test's thread, not from inside a runtime.
/// Throws: CheckpointViolation naming `what` (it completed, it threw
///   something else, or `unchanged()` said no); what `op()` itself throws
///   when called (before its awaitable is awaited).
template <class F>
void assert_checkpoints(std::string_view what, F op, std::function<bool()> unchanged = {}) {
  std::string problem;
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
    s.cancel();
    try {
      co_await ::shoal::detail::await_checkpoint_op(op, s);
      problem = "completed in a cancelled scope: not a checkpoint";
    } catch (const Cancelled&) {
    } catch (const std::exception& e) {
      problem = std::string("threw \"").append(e.what()).append("\" in a cancelled scope instead of Cancelled");
    } catch (...) {
      problem = "threw a non-std exception in a cancelled scope instead of Cancelled";
    }
  }));
  if (problem.empty() && unchanged && !unchanged()) problem = "had a side effect when cancelled";
  if (!problem.empty()) throw CheckpointViolation(std::string(what).append(": ").append(problem));
}

/// Checks that `op` yields to other tasks even when it never has to wait:
/// awaited `calls` times in a row on one worker beside a task that counts
/// its turns, it must let that task run at least once per cooperative
/// budget (128 operations) less one. `op()` returns something to co_await
/// and must not wait (a channel with room, a free lock).
/// Call it from a test's thread, not from inside a runtime.
/// Throws: CheckpointViolation naming `what` and the turns counted; what
///   `op` throws.
template <class F>
void assert_yields_per_budget(std::string_view what, F op, int calls = 1000) {
  long sibling_turns = 0, during = -1;
  bool done = false;
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               s.spawn([&]() -> Task<void> {
                 while (!done) {
                   ++sibling_turns;
                   co_await shoal::checkpoint();
                 }
               });
               co_await shoal::checkpoint();  // the sibling is running
               const long before = sibling_turns;
               for (int i = 0; i < calls; ++i) co_await op();
               during = sibling_turns - before;
               done = true;
             }),
             RuntimeOptions::with_workers(1));
  if (during < calls / 128 - 1) {
    throw CheckpointViolation(std::string(what).append(": starved its sibling (")
                                  .append(std::to_string(during)).append(" turns in ")
                                  .append(std::to_string(calls)).append(" calls)"));
  }
}

}  // namespace shoal::testing
