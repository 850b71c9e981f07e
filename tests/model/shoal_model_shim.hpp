// The sync shim of the model tests (SHOAL_MODEL): shoal/detail/sync_shim.hpp
// includes this instead of the std primitives, so the real protocol code
// runs against the model checker.
#pragma once

#include <mutex>
#include <thread>

#include "model.hpp"

namespace shoal::detail::shim {

template <class T>
using atomic = ::shoal::model::Atomic<T>;
using mutex = ::shoal::model::Mutex;
using condition_variable = ::shoal::model::CondVar;
using thread = std::thread;
template <class M>
using lock_guard = std::lock_guard<M>;
template <class M>
using unique_lock = std::unique_lock<M>;

template <class T>
using plain = T;  // the model checker does not look at plain fields
inline void spin_pause() noexcept { ::shoal::model::spin(); }
inline void thread_yield() noexcept { ::shoal::model::spin(); }

}  // namespace shoal::detail::shim

#define SHOAL_FENCE_SEQ_CST() ::shoal::model::fence()

