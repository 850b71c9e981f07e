// shoal::fs on each way it runs: the blocking pool (the default backend)
// and io_uring (SHOAL_IO_BACKEND=uring; skipped, saying why, where the
// kernel refuses it), each on 1 worker and on 4.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include "shoal/testing/registrations.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using shoal::Scope;
using shoal::Task;
using shoal::fs::File;

// A fresh directory per test, removed with what is in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/shoal-fs-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    if (!path_.empty()) (void)std::system(("rm -rf '" + path_ + "'").c_str());
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::span<const std::byte> bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }
std::span<std::byte> bytes(std::string& s) { return std::as_writable_bytes(std::span(s.data(), s.size())); }

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  return s;
}

// (backend, workers): "pool" is the default backend, where files go to the blocking pool.
class FileTest : public ::testing::TestWithParam<std::tuple<std::string, std::size_t>> {
 protected:
  void SetUp() override {
    if (backend() == "uring" && !shoal::test::io_uring_works()) GTEST_SKIP() << "io_uring is unavailable here";
  }
  const std::string& backend() const { return std::get<0>(GetParam()); }
  void run_task(Task<void> t) {
    shoal::test::EnvGuard env("SHOAL_IO_BACKEND", backend() == "uring" ? "uring" : "");
    shoal::testing::Watchdog dog(shoal::testing::kTestWatchdog,
                                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    shoal::run(std::move(t), shoal::RuntimeOptions::with_workers(std::get<1>(GetParam())));
  }
  TempDir dir;
};

INSTANTIATE_TEST_SUITE_P(Backends, FileTest,
                         ::testing::Combine(::testing::Values(std::string("pool"), std::string("uring")),
                                            ::testing::Values(std::size_t{1}, std::size_t{4})),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "workers";
                         });

#define FILE_TEST(Name)                                          \
  static Task<void> FileTest_##Name##_body(const TempDir& dir); \
  TEST_P(FileTest, Name) { run_task(FileTest_##Name##_body(dir)); } \
  static Task<void> FileTest_##Name##_body([[maybe_unused]] const TempDir& dir)

FILE_TEST(WhatIsWrittenAtAnOffsetIsReadBackThere) {
  const shoal::fs::OpenOptions rw{.read = true, .write = true, .create = true};
  File f = co_await File::open(dir / "a", rw);
  const std::string hello = "hello", world = "world";
  EXPECT_EQ(co_await f.write_at(bytes(world), 100), 5u);
  EXPECT_EQ(co_await f.write_at(bytes(hello), 0), 5u);
  std::string got(5, '\0');
  EXPECT_EQ(co_await f.read_at(bytes(got), 100), 5u);
  EXPECT_EQ(got, "world");
  EXPECT_EQ(co_await f.read_at(bytes(got), 0), 5u);
  EXPECT_EQ(got, "hello");
  std::string hole(3, 'x');
  EXPECT_EQ(co_await f.read_at(bytes(hole), 50), 3u);
  EXPECT_EQ(hole, std::string(3, '\0')) << "the gap reads as zeros";
  co_await f.fsync();
  co_await f.fdatasync();
  co_await f.close();
  EXPECT_FALSE(f.is_open());
}

FILE_TEST(AReadAtOrPastTheEndReturnsZeroAndReadAllStopsThere) {
  const std::string body = pattern(10000);
  co_await shoal::fs::write_file(dir / "b", bytes(body));
  File f = co_await File::open(dir / "b");
  std::string buf(4096, '\0');
  EXPECT_EQ(co_await f.read_at(bytes(buf), 10000), 0u);
  EXPECT_EQ(co_await f.read_at(bytes(buf), 20000), 0u);
  std::string all(16384, '\0');
  EXPECT_EQ(co_await f.read_all(bytes(all), 0), 10000u);
  EXPECT_EQ(all.substr(0, 10000), body);
  std::string tail(100, '\0');
  EXPECT_EQ(co_await f.read_all(bytes(tail), 9950), 50u);
  EXPECT_EQ(tail.substr(0, 50), body.substr(9950));
}

FILE_TEST(WriteAllAndReadFileMoveEveryByteOfALargeBuffer) {
  const std::string body = pattern(3 * 1024 * 1024 + 123);
  std::size_t written = 0;
  {
    File f = co_await File::create(dir / "c");
    co_await f.write_all(bytes(body), 0, written);
    co_await f.close();
  }
  EXPECT_EQ(written, body.size());
  const std::string back = co_await shoal::fs::read_file(dir / "c");
  EXPECT_EQ(back.size(), body.size());
  EXPECT_TRUE(back == body) << "the bytes read differ from those written";
  EXPECT_EQ(co_await shoal::fs::read_file(dir / "c"), body) << "read twice (the size hint path)";
  co_await shoal::fs::write_file(dir / "empty", std::span<const std::byte>());
  EXPECT_EQ(co_await shoal::fs::read_file(dir / "empty"), "");
}

FILE_TEST(ManyTasksReadingOneFileEachGetTheirOwnRange) {
  const std::string body = pattern(64 * 4096);
  co_await shoal::fs::write_file(dir / "d", bytes(body));
  File f = co_await File::open(dir / "d");
  std::vector<std::string> got(64, std::string(4096, '\0'));
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    for (std::size_t i = 0; i < got.size(); ++i) {
      s.spawn([&f, &got, i]() -> Task<void> { (void)co_await f.read_all(bytes(got[i]), i * 4096); });
    }
    co_return;
  });
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], body.substr(i * 4096, 4096)) << "block " << i;
}

