// Builds against an installed shoal and runs one scope.
#include <shoal/shoal.hpp>

#include <cstdio>

int main() {
  int v = shoal::run(shoal::scope([](shoal::Scope& s) -> shoal::Task<int> {
    auto h = s.start([]() -> shoal::Task<int> { co_return 41; });
    co_return co_await h + 1;
  }));
  // The standard the consumer chose (shoal requires C++20, forces nothing).
  std::printf("installed shoal works: %d (shoal %d.%d.%d, __cplusplus %ld)\n", v, SHOAL_VERSION_MAJOR,
              SHOAL_VERSION_MINOR, SHOAL_VERSION_PATCH, static_cast<long>(__cplusplus));
  return v == 42 ? 0 : 1;
}
