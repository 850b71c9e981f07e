// I/O and timers are served while a worker computes, and the driver wakes
// nobody it does not need (issue 16, behaviour 1 and 2).
//
// A task that computes without a checkpoint right after a wake-up runs on
// the worker that left the driver; the other workers may all be asleep on
// their futex. These tests make that happen and check that another client
// and a timer are still served while the loop runs (the loop ends early
// once they were, so a pass costs milliseconds; a failure waits out the
// loop). The wake counts come from the scheduler's own counters, which
// count every futex wake and backend wake-up it makes.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "shoal/shoal.hpp"
#include "src/runtime/scheduler.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;
using shoal::net::Address;
using shoal::net::Listener;
using shoal::net::Stream;
using Clock = std::chrono::steady_clock;

constexpr auto kLoop = 2s;  // the computing task's longest run

// A blocking client socket; every receive gives up after 5 s.
class Client {
 public:
  explicit Client(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  bool connected() const { return connected_; }
  bool send(char c) { return ::send(fd_, &c, 1, MSG_NOSIGNAL) == 1; }
  // The byte received, or 0 on timeout, error or end of stream.
  char recv() {
    char c = 0;
    return ::recv(fd_, &c, 1, 0) == 1 ? c : 0;
  }

 private:
  int fd_;
  bool connected_ = false;
};

// Computes until `release` or kLoop, with no checkpoint: the worker is gone
// for that long. Returns whether it was released (false: it ran out).
bool compute_until(const std::atomic<bool>& release) {
  const auto end = Clock::now() + kLoop;
  while (!release.load(std::memory_order_acquire)) {
    if (Clock::now() >= end) return false;
  }
  return true;
}

class DriverWatchTest : public ::testing::TestWithParam<std::size_t> {};

// Client 1's byte starts a computing task; client 2 must get its echo while
// that task still runs.
TEST_P(DriverWatchTest, AnotherClientIsAnsweredWhileATaskComputesAfterItsWakeUp) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "driver watch: clients");
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const std::uint16_t port = listener.local_address().port();
  std::atomic<bool> reading{false}, computing{false}, release{false}, released{false};
  std::chrono::microseconds answered_after{-1};
  bool answered_while_computing = false;

  std::thread clients([&] {
    Client c1(port);
    ASSERT_TRUE(c1.connected());
    // The byte goes once the handler waits for it and the workers have had
    // a moment to park, so its readiness wakes the handler in the driver.
    auto give_up = Clock::now() + 5s;
    while (!reading.load(std::memory_order_acquire) && Clock::now() < give_up) std::this_thread::yield();
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(c1.send('x'));
    give_up = Clock::now() + 5s;
    while (!computing.load(std::memory_order_acquire) && Clock::now() < give_up) std::this_thread::yield();
    ASSERT_TRUE(computing.load()) << "the computing task never started";
    const auto t0 = Clock::now();
    {
      Client c2(port);
      ASSERT_TRUE(c2.connected());
      ASSERT_TRUE(c2.send('p'));
      const char echo = c2.recv();
      answered_after = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
      answered_while_computing = echo == 'p' && !released.load() && computing.load();
    }
    release.store(true, std::memory_order_release);
    EXPECT_EQ(c1.recv(), 'y');
  });

  auto handle = [&](Stream c) -> Task<void> {
    std::byte b[1];
    reading.store(true, std::memory_order_release);
    if (co_await c.read_some(b) != 1) co_return;
    if (b[0] == std::byte{'x'}) {
      computing.store(true, std::memory_order_release);
      const bool was_released = compute_until(release);
      computing.store(false, std::memory_order_release);
      released.store(was_released);
      co_await c.write_all("y");
    } else {
      co_await c.write_all("p");
    }
  };
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               for (int i = 0; i < 2; ++i) {
                 Stream c = co_await listener.accept();
                 s.spawn(handle(std::move(c)));
               }
             }),
             shoal::RuntimeOptions::with_workers(GetParam()));
  clients.join();
  EXPECT_TRUE(answered_while_computing) << "client 2 was answered only when the computing task gave the worker back";
  EXPECT_GE(answered_after.count(), 0);
  EXPECT_LT(answered_after, 1000ms) << "the generous bound; expected within about two 10 ms watch ticks";
  RecordProperty("answered_after_us", static_cast<int>(answered_after.count()));
  std::printf("client 2 answered after %lld us on %zu workers\n", static_cast<long long>(answered_after.count()),
              GetParam());
}

