// Raising shoal::Cancelled (include/shoal/detail/raise.hpp): the one
// out-of-line throw, and the pieces of the direct raise that need the C++
// runtime's ABI. Its own file so that the model checker links it too.
#include <cxxabi.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <typeinfo>
#include <utility>

#include "shoal/runtime/errors.hpp"

#if SHOAL_DIRECT_RAISE
// ASan's hook for a stack left without returning, which its __cxa_throw
// interceptor calls. Weak, and looked for at run time: whether the program
// runs under ASan is the program's choice (its own build may have ASan when
// this library's has none), not this library's.
extern "C" void __asan_handle_no_return() __attribute__((weak));
#endif

namespace shoal::detail {

void throw_cancelled() { throw Cancelled{}; }

#if SHOAL_DIRECT_RAISE
namespace {
// The Itanium C++ ABI's per-thread exception globals (section 2.2.2):
// __cxa_throw counts a raise here, and __cxa_begin_catch uncounts it.
struct EhGlobals {
  void* caught_exceptions;
  unsigned int uncaught_exceptions;
};
}  // namespace

_Unwind_Exception* new_cancelled_exception() noexcept {
  // make_exception_ptr allocates and initializes the object exactly as
  // __cxa_throw does before it raises, and holds one reference: the one a
  // raise holds until its handler ends.
  std::exception_ptr ref = std::make_exception_ptr(Cancelled{});
  static_assert(sizeof ref == sizeof(void*), "libstdc++'s exception_ptr is the address of the thrown object");
  void* object = nullptr;
  std::memcpy(&object, &ref, sizeof object);
  // Hand that reference to the raise: moved into storage never destroyed.
  alignas(std::exception_ptr) unsigned char keep[sizeof ref];
  ::new (static_cast<void*>(keep)) std::exception_ptr(std::move(ref));
  ++reinterpret_cast<EhGlobals*>(abi::__cxa_get_globals())->uncaught_exceptions;
  // The ABI puts the unwind header last in __cxa_exception, right before
  // the thrown object, and the handler's object pointer (adjustedPtr) right
  // before the header. The search phase would set that pointer; Cancelled
  // has no base class, so every handler that matches it gets the object.
  auto* header = static_cast<_Unwind_Exception*>(object) - 1;
  reinterpret_cast<void**>(header)[-1] = object;
  // No frame designated as the handler's: the cleanup phase stops at the
  // first handler that matches.
  header->private_1 = 0;
  header->private_2 = 0;
  if (&__asan_handle_no_return != nullptr) __asan_handle_no_return();  // what ASan's __cxa_throw does
  return header;
}

void raise_failed(_Unwind_Exception* e) noexcept {
  abi::__cxa_begin_catch(e);
  std::terminate();
}
#endif

}  // namespace shoal::detail
