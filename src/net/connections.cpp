// Shutdown protocol. shutdown() sets down_ and then, under mu_, moves every
// idle entry to closing and shuts its socket's read side, which wakes its
// wait. An entry stores idle and then reads down_ (both seq_cst), so either
// it sees the shutdown itself or the shutdown sees it idle: none sleeps
// through it. An entry leaves the list (under mu_) before its socket closes.
#include "shoal/net/connections.hpp"

#include <sys/socket.h>

#include "shoal/net/serve.hpp"
#include "shoal/sync/event.hpp"

namespace shoal::net {

void Connections::shutdown() noexcept {
  down_.store(true, std::memory_order_seq_cst);
  std::lock_guard lock(mu_);
  for (Entry* e = entries_.front(); e != nullptr; e = entries_.next(e)) {
    auto expected = Entry::State::idle;
    if (e->state_.compare_exchange_strong(expected, Entry::State::closing)) {
      ::shutdown(e->fd_, SHUT_RD);
    } else if (expected == Entry::State::busy && e->notify_ != nullptr) {
      e->notify_->notify_one();
    }
  }
}

bool Connections::shutting_down() const noexcept {
  return down_.load(std::memory_order_seq_cst) || (signal_ != nullptr && signal_->triggered());
}

Connections::Entry::Entry(Connections& set, int fd, State initial) noexcept : set_(set), fd_(fd), state_(initial) {
  std::lock_guard lock(set_.mu_);
  set_.entries_.push_back(this);
  if (initial == State::idle && set_.down_.load(std::memory_order_seq_cst)) {
    state_.store(State::closing, std::memory_order_relaxed);
    ::shutdown(fd_, SHUT_RD);
  }
}

Connections::Entry::~Entry() {
  std::lock_guard lock(set_.mu_);
  set_.entries_.remove(this);
}

bool Connections::Entry::go_idle() noexcept {
  state_.store(State::idle, std::memory_order_seq_cst);
  if (!set_.shutting_down()) return true;
  auto expected = State::idle;
  state_.compare_exchange_strong(expected, State::closing);
  return false;
}

void Connections::Entry::notify_on_shutdown(Notify& n) noexcept {
  std::lock_guard lock(set_.mu_);
  notify_ = &n;
  if (set_.down_.load(std::memory_order_seq_cst)) n.notify_one();
}

bool Connections::Entry::go_busy() noexcept {
  auto expected = State::idle;
  return state_.compare_exchange_strong(expected, State::busy);
}

}  // namespace shoal::net
