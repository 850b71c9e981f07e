// Task<T>: laziness, values and faults to the awaiter, move-only, deep chains.
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "support/frame_counter.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::Task;

static_assert(!std::is_copy_constructible_v<Task<int>>);
static_assert(std::is_nothrow_move_constructible_v<Task<int>>);

Task<int> answer() { co_return 42; }

Task<int> add_one(int x) { co_return x + 1; }

Task<void> fail(std::string msg) {
  throw std::runtime_error(msg);
  co_return;
}

Task<long> depth(long n) {
  if (n == 0) co_return 0;
  co_return 1 + co_await depth(n - 1);
}

// g++ emits symmetric transfer as a call below -O2 and under sanitizers, so
// only optimized, uninstrumented builds get the full million.
constexpr bool kFullDepth =
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && \
    !defined(SHOAL_TSAN) && !defined(__SANITIZE_UNDEFINED__)
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    false;
#else
    true;
#endif
#else
    true;
#endif
#else
    false;
#endif

TEST(Task, IsLazyAndFreesAnUnstartedFrame) {
  shoal::test::FrameCounter frames;
  bool ran = false;
  {
    auto t = [&]() -> Task<void> {
      ran = true;
      co_return;
    }();
    shoal::test::escape(t);
    EXPECT_EQ(frames.live(), 1);
  }
  EXPECT_FALSE(ran);
  EXPECT_EQ(frames.live(), 0);
}

TEST(Task, AwaitYieldsTheValue) {
  EXPECT_EQ(shoal::run([]() -> Task<int> { co_return co_await add_one(co_await answer()); }()), 43);
}

TEST(Task, FaultTravelsToTheAwaiterAsTheSameType) {
  auto body = []() -> Task<std::string> {
    try {
      co_await fail("bad input");
    } catch (const std::runtime_error& e) {
      co_return e.what();
    }
    co_return "not thrown";
  };
  EXPECT_EQ(shoal::run(body()), "bad input");
}

TEST(Task, RunRethrowsTheRootFault) {
  EXPECT_THROW(shoal::run(fail("root")), std::runtime_error);
}

TEST(Task, ReferenceResultsReferToTheOriginal) {
  static int target = 7;
  auto ref = []() -> Task<int&> { co_return target; };
  int* seen = shoal::run([&]() -> Task<int*> {
    int& r = co_await ref();
    co_return &r;
  }());
  EXPECT_EQ(seen, &target);
}

TEST(Task, MoveOnlyResultsAreMovedOut) {
  auto make = []() -> Task<std::unique_ptr<int>> { co_return std::make_unique<int>(5); };
  auto p = shoal::run([&]() -> Task<std::unique_ptr<int>> { co_return co_await make(); }());
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, 5);
}

TEST(Task, DeepAwaitChainDoesNotOverflowTheStack) {
  const long n = kFullDepth ? 1'000'000 : 2'000;
  shoal::test::FrameCounter frames;
  EXPECT_EQ(shoal::run(depth(n)), n);
  EXPECT_EQ(frames.live(), 0);
}

TEST(Task, AllocationFailureIsReportedAsBadAlloc) {
  shoal::test::FrameCounter frames;
  frames.fail_at(1);
  EXPECT_THROW(
      {
        auto t = answer();
        shoal::test::escape(t);
      },
      std::bad_alloc);
  EXPECT_EQ(frames.live(), 0);
}

// Regression (issue 14.4): both were a silent SIGSEGV (a null or finished
// coroutine resumed), in release builds too.
TEST(Task, AwaitingAMovedFromTaskThrowsALogicErrorNamingIt) {
  std::string what;
  shoal::run([&]() -> Task<void> {
    Task<int> a = answer();
    Task<int> b = std::move(a);
    EXPECT_EQ(co_await std::move(b), 42);
    try {
      (void)co_await std::move(a);
    } catch (const std::logic_error& e) {
      what = e.what();
    }
  }());
  EXPECT_NE(what.find("moved from"), std::string::npos) << what;
}

TEST(Task, AwaitingATaskTwiceThrowsALogicErrorNamingIt) {
  std::string what;
  shoal::run([&]() -> Task<void> {
    Task<int> t = answer();
    EXPECT_EQ(co_await std::move(t), 42);
    try {
      (void)co_await std::move(t);
    } catch (const std::logic_error& e) {
      what = e.what();
    }
  }());
  EXPECT_NE(what.find("second time"), std::string::npos) << what;
}

}  // namespace
