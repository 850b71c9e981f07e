// Runtime::dump_tasks: the scope tree with each task's name, where it was
// spawned and what it waits on (and for how long); the dump signal; a dump
// racing tasks that wake, wait and finish.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "support/test_support.hpp"

namespace {

using shoal::Runtime;
using shoal::RuntimeOptions;
using shoal::Scope;
using shoal::Task;
using namespace std::chrono_literals;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Dumps `rt` from this thread until `ready(dump)` holds (the tasks have
/// reached their waits) or 10 s pass; returns the last dump.
std::string dump_when(const Runtime& rt, const std::function<bool(const std::string&)>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::string text;
  do {
    std::ostringstream out;
    rt.dump_tasks(out);
    text = out.str();
    if (ready(text)) break;
    std::this_thread::sleep_for(1ms);
  } while (std::chrono::steady_clock::now() < deadline);
  return text;
}

// A small pattern match instead of std::regex (g++ 12 warns inside
// <regex> at -O1 with sanitizers): `*` is any run of characters within a
// line, `#` one or more digits; everything else is literal. True if the
// pattern matches anywhere in `text`.
bool match_here(std::string_view t, std::string_view p) {
  if (p.empty()) return true;
  if (p[0] == '*') {
    for (std::size_t i = 0;; ++i) {
      if (match_here(t.substr(i), p.substr(1))) return true;
      if (i == t.size() || t[i] == '\n') return false;
    }
  }
  if (p[0] == '#') {
    std::size_t i = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    return i > 0 && match_here(t.substr(i), p.substr(1));
  }
  return !t.empty() && t[0] == p[0] && match_here(t.substr(1), p.substr(1));
}
bool matches(const std::string& text, const std::string& pattern) {
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (match_here(std::string_view(text).substr(i), pattern)) return true;
  }
  return false;
}

std::size_t count(const std::string& s, const std::string& part) {
  std::size_t n = 0;
  for (auto at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

Task<void> sleeper() { co_await shoal::sleep_for(1h); }
Task<void> wait_for(shoal::Event& e) { co_await e.wait(); }

TEST(TaskDump, ShowsEachTasksNameSpawnSiteAndWhatItWaitsOn) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "TaskDump");
  RuntimeOptions opts = RuntimeOptions::with_workers(2);
  opts.track_waits = true;
  Runtime rt(std::move(opts));
  shoal::Channel<int> ch(0);
  shoal::Event release;
  int sleeper_line = 0, named_line = 0;
  std::string dump;
  std::thread dumper([&] {
    dump = dump_when(rt, [](const std::string& d) {
      return contains(d, "shoal::Channel::recv") && contains(d, "shoal::sleep") && count(d, "on shoal::Event::wait") >= 2;
    });
    release.set();
  });
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(shoal::named("reader"), [&]() -> Task<void> { (void)co_await ch.recv(); }); named_line = __LINE__;
    s.spawn(sleeper()); sleeper_line = __LINE__;
    s.spawn([&]() -> Task<void> {
      auto body = [&](Scope&) -> Task<void> { co_await release.wait(); };  // named: g++ 12 (docs/compilers.md)
      co_await shoal::scope(body);
    });
    co_await release.wait();
    s.cancel();
  }));
  dumper.join();
  SCOPED_TRACE(dump);
  // Named, with the place of the named() call.
  EXPECT_TRUE(contains(dump, "task \"reader\" (spawned at " + std::string(__FILE__) + ":" +
                                 std::to_string(named_line) + "): waiting "));
  EXPECT_TRUE(matches(dump, "\"reader\"*: waiting # ms on shoal::Channel::recv\n"));
  // A Task spawned without a name: the spawn call's file and line.
  EXPECT_TRUE(matches(dump, "task (spawned at *task_dump_test.cpp:" + std::to_string(sleeper_line) +
                                "): waiting # ms on shoal::sleep"));
  // A spawned callable: its type. It opened a scope whose body (which runs
  // on the same task) waits on the event.
  EXPECT_TRUE(matches(dump, "task (spawned callable *lambda*): waiting # ms on shoal::Event::wait"));
  EXPECT_TRUE(matches(dump, "\n      scope, the body of task (spawned callable *lambda"));
  EXPECT_FALSE(contains(dump, ".Frame*")) << "the compiler's coroutine-frame parameter is left out of a callable's name";
  // The root task (block_on's) runs the outer scope's body.
  EXPECT_TRUE(contains(dump, "\n    task (a root task: run or block_on): waiting "));
  EXPECT_TRUE(contains(dump, "\n    scope, the body of task (a root task: run or block_on)\n"));
}

