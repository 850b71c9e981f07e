// Raising shoal::Cancelled from the waiting frame itself.
//
// Every cancelled wait throws Cancelled, and in a cancel fan-out the throw
// is most of a child's cost: the unwinder computes the state of every frame
// between the raise and the handler, once to search and once to clean up.
// `throw` raises from inside __cxa_throw, one frame deeper than the wait, so
// a child's coroutine, whose own catch-all is the handler, costs five frame
// computations. Raising from the awaiting frame costs three (docs/cancellation.md,
// "The throw"). The exception is the one `throw Cancelled{}` makes: the same
// object, type and handlers, counted by std::uncaught_exceptions().
#pragma once

// The direct raise needs the Itanium C++ ABI's table-driven unwinder and
// libstdc++'s runtime (the library checks the layout it relies on when it is
// built). Elsewhere, or with SHOAL_NO_DIRECT_RAISE, raise_cancelled() throws.
#if defined(__GLIBCXX__) && defined(__cpp_exceptions) && !defined(SHOAL_NO_DIRECT_RAISE) && \
    !defined(__USING_SJLJ_EXCEPTIONS__) && !defined(__ARM_EABI_UNWINDER__) && __has_include(<unwind.h>)
#define SHOAL_DIRECT_RAISE 1
#include <unwind.h>
#else
#define SHOAL_DIRECT_RAISE 0
#endif

namespace shoal::detail {

/// Throws shoal::Cancelled from an out-of-line frame (errors.hpp's type is
/// not visible everywhere this header is).
[[noreturn]] void throw_cancelled();

#if SHOAL_DIRECT_RAISE
/// A new Cancelled in the state __cxa_throw gives it just before it raises:
/// allocated by the C++ runtime, one reference held by the raise, counted
/// by std::uncaught_exceptions(). Returns its unwind header.
[[gnu::cold]] _Unwind_Exception* new_cancelled_exception() noexcept;
/// The raise found no handler: what __cxa_throw does then (std::terminate).
[[noreturn, gnu::cold]] void raise_failed(_Unwind_Exception* e) noexcept;
#endif

/// Throws shoal::Cancelled. Inlined, so that the unwinder starts at the
/// caller's frame (await_resume inlined into the waiting coroutine).
[[noreturn, gnu::always_inline]] inline void raise_cancelled() {
#if SHOAL_DIRECT_RAISE
  _Unwind_Exception* e = new_cancelled_exception();
  _Unwind_RaiseException(e);
  raise_failed(e);
#else
  throw_cancelled();
#endif
}

}  // namespace shoal::detail
