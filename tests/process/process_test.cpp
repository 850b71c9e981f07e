// Child processes: piped stdio, async wait, exit statuses, errors.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "shoal/process/process.hpp"
#include "shoal/testing/registrations.hpp"
#include "support/stream_io.hpp"
#include "support/test_support.hpp"

namespace {

using shoal::test::read_to_end;

using namespace std::chrono_literals;
using shoal::Task;
namespace process = shoal::process;

SHOAL_TEST_SUITE(ProcessTest);

SHOAL_TEST(ProcessTest, CatEchoesItsStdinToItsStdout) {
  process::Options opts;
  opts.in = process::Stdio::pipe;
  opts.out = process::Stdio::pipe;
  auto child = process::spawn({"cat"}, opts);
  std::string got;
  const std::string text(100'000, 'z');  // more than a pipe buffer: both directions must flow at once
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await child.in().write_all(text);
      child.in().close();  // end of file for cat
    });
    got = co_await read_to_end(child.out());
  });
  const auto status = co_await child.wait();
  EXPECT_TRUE(status.success()) << status.to_string();
  EXPECT_EQ(got.size(), text.size());
  EXPECT_TRUE(got == text);
}

// A child's exit is an event for the reactor (a pidfd on Linux, EVFILT_PROC
// on a kqueue), not a poll: while the wait is pending it holds a
// registration, and closing the child's stdin ends it.
SHOAL_TEST(ProcessTest, WaitingForAChildIsAnEventNotAPoll) {
#if defined(SHOAL_PORTABLE_POSIX)
  if (!shoal::test::on_libkqueue()) SHOAL_CO_SKIP("no pidfd in the POSIX forms, and this backend watches no process");
#endif
  process::Options opts;
  opts.in = process::Stdio::pipe;
  auto child = process::spawn({"cat"}, opts);
  const std::size_t before = shoal::testing::io_registrations();
  bool registered = false;
  std::optional<process::ExitStatus> status;
  co_await shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> { status = co_await child.wait(); });
    // The waiter's registration is the event this waits for (bounded).
    for (int i = 0; i < 5000 && !registered; ++i) {
      registered = shoal::testing::io_registrations() > before;
      if (!registered) co_await shoal::sleep_for(1ms);
    }
    child.in().close();  // end of file: cat exits
  });
  EXPECT_TRUE(registered) << "the wait registered nothing with the reactor: it polls";
  SHOAL_CO_ASSERT(status.has_value());
  EXPECT_TRUE(status->success()) << status->to_string();
}

SHOAL_TEST(ProcessTest, ExitCodesAndSignalsAreReported) {
  auto exits = process::spawn({"sh", "-c", "exit 3"});
  const auto a = co_await exits.wait();
  EXPECT_EQ(a.code, 3);
  EXPECT_EQ(a.to_string(), "exit code 3");
  auto sleeper = process::spawn({"sleep", "30"});
  sleeper.kill(SIGKILL);
  const auto b = co_await sleeper.wait();
  EXPECT_EQ(b.signal, SIGKILL);
  EXPECT_EQ(b.to_string(), "killed by SIGKILL");
  EXPECT_EQ((co_await sleeper.wait()).signal, SIGKILL) << "a second wait must return the same status";
}

TEST(ProcessSpawn, AMissingProgramIsNamed) {
  if (shoal::test::under_emulation()) {
    // glibc's posix_spawn reports an exec failure through memory its
    // CLONE_VFORK child shares; qemu-user runs that child as a fork.
    GTEST_SKIP() << "qemu-user limit: posix_spawn's exec failure never reaches the parent (CLONE_VFORK emulated as fork)";
  }
  try {
    (void)process::spawn({"shoal-no-such-program"});
    ADD_FAILURE() << "spawned a missing program";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("\"shoal-no-such-program\""), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)process::spawn({}), std::invalid_argument);
}

SHOAL_TEST(ProcessTest, ACancelledWaitLeavesTheChildRunning) {
  auto child = process::spawn({"sleep", "30"});
  auto r = co_await shoal::move_on_after(5ms, child.wait());
  EXPECT_FALSE(r.has_value());
  EXPECT_EQ(::kill(child.pid(), 0), 0) << "the child is gone";
  child.kill(SIGTERM);
  EXPECT_EQ((co_await child.wait()).signal, SIGTERM);
}

