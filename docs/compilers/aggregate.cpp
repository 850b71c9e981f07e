// g++ 12: a co_await inside a braced (aggregate) initializer corrupts the
// members built before it (ASan: attempting double-free). clang 14 prints 77.
#include "task.hpp"
struct Get {
  bool await_ready() noexcept { return true; }
  void await_suspend(std::coroutine_handle<>) noexcept {}
  std::string await_resume() { return std::string(40, 'v'); }
};
struct P { std::string name; std::string value; };
Task g() {
  P p{"a name long enough to allocate memory", co_await Get{}};
  std::printf("%zu\n", p.name.size() + p.value.size());
  co_return;
}
int main() { Task t = g(); t.h.resume(); }
