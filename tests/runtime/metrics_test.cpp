// Runtime::metrics and this_task::runtime_metrics: what each counter counts,
// and the Prometheus text the HTTP example serves.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.hpp"

namespace {

using shoal::Runtime;
using shoal::RuntimeMetrics;
using shoal::RuntimeOptions;
using shoal::Scope;
using shoal::Task;
using namespace std::chrono_literals;

std::uint64_t total_polls(const RuntimeMetrics& m) {
  std::uint64_t n = 0;
  for (const auto& w : m.workers) n += w.polls;
  return n;
}

TEST(Metrics, CountSpawnedAndLiveTasksAndOpenScopes) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "Metrics");
  Runtime rt(RuntimeOptions::with_workers(2));
  RuntimeMetrics during;
  shoal::Event release;  // outside the body: children use it after the body returns
  std::atomic<int> waiting{0};
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    for (int i = 0; i < 10; ++i) {
      s.spawn([&]() -> Task<void> {
        auto inner = [&](Scope&) -> Task<void> {  // named: g++ 12 (docs/compilers.md)
          waiting.fetch_add(1);
          co_await release.wait();
        };
        co_await shoal::scope(inner);
      });
    }
    while (waiting.load() < 10) co_await shoal::checkpoint();
    during = shoal::this_task::runtime_metrics();
    release.set();
  }));
  // The root task and 10 children are alive; the outer scope and 10 inner ones are open.
  EXPECT_EQ(during.tasks_spawned, 11u);
  EXPECT_EQ(during.tasks_live, 11u);
  EXPECT_EQ(during.scopes_live, 11u);
  EXPECT_EQ(during.workers.size(), 2u);
  const RuntimeMetrics after = rt.metrics();
  EXPECT_EQ(after.tasks_spawned, 11u);
  EXPECT_EQ(after.tasks_live, 0u);
  EXPECT_EQ(after.scopes_live, 0u);
  EXPECT_GE(total_polls(after), 11u) << "every task ran at least one step";
  std::uint64_t spawns = 0;
  for (const auto& w : after.workers) spawns += w.spawns;
  EXPECT_EQ(spawns, 10u) << "the root task was spawned from outside the workers";
}

TEST(Metrics, CountTimersFiredAndIoEvents) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "Metrics");
  Runtime rt(RuntimeOptions::with_workers(1));
  rt.block_on([]() -> Task<void> {
    for (int i = 0; i < 3; ++i) co_await shoal::sleep_for(1ms);
    auto listener = shoal::net::Listener::bind(shoal::net::Address::parse("127.0.0.1:0"));
    auto client = co_await shoal::net::connect(listener.local_address());
    auto server = co_await listener.accept();
    std::byte byte{};
    // The read waits: the byte comes only after it is parked, as an event.
    auto writer = [&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        co_await shoal::sleep_for(5ms);
        const std::string_view x = "x";
        co_await client.write_all(x);
      });
      const std::span<std::byte> into(&byte, 1);
      (void)co_await server.read_some(into);
    };
    co_await shoal::scope(writer);
  }());
  const RuntimeMetrics m = rt.metrics();
  EXPECT_GE(m.timers_fired, 4u);
  EXPECT_GE(m.io_events, 1u);
  EXPECT_EQ(m.timers_pending, 0u);
}

TEST(Metrics, CountBlockingPoolThreadsAndQueuedJobs) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "Metrics");
  Runtime rt(RuntimeOptions::with_workers(2));
  std::atomic<bool> release{false};
  RuntimeMetrics during;
  std::atomic<bool> started{false};
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await shoal::spawn_blocking([&] {
        started.store(true);
        while (!release.load()) std::this_thread::yield();  // the watchdog bounds it
      });
    });
    while (!started.load()) co_await shoal::checkpoint();
    during = shoal::this_task::runtime_metrics();
    release.store(true);
  }));
  EXPECT_GE(during.blocking_threads, 1u);
  EXPECT_EQ(during.blocking_queue, 0u) << "the job had a thread";
}

TEST(Metrics, RuntimeMetricsOutsideATaskIsRefused) {
  EXPECT_THROW((void)shoal::this_task::runtime_metrics(), std::logic_error);
}

TEST(Metrics, ThePrometheusTextHasAHelpATypeAndASampleForEachCounter) {
  RuntimeMetrics m;
  m.workers.resize(2);
  m.workers[1].polls = 42;
  m.tasks_live = 7;
  const std::string text = shoal::to_prometheus(m, "app");
  EXPECT_NE(text.find("# HELP app_tasks_live Tasks spawned and not finished.\n# TYPE app_tasks_live gauge\n"
                      "app_tasks_live 7\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE app_worker_polls_total counter\napp_worker_polls_total{worker=\"0\"} 0\n"
                      "app_worker_polls_total{worker=\"1\"} 42\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.back(), '\n');
}

}  // namespace
