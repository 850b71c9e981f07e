// Recognizing Cancelled without paying for a rethrow on the hot path: a
// cancel fan-out of 10k children must not add 10k extra throws.
#include <cxxabi.h>

#include <stdexcept>
#include <cstdio>
#include <new>
#include <string>
#include <typeinfo>

#include "shoal/runtime/errors.hpp"
#include "shoal/scope/scope.hpp"

namespace shoal {

namespace detail {

bool current_exception_is_cancelled() noexcept {
  const std::type_info* t = abi::__cxa_current_exception_type();
  return t != nullptr && *t == typeid(Cancelled);
}

bool is_cancelled_exception(const std::exception_ptr& e) noexcept {
  if (!e) return false;
#if defined(__GLIBCXX__)
  const std::type_info* t = e.__cxa_exception_type();
  return t != nullptr && *t == typeid(Cancelled);
#else
  try {
    std::rethrow_exception(e);
  } catch (const Cancelled&) {
    return true;
  } catch (...) {
    return false;
  }
#endif
}

bool is_out_of_memory(const std::exception_ptr& e) noexcept {
  if (!e) return false;
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    return true;
  } catch (...) {
  }
  return false;
}

void throw_invalid_task_await(bool moved_from) {
  throw std::logic_error(moved_from ? "shoal::Task: awaited after being moved from (it holds no coroutine)"
                                    : "shoal::Task: awaited a second time (its coroutine already finished)");
}

void print_fault(const char* prefix, const std::exception_ptr& e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "%s%s\n", prefix, ex.what());
  } catch (const Cancelled& c) {
    std::fprintf(stderr, "%s%s\n", prefix, c.what());
  } catch (...) {
    std::fprintf(stderr, "%s(not a std::exception)\n", prefix);
  }
}

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
  }
  return "(not a std::exception)";
}

}  // namespace detail

bool is_cancellation(const std::exception_ptr& e) noexcept { return detail::is_cancelled_exception(e); }

}  // namespace shoal
