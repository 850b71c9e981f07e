// The same-run reference for the HTTP and churn rows: a hand-written,
// single-threaded, edge-triggered epoll "hello" server in plain C++ (no
// shoal), answering keep-alive and "Connection: close" requests like
// examples/http_server does (GET only, no bodies, no timeouts). DESIGN.md §3
// quotes "hand-written epoll, 1 thread" as the hardware's reference; this
// lets bench/net/run.sh measure that ratio in the same run.
//
//   net_epoll_reference [127.0.0.1:port]   (port 0 picks one; prints "listening on ...")
// SIGINT/SIGTERM stop it.
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "bench/net/net_util.hpp"

namespace {

}  // namespace

int main(int argc, char** argv) {
  using namespace netbench;
  raise_fd_limit();
  install_stop_signals();
  unsigned port = 0;
  const int ls = reference_listener(argc > 1 ? argv[1] : "127.0.0.1:0", SOCK_NONBLOCK, port);
  std::printf("listening on 127.0.0.1:%u (plain epoll, 1 thread)\n", port);
  std::fflush(stdout);

  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = ls;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  std::vector<std::string> partial;  // by fd: the unparsed bytes (empty, no buffer, while idle)
  std::vector<epoll_event> events(256);
  char buf[4096];
  std::string out;
  while (!stop_requested) {
    const int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 200);
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<std::size_t>(i)].data.fd;
      if (fd == ls) {
        for (;;) {
          const int c = ::accept4(ls, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          epoll_event e{};
          e.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
          e.data.fd = c;
          ::epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
          if (static_cast<std::size_t>(c) >= partial.size()) partial.resize(static_cast<std::size_t>(c) * 2 + 1);
        }
        continue;
      }
      std::string& in = partial[static_cast<std::size_t>(fd)];
      bool eof = false;
      for (;;) {
        const ssize_t r = ::read(fd, buf, sizeof buf);
        if (r > 0) {
          in.append(buf, static_cast<std::size_t>(r));
          continue;
        }
        eof = r == 0 || (errno != EAGAIN && errno != EINTR);
        if (r < 0 && errno == EINTR) continue;
        break;
      }
      out.clear();
      bool close = answer_requests(in, out);
      if (!out.empty() && ::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
        close = true;  // a hello response always fits the socket buffer; anything else is a reset
      }
      if (close || eof || in.size() > 8192) {
        std::string().swap(in);
        ::close(fd);
      }
    }
  }
  return 0;
}
