// Raising shoal::Cancelled from the waiting frame itself.
//
// Every cancelled wait throws Cancelled, and in a cancel fan-out the throw
// is most of a child's cost: the unwinder computes the state of every frame
// from the raise to the handler, once to search for the handler and once to
// clean up, plus the frame of the unwinder's own entry. `throw` raises from
// inside __cxa_throw, one frame deeper than the wait: five computations for
// a cancelled coroutine. raise_cancelled() starts the cleanup phase straight
// from the waiting frame, as a landing pad resumes one: two.
//
// Skipping the search is safe because every raise site runs in a coroutine,
// and a coroutine's body always has a handler (the catch-all that hands the
// exception to its promise). The search could only find that handler or a
// nearer one, and the cleanup phase, asked for no particular frame, stops
// at the first handler that matches: the same one. A noexcept frame on the
// way ends in std::terminate, as with `throw`. The exception is the one
// `throw Cancelled{}` makes (docs/cancellation.md, "The throw").
#pragma once

#include <cstddef>

// The direct raise needs the Itanium C++ ABI's table-driven unwinder and
// libstdc++'s runtime (tests/runtime/raise_test.cpp checks the layouts it
// relies on). Elsewhere, or with SHOAL_NO_DIRECT_RAISE defined for the whole
// build (the library and everything that includes it), raise_cancelled()
// throws.
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
/// A new Cancelled in the state __cxa_throw gives it, plus what the search
/// phase would have recorded: allocated by the C++ runtime, one reference
/// held by the raise, counted by std::uncaught_exceptions(), no handler
/// frame designated, the handler's object pointer set. Returns its unwind
/// header.
[[gnu::cold]] _Unwind_Exception* new_cancelled_exception() noexcept;
/// Not reached: the cleanup phase ends in a handler (or std::terminate).
[[noreturn, gnu::cold]] void raise_failed(_Unwind_Exception* e) noexcept;
#endif


/// Throws shoal::Cancelled. Inlined, so that the unwinder starts at the
/// caller's frame (await_resume inlined into the waiting coroutine). Call it
/// only where a handler is certain (in a coroutine, or below one).
[[noreturn, gnu::always_inline]] inline void raise_cancelled() {
#if SHOAL_DIRECT_RAISE
  _Unwind_Exception* e = new_cancelled_exception();
  _Unwind_Resume(e);
  raise_failed(e);
#else
  throw_cancelled();
#endif
}

}  // namespace shoal::detail
