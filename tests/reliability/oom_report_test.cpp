// Fault reports made while memory runs out (issue 14.2's audit): the default
// reports run on noexcept paths (a scope's completion, serve's handler
// wrapper), so building a std::string there was std::terminate once
// operator new failed. This binary replaces the global operator new so a
// test can make the calling thread's allocations fail.
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

#include "support/test_support.hpp"

namespace {

// Fail every operator new on this thread while > 0 ...
thread_local int t_fail_all = 0;
// ... or only allocations of exactly this size (one report's message).
thread_local std::size_t t_fail_size = 0;

void* checked_alloc(std::size_t n) {
  if (t_fail_all > 0 || (t_fail_size != 0 && n == t_fail_size)) throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

struct FailAllocations {
  FailAllocations() { ++t_fail_all; }
  ~FailAllocations() { --t_fail_all; }
};

}  // namespace

void* operator new(std::size_t n) { return checked_alloc(n); }
void* operator new[](std::size_t n) { return checked_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

using shoal::Scope;
using shoal::Task;

const std::string kLongMessage(300, 'x');  // far past the small-string buffer

TEST(FaultReports, PrintFaultAllocatesNothing) {
  const auto e = std::make_exception_ptr(std::runtime_error(kLongMessage));
  testing::internal::CaptureStderr();
  {
    FailAllocations none;
    shoal::detail::print_fault("report: ", e);
  }
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("report: xxxx"), std::string::npos) << out;
}

// The second fault of a scope is reported (stderr by default) from the
// child's completion, a noexcept path. With the allocation of its message
// failing, the old report (what_of: a std::string) called std::terminate.
TEST(FaultReports, ASuppressedFaultIsReportedWhileAllocationsFail) {
  shoal::test::Watchdog dog(std::chrono::seconds(60), "FaultReports");
  const std::runtime_error second(kLongMessage);  // built now: throwing it copies a refcounted string
  std::string caught;
  testing::internal::CaptureStderr();
  try {
    shoal::run(shoal::scope([&](Scope& s) -> Task<void> {
                 s.spawn([&]() -> Task<void> {
                   try {
                     shoal::Channel<int> never(0);
                     (void)co_await never.recv();
                   } catch (const shoal::Cancelled&) {
                   }
                   t_fail_size = kLongMessage.size() + 1;  // the message string of a report
                   throw second;                          // suppressed: the scope has a fault already
                 });
                 co_await shoal::checkpoint();  // the child waits now
                 throw std::runtime_error("first");
               }),
               shoal::RuntimeOptions::with_workers(1));
  } catch (const std::runtime_error& e) {
    caught = e.what();
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(caught, "first");
  EXPECT_NE(err.find("suppressed fault"), std::string::npos) << err;
  EXPECT_NE(err.find("xxxx"), std::string::npos) << err;
}

TEST(FaultReports, ServeHandlerFaultIsReportedWhileAllocationsFail) {
  const auto e = std::make_exception_ptr(std::runtime_error(kLongMessage));
  const auto peer = shoal::net::Address::parse("127.0.0.1:8080");
  shoal::net::ServeOptions opts;
  testing::internal::CaptureStderr();
  {
    FailAllocations none;
    shoal::detail::report_handler_fault(opts, e, peer);
  }
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("handler"), std::string::npos) << out;
  EXPECT_NE(out.find("xxxx"), std::string::npos) << out;
}

}  // namespace
