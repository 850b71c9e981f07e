// Connection churn: `total` short connections, `concurrency` in flight. Each
// one connects, sends one HTTP/1.1 request with "Connection: close", reads
// the response to EOF and closes. One thread, non-blocking sockets + epoll,
// not shoal.
//
//   net_churn_client <server ip:port> [total=50000] [concurrency=64] [server pid] [sources=8] [linger=1]
//
// Source addresses 127.0.0.32 .. 127.0.0.(31 + sources). With linger=1 the
// client closes with SO_LINGER {1, 0} (a reset): the server has already
// closed its side after the response, and the reset ends its FIN_WAIT2
// at once, so no TIME_WAIT entries pile up across runs.
// The last line is "RESULT key=value ..." for bench/net/run.sh.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/net/net_util.hpp"

namespace {

using namespace netbench;

enum class State { idle, connecting, reading };

struct Conn {
  int fd = -1;
  State state = State::idle;
  std::size_t got = 0;    // response bytes read
  char head[16] = {};     // first bytes of the response
  Clock::time_point started;
};

double self_cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct Stats {
  std::size_t done = 0, errors = 0, bad = 0;
  std::vector<double> latency_us;  // connect .. EOF
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <server ip:port> [total=50000] [concurrency=64] [server pid] [sources=8] [linger=1]\n",
                 argv[0]);
    return 2;
  }
  const sockaddr_in server = parse_addr(argv[1]);
  const std::size_t total = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 50'000;
  const std::size_t concurrency = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 64;
  const int pid = argc > 4 ? std::atoi(argv[4]) : 0;
  const std::size_t sources = argc > 5 ? std::strtoul(argv[5], nullptr, 10) : 8;
  const bool linger_reset = argc > 6 ? std::atoi(argv[6]) != 0 : true;
  raise_fd_limit();

  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1");
  std::vector<Conn> conns(concurrency);
  Stats st;
  st.latency_us.reserve(total);
  std::size_t started = 0;
  std::size_t next_source = 0;

  auto finish = [&](std::size_t slot, bool ok) {
    Conn& c = conns[slot];
    if (ok) {
      ++st.done;
      st.latency_us.push_back(since(c.started) * 1e6);
    }
    if (linger_reset) {
      linger l{1, 0};
      ::setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    ::close(c.fd);  // also removes it from the epoll set
    c.fd = -1;
    c.state = State::idle;
  };

  // Starts connections in free slots until `total` have been started.
  auto start = [&](std::size_t slot) {
    while (started < total) {
      Conn& c = conns[slot];
      c.started = Clock::now();
      c.got = 0;
      std::memset(c.head, 0, sizeof c.head);
      c.fd = bound_socket(source_addr(next_source++, sources, 32), SOCK_NONBLOCK);
      if (c.fd < 0) die("socket/bind");
      ++started;
      int one = 1;
      ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
      ev.data.u64 = slot;
      if (::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev) != 0) die("epoll_ctl");
      if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) == 0 || errno == EINPROGRESS) {
        c.state = State::connecting;
        return;
      }
      if (errno == EADDRNOTAVAIL) die("connect: out of source ports (add source addresses)");
      ++st.errors;
      finish(slot, false);
    }
  };

  // Advances a connection after an event (edge-triggered: drain fully).
  auto advance = [&](std::size_t slot) {
    Conn& c = conns[slot];
    if (c.state == State::connecting) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == EINPROGRESS) return;
      if (err != 0) {
        ++st.errors;
        finish(slot, false);
        return;
      }
      const ssize_t n = ::send(c.fd, kCloseRequest.data(), kCloseRequest.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EAGAIN) return;  // not connected yet: wait for EPOLLOUT
      if (n != static_cast<ssize_t>(kCloseRequest.size())) {
        ++st.errors;
        finish(slot, false);
        return;
      }
      c.state = State::reading;
    }
    if (c.state == State::reading) {
      char buf[4096];
      for (;;) {
        const ssize_t n = ::read(c.fd, buf, sizeof buf);
        if (n > 0) {
          if (c.got < sizeof c.head - 1) {
            std::memcpy(c.head + c.got, buf, std::min(sizeof c.head - 1 - c.got, static_cast<std::size_t>(n)));
          }
          c.got += static_cast<std::size_t>(n);
          continue;
        }
        if (n == 0) {
          const bool ok = std::strncmp(c.head, "HTTP/1.1 200", 12) == 0;
          if (!ok) ++st.bad;
          finish(slot, ok);
          start(slot);
          return;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return;
        ++st.errors;
        finish(slot, false);
        start(slot);
        return;
      }
    }
  };

  const double cpu0 = pid > 0 ? proc_cpu_seconds(pid) : 0;
  const double self0 = self_cpu_seconds();
  const auto t0 = Clock::now();
  for (std::size_t s = 0; s < concurrency; ++s) start(s);
  std::vector<epoll_event> events(concurrency);
  double last_progress = 0;
  std::size_t last_done = 0;
  while (st.done + st.errors + st.bad < total) {
    const int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 1000);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("epoll_wait");
    for (int i = 0; i < n; ++i) {
      const std::size_t slot = events[static_cast<std::size_t>(i)].data.u64;
      if (conns[slot].fd < 0) continue;
      advance(slot);
      if (conns[slot].fd < 0 && conns[slot].state == State::idle) start(slot);
    }
    const std::size_t finished = st.done + st.errors + st.bad;
    if (finished != last_done) {
      last_done = finished;
      last_progress = since(t0);
    } else if (since(t0) - last_progress > 10) {
      std::fprintf(stderr, "churn: no progress for 10 s (%zu of %zu finished)\n", finished, total);
      break;
    }
  }
  const double elapsed = since(t0);
  const double cpu = pid > 0 ? proc_cpu_seconds(pid) - cpu0 : 0;
  const double client_cpu_us = (self_cpu_seconds() - self0) * 1e6 / static_cast<double>(st.done ? st.done : 1);
  const double rate = static_cast<double>(st.done) / elapsed;
  std::printf("churn: %zu connections (%zu in flight, %zu sources, %s) in %.3f s: %.0f conn/s; "
              "errors %zu, bad responses %zu; per connection p50 %.0f us, p99 %.0f us",
              st.done, concurrency, sources, linger_reset ? "reset on close" : "normal close", elapsed, rate, st.errors,
              st.bad, percentile(st.latency_us, 50), percentile(st.latency_us, 99));
  if (pid > 0) std::printf("; server CPU %.1f us/conn", cpu * 1e6 / static_cast<double>(st.done));
  std::printf("; client CPU %.1f us/conn", client_cpu_us);
  std::printf("\nRESULT done=%zu errors=%zu bad=%zu seconds=%.3f conn_per_s=%.0f p50_us=%.0f p99_us=%.0f "
              "server_cpu_us=%.2f client_cpu_us=%.2f\n",
              st.done, st.errors, st.bad, elapsed, rate, percentile(st.latency_us, 50), percentile(st.latency_us, 99),
              pid > 0 ? cpu * 1e6 / static_cast<double>(st.done) : 0.0, client_cpu_us);
  ::close(ep);
  return st.errors == 0 && st.bad == 0 && st.done == total ? 0 : 1;
}
