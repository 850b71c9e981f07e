// Signals as awaitables.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "shoal/signal/signal.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Task;

SHOAL_TEST_SUITE(SignalTest);

SHOAL_TEST(SignalTest, WaitReturnsTheSignalThatArrived) {
  auto waiting = shoal::signal::wait({SIGUSR1, SIGUSR2});  // installs the handlers now
  ::kill(::getpid(), SIGUSR2);
  EXPECT_EQ(co_await std::move(waiting), SIGUSR2);
}

SHOAL_TEST(SignalTest, NoDeliveryIsLostBetweenWaits) {
  auto first = shoal::signal::wait({SIGUSR1});
  ::kill(::getpid(), SIGUSR1);
  ::kill(::getpid(), SIGUSR1);
  EXPECT_EQ(co_await std::move(first), SIGUSR1);
  // The kernel may merge two deliveries of a pending signal into one; wait
  // for the second only if it was delivered separately.
  auto again = co_await shoal::move_on_after(20ms, shoal::signal::wait({SIGUSR1}));
  if (again) {
    EXPECT_EQ(*again, SIGUSR1);
  }
  // A delivery while nobody waits is kept for the next wait. raise() sends
  // the signal to this thread, which runs the handler before raise returns:
  // the delivery is over before the wait below starts.
  EXPECT_EQ(::raise(SIGUSR1), 0);
  auto kept = co_await shoal::move_on_after(5s, shoal::signal::wait({SIGUSR1}));
  EXPECT_TRUE(kept.has_value()) << "a delivery with no waiter was lost";
}

SHOAL_TEST(SignalTest, AWaitIsACancellationPoint) {
  auto r = co_await shoal::move_on_after(5ms, shoal::signal::wait({SIGUSR2}));
  EXPECT_FALSE(r.has_value());
}

TEST(SignalArgs, BadSetsAreRejectedWithTheirName) {
  try {
    (void)shoal::signal::wait({SIGKILL});
    ADD_FAILURE() << "SIGKILL accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("SIGKILL cannot be caught"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)shoal::signal::wait({}), std::invalid_argument);
  try {
    (void)shoal::signal::wait({0});
    ADD_FAILURE() << "0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("0 is not a signal number"), std::string::npos) << e.what();
  }
}

}  // namespace
