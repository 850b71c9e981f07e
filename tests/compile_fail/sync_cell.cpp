// Compile-fail checks for Cell<T>: T that only points at data elsewhere is
// refused (tests/compile_fail/CMakeLists.txt runs one CASE_* at a time).
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "shoal/sync/cell.hpp"

int main() {
  static int target = 0;
#if defined(CASE_CELL_POINTER)
  shoal::Cell<int*> cell(&target);
#elif defined(CASE_CELL_STRING_VIEW)
  shoal::Cell<std::string_view> cell("text");
#elif defined(CASE_CELL_SPAN)
  shoal::Cell<std::span<int>> cell(std::span<int>(&target, 1));
#elif defined(CASE_CELL_REFERENCE_WRAPPER)
  shoal::Cell<std::reference_wrapper<int>> cell(std::ref(target));
#else  // the control: owning values are fine
  shoal::Cell<std::string> cell("text");
#endif
  (void)cell;
  (void)target;
}
