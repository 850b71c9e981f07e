// detail::raise_cancelled: Cancelled raised from the waiting frame itself
// (include/shoal/detail/raise.hpp) must be the exception `throw Cancelled{}`
// is: caught by type and by catch-all, counted by std::uncaught_exceptions()
// until its handler, kept alive by std::current_exception(), rethrown,
// raised again inside its own handler, and freed once (ASan's leg checks the
// last).
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <vector>

#include "support/test_support.hpp"

namespace {

using shoal::Cancelled;
using shoal::Scope;
using shoal::Task;

/// Records std::uncaught_exceptions() when it is destroyed.
struct CountOnUnwind {
  int* seen;
  ~CountOnUnwind() { *seen = std::uncaught_exceptions(); }
};

[[gnu::noinline]] void raise_with_guard(int* seen) {
  CountOnUnwind guard{seen};
  shoal::detail::raise_cancelled();
}

TEST(Raise, CancelledIsCaughtByItsTypeAndByCatchAll) {
  bool by_type = false;
  try {
    shoal::detail::raise_cancelled();
  } catch (const Cancelled& c) {
    by_type = std::strcmp(c.what(), "shoal::Cancelled") == 0;
  }
  EXPECT_TRUE(by_type);
  bool by_catch_all = false;
  try {
    shoal::detail::raise_cancelled();
  } catch (...) {
    by_catch_all = shoal::is_cancellation(std::current_exception());
  }
  EXPECT_TRUE(by_catch_all);
}

TEST(Raise, UncaughtExceptionsCountsTheRaiseUntilItsHandler) {
  int during_unwind = -1;
  int in_handler = -1;
  try {
    raise_with_guard(&during_unwind);
  } catch (const Cancelled&) {
    in_handler = std::uncaught_exceptions();
  }
  EXPECT_EQ(during_unwind, 1) << "a destructor run by the unwinding sees one exception in flight";
  EXPECT_EQ(in_handler, 0);
  EXPECT_EQ(std::uncaught_exceptions(), 0);
}

TEST(Raise, CurrentExceptionOutlivesItsHandlerAndRethrows) {
  std::exception_ptr kept;
  try {
    shoal::detail::raise_cancelled();
  } catch (...) {
    kept = std::current_exception();
  }
  ASSERT_TRUE(kept);
  EXPECT_TRUE(shoal::is_cancellation(kept));
  bool rethrown = false;
  try {
    std::rethrow_exception(kept);
  } catch (const Cancelled&) {
    rethrown = true;
  }
  EXPECT_TRUE(rethrown);
}

TEST(Raise, ARaiseInsideItsOwnHandlerIsASecondException) {
  int inner = 0, outer = 0;
  std::exception_ptr first, second;
  try {
    shoal::detail::raise_cancelled();
  } catch (const Cancelled&) {
    first = std::current_exception();
    try {
      shoal::detail::raise_cancelled();
    } catch (const Cancelled&) {
      second = std::current_exception();
      ++inner;
    }
    EXPECT_EQ(std::current_exception(), first) << "the outer handler's exception is current again";
    ++outer;
  }
  EXPECT_EQ(inner, 1);
  EXPECT_EQ(outer, 1);
  EXPECT_NE(first, second) << "each raise is its own exception object";
  EXPECT_EQ(std::uncaught_exceptions(), 0);
}

[[gnu::noinline]] void raise_in_noexcept() noexcept { shoal::detail::raise_cancelled(); }

TEST(RaiseDeathTest, ARaiseThroughANoexceptFrameTerminatesNamingCancelled) {
  try {
    EXPECT_DEATH(raise_in_noexcept(), "terminate called after throwing an instance of 'shoal::Cancelled'");
  } catch (...) {
    ADD_FAILURE() << "the raise left a noexcept function";
  }
}

#if SHOAL_DIRECT_RAISE
TEST(Raise, TheUnwindHeaderIsTheRuntimesHeaderForTheObject) {
  // The layout the direct raise relies on: the unwind header right before
  // the object and the handler's object pointer right before the header,
  // filled in as a C++ exception ("GNUCC++\0") that the runtime frees.
  // Catching it by hand releases it as a handler would.
  _Unwind_Exception* e = shoal::detail::new_cancelled_exception();
  std::uint64_t klass = 0;  // libstdc++ builds the class as a big-endian word of these bytes
  for (char ch : {'G', 'N', 'U', 'C', 'C', '+', '+', '\0'}) klass = klass << 8 | static_cast<unsigned char>(ch);
  EXPECT_EQ(e->exception_class, klass);
  EXPECT_NE(e->exception_cleanup, nullptr);
  EXPECT_EQ(std::uncaught_exceptions(), 1) << "made ready to raise, it counts as in flight";
  EXPECT_EQ(abi::__cxa_begin_catch(e), static_cast<void*>(e + 1)) << "a handler gets the object itself";
  const std::type_info* type = abi::__cxa_current_exception_type();
  EXPECT_TRUE(type != nullptr && *type == typeid(Cancelled));
  abi::__cxa_end_catch();
  EXPECT_EQ(std::uncaught_exceptions(), 0);
}
#endif

// Handlers in the raising frame itself: the cleanup phase starts there, so
// that frame's own clauses must be matched as a throw's would be.

[[gnu::noinline]] int raise_past_a_catch_of_another_type() {
  try {
    shoal::detail::raise_cancelled();
  } catch (const std::exception&) {
    return 1;  // Cancelled is no std::exception
  }
  return 2;
}

TEST(Raise, ACatchOfAnotherTypeInTheRaisingFrameIsPassedBy) {
  int got = 0;
  try {
    got = raise_past_a_catch_of_another_type();
  } catch (const Cancelled&) {
    got = 3;
  }
  EXPECT_EQ(got, 3);
}

[[gnu::noinline]] int raise_into_the_second_clause(int* destroyed) {
  try {
    CountOnUnwind guard{destroyed};
    shoal::detail::raise_cancelled();
  } catch (const std::exception&) {
    return 1;
  } catch (const Cancelled&) {
    return 2;
  } catch (...) {
    return 3;
  }
  return 4;
}

TEST(Raise, TheMatchingClauseOfTheRaisingFramesTryRunsAfterItsCleanups) {
  int destroyed = -1;
  EXPECT_EQ(raise_into_the_second_clause(&destroyed), 2);
  EXPECT_EQ(destroyed, 1) << "the local was destroyed while the raise was in flight";
  EXPECT_EQ(std::uncaught_exceptions(), 0);
}

[[gnu::noinline]] int raise_through_an_inner_try(int* destroyed) {
  try {
    CountOnUnwind outer_guard{destroyed};
    try {
      shoal::detail::raise_cancelled();
    } catch (const std::runtime_error&) {
      return 1;
    }
    return 2;
  } catch (...) {
    return shoal::is_cancellation(std::current_exception()) ? 3 : 4;
  }
}

TEST(Raise, AnInnerTryThatDoesNotMatchLeavesItToTheOuterOneInTheSameFrame) {
  int destroyed = -1;
  EXPECT_EQ(raise_through_an_inner_try(&destroyed), 3);
  EXPECT_EQ(destroyed, 1);
}

// Values the compiler keeps in callee-saved registers across the raise:
// the landing pad must find them as they were at the call.
[[gnu::noinline]] std::uint64_t raise_with_live_values(std::uint64_t seed, int raise_at) {
  std::uint64_t a = seed, b = seed * 3, c = seed ^ 0x5555, d = seed + 7, e = seed * seed, f = ~seed;
  for (int i = 0; i < 16; ++i) {
    try {
      if (i == raise_at) shoal::detail::raise_cancelled();
      a += b;
      b ^= c;
    } catch (const Cancelled&) {
      c += d * e + f;
    }
    d = d * 5 + a;
    e ^= d >> 3;
    f += e;
  }
  return a ^ b ^ c ^ d ^ e ^ f;
}

std::uint64_t live_values_reference(std::uint64_t seed, int raise_at) {
  std::uint64_t a = seed, b = seed * 3, c = seed ^ 0x5555, d = seed + 7, e = seed * seed, f = ~seed;
  for (int i = 0; i < 16; ++i) {
    if (i == raise_at) {
      c += d * e + f;
    } else {
      a += b;
      b ^= c;
    }
    d = d * 5 + a;
    e ^= d >> 3;
    f += e;
  }
  return a ^ b ^ c ^ d ^ e ^ f;
}

TEST(Raise, TheRaisingFramesValuesAreIntactInItsHandler) {
  for (int at = 0; at < 16; at += 5) {
    for (std::uint64_t seed : {1ull, 0x123456789abcdefull}) {
      EXPECT_EQ(raise_with_live_values(seed, at), live_values_reference(seed, at)) << "raised at " << at;
    }
  }
}

TEST(Raise, ACancelledWaitUnwindsTheCoroutineAndReachesItsCatch) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "Raise");
  shoal::Runtime rt(shoal::RuntimeOptions::with_workers(2));
  constexpr int kChildren = 100;
  shoal::Channel<int> never(0);
  std::atomic<int> waiting{0}, caught{0};
  std::vector<int> seen(kChildren, -1);
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    for (int i = 0; i < kChildren; ++i) {
      s.spawn([&, i]() -> Task<void> {
        try {
          CountOnUnwind guard{&seen[static_cast<std::size_t>(i)]};
          waiting.fetch_add(1);
          (void)co_await never.recv();
        } catch (const Cancelled&) {
          caught.fetch_add(1);
          throw;
        }
      });
    }
    while (waiting.load() < kChildren) co_await shoal::checkpoint();
    s.cancel();
  }));
  EXPECT_EQ(caught.load(), kChildren);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kChildren) << "each child's locals were destroyed by the unwinding";
  EXPECT_EQ(std::uncaught_exceptions(), 0);
}

}  // namespace