// serve names each handler's task after its peer, so a dump of a real server
// says which client each handler serves; name_connections = false opts out.
TEST(TaskDump, ServeNamesEachConnectionsTaskAfterItsPeer) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "TaskDump serve");
  for (const bool named : {true, false}) {
    Runtime rt(RuntimeOptions::with_workers(2));
    shoal::Event release;
    std::string dump, client_port;
    std::thread dumper([&] {
      dump = dump_when(rt, [](const std::string& d) { return count(d, "on shoal::Event::wait") >= 2; });
      release.set();
    });
    rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
      auto listener = shoal::net::Listener::bind(shoal::net::Address::parse("127.0.0.1:0"));
      shoal::net::ServeOptions opts;
      opts.name_connections = named;
      s.spawn(shoal::net::serve(listener, opts, [&](shoal::net::Stream) -> Task<void> { co_await release.wait(); }));
      shoal::net::Stream client = co_await shoal::net::connect(listener.local_address());
      client_port = std::to_string(client.local_address().port());
      co_await release.wait();
      s.cancel();
    }));
    dumper.join();
    SCOPED_TRACE(dump);
    EXPECT_EQ(contains(dump, "task \"connection from 127.0.0.1:" + client_port + "\""), named);
  }
}

// A handler's label lives in its frame and is written at dump time: dumps
// racing connections that come and go must never read a frame that is gone
// (ASan and TSan legs).
TEST(TaskDump, DumpsWhileConnectionsComeAndGoAreSafe) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "TaskDump serve churn");
  Runtime rt(RuntimeOptions::with_workers(2));
  std::atomic<bool> done{false};
  std::atomic<std::size_t> dumps{0}, named{0};
  std::thread dumper([&] {
    while (!done.load()) {
      std::ostringstream out;
      rt.dump_tasks(out);
      if (contains(out.str(), "connection from 127.0.0.1:")) named.fetch_add(1);
      dumps.fetch_add(1);
    }
  });
  const long connections = shoal::test::scaled(2000, 100);
  auto listener = shoal::net::Listener::bind(shoal::net::Address::parse("127.0.0.1:0"));
  shoal::net::ShutdownSignal stop;  // both outlive the scope that serves
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    shoal::net::ServeOptions opts;
    opts.shutdown = &stop;
    s.spawn(shoal::net::serve(listener, opts, [](shoal::net::Stream c) -> Task<void> {
      std::byte b[1];
      (void)co_await c.read_some(b);  // until the client closes
    }));
    for (long i = 0; i < connections || (dumps.load() < 20 && i < 100 * connections); ++i) {
      shoal::net::Stream c = co_await shoal::net::connect(listener.local_address());
      if (i % 2 == 0) co_await shoal::checkpoint();  // some handlers get to wait, and be dumped, first
    }
    stop.trigger();
  }));
  done.store(true);
  dumper.join();
  EXPECT_GE(dumps.load(), 20u);
}

