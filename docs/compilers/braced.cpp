// g++ 12: a braced list inside a co_await expression fails to compile ("array used as
// initializer"). clang 14 prints 2.
#include "task.hpp"
#include <vector>
Task f(std::vector<int> v) { std::printf("%zu\n", v.size()); co_return; }
Task g() { co_await f({1, 2}); }
int main() { Task t = g(); t.h.resume(); }
