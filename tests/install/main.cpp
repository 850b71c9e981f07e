// Builds against an installed shoal and runs one scope.
#include <shoal/shoal.hpp>

#include <cstdio>

int main() {
  int v = shoal::run(shoal::scope([](shoal::Scope& s) -> shoal::Task<int> {
    auto h = s.start([]() -> shoal::Task<int> { co_return 41; });
    co_return co_await h + 1;
  }));
  std::printf("installed shoal works: %d\n", v);
  return v == 42 ? 0 : 1;
}
