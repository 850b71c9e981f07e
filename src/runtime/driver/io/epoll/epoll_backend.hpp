// epoll backend (Linux).
#pragma once

#include "src/runtime/driver/io/backend.hpp"

namespace shoal::detail::io {

class EpollBackend final : public Backend {
 public:
  EpollBackend();
  ~EpollBackend() override;
  const char* name() const noexcept override { return "epoll"; }
  void add(int fd, std::uint32_t interest, void* token) override;
  void remove(int fd) noexcept override;
  std::size_t wait(std::chrono::nanoseconds timeout, std::span<Event> out) override;
  void wake() noexcept override;

 private:
  int epfd_ = -1;
  int wakefd_ = -1;
};

}  // namespace shoal::detail::io