SHOAL_TEST(ProcessTest, DestroyingAnUnwaitedChildKillsIt) {
  pid_t pid;
  {
    auto child = process::spawn({"sleep", "30"});
    pid = child.pid();
  }
  // Killed at once; reaped by the destructor or by the next process call.
  for (int i = 0; i < 2000 && ::kill(pid, 0) == 0; ++i) {
    auto probe = process::spawn({"true"});
    (void)co_await probe.wait();
  }
  EXPECT_NE(::kill(pid, 0), 0) << "the child of a destroyed Child is still there";
}

SHOAL_TEST(ProcessTest, StderrAndDevNullAreWiredAsAsked) {
  process::Options opts;
  opts.in = process::Stdio::null;
  opts.out = process::Stdio::null;
  opts.err = process::Stdio::pipe;
  auto child = process::spawn({"sh", "-c", "echo out; echo err >&2"}, opts);
  EXPECT_EQ(co_await read_to_end(child.err()), "err\n");
  EXPECT_TRUE((co_await child.wait()).success());
  EXPECT_THROW((void)child.out(), std::logic_error);
}

SHOAL_TEST(ProcessTest, KillGroupReachesWhatTheChildStarted) {
  process::Options opts;
  opts.out = process::Stdio::pipe;
  opts.process_group = true;
  auto child = process::spawn({"sh", "-c", "sleep 60 & echo $!; wait"}, opts);
  std::string line;
  while (line.find('\n') == std::string::npos) {
    char buf[64];
    const std::size_t n = co_await child.out().read_some(std::as_writable_bytes(std::span(buf)));
    SHOAL_CO_ASSERT(n > 0);
    line.append(buf, n);
  }
  const pid_t grandchild = std::stoi(line);
  child.kill_group(SIGTERM);
  const auto status = co_await child.wait();
  EXPECT_EQ(status.signal, SIGTERM) << status.to_string();
  // The grandchild got SIGTERM too (its exit is its adopter's to reap).
  bool gone = false;
  for (int i = 0; i < 5000 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string st;
    gone = !std::getline(stat, st) || st.substr(st.rfind(')') + 2, 1) == "Z";
    if (!gone) co_await shoal::sleep_for(1ms);
  }
  EXPECT_TRUE(gone) << "the group's other member outlived kill_group";
}

SHOAL_TEST(ProcessTest, KillGroupWithoutAProcessGroupIsALogicError) {
  auto child = process::spawn({"true"});
  EXPECT_THROW(child.kill_group(SIGTERM), std::logic_error);
  (void)co_await child.wait();
}

}  // namespace

namespace {

// Spawns `argv` with `options` from a thread of its own, which then ends:
// for PR_SET_PDEATHSIG the spawning thread is the parent.
process::Child spawn_from_a_thread_that_ends(std::vector<std::string> argv, process::Options options) {
  std::optional<process::Child> child;
  std::thread([&] { child.emplace(process::spawn(argv, options)); }).join();
  return std::move(*child);
}

SHOAL_TEST(ProcessTest, AChildThatDiesWithItsParentIsKilledWhenTheSpawningThreadEnds) {
  process::Options o;
  o.die_with_parent = true;
  o.process_group = true;
  auto child = spawn_from_a_thread_that_ends({"sleep", "60"}, o);
  const auto status = co_await shoal::with_timeout(30s, child.wait());
  EXPECT_EQ(status.signal, SIGKILL) << status.to_string();
}

SHOAL_TEST(ProcessTest, AChildThatDiesWithItsParentGetsItsStdioEnvironmentAndDirectory) {
  process::Options o;
  o.die_with_parent = true;
  o.in = process::Stdio::pipe;
  o.out = process::Stdio::pipe;
  o.err = process::Stdio::null;
  o.cwd = "/tmp";
  o.env = std::vector<std::string>{"GREETING=hi"};
  auto child = process::spawn({"sh", "-c", "read x; echo \"$x $GREETING $(pwd)\"; echo lost >&2"}, o);
  co_await child.in().write_all(std::string_view("ping\n"));
  child.in().close();
  EXPECT_EQ(co_await read_to_end(child.out()), "ping hi /tmp\n");
  const auto status = co_await child.wait();
  EXPECT_TRUE(status.success()) << status.to_string();
}

TEST(ProcessSpawn, AMissingProgramThatWouldDieWithItsParentIsNamed) {
  process::Options o;
  o.die_with_parent = true;
  try {
    (void)process::spawn({"shoal-no-such-program"}, o);
    ADD_FAILURE() << "spawned a missing program";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("shoal-no-such-program"), std::string::npos) << e.what();
  }
}

}  // namespace
