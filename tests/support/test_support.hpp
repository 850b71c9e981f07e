// Shared test helpers: the coroutine tests of shoal::testing (SHOAL_TEST on
// 1 and 4 workers with a watchdog, SHOAL_SIMULATED_TEST); scale and seed
// knobs for stress tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "shoal/shoal.hpp"
#include "shoal/testing/gtest.hpp"  // SHOAL_TEST, SHOAL_TEST_SUITE, SHOAL_SIMULATED_TEST, SHOAL_CO_ASSERT
#include "src/platform/platform.hpp"
#if defined(SHOAL_HAVE_URING)
#include "src/runtime/driver/io/uring/uring_backend.hpp"
#endif
#include "support/watchdog.hpp"

namespace shoal::test {

/// SHOAL_STRESS_SCALE (default 1): sanitizer legs scale heavy tests down.
inline double stress_scale() {
  const char* s = std::getenv("SHOAL_STRESS_SCALE");
  double v = s ? std::atof(s) : 1.0;
  return v > 0 ? v : 1.0;
}
inline long scaled(long n, long minimum = 1) {
  long v = static_cast<long>(static_cast<double>(n) * stress_scale());
  return v < minimum ? minimum : v;
}

/// The seed for a randomized test: SHOAL_SEED if set, else fresh. Printed.
inline std::uint64_t test_seed(const char* test_name) {
  std::uint64_t seed;
  if (const char* s = std::getenv("SHOAL_SEED")) {
    seed = std::strtoull(s, nullptr, 10);
  } else {
    seed = std::random_device{}();
    seed = (seed << 32) ^ std::random_device{}();
  }
  std::printf("[seed] %s: SHOAL_SEED=%llu\n", test_name, static_cast<unsigned long long>(seed));
  return seed;
}

inline constexpr std::chrono::seconds kWatchdog = ::shoal::testing::kTestWatchdog;

/// The emulator the tests run under, as words to put before a program
/// (SHOAL_TEST_EMULATOR, set by the aarch64 test preset: qemu-aarch64 and
/// its sysroot), or empty on the machine's own architecture. Without
/// binfmt_misc an aarch64 binary cannot be started without it.
inline std::vector<std::string> test_emulator() {
  std::vector<std::string> words;
  if (const char* e = std::getenv("SHOAL_TEST_EMULATOR")) {
    std::string w;
    for (const char* c = e;; ++c) {
      if (*c == ' ' || *c == '\0') {
        if (!w.empty()) words.push_back(std::move(w));
        w.clear();
        if (*c == '\0') break;
      } else {
        w += *c;
      }
    }
  }
  return words;
}
inline bool under_emulation() { return !test_emulator().empty(); }

/// The kqueue backend over libkqueue (the kqueue preset), where a test may
/// meet one of libkqueue's Linux limits (docs/platforms.md lists them).
inline bool on_libkqueue() {
#if defined(SHOAL_WITH_LIBKQUEUE)
  const char* b = std::getenv("SHOAL_IO_BACKEND");
  return b != nullptr && std::string(b) == "kqueue";
#else
  return false;
#endif
}
/// Sets an environment variable for a scope and restores what was there.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~EnvGuard() {
    if (old_.empty()) {
      ::unsetenv(name_);
    } else {
      ::setenv(name_, old_.c_str(), 1);
    }
  }

 private:
  const char* name_;
  std::string old_;
};

/// True where the kernel gives io_uring to the uring backend (else a runtime
/// asked for SHOAL_IO_BACKEND=uring runs on epoll).
inline bool io_uring_works() {
#if defined(SHOAL_HAVE_URING)
  static const bool works = [] {
    try {
      shoal::detail::io::UringBackend probe;
      return true;
    } catch (const shoal::detail::io::RingUnavailable&) {
      return false;
    }
  }();
  return works;
#else
  return false;
#endif
}

/// libkqueue fills an event's fflags with getsockopt(SO_ERROR), which clears
/// the socket's pending error: a refused connect then looks connected and a
/// reset reads as the end of the stream (native kqueue leaves it in place).
inline constexpr const char* kLibkqueueTakesSoError =
    "libkqueue limit: its kevent reads SO_ERROR into fflags, clearing the socket's pending error "
    "(a refused connect looks connected, a reset reads as the end of stream); docs/platforms.md";

/// GTEST_SKIP for a coroutine test body (which cannot `return`): records the
/// skip with its reason, then ends the body.
#define SHOAL_CO_SKIP(why)   \
  do {                       \
    [&] { GTEST_SKIP() << (why); }(); \
    co_return;               \
  } while (0)

/// Makes `x` escape so the optimizer cannot elide it (clang elides coroutine
/// frames that provably never leave a function).
template <class T>
inline void escape(T& x) {
  asm volatile("" : : "g"(&x) : "memory");
}

using ::shoal::testing::RuntimeTest;
using ::shoal::testing::worker_param_name;

}  // namespace shoal::test