// A cancellation takes each child it wakes out of its scope's list (so the
// child ends without the scope's lock); one that waits again is listed again.
// 200 children: the canceller hands them over in several batches.
TEST(TaskDump, ACancelledChildThatWaitsAgainInAShieldIsListedAgain) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "TaskDump");
  Runtime rt(RuntimeOptions::with_workers(2));
  constexpr int kChildren = 200;
  shoal::Channel<int> never(0);
  shoal::Event release;
  std::atomic<int> waiting{0}, caught{0}, cleaned{0};
  std::string dump;
  std::thread dumper([&] {
    dump = dump_when(rt, [&](const std::string& d) {
      return caught.load() == kChildren && count(d, "on shoal::Event::wait") == kChildren;
    });
    release.set();
  });
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    for (int i = 0; i < kChildren; ++i) {
      s.spawn([&]() -> Task<void> {
        bool cancelled = false;
        try {
          waiting.fetch_add(1);
          (void)co_await never.recv();
        } catch (const shoal::Cancelled&) {
          cancelled = true;
        }
        if (!cancelled) co_return;
        caught.fetch_add(1);
        co_await shoal::shielded(wait_for(release));
        cleaned.fetch_add(1);
      });
    }
    while (waiting.load() < kChildren) co_await shoal::checkpoint();
    s.cancel();
  }));
  dumper.join();
  SCOPED_TRACE(dump);
  EXPECT_EQ(caught.load(), kChildren);
  EXPECT_EQ(cleaned.load(), kChildren);
  EXPECT_EQ(count(dump, "on shoal::Event::wait"), static_cast<std::size_t>(kChildren))
      << "every cancelled child waiting in its shield is in the dump";
  EXPECT_FALSE(contains(dump, "shoal::Channel::recv")) << "no child is still listed at the wait it was cancelled out of";
}

TEST(TaskDump, WithoutTrackWaitsSaysWhatButNotHowLong) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "TaskDump");
  Runtime rt(RuntimeOptions::with_workers(1));
  shoal::Event release;
  std::string dump;
  std::thread dumper([&] {
    dump = dump_when(rt, [](const std::string& d) { return contains(d, "on shoal::Event::wait"); });
    release.set();
  });
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> { co_await release.wait(); });
    co_return;
  }));
  dumper.join();
  EXPECT_TRUE(contains(dump, "track_waits is off")) << dump;
  EXPECT_TRUE(contains(dump, ": waiting on shoal::Event::wait\n")) << dump;
}

TEST(TaskDump, SetNameRenamesTheCallingTask) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "TaskDump");
  Runtime rt(RuntimeOptions::with_workers(2));
  shoal::Event release;
  std::string dump;
  std::thread dumper([&] {
    dump = dump_when(rt, [](const std::string& d) { return contains(d, "\"conn 127.0.0.1:4000\""); });
    release.set();
  });
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(shoal::named("conn"), [&]() -> Task<void> {
      co_await shoal::checkpoint();  // waited once under its first name: listed
      shoal::this_task::set_name("conn 127.0.0.1:4000");
      co_await release.wait();
    });
    co_return;
  }));
  dumper.join();
  EXPECT_TRUE(contains(dump, "task \"conn 127.0.0.1:4000\" (spawned at " __FILE__ ":")) << "the spawn site is kept:\n"
                                                                                     << dump;
  EXPECT_THROW(shoal::this_task::set_name("x"), std::logic_error);
}

// stderr goes to a scratch file while it lives (the dump signal writes there).
class CapturedStderr {
 public:
  CapturedStderr() {
    file_ = ::mkstemp(path_);
    if (file_ < 0) throw std::runtime_error("mkstemp failed");
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    ::dup2(file_, STDERR_FILENO);
  }
  ~CapturedStderr() {
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    ::close(file_);
    ::unlink(path_);
  }
  CapturedStderr(const CapturedStderr&) = delete;
  CapturedStderr& operator=(const CapturedStderr&) = delete;
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  char path_[32] = "/tmp/shoal-dump-XXXXXX";
  int file_ = -1;
  int saved_ = -1;
};

