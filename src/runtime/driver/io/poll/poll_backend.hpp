// poll(2) backend: portable, level-triggered underneath, emulating one-shot
// edges by reporting each readiness once until the interest is re-armed.
#pragma once

#include <poll.h>

#include <mutex>
#include <unordered_map>
#include <vector>

#include "shoal/detail/sync_shim.hpp"
#include "src/runtime/driver/io/backend.hpp"

namespace shoal::detail::io {

class PollBackend final : public Backend {
 public:
  PollBackend();
  ~PollBackend() override;
  const char* name() const noexcept override { return "poll"; }
  void add(int fd, std::uint32_t interest, void* token) override;
  void remove(int fd) noexcept override;
  std::size_t wait(std::chrono::nanoseconds timeout, std::span<Event> out) override;
  void wake() noexcept override;
  bool needs_rearm() const noexcept override { return true; }
  void rearm(int fd, std::uint32_t interest, void* token) override;

 private:
  struct Reg {
    std::uint32_t interest;
    void* token;
  };
  ::shoal::detail::shim::mutex mu_;
  std::unordered_map<int, Reg> regs_;
  int wake_read_ = -1;
  int wake_write_ = -1;
};

}  // namespace shoal::detail::io
