// Compile-fail checks for TaskSet::spawn / try_spawn / spawn_local arguments.
// Never built as a target: tests/compile_fail/CMakeLists.txt runs the compiler
// with -fsyntax-only and one -DCASE_* macro, and matches the static_assert.
#include <array>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "shoal/scope/task_set.hpp"

namespace {

using shoal::Task;

[[maybe_unused]] Task<void> by_string(std::string) { co_return; }
[[maybe_unused]] Task<void> by_view(std::string_view) { co_return; }
[[maybe_unused]] Task<void> by_span(std::span<const int>) { co_return; }
[[maybe_unused]] Task<void> by_int_pointer(const int*) { co_return; }
[[maybe_unused]] Task<void> by_int_ref(int&) { co_return; }
[[maybe_unused]] Task<void> by_values(std::string, int, std::shared_ptr<int>) { co_return; }
[[maybe_unused]] Task<void> no_args() { co_return; }

[[maybe_unused]] Task<void> body(shoal::TaskSet& set) {
  [[maybe_unused]] std::string text = "x";
  [[maybe_unused]] std::array<int, 3> numbers{1, 2, 3};
  [[maybe_unused]] int value = 7;
#if defined(CASE_STRING_VIEW)
  (void)co_await set.spawn(by_view, std::string_view{text});
#elif defined(CASE_SPAN)
  (void)co_await set.spawn(by_span, std::span<const int>{numbers});
#elif defined(CASE_RAW_POINTER)
  (void)co_await set.spawn(by_int_pointer, &value);
#elif defined(CASE_STRING_LITERAL)
  (void)co_await set.spawn(by_string, "literal");
#elif defined(CASE_REFERENCE_WRAPPER)
  (void)co_await set.spawn(by_int_ref, std::ref(value));
#elif defined(CASE_TASK_NOT_FACTORY)
  (void)co_await set.spawn(no_args());
#elif defined(CASE_TRY_SPAWN_STRING_VIEW)
  (void)set.try_spawn(by_view, std::string_view{text});
#elif defined(CASE_SPAWN_LOCAL_RAW_POINTER)
  (void)co_await set.spawn_local(by_int_pointer, &value);
#elif defined(CASE_CONTROL)
  // Owned arguments compile with all three entry points.
  auto shared = std::make_shared<int>(1);
  (void)co_await set.spawn(by_values, text, value, shared);
  (void)co_await set.spawn_local(by_values, std::string("y"), 2, shared);
  (void)set.try_spawn(by_values, text, 3, std::move(shared));
  (void)co_await set.spawn(no_args);
  (void)co_await set.spawn([text] { return by_string(text); });
#else
#error "define one CASE_* macro"
#endif
  co_return;
}

}  // namespace