// Sends `sig` until stderr holds `wanted` (the dump may not show it at the
// first signal), within 10 s; returns what stderr held last.
std::string ask_dump_until(const CapturedStderr& err, int sig, const std::function<bool(const std::string&)>& wanted) {
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    ::kill(::getpid(), sig);
    std::this_thread::sleep_for(20ms);
    text = err.text();
    if (wanted(text)) break;
  }
  return text;
}

/// Two workers; SIGUSR2 dumps the tasks.
RuntimeOptions dumping_on_sigusr2() {
  RuntimeOptions opts = RuntimeOptions::with_workers(2);
  opts.dump_signal = SIGUSR2;
  return opts;
}

TEST(TaskDump, TheDumpSignalWritesTheTreeToStderr) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "TaskDump");
  std::string text;
  {
    CapturedStderr err;
    Runtime rt(dumping_on_sigusr2());
    shoal::Event release;
    std::thread asker([&] {
      text = ask_dump_until(err, SIGUSR2, [](const std::string& t) {
        return contains(t, "\"stuck\"") && contains(t, "on shoal::Event::wait");
      });
      release.set();
    });
    rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn(shoal::named("stuck"), [&]() -> Task<void> { co_await release.wait(); });
      co_return;
    }));
    asker.join();
  }
  EXPECT_TRUE(matches(text, "task \"stuck\" (spawned at *: waiting # ms on shoal::Event::wait"))
      << text;
}

// The dump is written by the thread in block_on, not by a worker: with both
// workers computing (no checkpoint until released), it still arrives.
TEST(TaskDump, TheDumpSignalAnswersWhileEveryWorkerComputes) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "TaskDump");
  std::string text;
  {
    CapturedStderr err;
    Runtime rt(dumping_on_sigusr2());
    std::atomic<int> computing{0};
    std::atomic<bool> release{false};
    std::thread asker([&] {
      while (computing.load() < 2) std::this_thread::yield();  // both workers are held from here on
      text = ask_dump_until(err, SIGUSR2, [](const std::string& t) { return count(t, "running or ready to run") >= 2; });
      release.store(true);
    });
    auto compute = [&]() -> Task<void> {
      co_await shoal::sleep_for(1ms);  // waited once: the dump lists it
      computing.fetch_add(1);
      while (!release.load()) std::this_thread::yield();
    };
    rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn(shoal::named("computes"), compute);
      s.spawn(shoal::named("computes"), compute);
      co_return;
    }));
    asker.join();
  }
  EXPECT_GE(count(text, "task \"computes\" (spawned at "), 2u) << text;
}

// threads = workers + 1: the dump signal starts no thread of its own.
TEST(TaskDump, TheDumpSignalStartsNoThread) {
  if (shoal::test::on_libkqueue()) GTEST_SKIP() << "libkqueue limit: it runs threads of its own (its fd-close monitor)";
  // The threads that appear, not a count: an idle blocking-pool thread an
  // earlier test left in this process may exit meanwhile (one binary per
  // process, as the aarch64 leg runs it under qemu).
  auto threads = [] {
    std::set<std::string> ids;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ids.insert(e.path().filename().string());
    return ids;
  };
  const std::set<std::string> before = threads();
  Runtime rt(dumping_on_sigusr2());
  std::size_t added = 0;
  rt.block_on([&]() -> Task<void> {
    for (const std::string& id : threads()) added += before.count(id) == 0 ? 1 : 0;
    co_return;
  }());
  EXPECT_EQ(added, 2u) << "threads besides the 2 workers";
}

TEST(TaskDump, ADumpSignalThatCannotBeCaughtIsRefusedByName) {
  RuntimeOptions opts;
  opts.dump_signal = SIGKILL;
  try {
    Runtime rt(std::move(opts));
    FAIL() << "accepted SIGKILL";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "RuntimeOptions::dump_signal = 9")) << e.what();
  }
}

