// Builds against an installed shoal::testing: a leak check and a watchdog
// around a run, as a user's own test would.
#include <shoal/shoal.hpp>
#include <shoal/testing.hpp>

#include <chrono>
#include <cstdio>

int main() {
  shoal::testing::Watchdog dog(std::chrono::seconds(30), "installed shoal::testing");
  shoal::testing::FrameCounter frames;
  const int v = shoal::run([]() -> shoal::Task<int> { co_return 7; }());
  std::printf("installed shoal::testing works: %d, %ld frames left\n", v, frames.live());
  return v == 7 && frames.live() == 0 ? 0 : 1;
}
