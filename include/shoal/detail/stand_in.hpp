// A stand-in coroutine frame: what an awaiter that finishes its work on the
// waking worker (an I/O retry, a select's clean-up) parks its task at, so a
// wake-up that is not the end of the wait costs no resume of the awaiting
// coroutine and no frame of its own.
#pragma once

#include "shoal/version.hpp"

#include <coroutine>

namespace shoal::detail {

/// Compilers lay a coroutine frame out as {resume, destroy, ...}, and
/// resume() calls the first word with the frame's address (libstdc++'s
/// noop_coroutine relies on the same). A stand-in is only ever resumed,
/// never destroyed or asked done(), so its second word holds its owner.
struct StandIn {
  void (*resume)(void*);
  void* owner;
  std::coroutine_handle<> handle() noexcept { return std::coroutine_handle<>::from_address(this); }
  /// The owner, from the address resume() is called with.
  template <class Owner>
  static Owner& owner_of(void* frame) noexcept {
    return *static_cast<Owner*>(static_cast<StandIn*>(frame)->owner);
  }
};

}  // namespace shoal::detail
