// kqueue backend (macOS and the BSDs; on Linux over libkqueue).
#pragma once

#include <vector>

#include "shoal/detail/sync_shim.hpp"
#include "src/runtime/driver/io/backend.hpp"

namespace shoal::detail::io {

class KqueueBackend final : public Backend {
 public:
  KqueueBackend();
  ~KqueueBackend() override;
  const char* name() const noexcept override { return "kqueue"; }
  void add(int fd, std::uint32_t interest, void* token) override;
  void remove(int fd) noexcept override;
  std::size_t wait(std::chrono::nanoseconds timeout, std::span<Event> out) override;
  void wake() noexcept override;
  /// Writability is asked for when a writer waits: EVFILT_WRITE goes in
  /// one-shot then (kqueue_backend.cpp says why).
  bool needs_rearm() const noexcept override { return true; }
  void rearm(int fd, std::uint32_t interest, void* token) override;
  bool watches_processes() const noexcept override { return true; }
  void add_process(int pid, void* token) override;
  void remove_process(int pid) noexcept override;

 private:
  int kq_ = -1;
  // Each registered fd's token, so that a late rearm (its waiter woke, the
  // fd was closed and its number reused meanwhile) adds nothing for a
  // source that is gone. mu_ also makes remove and rearm exclusive.
  shim::mutex mu_;
  void arm_write_locked(int fd, void* token);
  std::vector<void*> tokens_;
};

}  // namespace shoal::detail::io
