// Frame allocation. Every frame carries a 16-byte header recording where it
// came from, so frees go back to the right place even if the hooks or the
// thread's resource changed in between.
#include "shoal/detail/frame_alloc.hpp"

#include <new>

#include "shoal/detail/sync_shim.hpp"

namespace shoal::detail {
namespace {

struct alignas(16) Header {
  std::pmr::memory_resource* resource;  // non-null: from a pmr resource
  const FrameHooks* hooks;              // non-null: from test hooks
};
static_assert(sizeof(Header) == 16);

shim::atomic<const FrameHooks*> g_hooks{nullptr};
thread_local std::pmr::memory_resource* tls_resource = nullptr;

}  // namespace

void set_frame_hooks(const FrameHooks* hooks) noexcept { g_hooks.store(hooks, std::memory_order_release); }

FrameResourceGuard::FrameResourceGuard(std::pmr::memory_resource* resource) noexcept
    : previous_(tls_resource) {
  tls_resource = resource;
}
FrameResourceGuard::~FrameResourceGuard() { tls_resource = previous_; }

void* frame_allocate(std::size_t size) {
  const std::size_t total = size + sizeof(Header);
  std::pmr::memory_resource* resource = tls_resource;
  const FrameHooks* hooks = nullptr;
  void* raw;
  if (resource != nullptr) {
    raw = resource->allocate(total, alignof(Header));
  } else if ((hooks = g_hooks.load(std::memory_order_acquire)) != nullptr) {
    raw = hooks->allocate(total, hooks->ctx);
    if (raw == nullptr) throw std::bad_alloc();
  } else {
    raw = ::operator new(total);
  }
  auto* header = ::new (raw) Header{resource, hooks};
  return header + 1;
}

void frame_deallocate(void* p, std::size_t size) noexcept {
  auto* header = static_cast<Header*>(p) - 1;
  const std::size_t total = size + sizeof(Header);
  if (header->resource != nullptr) {
    header->resource->deallocate(header, total, alignof(Header));
  } else if (header->hooks != nullptr) {
    header->hooks->deallocate(header, total, header->hooks->ctx);
  } else {
    ::operator delete(header);  // unsized: clang 14 lacks sized delete by default
  }
}

}  // namespace shoal::detail
