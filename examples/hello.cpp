// The README's example, kept compiling.
#include <shoal/shoal.hpp>
#include <cstdio>
#include <stdexcept>

shoal::Task<int> fetch(int shard) {
  for (int step = 0; step < 3; ++step) co_await shoal::checkpoint();  // a cancel point
  if (shard == 3) throw std::runtime_error("shard 3 is down");
  co_return shard * 10;
}

int main() {
  try {
    shoal::run(shoal::scope([](shoal::Scope& s) -> shoal::Task<void> {
      for (int shard = 0; shard < 8; ++shard) s.spawn(fetch, shard);  // children on any worker
      co_return;  // the scope joins them all; shard 3's fault cancels the others
    }));
  } catch (const std::runtime_error& e) {
    std::printf("failed: %s\n", e.what());  // the original exception, after every child finished
  }
}