FILE_TEST(OpeningAMissingFileNamesThePathAndTheError) {
  const std::string missing = dir / "no-such-file";
  bool threw = false;
  try {
    (void)co_await File::open(missing);
  } catch (const std::system_error& e) {
    threw = true;
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("open of " + missing), std::string::npos) << e.what();
  }
  EXPECT_TRUE(threw);
}

FILE_TEST(AnExclusiveCreateRefusesAnExistingFile) {
  const std::string x = "x";
  co_await shoal::fs::write_file(dir / "e", bytes(x));
  bool threw = false;
  try {
    const shoal::fs::OpenOptions excl{.write = true, .create = true, .exclusive = true};
    (void)co_await File::open(dir / "e", excl);
  } catch (const std::system_error& e) {
    threw = true;
    EXPECT_EQ(e.code().value(), EEXIST);
  }
  EXPECT_TRUE(threw);
}

FILE_TEST(AWriteToAFileOpenedForReadingNamesThePathAndOffset) {
  const std::string x = "x", y = "y";
  co_await shoal::fs::write_file(dir / "ro", bytes(x));
  File f = co_await File::open(dir / "ro");
  bool threw = false;
  try {
    (void)co_await f.write_at(bytes(y), 7);
  } catch (const std::system_error& e) {
    threw = true;
    EXPECT_EQ(e.code().value(), EBADF);
    EXPECT_NE(std::string(e.what()).find("write of " + (dir / "ro") + " at offset 7"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(threw);
}

FILE_TEST(AClosedFileSaysSoInsteadOfUsingAStaleDescriptor) {
  File f = co_await File::create(dir / "f");
  co_await f.close();
  std::string buf(1, '\0');
  bool threw = false;
  try {
    (void)co_await f.read_at(bytes(buf), 0);
  } catch (const std::logic_error& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("not open"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(threw);
}

FILE_TEST(ACancelledTaskWritesNothingButItsCloseStillCloses) {
  File f = co_await File::create(dir / "g");
  const int fd = f.native_handle();
  bool write_cancelled = false;
  const std::string never = "never";
  co_await shoal::scope([&](Scope& s) -> Task<void> {
    s.cancel();
    try {
      (void)co_await f.write_at(bytes(never), 0);
    } catch (const shoal::Cancelled&) {
      write_cancelled = true;
    }
    co_await f.close();  // not a checkpoint: closes even here
  });
  EXPECT_TRUE(write_cancelled);
  EXPECT_FALSE(f.is_open());
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the descriptor is still open";
  struct stat st {};
  EXPECT_EQ(::stat((dir / "g").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0) << "a cancelled write wrote";
}

// The structured cancel: a read of an empty pipe waits in the kernel; the
// cancelled task resumes only at the read's own completion (the kernel's
// -ECANCELED), never while the kernel could still write its buffer, and the
// cancelled read took nothing from the pipe.
TEST_P(FileTest, ACancelledReadInTheKernelResumesOnlyAtItsCompletionAndTakesNothing) {
  if (backend() != "uring") GTEST_SKIP() << "ring only: the blocking pool's pread cannot read a pipe (ESPIPE)";
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  run_task([](std::string path) -> Task<void> {
    const shoal::fs::OpenOptions both{.read = true, .write = true};  // O_RDWR: the open waits for no writer
    File f = co_await File::open(path, both);
    std::size_t in_flight_when_resumed = 99;
    bool cancelled = false;
    std::string buf(16, '\0');
    co_await shoal::scope([&](Scope& s) -> Task<void> {
      s.spawn([&]() -> Task<void> {
        try {
          (void)co_await f.read_at(bytes(buf), 0);
        } catch (const shoal::Cancelled&) {
          cancelled = true;
          in_flight_when_resumed = shoal::testing::operations_in_flight();
          throw;
        }
      });
      while (shoal::testing::operations_in_flight() == 0) co_await shoal::sleep_for(100us);  // submitted
      s.cancel();
      co_return;
    });
    EXPECT_TRUE(cancelled);
    EXPECT_EQ(in_flight_when_resumed, 0u) << "the task resumed before the kernel completed its read";
    const std::string one = "z";  // nothing was taken: this byte is the next read's
    EXPECT_EQ(co_await f.write_at(bytes(one), 0), 1u);
    std::string b(1, '\0');
    EXPECT_EQ(co_await f.read_at(bytes(b), 0), 1u);
    EXPECT_EQ(b, "z");
  }(fifo));
}

// The simulated runtime's manual clock jumps to the next timer only when
// nothing can happen first: a kernel operation in flight can. A read of a
// FIFO that a plain thread writes to later (real time) completes inside a
// 1 s timeout of virtual time; without the check the clock jumped to the
// deadline as soon as the task waited, and the read was cancelled.
TEST(FileSimulated, TheManualClockDoesNotJumpPastAKernelOperationInFlight) {
  if (!shoal::test::io_uring_works()) GTEST_SKIP() << "io_uring is unavailable here";
  TempDir dir;
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  shoal::test::EnvGuard env("SHOAL_IO_BACKEND", "uring");
  shoal::testing::Watchdog dog(shoal::testing::kTestWatchdog, "FileSimulated");
  std::atomic<bool> reading{false};
  std::thread writer([&] {
    while (!reading.load()) std::this_thread::yield();
    // Real time, so the byte comes after the task waits (if it came first
    // the read would find it: the test passes either way with the check).
    std::this_thread::sleep_for(20ms);
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // ENXIO once the reader is gone
    if (fd >= 0) {
      [[maybe_unused]] auto r = ::write(fd, "k", 1);
      ::close(fd);
    }
  });
  bool read_it = false;
  try {
    shoal::run(
        [](std::string path, std::atomic<bool>& flag, bool& ok) -> Task<void> {
          const shoal::fs::OpenOptions both{.read = true, .write = true};
          File f = co_await File::open(path, both);
          std::string b(1, '\0');
          auto read = [&]() -> Task<std::size_t> { co_return co_await f.read_at(bytes(b), 0); };
          flag.store(true);
          const std::size_t n = co_await shoal::with_timeout(1s, read());
          ok = n == 1 && b == "k";
        }(fifo, reading, read_it),
        shoal::RuntimeOptions::simulated(1));
  } catch (const shoal::TimedOut&) {
    ADD_FAILURE() << "the virtual deadline passed while the read was in the kernel";
  }
  writer.join();
  EXPECT_TRUE(read_it);
}

}  // namespace