// A task wakes from a timer and computes; a sibling's timer keeps firing.
TEST_P(DriverWatchTest, TimersFireWhileATaskComputesAfterItsWakeUp) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "driver watch: timers");
  constexpr int kTicks = 10;
  std::atomic<bool> started{false}, computing{false}, release{false};
  int ticks_while_computing = 0;
  bool released = false;
  shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
               s.spawn([&]() -> Task<void> {
                 co_await shoal::sleep_for(10ms);  // alone in its batch: every other task waits longer
                 started.store(true, std::memory_order_release);
                 computing.store(true, std::memory_order_release);
                 released = compute_until(release);
                 computing.store(false, std::memory_order_release);
               });
               co_await shoal::sleep_for(30ms);
               while (!started.load(std::memory_order_acquire)) co_await shoal::sleep_for(1ms);
               while (computing.load(std::memory_order_acquire) && ticks_while_computing < kTicks) {
                 co_await shoal::sleep_for(2ms);
                 if (computing.load(std::memory_order_acquire)) ++ticks_while_computing;
               }
               release.store(true, std::memory_order_release);
             }),
             shoal::RuntimeOptions::with_workers(GetParam()));
  EXPECT_EQ(ticks_while_computing, kTicks) << "the sibling's timer stopped while the other task computed";
  EXPECT_TRUE(released) << "the sibling's ticks came only after the loop ran out";
}

INSTANTIATE_TEST_SUITE_P(Workers, DriverWatchTest, ::testing::Values(std::size_t{2}, std::size_t{4}),
                         shoal::test::worker_param_name);

// 2,000 round trips on one connection, 2 workers: each is one readiness
// event that the worker in the driver runs itself.
TEST(DriverWakes, ReadinessEventsTheDriverRunsItselfWakeNobody) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "driver wakes");
  constexpr int kTrips = 2000;
  auto listener = Listener::bind(Address::parse("127.0.0.1:0"));
  const std::uint16_t port = listener.local_address().port();
  shoal::detail::WakeCounts before, after;
  const char* backend = "";
  std::atomic<bool> counting{false};
  std::atomic<int> trips{0};

  std::thread client([&] {
    Client c(port);
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.send('a'));  // the first trip: the server takes its counts after it
    ASSERT_EQ(c.recv(), 'a');
    const auto give_up = Clock::now() + 5s;
    while (!counting.load(std::memory_order_acquire) && Clock::now() < give_up) std::this_thread::yield();
    for (int i = 0; i < kTrips; ++i) {
      if (!c.send('b') || c.recv() != 'b') break;
      trips.fetch_add(1, std::memory_order_relaxed);
    }
    c.send('q');
  });

  shoal::run(shoal::scope([&](Scope&) -> Task<void> {
               shoal::detail::Scheduler* sched = shoal::detail::current_record()->sched;
               backend = sched->driver().backend_name();
               Stream c = co_await listener.accept();
               std::byte b[1];
               bool first = true;
               while (co_await c.read_some(b) == 1 && b[0] != std::byte{'q'}) {
                 co_await c.write_all(std::span<const std::byte>(b, 1));
                 if (first) {
                   first = false;
                   before = sched->wake_counts();
                   counting.store(true, std::memory_order_release);
                 }
               }
               after = sched->wake_counts();
             }),
             shoal::RuntimeOptions::with_workers(2));
  client.join();
  ASSERT_EQ(trips.load(), kTrips);
  const auto futex = after.futex_wakes - before.futex_wakes;
  const auto driver = after.driver_wakes - before.driver_wakes;
  std::printf("%d readiness events: %llu futex wakes, %llu backend wake-ups (%s)\n", kTrips,
              static_cast<unsigned long long>(futex), static_cast<unsigned long long>(driver), backend);
  EXPECT_LE(futex, kTrips / 10u) << "tasks the driver runs itself woke sleepers";
  if (std::strcmp(backend, "epoll") == 0) {
    EXPECT_LE(driver, kTrips / 100u) << "the driver woke itself";
  }
}

}  // namespace