// Dumps race tasks that keep waking, waiting and finishing: every dump
// completes and nothing is read after it is freed (ASan, TSan). The tasks
// keep going until the dumper has finished kMinDumps dumps, so the dumps
// overlap them however fast either side runs.
TEST(TaskDump, DumpsWhileTasksWakeWaitAndFinishAreSafe) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "TaskDump");
  RuntimeOptions opts = RuntimeOptions::with_workers(2);
  opts.track_waits = true;
  Runtime rt(std::move(opts));
  constexpr std::size_t kMinDumps = 20;
  std::atomic<bool> done{false};
  std::atomic<std::size_t> dumps{0};
  std::thread dumper([&] {
    while (!done.load()) {
      std::ostringstream out;
      rt.dump_tasks(out);
      dumps.fetch_add(1);
    }
  });
  const long rounds = shoal::test::scaled(2000, 100);
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    for (int pair = 0; pair < 4; ++pair) {
      auto ping = std::make_shared<shoal::Channel<int>>(0);
      s.spawn([ping, rounds, &dumps]() -> Task<void> {
        for (long i = 0; i < rounds || dumps.load() < kMinDumps; ++i) co_await ping->send(static_cast<int>(i));
        ping->close();
      });
      s.spawn([ping]() -> Task<void> {
        for (bool more = true; more;) {
          // A short-lived child per round: records come and go under the dump.
          auto round = [&](Scope& inner) -> Task<void> {
            inner.spawn([]() -> Task<void> { co_await shoal::checkpoint(); });
            const std::optional<int> v = co_await ping->recv();
            more = v.has_value();
          };
          co_await shoal::scope(round);
        }
      });
    }
    co_return;
  }));
  done.store(true);
  dumper.join();
  EXPECT_GE(dumps.load(), kMinDumps);
}

}  // namespace

namespace {

void spin_for(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// The task finishes inside its long step: the warning is written after its
// record is gone, from the label copied when the step began (ASan checks).
TEST(LongPoll, AStepOverTheThresholdIsReportedWithTheTasksNameAndSpawnSite) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "LongPoll");
  RuntimeOptions opts = RuntimeOptions::with_workers(2);
  opts.long_poll_warning = 20ms;
  Runtime rt(std::move(opts));
  int line = 0;
  ::testing::internal::CaptureStderr();
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    s.spawn(shoal::named("cruncher"), []() -> Task<void> { spin_for(60ms); co_return; }); line = __LINE__;
    co_return;
  }));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(matches(err, "shoal: a task step ran # ms without yielding on worker #: task \"cruncher\" (spawned at *task_dump_test.cpp:" +
                               std::to_string(line) + "); other tasks"))
      << err;
  EXPECT_EQ(count(err, "a task step ran"), 1u) << err;
}

TEST(LongPoll, StepsUnderTheThresholdAreNotReported) {
  shoal::test::Watchdog dog(shoal::test::kWatchdog, "LongPoll");
  RuntimeOptions opts = RuntimeOptions::with_workers(2);
  opts.long_poll_warning = std::chrono::seconds(5);
  Runtime rt(std::move(opts));
  ::testing::internal::CaptureStderr();
  rt.block_on(shoal::scope([&](Scope& s) -> Task<void> {
    for (int i = 0; i < 100; ++i) {
      s.spawn([]() -> Task<void> {
        co_await shoal::checkpoint();
        spin_for(1ms);
      });
    }
    co_return;
  }));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("a task step ran"), std::string::npos) << err;
}

TEST(LongPoll, AThresholdOutOfRangeIsRefusedByName) {
  RuntimeOptions opts;
  opts.long_poll_warning = -1ms;
  EXPECT_THROW(
      {
        try {
          Runtime rt(std::move(opts));
        } catch (const std::invalid_argument& e) {
          EXPECT_TRUE(contains(e.what(), "RuntimeOptions::long_poll_warning = -1 ms")) << e.what();
          throw;
        }
      },
      std::invalid_argument);
}

}  // namespace
