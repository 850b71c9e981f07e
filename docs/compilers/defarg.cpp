// g++ 12: a default argument's class-type temporary inside a co_await expression is
// destroyed twice (ASan: attempting double-free). clang 14 prints 40.
#include "task.hpp"
struct Opt { std::string name = std::string(40, 'x'); };
Task f(const Opt& o = {}) { std::printf("%zu\n", o.name.size()); co_return; }
Task g() { co_await f(); }
int main() { Task t = g(); t.h.resume(); }
