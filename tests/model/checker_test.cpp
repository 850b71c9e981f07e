// The model checker against bugs it must find (and must not invent): a lost
// update, a lock-order deadlock, a lost condition-variable wake-up, a spin
// nobody ends, and the preemption bound's meaning.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "harness.hpp"

namespace shoal::model {
namespace {

void racy_increments() {
  Atomic<int> x{0};
  auto inc = [&] {
    const int v = x.load();
    x.store(v + 1);
  };
  Thread a = spawn(inc, "a");
  Thread b = spawn(inc, "b");
  a.join();
  b.join();
  check(x.load() == 2, "an increment was lost");
}

TEST(ModelChecker, FindsALostUpdateWithOnePreemptionNotWithout) {
  const Result none = explore_bound(0, racy_increments);
  EXPECT_TRUE(none.ok) << none.failure;
  const Result one = explore_bound(1, racy_increments);
  EXPECT_FALSE(one.ok);
  EXPECT_NE(one.failure.find("an increment was lost"), std::string::npos) << one.failure;
  EXPECT_NE(one.failure.find("SHOAL_MODEL_SCHEDULE="), std::string::npos) << one.failure;
}

TEST(ModelChecker, AtomicIncrementsPassEverySchedule) {
  const Result r = explore_bound(3, [] {
    Atomic<int> x{0};
    auto inc = [&] {
      x.fetch_add(1);
      x.fetch_add(1);
    };
    Thread a = spawn(inc, "a");
    Thread b = spawn(inc, "b");
    a.join();
    b.join();
    check(x.load() == 4, "an increment was lost");
  });
  expect_passes(r);
  EXPECT_GT(r.executions, 10);
}

TEST(ModelChecker, ReportsALockOrderDeadlock) {
  const Result r = explore_bound(1, [] {
    Mutex m1, m2;
    Thread a = spawn(
        [&] {
          m1.lock();
          m2.lock();
          m2.unlock();
          m1.unlock();
        },
        "a");
    m2.lock();
    m1.lock();
    m1.unlock();
    m2.unlock();
    a.join();
  });
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("deadlock"), std::string::npos) << r.failure;
  EXPECT_NE(r.failure.find("blocked in mutex"), std::string::npos) << r.failure;
}

TEST(ModelChecker, ReportsALostConditionVariableWakeup) {
  // The classic bug: the flag is set without the waiter's mutex held.
  const Result r = explore_bound(1, [] {
    Mutex m;
    CondVar cv;
    Atomic<bool> ready{false};
    Thread waker = spawn(
        [&] {
          ready.store(true);
          cv.notify_one();
        },
        "waker");
    {
      std::unique_lock<Mutex> lk(m);
      while (!ready.load()) cv.wait(lk);
    }
    waker.join();
  });
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("lost wake-up"), std::string::npos) << r.failure;
}

TEST(ModelChecker, ReportsASpinNobodyEnds) {
  const Result r = explore_bound(0, [] {
    Atomic<bool> flag{false};
    while (!flag.load()) spin();
  });
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("livelock"), std::string::npos) << r.failure;
  EXPECT_NE(r.failure.find("blocked in a spin"), std::string::npos) << r.failure;
}

// Seeing A's middle state twice needs A preempted after its first store and
// B preempted between its loads: two preemptions.
void two_preemption_bug() {
  Atomic<int> x{0};
  Thread a = spawn(
      [&] {
        x.store(1);
        x.store(2);
      },
      "a");
  Thread b = spawn(
      [&] {
        const int r1 = x.load();
        const int r2 = x.load();
        check(!(r1 == 1 && r2 == 2), "saw both of a's stores");
      },
      "b");
  a.join();
  b.join();
}

TEST(ModelChecker, PreemptionBoundIsExact) {
  const Result one = explore_bound(1, two_preemption_bug);
  EXPECT_TRUE(one.ok) << one.failure;
  const Result two = explore_bound(2, two_preemption_bug);
  EXPECT_FALSE(two.ok);
  EXPECT_NE(two.failure.find("saw both"), std::string::npos) << two.failure;
}

// The spinner's first read goes stale before it spins: it must look again
// (a checker that waits for a *later* write would report a false livelock).
TEST(ModelChecker, ASpinAfterAStaleReadLooksAgain) {
  expect_passes(explore_bound(2, [] {
    Atomic<int> x{0};
    Atomic<int> other{0};
    Thread a = spawn([&] { x.store(1); }, "a");
    while (x.load() == 0) {
      (void)other.load();  // a preemption here lets a write x
      spin();
    }
    a.join();
  }));
}

TEST(ModelChecker, APrintedScheduleReplaysTheFailure) {
  const Result r = explore_bound(1, racy_increments);
  ASSERT_FALSE(r.ok);
  const std::string key = "SHOAL_MODEL_SCHEDULE=";
  const std::size_t at = r.failure.find(key);
  ASSERT_NE(at, std::string::npos) << r.failure;
  const std::string schedule = r.failure.substr(at + key.size());
  ::setenv("SHOAL_MODEL_SCHEDULE", schedule.c_str(), 1);
  const Result again = explore_bound(1, racy_increments);
  ::unsetenv("SHOAL_MODEL_SCHEDULE");
  EXPECT_FALSE(again.ok);
  EXPECT_EQ(again.executions, 1);
  EXPECT_NE(again.failure.find("an increment was lost"), std::string::npos) << again.failure;
}

TEST(ModelChecker, RandomSchedulesFindALostUpdate) {
  const Result r = random_schedules(42, 2000, Options{}, racy_increments);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("SHOAL_SEED=42"), std::string::npos) << r.failure;
}

}  // namespace
}  // namespace shoal::model
